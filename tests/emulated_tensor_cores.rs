//! The emitted CUDA of tensor-core `dot` kernels run on the host: the fiber emulation of
//! tests/emulator/fuse_emu.h (every thread a fiber, switched at barriers and warp-collective
//! operations in an order the seed varies) with `ldmatrix`, `mma.sync` and `cp.async` emulated by
//! tests/emulator/fuse_emu_mma.h (the PTX ISA's fragment layouts; TF32 operands checked to be
//! rounded; copies landing at issue or at their wait, at random). So the f32 (TF32) lowering's
//! fragment addressing, its swizzled staging and its pipelined ring are checked against float64
//! without a GPU, at block shapes, warp counts and stage counts; the f16 lowering, which the GPU
//! tests have checked, runs too, as a check of the emulation itself; so does the i8 one
//! (m16n8k32) of the `matmul_int8` example, its accumulator bit for bit and its requantised
//! output by the example's float64 rule. Needs a C++17 compiler (`$CXX`, else `g++`), without
//! which the tests are reported as ignored (harness = false, `common::backend::cxx_trials`).
use fuse_kernels::bias_gelu_dropout;
mod common;
use fuse_kernels::matmul as matmul_example;
use fuse_testkit::harness;

use common::dot::*;
use common::matmul_int8::{self, Config};
use common::quant_ffn::{assert_accumulator, int8s, Int8Case, Scales};
use common::{Elem, Rng};
use fuse::fuse_ir::{DType, HostScalar, ParamKind, Specialization};
use fuse::half::f16;
use fuse::KernelSpec;
use std::path::PathBuf;
use std::process::Command;

/// The C++ compiler (`main` registers the tests as runnable only where one runs).
fn compiler() -> String {
    common::backend::cxx().expect("a C++ compiler, checked when the tests were registered")
}

/// A kernel argument: a buffer (its bytes and element size) or a scalar.
enum Arg {
    Buf(Vec<u8>, usize),
    I32(i32),
    F32(f32),
}

fn buf<T: Copy>(v: &[T]) -> Arg {
    // SAFETY: plain numbers (f32, f16 bits) read as bytes.
    let bytes = unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) };
    Arg::Buf(bytes.to_vec(), std::mem::size_of::<T>())
}

/// The helpers the emulation replaces (their inline-PTX definitions are cut from the source).
const EMULATED: &[&str] = &[
    "__device__ __forceinline__ unsigned int fuse_smem_addr(",
    "__device__ __forceinline__ float fuse_f16_to_f32(",
    "__device__ __forceinline__ unsigned short fuse_f32_to_f16(",
    "__device__ __forceinline__ float fuse_erff(",
    "__device__ __forceinline__ int fuse_f2i_s32(",
    "__device__ __forceinline__ unsigned int fuse_f2i_u32(",
    "__device__ __forceinline__ long long fuse_f2i_s64(",
    "__device__ __forceinline__ unsigned long long fuse_f2i_u64(",
    "__device__ __forceinline__ void fuse_ldmatrix_x4(",
    "__device__ __forceinline__ void fuse_ldmatrix_x2(",
    "__device__ __forceinline__ void fuse_ldmatrix_x4_trans(",
    "__device__ __forceinline__ void fuse_ldmatrix_x2_trans(",
    "__device__ __forceinline__ void fuse_mma_f16(",
    "__device__ __forceinline__ void fuse_mma_tf32(",
    "__device__ __forceinline__ void fuse_mma_s8(",
    "template <int fuse_n> __device__ __forceinline__ void fuse_tf32_frag(",
    "template <int fuse_nb> __device__ __forceinline__ void fuse_cp_async(",
    "__device__ __forceinline__ void fuse_cp_async_commit(",
    "template <int fuse_n> __device__ __forceinline__ void fuse_cp_async_wait(",
];

/// `src` without the definition starting at `head` (to the end of its line if it closes there,
/// else to the next line holding only `}`).
fn cut(src: &str, head: &str) -> String {
    let Some(start) = src.find(head) else { return src.to_string() };
    let line_end = start + src[start..].find('\n').expect("a line end");
    let end = if src[start..line_end].trim_end().ends_with('}') {
        line_end + 1
    } else {
        line_end + src[line_end..].find("\n}\n").expect("the definition's end") + 3
    };
    format!("{}{}", &src[..start], &src[end..])
}

