//! The emitted CUDA C of every example kernel and of the `dot` kernels (tests/common/dot.rs): snapshots (review changes with `cargo insta review`)
//! and a compile of each with NVRTC for sm_80 and sm_90 (no GPU needed), and of the example
//! kernels without a snapshot with their launch-time specialisations on and off. harness = false
//! (fuse_testkit::harness): when NVRTC is missing the compile tests are reported as ignored,
//! "needs NVRTC", except under CI=true where they fail.
mod common;
use fuse_kernels::matmul as matmul_example;
use fuse_testkit::harness;

use common::*;

/// The example kernels and the `dot` kernels (tests/common/dot.rs).
fn specs() -> Vec<(&'static fuse::KernelSpec, Vec<u64>)> {
    example_specs().into_iter().chain(dot::dot_specs()).collect()
}

/// The tensor-core examples whose names the `dot` kernels of tests/common/dot.rs already take:
/// their snapshot names (`None`: bf16's source differs from f16's in its types alone), specs and
/// consts. Their half-precision and int8 results go from the accumulator through the scratch
/// (emit_cuda/lower/coalesce.rs). (`matmul_int8` and `ffn_sublayer` compile in tests/quant_ffn.rs,
/// attention in tests/attention.rs, all without a GPU.)
fn tensor_core_examples() -> Vec<(Option<&'static str>, &'static fuse::KernelSpec, Vec<u64>)> {
    vec![
        (Some("example_matmul_f16"), &matmul_example::matmul::f16::SPEC, vec![128, 128, 32]),
        (None, &matmul_example::matmul::bf16::SPEC, vec![128, 256, 64]),
        (Some("example_matmul_int8"), &common::matmul_int8::matmul_int8::SPEC, vec![128, 128, 128]),
    ]
}

fn emitted_source_snapshots() {
    for (spec, _) in specs() {
        insta::assert_snapshot!(spec.name(), spec.source());
    }
    for (name, spec, _) in tensor_core_examples() {
        if let Some(name) = name {
            insta::assert_snapshot!(name, spec.source());
        }
    }
}

/// An upper estimate of the text each `#define`d macro of `src` expands to: its body with each
/// macro it names replaced by that macro's estimate (the largest of its definitions, whichever
/// `#if` branch they sit in; a function-like macro's arguments are counted where it is called).
fn macro_expansion_sizes(src: &str) -> std::collections::HashMap<String, usize> {
    use std::collections::HashMap;
    let mut bodies: HashMap<&str, Vec<&str>> = HashMap::new();
    for line in src.lines() {
        let Some(rest) = line.trim_start().strip_prefix("#define ") else { continue };
        let name_end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        let (name, body) = rest.split_at(name_end);
        let body = if body.starts_with('(') { body.split_once(')').map_or("", |(_, b)| b) } else { body };
        bodies.entry(name).or_default().push(body);
    }
    fn size<'a>(
        name: &'a str,
        bodies: &HashMap<&'a str, Vec<&'a str>>,
        memo: &mut HashMap<&'a str, usize>,
        depth: usize,
    ) -> usize {
        if let Some(&n) = memo.get(name) {
            return n;
        }
        let Some(defs) = bodies.get(name) else { return name.len() };
        if depth > 64 {
            return usize::MAX / 4; // a cycle, or a chain no preprocessor should be asked to walk
        }
        let mut largest = 0usize;
        for body in defs {
            let mut total = 0usize;
            let mut ident = String::new();
            for c in body.chars().chain(std::iter::once(' ')) {
                if c.is_ascii_alphanumeric() || c == '_' {
                    ident.push(c);
                    continue;
                }
                if !ident.is_empty() {
                    let id: &str = bodies.get_key_value(ident.as_str()).map_or("", |(k, _)| k);
                    total = total.saturating_add(if id.is_empty() {
                        ident.len()
                    } else {
                        size(id, bodies, memo, depth + 1)
                    });
                    ident.clear();
                }
                total += 1;
            }
            largest = largest.max(total);
        }
        memo.insert(name, largest);
        largest
    }
    let mut memo = HashMap::new();
    let names: Vec<&str> = bodies.keys().copied().collect();
    names.into_iter().map(|n| (n.to_string(), size(n, &bodies, &mut memo, 0))).collect()
}

