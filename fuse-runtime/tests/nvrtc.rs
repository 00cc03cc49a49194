//! NVRTC without a GPU: compile_for_arch, compile errors with the log, library discovery.
//! harness = false (fuse_testkit::harness): when NVRTC is missing the tests that need it are
//! reported as ignored, "needs NVRTC", except under CI=true where they fail.
mod common;
use fuse_testkit::harness;

use common::*;
use fuse_runtime::{Error, KernelSpec};

fn is_elf(b: &[u8]) -> bool {
    b.len() > 64 && &b[..4] == b"\x7fELF"
}

fn compile_for_arch_gives_cubins() {
    let spec = add_one_spec();
    for arch in ["sm_80", "sm_90"] {
        let cubin = spec.compile_for_arch(arch, &[1024], 4).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert!(is_elf(&cubin), "{arch}: not an ELF cubin ({} bytes)", cubin.len());
        // The kernel's name is in the symbol table.
        assert!(cubin.windows(7).any(|w| w == b"add_one"), "{arch}: entry point missing");
    }
    // Same inputs: the in-memory cache gives the same bytes.
    assert_eq!(
        spec.compile_for_arch("sm_90", &[1024], 4).unwrap(),
        spec.compile_for_arch("sm_90", &[1024], 4).unwrap()
    );
}

/// Two stage counts never share a cubin: the define is in the full source, which keys the
/// in-memory and on-disk caches.
fn num_stages_is_its_own_variant() {
    let src: &'static str =
        Box::leak(ADD_ONE_SOURCE.replace("v + 1.0f", "v + (float)FUSE_NUM_STAGES").into_boxed_str());
    let spec = leak_spec(
        "add_one",
        src,
        &add_one_ir("add_one", fuse_runtime::fuse_ir::DType::F32, fuse_runtime::fuse_ir::DType::I32),
    );
    let two = spec.compile_for_arch_staged("sm_90", &[256], 4, 2, &[]).unwrap();
    let three = spec.compile_for_arch_staged("sm_90", &[256], 4, 3, &[]).unwrap();
    assert!(is_elf(&two) && is_elf(&three));
    assert_ne!(two, three, "2 and 3 stages gave the same cubin");
    // The methods without stages take the default, 3.
    assert_eq!(spec.compile_for_arch("sm_90", &[256], 4).unwrap(), three);
    let key = |stages| {
        fuse_runtime::disk_cache::DiskCache::key(
            &spec.full_source_staged(&[256], 4, stages, &[]),
            "sm_90",
            &[],
            (13, 0),
        )
    };
    assert_ne!(key(2), key(3));
}

/// The contract's symbol survives NVRTC (where `cuModuleGetGlobal` finds it), declared either
/// way the contract allows, holding its expression of the defines evaluated for the variant.
fn dynamic_smem_symbol_is_kept_in_the_cubin() {
    for decl in ["__device__", "__constant__"] {
        let spec = smem_reverse_spec(decl, "FUSE_NUM_STAGES * 25600u");
        for stages in [1u32, 4, 8] {
            let cubin = spec
                .compile_for_arch_staged("sm_90", &[], 8, stages, &[])
                .unwrap_or_else(|e| panic!("{decl}: {e}"));
            let value = elf_symbol_bytes(&cubin, "fuse_dynamic_smem_bytes")
                .unwrap_or_else(|| panic!("{decl}: no `fuse_dynamic_smem_bytes` with data in the cubin"));
            assert_eq!(value, (stages * 25600).to_le_bytes(), "{decl}, {stages} stages");
        }
    }
    // The parser finds nothing where there is nothing (so the check above can fail).
    let plain = add_one_spec().compile_for_arch("sm_90", &[256], 4).unwrap();
    assert_eq!(elf_symbol_bytes(&plain, "fuse_dynamic_smem_bytes"), None);
}

fn compile_for_arch_validates_first() {
    let spec = add_one_spec();
    let e = spec.compile_for_arch("90", &[1024], 4).unwrap_err();
    assert!(e.to_string().contains("arch must look like \"sm_90\""), "{e}");
    let e = spec.compile_for_arch("sm_90", &[1000], 4).unwrap_err();
    assert!(e.to_string().contains("power of two"), "{e}");
    let e = spec.compile_for_arch("sm_90", &[1024], 5).unwrap_err();
    assert!(e.to_string().contains("num_warps"), "{e}");
}

fn compile_error_carries_the_log_and_the_numbered_source() {
    let src = "extern \"C\" __global__ void broken(float* out, long long out_len, unsigned long long* fuse_err) {\n    out[0] = undefined_name;\n}\n";
    let ir = fuse_runtime::fuse_ir::Kernel {
        name: "broken".into(),
        consts: vec![],
        params: vec![fuse_runtime::fuse_ir::Param {
            name: "out".into(),
            kind: fuse_runtime::fuse_ir::ParamKind::Ptr {
                elem: fuse_runtime::fuse_ir::DType::F32,
                mutable: true,
            },
        }],
        vars: vec![],
        body: vec![],
    };
    let spec: &'static KernelSpec = leak_spec("broken", src, &ir);
    let e = spec.compile_for_arch("sm_90", &[], 1).unwrap_err();
    let Error::Compile { kernel, log, source } = &e else { panic!("expected Error::Compile, got {e}") };
    assert_eq!(kernel, "broken");
    assert!(log.contains("undefined_name"), "log: {log}");
    assert!(source.contains("#define FUSE_NUM_WARPS 1"), "{source}");
    let shown = e.to_string();
    // The log's line number matches the numbered source (the #defines are lines 1 and 2).
    assert!(log.contains("(4)"), "log: {log}");
    assert!(shown.contains("4 |     out[0] = undefined_name;"), "{shown}");
    println!("{shown}");
}

/// Discovery must find the pip wheel (or toolkit) without LD_LIBRARY_PATH: run this test binary
/// again with LD_LIBRARY_PATH removed and check the child compiles.
fn finds_nvrtc_without_ld_library_path() {
    if std::env::var_os("FUSE_TEST_CHILD").is_some() {
        let spec = add_one_spec();
        let v = fuse_runtime::nvrtc_version().expect("child: NVRTC found without LD_LIBRARY_PATH");
        let cubin = spec.compile_for_arch("sm_90", &[256], 2).expect("child: compiles");
        assert!(is_elf(&cubin));
        println!("child: NVRTC {}.{} found without LD_LIBRARY_PATH", v.0, v.1);
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", "finds_nvrtc_without_ld_library_path", "--nocapture", "--test-threads=1"])
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("FUSE_NVRTC_PATH")
        .env("FUSE_TEST_CHILD", "1")
        .env("FUSE_CACHE", "0")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(text.contains("found without LD_LIBRARY_PATH"), "{text}");
}

fn main() {
    let mut trials =
        vec![harness::trial("compile_for_arch_validates_first", compile_for_arch_validates_first)];
    trials.extend(harness::nvrtc_trials(vec![
        ("compile_for_arch_gives_cubins", compile_for_arch_gives_cubins),
        ("num_stages_is_its_own_variant", num_stages_is_its_own_variant),
        ("dynamic_smem_symbol_is_kept_in_the_cubin", dynamic_smem_symbol_is_kept_in_the_cubin),
        (
            "compile_error_carries_the_log_and_the_numbered_source",
            compile_error_carries_the_log_and_the_numbered_source,
        ),
        ("finds_nvrtc_without_ld_library_path", finds_nvrtc_without_ld_library_path),
    ]));
    harness::run(trials)
}