/// The host program: the kernel's full source (specialisations: pointers aligned, integers
/// divisible by 16 where `args` are, as the runtime decides, the bounds facts as `proven`),
/// helpers replaced, and a `main` that reads the arguments from a file, runs the grid its command
/// line gives (so sizes of one program share its binary) and writes the buffers back.
fn program(
    spec: &KernelSpec,
    consts: &[u64],
    (warps, stages): (u32, u32),
    proven: bool,
    args: &[Arg],
) -> String {
    let k = spec.kernel().expect("the kernel's IR");
    // Branch facts stay 0 (undecided: the condition is tested at run time).
    let values: Vec<bool> = spec
        .specializations()
        .iter()
        .map(|s| match *s {
            Specialization::Align16(_) => true,
            Specialization::Div16(p) => matches!(args[p as usize], Arg::I32(v) if v % 16 == 0),
            Specialization::BranchTaken(_) | Specialization::BranchSkipped(_) => false,
            _ => proven,
        })
        .collect();
    let mut src = spec.full_source_staged(consts, warps, stages, &values);
    for head in EMULATED {
        src = cut(&src, head);
    }
    let src = src.replace("asm volatile(", "asm(").replace(
        "extern __shared__ __align__(1024) unsigned char fuse_xs[];",
        "__shared__ __align__(1024) unsigned char fuse_xs[fuse_xs_bytes];",
    );
    let dir = env!("CARGO_MANIFEST_DIR");
    let mut p = format!(
        "#include \"{dir}/tests/emulator/fuse_emu_mma.h\"\n#define asm(...) fuse_emu_fail(\"inline PTX is not emulated\", __LINE__)\n#define __grid_constant__\n{src}\nint main(int argc, char** argv) {{\n  if (argc != 6) return 2;\n  FILE* in = fopen(argv[1], \"rb\");\n  if (!in) return 2;\n"
    );
    let (mut call, mut lens) = (Vec::new(), Vec::new());
    for (i, prm) in k.params.iter().enumerate() {
        match prm.kind {
            ParamKind::Ptr { elem, .. } => {
                let t = match elem {
                    DType::F32 => "float",
                    DType::F16 | DType::BF16 => "unsigned short",
                    DType::I8 => "signed char",
                    DType::I32 => "int",
                    other => panic!("a {other} buffer"),
                };
                p.push_str(&format!(
                    "  long long n{i} = 0;\n  if (fread(&n{i}, 8, 1, in) != 1) return 2;\n  {t}* b{i} = nullptr;\n  if (posix_memalign((void**)&b{i}, 16, n{i} * sizeof({t}) + 16) != 0) return 2;\n  if (n{i} && fread(b{i}, sizeof({t}), n{i}, in) != (size_t)n{i}) return 2;\n"
                ));
                call.push(format!("b{i}"));
                lens.push(format!("n{i}"));
            }
            ParamKind::Scalar(t) => {
                // Every scalar travels as 8 bytes: an i32 sign-extended, an f32's bits.
                p.push_str(&format!("  long long s{i} = 0;\n  if (fread(&s{i}, 8, 1, in) != 1) return 2;\n"));
                call.push(match t {
                    DType::I32 => format!("(int)s{i}"),
                    DType::F32 => format!("__uint_as_float((unsigned int)s{i})"),
                    other => panic!("a {other} scalar"),
                });
            }
        }
    }
    call.extend(lens);
    // The scalars the runtime computes at launch, after the arguments (`run` writes them).
    for (i, h) in k.host_scalars().iter().enumerate() {
        p.push_str(&format!("  long long h{i} = 0;\n  if (fread(&h{i}, 8, 1, in) != 1) return 2;\n"));
        call.push(match h.dtype() {
            DType::F32 => format!("__uint_as_float((unsigned int)h{i})"),
            DType::I32 => format!("(int)h{i}"),
            DType::U32 => format!("(unsigned int)h{i}"),
            DType::U64 => format!("(unsigned long long)h{i}"),
            _ => format!("h{i}"), // i64 (host scalars are never bool)
        });
    }
    call.push("fuse_err".into());
    // The tensor maps (TMA is an sm_90a path; the emulation takes the cp.async one): zeros.
    for s in spec.specializations() {
        if let Specialization::TensorBox(_) = s {
            call.push("fuse_tmap_t{}".into());
        }
    }
    p.push_str(&format!(
        "  fclose(in);\n  static unsigned long long fuse_err[2] = {{0, 0}};\n  fuse_emu_launch(atoi(argv[4]), atoi(argv[5]), 1, FUSE_THREADS, strtoull(argv[3], nullptr, 10), [&] {{ {}({}); }});\n  fuse_emu_check_copies_retired();\n",
        spec.name(),
        call.join(", ")
    ));
    p.push_str("  FILE* out = fopen(argv[2], \"wb\");\n  if (!out) return 2;\n");
    for (i, prm) in k.params.iter().enumerate() {
        if let ParamKind::Ptr { .. } = prm.kind {
            p.push_str(&format!("  fwrite(b{i}, sizeof(*b{i}), n{i}, out);\n"));
        }
    }
    p.push_str("  fwrite(fuse_err, 8, 2, out);\n  fclose(out);\n  return 0;\n}\n");
    p
}