/// No macro of an emitted kernel expands to more than 64 KiB of text: a chain of macros that each
/// name the one before more than once grows exponentially, and the NVRTC front end then spends
/// seconds on it (the mma.sync warp grid once expanded `FUSE_IDX<k>` to 1.4 MB: 7-16 s a
/// variant, byte-identical cubins after the fix).
fn emitted_macros_expand_to_bounded_text() {
    let tensor_cores = tensor_core_examples().into_iter().map(|(_, s, _)| s);
    for spec in specs().into_iter().map(|(s, _)| s).chain(tensor_cores) {
        let sizes = macro_expansion_sizes(spec.source());
        let (name, largest) =
            sizes.iter().max_by_key(|(_, n)| **n).map_or(("", 0), |(k, n)| (k.as_str(), *n));
        assert!(largest <= 64 << 10, "{}: macro {name} expands to about {largest} bytes", spec.name());
    }
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
    // The matmul examples at the warps their blocks are launched with (one warp would hold a
    // whole 128x128 accumulator); int8 compiles in tests/quant_ffn.rs.
    let int8 = &common::matmul_int8::matmul_int8::SPEC;
    let matmuls = tensor_core_examples().into_iter().filter(|(_, s, _)| !std::ptr::eq(*s, int8));
    let kernels = specs().into_iter().map(|(s, c)| (s, c, &[1, 4, 8][..]));
    for (spec, consts, warps) in kernels.chain(matmuls.map(|(_, s, c)| (s, c, &[4, 8][..]))) {
        for arch in ["sm_80", "sm_90"] {
            for &num_warps in warps {
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

/// The example kernels that have no emitted-CUDA snapshot (multi-row softmax and LayerNorm,
/// QK-norm + RoPE, cross-entropy, add + activation) compile with NVRTC for sm_80 and sm_90, at the
/// tiles their launchers use, with every launch-time specialisation on (the proven, unchecked
/// paths), off (the checked ones), and with no access proven in bounds nor mask true but aligned
/// buffers (the checked vector paths).
fn unsnapshotted_example_kernels_compile_with_every_specialisation() {
    use fuse::fuse_ir::Specialization;
    use fuse::KernelSpec;
    let specs: Vec<(&'static KernelSpec, Vec<u64>)> = vec![
        (&softmax::softmax_rows::f32::SPEC, vec![16, 128]),
        (&softmax::softmax_rows::f16::SPEC, vec![8, 256]),
        (&softmax::softmax_rows::bf16::SPEC, vec![64, 16]),
        (&layernorm::layernorm_rows::f32::SPEC, vec![16, 128]),
        (&layernorm::layernorm_rows::f16::SPEC, vec![8, 256]),
        (&layernorm::layernorm_rows::bf16::SPEC, vec![2, 1024]),
        (&qk_norm_rope::qk_norm_rope::f32::SPEC, vec![8, 64]),
        (&qk_norm_rope::qk_norm_rope::f16::SPEC, vec![8, 64]),
        (&qk_norm_rope::qk_norm_rope::bf16::SPEC, vec![4, 128]),
        (&qk_norm_rope::qk_norm_rope_gptj::f16::SPEC, vec![8, 64]),
        (&qk_norm_rope::qk_norm_rope_gptj::bf16::SPEC, vec![4, 128]),
        (&cross_entropy::cross_entropy::f32::SPEC, vec![cross_entropy::BLOCK as u64]),
        (&cross_entropy::cross_entropy::bf16::SPEC, vec![cross_entropy::BLOCK_16BIT as u64]),
        (&add_activation::add_gelu::f16::SPEC, vec![1024]),
        (&add_activation::add_gelu::bf16::SPEC, vec![1024]),
        (&add_activation::add_silu::f16::SPEC, vec![1024]),
        (&add_activation::add_silu::bf16::SPEC, vec![1024]),
    ];
    let mut compiled = 0;
    for (spec, consts) in specs {
        // Every fact on, every fact off, and a launch that proves no access in bounds and no mask
        // true but passes aligned buffers (the checked vector paths).
        let n = spec.specializations().len();
        let unproven: Vec<bool> = spec
            .specializations()
            .iter()
            .map(|s| !matches!(s, Specialization::InBounds(_) | Specialization::AllTrue(_)))
            .collect();
        for arch in ["sm_80", "sm_90"] {
            for (what, values) in
                [("on", vec![true; n]), ("off", vec![false; n]), ("unproven", unproven.clone())]
            {
                match spec.compile_for_arch_with(arch, &consts, 4, &values) {
                    Ok(cubin) => assert!(cubin.len() > 64, "{} {arch}: empty cubin", spec.name()),
                    Err(e) => {
                        panic!("{} {consts:?} for {arch} (specialisations {what}) failed:\n{e}", spec.name())
                    }
                }
                compiled += 1;
            }
        }
    }
    println!("compiled {compiled} kernel variants");
}

fn main() {
    let mut trials = vec![
        harness::trial("emitted_source_snapshots", emitted_source_snapshots),
        harness::trial("emitted_macros_expand_to_bounded_text", emitted_macros_expand_to_bounded_text),
        harness::trial("emitted_source_is_self_contained", emitted_source_is_self_contained),
    ];
    trials.extend(harness::nvrtc_trials(vec![
        (
            "every_example_kernel_compiles_with_nvrtc_for_sm80_and_sm90",
            every_example_kernel_compiles_with_nvrtc_for_sm80_and_sm90,
        ),
        (
            "unsnapshotted_example_kernels_compile_with_every_specialisation",
            unsnapshotted_example_kernels_compile_with_every_specialisation,
        ),
    ]));
    harness::run(trials)
}
