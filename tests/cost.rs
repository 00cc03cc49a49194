//! What the runtime knows of a launch before it runs: `KernelSpec::cost` (FLOPs, transcendentals,
//! Philox calls, bytes read and written) against hand counts by fuse_runtime::cost's rules, what it
//! says where it cannot be exact (a gather, a ragged loop) and where the arguments are wrong, the
//! recording of each launch's cost, and the scalars the host computes for a launch. No device
//! needed but the CPU interpreter, for the recorded launches.
mod common;
use fuse_kernels::matmul as matmul_example;

use common::*;
use fuse::Device;

use fuse::CostArg::{Int, Len, F32};

/// add_mul: 2 FLOPs per lane of the 1024-lane tile (masked lanes too), 3 reads and 1 write of
/// exactly `n` elements (the mask `offs < n` narrows the range), no transcendentals.
#[test]
fn cost_add_mul_by_hand() {
    for (n, grid) in [(1000u64, 1u32), (4096, 4), (1_000_003, 977)] {
        let c = add_mul::add_mul::f32::SPEC
            .cost(&[1024], grid, &[Len(n), Len(n), Len(n), Len(n), Int(n.into())])
            .unwrap();
        assert_eq!(c.programs, u64::from(grid));
        assert_eq!(c.flops, 2 * 1024 * u64::from(grid), "n={n}");
        assert_eq!((c.transcendentals, c.dot_flops, c.philox_calls), (0, 0, 0));
        assert_eq!(c.bytes_read(), 12 * n);
        assert_eq!(c.bytes_written(), 4 * n);
        assert_eq!(c.bytes(), 16 * n);
        assert!(c.exact && c.buffers.iter().all(|b| b.proven && b.range == (0, n)), "{c:?}");
        assert!((c.intensity() - (2 * 1024 * u64::from(grid)) as f64 / (16 * n) as f64).abs() < 1e-12);
    }
    // f16: the same FLOPs, half the bytes; buffers longer than `n` count only `n`.
    let c = add_mul::add_mul::f16::SPEC
        .cost(&[1024], 4u32, &[Len(9000), Len(9000), Len(9000), Len(9000), Int(4096)])
        .unwrap();
    assert_eq!((c.flops, c.bytes()), (8192, 8 * 4096));
}

/// softmax (one row per program, BLOCK 1024 over 1000 columns, 37 rows): per program max (1023)
/// and subtract (1024), the `* log2 e` (1024), the sum (1023), one scalar division, the final
/// multiply (1024): 5119 FLOPs and 1024 `exp2`; bytes 37 x 1000 in and out.
#[test]
fn cost_softmax_by_hand() {
    let rows = 37u64;
    let c = softmax::softmax::f32::SPEC
        .cost(&[1024], rows as u32, &[Len(rows * 1000), Len(rows * 1000), Int(1000), Int(1000), Int(1000)])
        .unwrap();
    assert_eq!(c.flops, 5119 * rows);
    assert_eq!(c.transcendentals, 1024 * rows);
    assert_eq!((c.bytes_read(), c.bytes_written()), (4 * rows * 1000, 4 * rows * 1000));
    // A stride wider than the row: the hull counts the gaps (documented), but never past the buffer.
    let c = softmax::softmax::f32::SPEC
        .cost(&[1024], 3u32, &[Len(3 * 1500), Len(3 * 1500), Int(1500), Int(1500), Int(1000)])
        .unwrap();
    assert_eq!(c.bytes_read(), 4 * (2 * 1500 + 1000));
}