fn work_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuse-emu-mma");
    std::fs::create_dir_all(&d).expect("the emulation's work directory");
    d
}

fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Compiles (once per program) and runs `spec` over `args` on a `grid`; the buffers afterwards,
/// as bytes, in parameter order.
fn run(
    cxx: &str,
    spec: &KernelSpec,
    consts: &[u64],
    shape: (u32, u32),
    grid: (u32, u32),
    proven: bool,
    args: &[Arg],
) -> Vec<Vec<u8>> {
    let p = program(spec, consts, shape, proven, args);
    let dir = work_dir();
    // The binary's name: the program and the emulation's headers.
    let headers: String = ["fuse_emu.h", "fuse_emu_mma.h"]
        .iter()
        .map(|h| {
            std::fs::read_to_string(format!("{}/tests/emulator/{h}", env!("CARGO_MANIFEST_DIR")))
                .expect("the header")
        })
        .collect();
    let name = format!("{}_{:016x}", spec.name(), hash(&(headers + &p)));
    let bin = dir.join(&name);
    if !bin.exists() {
        let cpp = dir.join(format!("{name}.cpp"));
        std::fs::write(&cpp, &p).expect("the program written");
        let tmp = dir.join(format!("{name}.tmp{}", std::process::id()));
        let out = Command::new(cxx)
            .args(["-std=c++17", "-O1", "-w", "-o"])
            .arg(&tmp)
            .arg(&cpp)
            .output()
            .expect("the compiler runs");
        assert!(
            out.status.success(),
            "{cxx} failed on {}:\n{}",
            cpp.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::rename(&tmp, &bin).expect("the binary in place");
    }
    let mut input = Vec::new();
    for a in args {
        match a {
            Arg::Buf(bytes, size) => {
                input.extend(((bytes.len() / size) as i64).to_le_bytes());
                input.extend(bytes);
            }
            Arg::I32(v) => input.extend(i64::from(*v).to_le_bytes()),
            Arg::F32(v) => input.extend(u64::from(v.to_bits()).to_le_bytes()),
        }
    }
    let param = |p: u32| match args.get(p as usize)? {
        Arg::I32(v) => Some(HostScalar::Int((*v).into())),
        Arg::F32(v) => Some(HostScalar::Float((*v).into())),
        Arg::Buf(..) => None,
    };
    for h in spec.kernel().expect("the kernel's IR").host_scalars() {
        let v = h.eval(&param, consts).expect("a host scalar of these arguments");
        input.extend(v.launch_word().to_le_bytes());
    }
    let tag = format!("{}_{:016x}", std::process::id(), hash(&format!("{name}{}", input.len())));
    let (inp, outp) = (dir.join(format!("in_{tag}")), dir.join(format!("out_{tag}")));
    std::fs::write(&inp, &input).expect("the input written");
    let seed = hash(&format!("{name}{grid:?}")) % 1000;
    let out = Command::new("timeout")
        .arg("600")
        .arg(&bin)
        .arg(&inp)
        .arg(&outp)
        .arg(seed.to_string())
        .arg(grid.0.to_string())
        .arg(grid.1.to_string())
        .output()
        .expect("the program runs");
    let _ = std::fs::remove_file(&inp);
    assert!(
        out.status.success(),
        "{} {consts:?} {shape:?}: the emulated kernel failed ({}): {}",
        spec.name(),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let got = std::fs::read(&outp).expect("the output");
    let _ = std::fs::remove_file(&outp);
    let mut at = 0;
    let mut bufs = Vec::new();
    for a in args {
        if let Arg::Buf(bytes, _) = a {
            bufs.push(got[at..at + bytes.len()].to_vec());
            at += bytes.len();
        }
    }
    assert_eq!(&got[at..at + 16], &[0u8; 16], "{}: an out-of-bounds access was reported", spec.name());
    bufs
}

/// `run` of an example's matmul kernel: consts `[BM, BN, BK]`, one program per `[BM, BN]` block
/// of the `m x n` result on a 1-D grid (Triton's grouped order).
fn run_blocks(
    cxx: &str,
    spec: &KernelSpec,
    (bm, bn, bk): (usize, usize, usize),
    shape: (u32, u32),
    (m, n): (usize, usize),
    proven: bool,
    args: &[Arg],
) -> Vec<Vec<u8>> {
    let grid = ((m.div_ceil(bm) * n.div_ceil(bn)) as u32, 1);
    run(cxx, spec, &[bm as u64, bn as u64, bk as u64], shape, grid, proven, args)
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// `c = a @ b` (`matmul`) or `a @ w^T` (`matmul_nt`, `w: [n, k]`) of `T` in the emulation, against
/// float64 of the inputs as `dot` takes them (f32 rounded to TF32), NaN-poisoned output.
#[allow(clippy::too_many_arguments)]
fn check<T: DotElem + Copy>(
    cxx: &str,
    spec: &KernelSpec,
    nt: bool,
    rng: &mut Rng,
    (bm, bn, bk): (usize, usize, usize),
    (warps, stages): (u32, u32),
    (m, n, k): (usize, usize, usize),
    proven: bool,
) {
    let a = T::from_f32s(&rng.vec(m * k, 1.0));
    let b = T::from_f32s(&rng.vec(k * n, 1.0));
    let grid = (m.div_ceil(bm) as u32, n.div_ceil(bn) as u32);
    let args = [
        buf(&a),
        buf(&b),
        buf(&vec![f32::NAN; m * n]),
        Arg::I32(m as i32),
        Arg::I32(n as i32),
        Arg::I32(k as i32),
    ];
    let out = run(cxx, spec, &[bm as u64, bn as u64, bk as u64], (warps, stages), grid, proven, &args);
    let got = f32s(&out[2]);
    let av: Vec<f64> = a.iter().map(|x| x.dot_value()).collect();
    let mut bv: Vec<f64> = b.iter().map(|x| x.dot_value()).collect();
    if nt {
        // b holds w: [n, k]; the reference takes w^T as [k, n].
        bv = (0..k * n).map(|i| b[(i % n) * k + i / n].dot_value()).collect();
    }
    let (want, bound) = reference(&av, &bv, None, m, n, k);
    let what = format!(
        "emulated {} {m}x{n}x{k} [{bm}x{bn}x{bk}, {warps} warps, {stages} stages{}]",
        spec.name(),
        if proven { ", proven in bounds" } else { "" }
    );
    let worst = assert_within(&what, &got, &want, &bound);
    println!("{what}: worst error {worst:.3} of the bound");
}

/// f32 (TF32) matmul: block shapes with 16- to 128-float rows (both staging swizzles), 1 to 8
/// warps, 2 to 4 stages, ragged sizes (K not a multiple of 4: the per-lane copies), and sizes
/// the launch proves in bounds (the unchecked 16-byte copies).
fn tf32_matmul_in_the_emulation() {
    let cxx = compiler();
    let mut rng = Rng::fresh("emulated tf32 matmul");
    let spec = &matmul::f32::SPEC;
    check::<f32>(&cxx, spec, false, &mut rng, (32, 32, 16), (4, 3), (77, 45, 100), false);
    check::<f32>(&cxx, spec, false, &mut rng, (64, 64, 32), (4, 2), (130, 70, 333), false);
    check::<f32>(&cxx, spec, false, &mut rng, (128, 128, 32), (8, 4), (257, 129, 96), false);
    check::<f32>(&cxx, spec, false, &mut rng, (16, 16, 16), (2, 3), (33, 17, 48), false);
    check::<f32>(&cxx, spec, false, &mut rng, (64, 128, 64), (1, 2), (64, 128, 128), true);
    check::<f32>(&cxx, spec, false, &mut rng, (64, 64, 32), (4, 4), (128, 128, 96), true);
}

/// f32 `a @ w^T` (K-major B read by `ldmatrix`), pipelined.
fn tf32_k_major_b_in_the_emulation() {
    let cxx = compiler();
    let mut rng = Rng::fresh("emulated tf32 matmul_nt");
    let spec = &matmul_nt::f32::SPEC;
    check::<f32>(&cxx, spec, true, &mut rng, (64, 64, 32), (4, 3), (130, 70, 100), false);
    check::<f32>(&cxx, spec, true, &mut rng, (32, 32, 32), (2, 2), (45, 37, 70), false);
}

/// f32 dots outside a loop, their operands staged from registers: `dot_forms` (an accumulator
/// loaded in another layout, the method form, a computed operand), `nt_once` (a K-major B) and
/// `dot_reductions` (row sums from the accumulators, column maxima after moving them out), at 1 to
/// 8 warps, against float64.
fn tf32_staged_from_registers_in_the_emulation() {
    let cxx = compiler();
    let mut rng = Rng::fresh("emulated tf32 from registers");
    for warps in [1, 4, 8] {
        let (a, b) = (rng.vec(FM * FK, 1.0), rng.vec(FK * FN, 1.0));
        let acc = rng.vec(FM * FN, 8.0);
        let nan = vec![f32::NAN; FM * FN];
        let args = [buf(&a), buf(&b), buf(&acc), buf(&nan), buf(&nan), buf(&nan)];
        let consts = [FM as u64, FN as u64, FK as u64];
        let out = run(&cxx, &dot_forms::f32::SPEC, &consts, (warps, 3), (1, 1), false, &args);
        let (av, bv): (Vec<f64>, Vec<f64>) =
            (a.iter().map(|x| x.dot_value()).collect(), b.iter().map(|x| x.dot_value()).collect());
        let accs: Vec<f64> = acc.iter().map(|&x| f64::from(x)).collect();
        let what = |form: &str| format!("emulated f32 dot_forms {form}, {warps} warps");
        let (want, bound) = reference(&av, &bv, Some(&accs), FM, FN, FK);
        assert_within(&what("with an accumulator"), &f32s(&out[3]), &want, &bound);
        let (want, bound) = reference(&av, &bv, None, FM, FN, FK);
        let scaled = |s: f64, v: &[f64]| v.iter().map(|x| x * s).collect::<Vec<f64>>();
        assert_within(&what("halved"), &f32s(&out[4]), &scaled(0.5, &want), &scaled(0.5, &bound));
        assert_within(&what("of (2 a).to(f32)"), &f32s(&out[5]), &scaled(2.0, &want), &scaled(2.0, &bound));

        let (x, w) = (rng.vec(64 * 32, 1.0), rng.vec(32 * 32, 1.0));
        let out = run(
            &cxx,
            &nt_once::f32::SPEC,
            &[],
            (warps, 3),
            (1, 1),
            false,
            &[buf(&x), buf(&w), buf(&vec![f32::NAN; 64 * 32])],
        );
        let xv: Vec<f64> = x.iter().map(|v| v.dot_value()).collect();
        let wt: Vec<f64> = (0..32 * 32).map(|i| w[(i % 32) * 32 + i / 32].dot_value()).collect();
        let (want, bound) = reference(&xv, &wt, None, 64, 32, 32);
        assert_within(&format!("emulated f32 nt_once, {warps} warps"), &f32s(&out[2]), &want, &bound);

        let (a, b) = (rng.vec(FM * FK, 1.0), rng.vec(FK * FN, 1.0));
        let args = [buf(&a), buf(&b), buf(&[f32::NAN; FM]), buf(&[f32::NAN; FN])];
        let out = run(&cxx, &dot_reductions::f32::SPEC, &consts, (warps, 3), (1, 1), false, &args);
        let (av, bv): (Vec<f64>, Vec<f64>) =
            (a.iter().map(|x| x.dot_value()).collect(), b.iter().map(|x| x.dot_value()).collect());
        let (want, bound) = reference(&av, &bv, None, FM, FN, FK);
        let u = 2f64.powi(-24);
        let sums: Vec<f64> = (0..FM).map(|r| want[r * FN..(r + 1) * FN].iter().sum()).collect();
        let sum_bounds: Vec<f64> = (0..FM)
            .map(|r| {
                let mag: f64 = want[r * FN..(r + 1) * FN].iter().map(|v| v.abs()).sum();
                bound[r * FN..(r + 1) * FN].iter().sum::<f64>() + 2.0 * (FN as f64 + 2.0) * u * mag
            })
            .collect();
        assert_within(
            &format!("emulated f32 dot row sums, {warps} warps"),
            &f32s(&out[2]),
            &sums,
            &sum_bounds,
        );
        let maxes: Vec<f64> =
            (0..FN).map(|c| (0..FM).map(|r| want[r * FN + c]).fold(f64::NEG_INFINITY, f64::max)).collect();
        let max_bounds: Vec<f64> =
            (0..FN).map(|c| (0..FM).map(|r| bound[r * FN + c]).fold(0.0, f64::max)).collect();
        assert_within(
            &format!("emulated f32 dot column maxima, {warps} warps"),
            &f32s(&out[3]),
            &maxes,
            &max_bounds,
        );
    }
}

/// The f16 lowering (ldmatrix.trans, m16n8k16), checked on GPUs, in the emulation: a check of
/// the emulation's ldmatrix, mma and cp.async.
fn f16_matmul_in_the_emulation() {
    let cxx = compiler();
    let mut rng = Rng::fresh("emulated f16 matmul");
    check::<f16>(&cxx, &matmul::f16::SPEC, false, &mut rng, (64, 64, 32), (4, 3), (130, 70, 100), false);
    check::<f16>(&cxx, &matmul_nt::f16::SPEC, true, &mut rng, (32, 32, 32), (2, 2), (45, 37, 70), false);
}

/// The example's f16 matmul, whose f16 result goes from the accumulator through the scratch to
/// 16-byte row runs before its store (`emit_cuda/lower/coalesce.rs`): ragged edges (the masked runs),
/// one warp to eight, with and without bias + GELU, and a launch proven in bounds (the unchecked
/// vector stores); within f16's rounding of the float64 result, poisoned output.
fn f16_results_stored_through_the_scratch_in_the_emulation() {
    let cxx = compiler();
    let mut rng = Rng::fresh("emulated f16 stores through the scratch");
    let spec = &matmul_example::matmul::f16::SPEC;
    let cases = [
        ((64, 64, 32), (4, 3), (130, 70, 100), false),
        ((32, 32, 16), (1, 2), (45, 37, 40), false),
        ((32, 32, 16), (2, 2), (33, 40, 48), false),
        ((64, 128, 32), (4, 2), (64, 128, 64), true),
        ((128, 256, 32), (8, 2), (130, 260, 64), false),
    ];
    for ((bm, bn, bk), shape, (m, n, k), proven) in cases {
        for gelu in [false, true] {
            let a = f16::from_f32s(&rng.vec(m * k, 1.0));
            let b = f16::from_f32s(&rng.vec(k * n, 1.0));
            let bias = f16::from_f32s(&rng.vec(n, 1.0));
            let args = [
                buf(&a),
                buf(&b),
                buf(&bias),
                buf(&vec![f16::NAN; m * n]),
                Arg::I32(m as i32),
                Arg::I32(n as i32),
                Arg::I32(k as i32),
                Arg::I32(i32::from(gelu)),
            ];
            let out = run_blocks(&cxx, spec, (bm, bn, bk), shape, (m, n), proven, &args);
            let got: Vec<f64> = out[3]
                .chunks_exact(2)
                .map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f64())
                .collect();
            let f = |v: &[f16]| v.iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
            let want =
                matmul_example::reference(&f(&a), &f(&b), &f(&bias), m, n, k, gelu, bias_gelu_dropout::erf64);
            let what = format!("emulated matmul f16 {m}x{n}x{k} [{bm}x{bn}x{bk}, {shape:?}, gelu {gelu}]");
            // f32 accumulation of k exact products, then one rounding to f16.
            common::assert_close(&what, &got, &want, 2e-3 * (k as f64).sqrt(), 2e-3);
        }
    }
}

fn i32s(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn i8s(b: &[u8]) -> Vec<i8> {
    b.iter().map(|&x| x as i8).collect()
}

/// `matmul_int8_i32`'s accumulator, bit for bit against the exact i64 product; the output is
/// filled with a sentinel first.
fn check_int8_accumulator(
    cxx: &str,
    rng: &mut Rng,
    cfg: Config,
    (m, n, k): (usize, usize, usize),
    proven: bool,
) {
    let (a, w) = (int8s(rng, m * k, i8::MIN, i8::MAX), int8s(rng, n * k, i8::MIN, i8::MAX));
    let args = [
        buf(&a),
        buf(&w),
        buf(&vec![i32::MIN + 12345; m * n]),
        Arg::I32(m as i32),
        Arg::I32(n as i32),
        Arg::I32(k as i32),
    ];
    let spec = &matmul_int8::matmul_int8_i32::SPEC;
    let out = run_blocks(cxx, spec, (cfg.bm, cfg.bn, cfg.bk), (cfg.warps, cfg.stages), (m, n), proven, &args);
    let what = format!("emulated int8 accumulator {m}x{n}x{k} {cfg:?}");
    assert_accumulator(&what, &i32s(&out[2]), &a, &w, (m, n, k));
}

/// `matmul_int8`'s requantised output against the float64 rule (`matmul_int8::verify`), with
/// the inputs tests/common/quant_ffn.rs draws for `scales`; the output poisoned per element.
fn check_int8_requant(
    cxx: &str,
    rng: &mut Rng,
    cfg: Config,
    (m, n, k): (usize, usize, usize),
    proven: bool,
    scales: Scales,
) -> matmul_int8::Verdict {
    let case = Int8Case::draw(rng, (m, n, k), scales);
    let args = [
        buf(&case.a),
        buf(&case.w),
        buf(&case.sa),
        buf(&case.sw),
        buf(&case.bias),
        buf(&matmul_int8::poison(&case.t)),
        Arg::I32(m as i32),
        Arg::I32(n as i32),
        Arg::I32(k as i32),
        Arg::I32(i32::from(case.with_bias)),
        Arg::F32(case.out_scale),
    ];
    let spec = &matmul_int8::matmul_int8::SPEC;
    let out = run_blocks(cxx, spec, (cfg.bm, cfg.bn, cfg.bk), (cfg.warps, cfg.stages), (m, n), proven, &args);
    let what = format!("emulated int8 requant {scales:?} {m}x{n}x{k} {cfg:?}");
    case.verify(&what, &i8s(&out[5]), n, scales)
}

/// The `matmul_int8` example on the mma.sync path (m16n8k32 s8 into i32): the accumulator kernel
/// bit for bit, and the requantised i8 result, which goes from its MMA layout through the
/// scratch as 2-byte pairs to 16-byte row runs (`emit_cuda/lower/coalesce.rs`), by the float64 rule
/// (random scales with and without bias; ties exactly). One warp (2 stages), four (3) and eight
/// (3, 4); ragged sizes with K under 16, a multiple of 16 (the 16-byte copies, masked) or not
/// (the per-byte ones), and a size proven in bounds (the unchecked copies and stores).
fn int8_matmul_in_the_emulation() {
    let cxx = compiler();
    let mut rng = Rng::fresh("emulated int8 matmul");
    let cfgs = matmul_int8::CONFIGS;
    let configs = [Config { warps: 1, stages: 2, ..cfgs[6] }, cfgs[2], cfgs[0], cfgs[4]];
    // Each size's divisibility of (m, n, k) by 16 is specialised as at launch: a program each.
    let ragged = [(16, 130, 7), (129, 257, 192), (300, 200, 100), (1, 1, 1)];
    for cfg in configs {
        for (size, proven) in ragged.map(|size| (size, false)).into_iter().chain([((256, 256, 256), true)]) {
            check_int8_accumulator(&cxx, &mut rng, cfg, size, proven);
            let mut took_other = 0;
            for bias in [false, true] {
                took_other +=
                    check_int8_requant(&cxx, &mut rng, cfg, size, proven, Scales::Random { bias }).took_other;
            }
            // As the GPU test: K of 16 or more, so that ties occur.
            if size.2 >= 16 {
                check_int8_requant(&cxx, &mut rng, cfg, size, proven, Scales::Ties);
            }
            println!("emulated matmul_int8 {size:?} {cfg:?}: right; {took_other} within the f32 bound of a tie took the other neighbour");
        }
    }
}

fn main() {
    harness::run(common::backend::cxx_trials(vec![
        ("tf32_matmul_in_the_emulation", tf32_matmul_in_the_emulation),
        ("tf32_k_major_b_in_the_emulation", tf32_k_major_b_in_the_emulation),
        ("tf32_staged_from_registers_in_the_emulation", tf32_staged_from_registers_in_the_emulation),
        ("f16_matmul_in_the_emulation", f16_matmul_in_the_emulation),
        (
            "f16_results_stored_through_the_scratch_in_the_emulation",
            f16_results_stored_through_the_scratch_in_the_emulation,
        ),
        ("int8_matmul_in_the_emulation", int8_matmul_in_the_emulation),
    ]))
}
