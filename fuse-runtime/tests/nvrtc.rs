//! NVRTC without a GPU: compile_for_arch, compile errors with the log, library discovery.
//! harness = false (tests/common/harness.rs): when NVRTC is missing the tests that need it are
//! reported as ignored, "needs NVRTC", except under CI=true where they fail.
mod common;
#[path = "common/harness.rs"]
mod harness;

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
    // The log's line number matches the numbered source (the #define is line 1).
    assert!(log.contains("(3)"), "log: {log}");
    assert!(shown.contains("3 |     out[0] = undefined_name;"), "{shown}");
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
        (
            "compile_error_carries_the_log_and_the_numbered_source",
            compile_error_carries_the_log_and_the_numbered_source,
        ),
        ("finds_nvrtc_without_ld_library_path", finds_nvrtc_without_ld_library_path),
    ]));
    harness::run(trials)
}