/// LayerNorm (f32, 1000 columns, BLOCK 1024, 37 rows): per program 1 (1 / n, counted from the IR
/// though the runtime computes it once per launch) + 1023 + 1 (mean) + 1024 (xs - mean) + 1024
/// + 1023 + 1 + 1 (variance + eps) + 3 x 1024 (xc * rstd * w + b) = 7170 FLOPs and one rsqrt; bytes: x and y 37 x 1000 each, w and b 1000 each (read once).
#[test]
fn cost_layernorm_by_hand() {
    let rows = 37u64;
    let n = rows * 1000;
    let c = layernorm::layernorm::f32::SPEC
        .cost(&[1024], rows as u32, &[Len(n), Len(n), Len(1000), Len(1000), Int(1000), Int(1000), F32(1e-5)])
        .unwrap();
    assert_eq!(c.flops, 7170 * rows);
    assert_eq!(c.transcendentals, rows);
    assert_eq!(c.bytes(), 4 * (2 * n + 2000));
    assert_eq!(c.bytes_read(), 4 * (n + 2000));
    assert!(c.exact, "{:?}", c.notes);
}

/// The tensor-core matmul example (f16, 64 x 64 x 64 in 32 x 32 x 32 blocks: 4 programs, 2 trips
/// of the K loop): 2 M N K FLOPs of `dot`; with `gelu != 0` also the epilogue per element of C
/// (bias add, 0.5 *, * 0.7071, 1 +, the product: 5 FLOPs and one erf) and the bias read.
#[test]
fn cost_matmul_by_hand() {
    let spec = &matmul_example::matmul::f16::SPEC;
    let (m, n, k) = (64u64, 64u64, 64u64);
    let args =
        |gelu: i32| [Len(m * k), Len(k * n), Len(n), Len(m * n), Int(64), Int(64), Int(64), Int(gelu.into())];
    let c = spec.cost(&[32, 32, 32], 4u32, &args(0)).unwrap();
    assert_eq!(c.dot_flops, 2 * m * n * k);
    assert_eq!(c.flops, 2 * m * n * k);
    assert_eq!(c.transcendentals, 0);
    assert_eq!(c.bytes(), 2 * (m * k + k * n + m * n), "bias not read: {:?}", c.buffers);
    assert!(c.exact, "{:?}", c.notes);
    let c = spec.cost(&[32, 32, 32], 4u32, &args(1)).unwrap();
    assert_eq!(c.flops, 2 * m * n * k + 5 * m * n);
    assert_eq!(c.transcendentals, m * n);
    assert_eq!(c.bytes(), 2 * (m * k + k * n + m * n + n));
    // k not a multiple of BK: the loop runs cdiv(k, BK) times.
    let c = spec
        .cost(
            &[32, 32, 32],
            4u32,
            &[Len(64 * 80), Len(80 * 64), Len(64), Len(64 * 64), Int(64), Int(64), Int(80), Int(0)],
        )
        .unwrap();
    assert_eq!(c.dot_flops, 4 * 3 * 2 * 32 * 32 * 32);
}

/// bias+GELU+dropout: per lane the bias add, `half_scale *` (GELU's 1/2 and the dropout scale in
/// one), `* 0.7071`, `1 +` and the product (5 FLOPs) plus one scalar `1 - p` and `0.5 / (1 - p)`
/// per program, one erf per lane; one Philox call per 4 lanes (`rand`) or per 8 (`rand16`); bytes
/// 2n + h elements.
#[test]
fn cost_bias_gelu_dropout_by_hand() {
    let (rows, h) = (8u64, 512u64);
    let n = rows * h;
    let args = [Len(n), Len(h), Len(n), Int(7), F32(0.1), Int(n.into()), Int(h.into())];
    for (spec, per_call) in [
        (&bias_gelu_dropout::bias_gelu_dropout::f16::SPEC, 4),
        (&bias_gelu_dropout::bias_gelu_dropout16::f16::SPEC, 8),
    ] {
        let c = spec.cost(&[1024], 4u32, &args).unwrap();
        assert_eq!(c.flops, 4 * (5 * 1024 + 2), "{}", spec.name());
        assert_eq!(c.transcendentals, 4 * 1024);
        assert_eq!(c.philox_calls, 4 * 1024 / per_call);
        assert_eq!(c.bytes(), 2 * (2 * n + h));
    }
}

