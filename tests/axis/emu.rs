//! The emitted CUDA run on the host (tests/emulator/fuse_emu.h): the kernel's full source (the
//! runtime's `#define`s included) with a `main` that reads the buffers from a file, runs the grid
//! with every thread a fiber (switched at `__syncthreads` and shuffles, in an order the seed
//! varies), and writes them back. Needs a C++17 compiler (`$CXX`, else `g++`); binaries are cached
//! per source in the target directory.
use super::{Buf, Launch};
use fuse::fuse_ir::{ParamKind, Specialization};
use std::path::PathBuf;
use std::process::Command;

/// The C++ compiler, if one runs.
pub fn compiler() -> Option<String> {
    crate::common::backend::cxx()
}

fn work_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuse-emu");
    std::fs::create_dir_all(&d).expect("the emulation's work directory");
    d
}

fn c_type(d: fuse::fuse_ir::DType) -> &'static str {
    use fuse::fuse_ir::DType::*;
    match d {
        F32 => "float",
        I32 => "int",
        U32 => "unsigned int",
        I64 => "long long",
        U64 => "unsigned long long",
        F16 | BF16 => "unsigned short",
        I8 => "signed char",
        U8 => "unsigned char",
        Bool => "bool",
    }
}

/// The program for `l`'s kernel, const generics and warp count (the specialisations: pointers
/// 16-byte aligned, nothing else proven).
fn program(l: &Launch) -> Result<String, String> {
    let k = l.spec.kernel().map_err(|e| e.to_string())?;
    let values: Vec<bool> =
        l.spec.specializations().iter().map(|s| matches!(s, Specialization::Align16(_))).collect();
    let src = l.spec.full_source(&l.consts, l.warps, &values);
    let header = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/emulator/fuse_emu.h");
    let mut p = format!("#include \"{header}\"\n// Inline PTX is not emulated: a helper that needs it fails when called.\n#define asm(...) fuse_emu_fail(\"inline PTX is not emulated\", __LINE__)\n");
    p.push_str(&src);
    p.push_str("\nint main(int argc, char** argv) {\n  if (argc != 4) return 2;\n  FILE* in = fopen(argv[1], \"rb\");\n  if (!in) return 2;\n");
    let mut call = Vec::new();
    let mut lens = Vec::new();
    for (i, prm) in k.params.iter().enumerate() {
        let ParamKind::Ptr { elem, .. } = prm.kind else {
            return Err(format!("parameter `{}`: the emulation takes pointer parameters only", prm.name));
        };
        let t = c_type(elem);
        p.push_str(&format!(
            "  long long n{i} = 0;\n  if (fread(&n{i}, 8, 1, in) != 1) return 2;\n  {t}* b{i} = nullptr;\n  if (posix_memalign((void**)&b{i}, 16, n{i} * sizeof({t}) + 16) != 0) return 2;\n  if (n{i} && fread(b{i}, sizeof({t}), n{i}, in) != (size_t)n{i}) return 2;\n"
        ));
        call.push(format!("b{i}"));
        lens.push(format!("n{i}"));
    }
    call.extend(lens);
    call.push("fuse_err".into());
    p.push_str(&format!(
        "  fclose(in);\n  static unsigned long long fuse_err[2] = {{0, 0}};\n  fuse_emu_launch({}, 1, 1, FUSE_THREADS, strtoull(argv[3], nullptr, 10), [&] {{ {}({}); }});\n",
        l.grid,
        k.name,
        call.join(", ")
    ));
    p.push_str("  FILE* out = fopen(argv[2], \"wb\");\n  if (!out) return 2;\n");
    for (i, prm) in k.params.iter().enumerate() {
        let ParamKind::Ptr { elem, .. } = prm.kind else { unreachable!() };
        p.push_str(&format!("  fwrite(b{i}, sizeof({}), n{i}, out);\n", c_type(elem)));
    }
    p.push_str("  fwrite(fuse_err, 8, 2, out);\n  fclose(out);\n  fprintf(stderr, \"fuse_emu: %lld barriers, %lld warp shuffles\\n\", fuse_emu_syncs, fuse_emu_shuffles);\n  return 0;\n}\n");
    Ok(p)
}

fn hash(s: &str) -> u64 {
    // FNV-1a: a stable name for a program's binary.
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Compiles (once per source) the program for `l`.
fn binary(l: &Launch) -> Result<PathBuf, String> {
    let p = program(l)?;
    let dir = work_dir();
    let name = format!("{}_{:016x}", l.spec.name(), hash(&p));
    let bin = dir.join(&name);
    if bin.exists() {
        return Ok(bin);
    }
    let cxx = compiler().ok_or("no C++ compiler (set CXX)")?;
    let src = dir.join(format!("{name}.cpp"));
    std::fs::write(&src, &p).map_err(|e| e.to_string())?;
    let tmp = dir.join(format!("{name}.tmp{}", std::process::id()));
    let out = Command::new(&cxx)
        .args(["-std=c++17", "-O1", "-w", "-o"])
        .arg(&tmp)
        .arg(&src)
        .output()
        .map_err(|e| format!("{cxx}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cxx} failed on {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&out.stderr).lines().take(40).collect::<Vec<_>>().join("\n")
        ));
    }
    std::fs::rename(&tmp, &bin).map_err(|e| e.to_string())?;
    Ok(bin)
}

/// Runs `l` in the emulation with schedule seed `seed`, replacing its buffers with the results.
pub fn run(l: &mut Launch, seed: u64) -> Result<(), String> {
    let bin = binary(l)?;
    let dir = work_dir();
    let tag = format!(
        "{}_{}_{}",
        std::process::id(),
        seed,
        hash(&format!("{:?}", l.bufs.iter().map(Buf::len).collect::<Vec<_>>()))
    );
    let (inp, outp) = (dir.join(format!("in_{tag}")), dir.join(format!("out_{tag}")));
    let mut bytes = Vec::new();
    for b in &l.bufs {
        bytes.extend((b.len() as i64).to_le_bytes());
        bytes.extend(b.bytes());
    }
    std::fs::write(&inp, bytes).map_err(|e| e.to_string())?;
    let out = Command::new("timeout")
        .arg("300")
        .arg(&bin)
        .arg(&inp)
        .arg(&outp)
        .arg(seed.to_string())
        .output()
        .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&inp);
    if !out.status.success() {
        let _ = std::fs::remove_file(&outp);
        return Err(format!(
            "the emulated kernel failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let got = std::fs::read(&outp).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&outp);
    let mut at = 0;
    for b in l.bufs.iter_mut() {
        let n = b.bytes().len();
        let nb = got.get(at..at + n).ok_or("short output")?;
        *b = b.like_from_bytes(nb);
        at += n;
    }
    let err = got.get(at..at + 16).ok_or("no error words")?;
    let e0 = u64::from_le_bytes(err[..8].try_into().unwrap());
    if e0 != 0 {
        let e1 = u64::from_le_bytes(err[8..].try_into().unwrap());
        return Err(format!(
            "the emulated kernel reported an out-of-bounds access: parameter {} at {e1}",
            e0 - 1
        ));
    }
    Ok(())
}
