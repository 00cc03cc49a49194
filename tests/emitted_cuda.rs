//! The emitted CUDA C of every example kernel and of the `dot` kernels (tests/common/dot.rs): snapshots (review changes with `cargo insta review`)
//! and a compile of each with NVRTC for sm_80 and sm_90 (no GPU needed). harness = false
//! (fuse-runtime/tests/common/harness.rs): when NVRTC is missing the compile test is reported as
//! ignored, "needs NVRTC", except under CI=true where it fails.
mod common;
#[path = "../fuse-runtime/tests/common/harness.rs"]
mod harness;
#[path = "../examples/kernels/matmul.rs"]
#[allow(dead_code)]
mod matmul_example;

use common::*;

/// The example kernels and the `dot` kernels (tests/common/dot.rs).
fn specs() -> Vec<(&'static fuse::KernelSpec, Vec<u64>)> {
    example_specs().into_iter().chain(dot::dot_specs()).collect()
}

fn emitted_source_snapshots() {
    for (spec, _) in specs() {
        insta::assert_snapshot!(spec.name(), spec.source());
    }
    // Half-precision and int8 results stored from the accumulator through the scratch
    // (emit_cuda/coalesce.rs); tests/ptxas_resources.rs compiles these kernels.
    insta::assert_snapshot!("example_matmul_f16", matmul_example::matmul::f16::SPEC.source());
    insta::assert_snapshot!("example_matmul_int8", common::matmul_int8::matmul_int8::SPEC.source());
}

fn emitted_source_is_self_contained() {
    for (spec, _) in specs() {
        let src = spec.source();
        assert!(!src.contains("#include"), "{}: must not include headers", spec.name());
        assert!(src.contains("extern \"C\" __global__"), "{}", spec.name());
        assert!(src.contains(spec.name()), "{}: entry point named after the kernel", spec.name());
    }
}

fn every_example_kernel_compiles_with_nvrtc_for_sm80_and_sm90() {
    let mut compiled = 0;
    for (spec, consts) in specs() {
        for arch in ["sm_80", "sm_90"] {
            for num_warps in [1, 4, 8] {
                match spec.compile_for_arch(arch, &consts, num_warps) {
                    Ok(cubin) => {
                        assert!(cubin.len() > 64, "{} {arch}: empty cubin", spec.name());
                        compiled += 1;
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

fn main() {
    let mut trials = vec![
        harness::trial("emitted_source_snapshots", emitted_source_snapshots),
        harness::trial("emitted_source_is_self_contained", emitted_source_is_self_contained),
    ];
    trials.extend(harness::nvrtc_trials(vec![(
        "every_example_kernel_compiles_with_nvrtc_for_sm80_and_sm90",
        every_example_kernel_compiles_with_nvrtc_for_sm80_and_sm90,
    )]));
    harness::run(trials)
}