mod gather_kernel {
    use fuse::fused_kernel;
    /// `out[i] = src[idx[i]]`: offsets read from memory.
    #[fused_kernel]
    pub fn gather<const BLOCK: usize>(idx: *const i32, src: *const f32, out: *mut f32, n: i32) {
        let offs = program_id(0) * BLOCK + arange(0, BLOCK);
        let m = offs < n;
        let i = load(idx + offs, m);
        store(out + offs, load(src + i, m), m);
    }
}

/// A gather (offsets from loaded values) cannot be bounded: the whole buffer counts, flagged.
/// Wrong arguments are errors that say what is wrong, not panics.
#[test]
fn cost_of_an_unbounded_access_is_the_whole_buffer_and_flagged() {
    let c =
        gather_kernel::gather::SPEC.cost(&[256], 2u32, &[Len(500), Len(7777), Len(500), Int(500)]).unwrap();
    assert_eq!(c.bytes(), 4 * (500 + 7777 + 500));
    assert!(!c.exact);
    let src = &c.buffers[1];
    assert!(!src.proven && src.read && !src.written && src.range == (0, 7777), "{src:?}");
    assert!(c.buffers[0].proven && c.buffers[2].proven);
    assert!(c.notes.iter().any(|n| n.contains("`src`")), "{:?}", c.notes);
    assert_eq!(c.flops, 0);

    let e = add_mul::add_mul::f32::SPEC
        .cost(&[1024], 1u32, &[Len(1), Len(1), Len(1), Int(1), Int(1)])
        .unwrap_err();
    assert!(e.to_string().contains("parameter `out` needs a buffer length"), "{e}");
    let e =
        add_mul::add_mul::f32::SPEC.cost(&[], 1u32, &[Len(1), Len(1), Len(1), Len(1), Int(1)]).unwrap_err();
    assert!(e.to_string().contains("const generics"), "{e}");
    let e = add_mul::add_mul::f32::SPEC.cost(&[1024], 1u32, &[Len(1), Len(1)]).unwrap_err();
    assert!(e.to_string().contains("arguments"), "{e}");
}

/// A loop whose trip count differs between programs (a causal-style bound on `program_id`)
/// counts its most trips and says so.
mod ragged_kernel {
    use fuse::fused_kernel;
    #[fused_kernel]
    pub fn ragged<const BLOCK: usize>(x: *const f32, out: *mut f32) {
        let row = program_id(0);
        let cols = arange(0, BLOCK);
        let mut acc = zeros(BLOCK);
        for j in 0..row + 1 {
            acc += load(x + j * BLOCK + cols);
        }
        store(out + row * BLOCK + cols, acc);
    }
}

#[test]
fn cost_of_a_ragged_loop_counts_the_most_trips_and_says_so() {
    let c = ragged_kernel::ragged::SPEC.cost(&[64], 4u32, &[Len(256), Len(256)]).unwrap();
    assert_eq!(c.flops, 4 * 4 * 64, "4 programs x at most 4 trips x 64 adds");
    assert!(!c.exact);
    assert!(c.notes.iter().any(|n| n.contains("1 to 4 times")), "{:?}", c.notes);
    assert_eq!(c.bytes(), 4 * (256 + 256));
}

