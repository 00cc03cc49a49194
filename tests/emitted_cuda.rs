//! The emitted CUDA C of every example kernel: snapshots (review changes with `cargo insta review`)
//! and a compile of each with NVRTC for sm_80 and sm_90 (no GPU needed).
mod common;

use common::*;

#[test]
fn emitted_source_snapshots() {
    for (spec, _) in example_specs() {
        insta::assert_snapshot!(spec.name(), spec.source());
    }
}

#[test]
fn emitted_source_is_self_contained() {
    for (spec, _) in example_specs() {
        let src = spec.source();
        assert!(!src.contains("#include"), "{}: must not include headers", spec.name());
        assert!(src.contains("extern \"C\" __global__"), "{}", spec.name());
        assert!(src.contains(spec.name()), "{}: entry point named after the kernel", spec.name());
    }
}

#[test]
fn every_example_kernel_compiles_with_nvrtc_for_sm80_and_sm90() {
    let mut compiled = 0;
    for (spec, consts) in example_specs() {
        for arch in ["sm_80", "sm_90"] {
            for num_warps in [1, 4, 8] {
                match spec.compile_for_arch(arch, &consts, num_warps) {
                    Ok(cubin) => {
                        assert!(cubin.len() > 64, "{} {arch}: empty cubin", spec.name());
                        compiled += 1;
                    }
                    Err(fuse::Error::LibraryNotFound { .. }) if !nvrtc_required() => {
                        println!("skipped: NVRTC not found (install with `pip install nvidia-cuda-nvrtc`); CI=true makes this a failure");
                        return;
                    }
                    Err(e) => {
                        panic!("{} for {arch} with {num_warps} warps failed to compile:\n{e}", spec.name())
                    }
                }
            }
        }
    }
    println!("compiled {compiled} kernel variants");
}