/// `fuse::cost::record_costs` records each launch's cost (the same as `KernelSpec::cost` for
/// that launch), across launches, until `take_recorded_costs`; nothing is recorded otherwise.
#[test]
fn launches_record_their_cost_while_recording() {
    let d = Device::cpu();
    let n = 3000usize;
    let x = d.upload(&vec![1.0f32; n]).unwrap();
    let mut o = d.zeros::<f32>(n).unwrap();
    add_mul::add_mul::launch::<f32, 1024>(&d, 3, &x, &x, &x, &mut o, n as i32).unwrap();
    assert!(fuse::cost::take_recorded_costs().is_empty());
    fuse::cost::record_costs();
    add_mul::add_mul::launch::<f32, 1024>(&d, 3, &x, &x, &x, &mut o, n as i32).unwrap();
    add_mul::add_mul::launch::<f32, 1024>(&d, 2, &x, &x, &x, &mut o, 2048).unwrap();
    let got = fuse::cost::take_recorded_costs();
    assert_eq!(got.len(), 2);
    let want = add_mul::add_mul::f32::SPEC
        .cost(&[1024], 3u32, &[Len(3000), Len(3000), Len(3000), Len(3000), Int(3000)])
        .unwrap();
    assert_eq!(got[0].0, "add_mul_f32");
    assert_eq!(got[0].1.as_ref().unwrap(), &want);
    assert_eq!(got[1].1.as_ref().unwrap().bytes(), 16 * 2048);
    add_mul::add_mul::launch::<f32, 1024>(&d, 3, &x, &x, &x, &mut o, n as i32).unwrap();
    assert!(fuse::cost::take_recorded_costs().is_empty(), "recording stopped");
}

/// The scalars the runtime computes at each launch (fuse-ir's host_scalars.rs): LayerNorm's
/// `1 / n_cols` and dropout's `0.5 / (1 - p)` are found, evaluate to the f32 the device's IEEE `/`
/// gives, and a source that does not declare them as parameters is refused.
#[test]
fn divisions_of_arguments_are_computed_by_the_host_with_f32_rounding() {
    use fuse::fuse_ir::{HostScalar, Kernel};
    fn only(k: &Kernel, var: &str) -> fuse::fuse_ir::HostProgram {
        let hs = k.host_scalars();
        assert_eq!(hs.len(), 1, "{}", k.name);
        assert_eq!(k.var(hs[0].var()).name, var, "{}", k.name);
        hs.into_iter().next().unwrap()
    }
    let param = |k: &Kernel, name: &str| k.params.iter().position(|p| p.name == name).unwrap() as u32;
    for spec in [&layernorm::layernorm::f32::SPEC, &layernorm::layernorm::f16::SPEC] {
        let k = spec.kernel().unwrap();
        let (program, n_cols) = (only(k, "inv_n"), param(k, "n_cols"));
        for n in [1i32, 3, 7, 1000, 50257, 0] {
            let got = program.eval(&|p| (p == n_cols).then_some(HostScalar::Int(n.into())), &[1024]);
            assert_eq!(got, Some(HostScalar::Float(f64::from(1.0f32 / n as f32))), "{} n = {n}", k.name);
            assert_eq!(got.unwrap().launch_word(), u64::from((1.0f32 / n as f32).to_bits()));
        }
    }
    let k = bias_gelu_dropout::bias_gelu_dropout::f32::SPEC.kernel().unwrap();
    let (program, p_index) = (only(k, "half_scale"), param(k, "p"));
    for p in [0.0f32, 0.1, 0.3, 0.999_999, 1.0] {
        let got = program.eval(&|q| (q == p_index).then_some(HostScalar::Float(p.into())), &[1024]);
        assert_eq!(got, Some(HostScalar::Float(f64::from(0.5f32 / (1.0 - p)))), "p = {p}");
    }
    // The source and the IR disagree: the runtime says so instead of launching with the wrong words.
    let spec = &layernorm::layernorm::f32::SPEC;
    let source: &'static str = Box::leak(spec.source().replace("fuse_host0", "renamed").into_boxed_str());
    let bad: &'static fuse::KernelSpec = Box::leak(Box::new(fuse::KernelSpec::new(
        spec.name(),
        source,
        spec.ir_json(),
        spec.specializations(),
    )));
    let e = bad.kernel().unwrap_err().to_string();
    assert!(e.contains("takes 0 host-computed scalars but the IR has 1"), "{e}");
}
