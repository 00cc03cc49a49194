//! The launch-time in-bounds proof (`KernelSpec::proven_in_bounds`, which lets the GPU skip bounds
//! checks) against the CPU interpreter, which checks every access: on random launches of every
//! example kernel — random grids, scalars (negative ones included) and buffer lengths, so that
//! many launches do go out of bounds — an access the proof calls in bounds must never be the
//! one the interpreter catches. And the proof must hold for the launches the examples make.
//! Likewise `KernelSpec::proven_all_true` (masks the GPU treats as the constant `true`): a mask
//! it proves must be true on every lane the interpreter computes.
mod common;

use common::*;
use fuse::fuse_ir::{DType, ParamKind};
use fuse::half::{bf16, f16};
use fuse::{Buffer, Device, Error, KernelArg, KernelSpec, LaunchConfig};

/// One buffer per dtype the examples use.
enum AnyBuffer {
    F32(Buffer<f32>),
    F16(Buffer<f16>),
    BF16(Buffer<bf16>),
    I8(Buffer<i8>),
    I32(Buffer<i32>),
}

impl AnyBuffer {
    fn new(d: &Device, dtype: DType, len: usize) -> AnyBuffer {
        match dtype {
            DType::F32 => AnyBuffer::F32(d.upload(&vec![0.5f32; len]).unwrap()),
            DType::F16 => AnyBuffer::F16(d.upload(&vec![f16::from_f32(0.5); len]).unwrap()),
            DType::BF16 => AnyBuffer::BF16(d.upload(&vec![bf16::from_f32(0.5); len]).unwrap()),
            DType::I8 => AnyBuffer::I8(d.upload(&vec![1i8; len]).unwrap()),
            DType::I32 => AnyBuffer::I32(d.upload(&vec![7i32; len]).unwrap()),
            other => panic!("no example uses {other} buffers"),
        }
    }
    fn arg(&mut self) -> KernelArg<'_> {
        match self {
            AnyBuffer::F32(b) => b.into(),
            AnyBuffer::F16(b) => b.into(),
            AnyBuffer::BF16(b) => b.into(),
            AnyBuffer::I8(b) => b.into(),
            AnyBuffer::I32(b) => b.into(),
        }
    }
}

enum Value {
    Buffer(AnyBuffer),
    I32(i32),
    U64(u64),
    F32(f32),
}

fn args_of(values: &mut [Value]) -> Vec<KernelArg<'_>> {
    values
        .iter_mut()
        .map(|v| match v {
            Value::Buffer(b) => b.arg(),
            Value::I32(x) => (*x).into(),
            Value::U64(x) => (*x).into(),
            Value::F32(x) => (*x).into(),
        })
        .collect()
}

/// Launches `spec` on the CPU with `values`; returns the proof and the interpreter's verdict.
fn prove_and_run(
    spec: &'static KernelSpec,
    consts: &[u64],
    grid: u32,
    values: &mut [Value],
) -> (Vec<bool>, Result<(), Error>) {
    let d = Device::cpu();
    let mut args = args_of(values);
    let proof = spec.proven_in_bounds(&d, LaunchConfig::new(grid), consts, &args).unwrap();
    let run = fuse::launch(spec, &d, LaunchConfig::new(grid), consts, &mut args);
    (proof, run)
}

#[test]
fn a_proven_access_is_never_the_one_that_goes_out_of_bounds() {
    let mut rng = Rng::fresh("bounds proof");
    let d = Device::cpu();
    let (mut launches, mut caught, mut all_proven) = (0, 0, 0);
    for (spec, consts) in example_specs() {
        // Small tiles keep the interpreter quick; the proof does not depend on their size.
        let block = 256u64;
        let consts: Vec<u64> = consts.iter().map(|_| block).collect();
        let k = spec.kernel().unwrap();
        let accesses = k.accesses();
        for _ in 0..150 {
            let grid = 1 + (rng.next_u64() % 4) as u32;
            let span = (u64::from(grid) * block) as i64;
            let mut values: Vec<Value> = k
                .params
                .iter()
                .map(|p| match p.kind {
                    ParamKind::Ptr { elem, .. } => {
                        let len = (rng.next_u64() % (2 * span as u64 + 2)) as usize;
                        Value::Buffer(AnyBuffer::new(&d, elem, len))
                    }
                    // Mostly near the tile sizes, sometimes negative or far out.
                    ParamKind::Scalar(DType::I32) => Value::I32(match rng.next_u64() % 8 {
                        0 => -((rng.next_u64() % 300) as i32),
                        1 => block as i32,
                        2 => (span as i32) * 3,
                        _ => (rng.next_u64() % (span as u64 + 1)) as i32,
                    }),
                    ParamKind::Scalar(DType::U64) => Value::U64(rng.next_u64()),
                    ParamKind::Scalar(DType::F32) => Value::F32(0.25),
                    ParamKind::Scalar(other) => panic!("no example takes {other} scalars"),
                })
                .collect();
            let (proof, run) = prove_and_run(spec, &consts, grid, &mut values);
            launches += 1;
            if proof.iter().all(|&p| p) {
                all_proven += 1;
            }
            match run {
                Ok(()) => {}
                Err(Error::OutOfBounds { param, index, .. }) => {
                    caught += 1;
                    let p = k.params.iter().position(|q| q.name == param).unwrap() as u32;
                    let unproven = accesses.iter().zip(&proof).any(|(a, &ok)| a.param == p && !ok);
                    assert!(
                        unproven,
                        "kernel `{}`: every access to `{param}` was proven in bounds, but the interpreter caught index {index} (grid {grid}, proof {proof:?})",
                        k.name
                    );
                }
                Err(e) => panic!("kernel `{}`: unexpected error {e}", k.name),
            }
        }
    }
    println!("{launches} launches: {caught} out of bounds (each with an unproven access), {all_proven} fully proven");
    assert!(
        caught > launches / 10 && all_proven > launches / 20,
        "the random launches must exercise both verdicts"
    );
}

fn f32s(d: &Device, n: usize) -> Value {
    Value::Buffer(AnyBuffer::new(d, DType::F32, n))
}

fn f16s(d: &Device, n: usize) -> Value {
    Value::Buffer(AnyBuffer::new(d, DType::F16, n))
}

/// The arguments of the LayerNorm kernels: `x`, `y` (`rows x cols`), `w`, `b`, `stride`, `n_cols`, `eps`.
fn layernorm_args(d: &Device, dtype: DType, rows: usize, cols: usize, stride: i32) -> Vec<Value> {
    let buf = |n| Value::Buffer(AnyBuffer::new(d, dtype, n));
    vec![
        buf(rows * cols),
        buf(rows * cols),
        buf(cols),
        buf(cols),
        Value::I32(stride),
        Value::I32(cols as i32),
        Value::F32(1e-5),
    ]
}

#[test]
fn the_launches_the_examples_make_are_proven() {
    let d = Device::cpu();
    let proven =
        |what: &str, spec: &'static KernelSpec, consts: &[u64], grid: u32, mut values: Vec<Value>| {
            let (proof, run) = prove_and_run(spec, consts, grid, &mut values);
            run.unwrap();
            assert!(proof.iter().all(|&p| p), "{what}: {proof:?}");
        };
    // Element-wise, exact and with a masked tail.
    for n in [4096usize, 4000] {
        let v = vec![f32s(&d, n), f32s(&d, n), f32s(&d, n), f32s(&d, n), Value::I32(n as i32)];
        proven("add_mul_f32", add_mul::add_mul::spec::<f32>(), &[1024], n.div_ceil(1024) as u32, v);
    }
    // Rows of 1000 in tiles of 1024: the mask `cols < n_cols` bounds the offsets.
    let (rows, cols) = (5usize, 1000usize);
    let v = layernorm_args(&d, DType::F16, rows, cols, cols as i32);
    proven("layernorm_f16", &layernorm::layernorm::f16::SPEC, &[1024], rows as u32, v);
    // A loop over column blocks: the counter is bounded by the loop's range.
    let (rows, cols) = (3usize, 3000usize);
    let v = layernorm_args(&d, DType::F32, rows, cols, cols as i32);
    proven("layernorm_wide", &layernorm::layernorm_wide::SPEC, &[1024], rows as u32, v);
    let v = vec![
        f32s(&d, rows * cols),
        f32s(&d, rows * cols),
        Value::I32(cols as i32),
        Value::I32(cols as i32),
        Value::I32(cols as i32),
    ];
    proven("softmax_f32", &softmax::softmax::f32::SPEC, &[4096], rows as u32, v);
    // `offs % h` bounded by the divisor.
    let (n, h) = (8192usize, 768usize);
    let v = vec![
        f16s(&d, n),
        f16s(&d, h),
        f16s(&d, n),
        Value::U64(7),
        Value::F32(0.1),
        Value::I32(n as i32),
        Value::I32(h as i32),
    ];
    proven(
        "bias_gelu_dropout_f16",
        bias_gelu_dropout::bias_gelu_dropout::spec::<f16>(),
        &[1024],
        (n / 1024) as u32,
        v,
    );
    // A negative remainder masked off by `r >= 0`.
    let (n, h) = (4100usize, 100usize);
    let v = vec![
        f16s(&d, n),
        f16s(&d, h),
        f16s(&d, n),
        Value::I32(n as i32),
        Value::I32(16),
        Value::I32(h as i32),
        Value::I32(5),
    ];
    proven("rem_gather", &paths::rem_gather::SPEC, &[1024], n.div_ceil(1024) as u32, v);
}

#[test]
fn an_offset_the_proof_cannot_bound_is_not_proven() {
    let d = Device::cpu();
    // One element short of the grid's span, no mask that covers it: the store is not proven.
    let n = 4096usize;
    let mut v = vec![f32s(&d, n), f32s(&d, n), f32s(&d, n), f32s(&d, n - 1), Value::I32(n as i32)];
    let (proof, run) = prove_and_run(&add_mul::add_mul::f32::SPEC, &[1024], 4, &mut v);
    assert!(matches!(run, Err(Error::OutOfBounds { .. })), "{run:?}");
    assert_eq!(proof, vec![true, true, true, false]);
    // A stride the rows overlap with: still in bounds, still proven; a negative one is not.
    for (stride, want) in [(500, true), (-1000, false)] {
        let (rows, cols) = (4usize, 1000usize);
        let mut v = layernorm_args(&d, DType::F32, rows, cols, stride);
        let (proof, _) = prove_and_run(&layernorm::layernorm::f32::SPEC, &[1024], rows as u32, &mut v);
        assert_eq!(proof[0], want, "stride {stride}: {proof:?}");
    }
}

/// Five masks over `offs = i * s + lo` (`i` the element's index in the grid), written out as
/// `out[5 i + k] = mask k` so that the CPU interpreter reports every lane's value.
#[fuse::fused_kernel]
pub fn mask_probe<const BLOCK: usize>(out: *mut i32, n: i32, lo: i32, s: i32) {
    let i = program_id(0) * BLOCK + arange(0, BLOCK);
    let offs = i * s + lo;
    let m0 = offs < n;
    let m1 = offs >= lo;
    let m2 = m0 & m1;
    let m3 = i != s;
    let m4 = offs <= n;
    store(out + i * 5, m0 as i32);
    store(out + i * 5 + 1, m1 as i32);
    store(out + i * 5 + 2, m2 as i32);
    store(out + i * 5 + 3, m3 as i32);
    store(out + i * 5 + 4, m4 as i32);
}

#[test]
fn a_mask_proven_true_is_true_on_every_lane() {
    let d = Device::cpu();
    let spec = &mask_probe::SPEC;
    assert_eq!(spec.kernel().unwrap().masks().len(), 5, "m0..m4, in program order");
    let mut rng = Rng::fresh("mask proof");
    let block = 64u32;
    let (mut launches, mut proven, mut refuted) = (0, 0, 0);
    for _ in 0..3000 {
        let grid = 1 + (rng.next_u64() % 4) as u32;
        let span = (grid * block) as i64;
        let pick = |rng: &mut Rng| -> i32 {
            match rng.next_u64() % 6 {
                0 => -((rng.next_u64() % 300) as i32),
                1 => span as i32,
                2 => i32::MAX - (rng.next_u64() % 100) as i32,
                3 => (rng.next_u64() % 4) as i32,
                _ => (rng.next_u64() % (3 * span as u64 + 1)) as i32,
            }
        };
        let (n, lo, s) = (pick(&mut rng), pick(&mut rng), pick(&mut rng));
        let mut out = d.upload(&vec![-1i32; 5 * span as usize]).unwrap();
        let config = LaunchConfig::new(grid);
        let mut args: Vec<KernelArg<'_>> = vec![(&mut out).into(), n.into(), lo.into(), s.into()];
        let proof = spec.proven_all_true(&d, config, &[u64::from(block)], &args).unwrap();
        fuse::launch(spec, &d, config, &[u64::from(block)], &mut args).unwrap();
        drop(args);
        let lanes = out.to_vec().unwrap();
        launches += 1;
        for (k, &p) in proof.iter().enumerate() {
            let all = lanes.iter().skip(k).step_by(5).all(|&v| v == 1);
            assert!(!p || all, "mask {k} proven true but false on a lane: n={n} lo={lo} s={s} grid={grid}");
            proven += usize::from(p);
            refuted += usize::from(!all);
        }
    }
    println!("{launches} launches: {proven} masks proven all-true, {refuted} false somewhere");
    assert!(proven > launches / 4 && refuted > launches / 4, "the launches must exercise both verdicts");
}

#[test]
fn the_examples_masks_are_proven_where_the_grid_fits_the_data() {
    let d = Device::cpu();
    // add_mul: `offs < n` holds on every lane when the grid covers exactly n, not with a tail.
    for (n, want) in [(4096usize, true), (4000, false)] {
        let mut v = vec![f32s(&d, n), f32s(&d, n), f32s(&d, n), f32s(&d, n), Value::I32(n as i32)];
        let grid = LaunchConfig::new(n.div_ceil(1024) as u32);
        let proof = add_mul::add_mul::f32::SPEC.proven_all_true(&d, grid, &[1024], &args_of(&mut v)).unwrap();
        assert_eq!(proof, vec![want], "n = {n}");
    }
    // LayerNorm: `cols < n_cols` holds when the tile is the row.
    for (cols, block, want) in [(1024usize, 1024u64, true), (1000, 1024, false)] {
        let mut v = layernorm_args(&d, DType::F32, 3, cols, cols as i32);
        let config = LaunchConfig::new(3);
        let proof =
            layernorm::layernorm::f32::SPEC.proven_all_true(&d, config, &[block], &args_of(&mut v)).unwrap();
        assert!(proof.iter().all(|&p| p == want), "cols {cols}: {proof:?}");
    }
}

/// A loop over `(start..end).step_by(step)` reading `x[s .. s + 4]`: the proof bounds the counter
/// by the last value the loop takes (a multiple of `step` from `start`), never past it.
#[fuse::fused_kernel]
fn stepped(x: *const f32, y: *mut f32, start: i32, end: i32, step: i32) {
    let mut acc = zeros([4]);
    for s in (start..end).step_by(step) {
        acc = acc + load(x + s + arange(0, 4));
    }
    store(y + arange(0, 4), acc);
}

#[test]
fn a_stepped_counter_is_bounded_by_its_last_value_and_no_further() {
    let mut rng = Rng::fresh("stepped counter");
    let d = Device::cpu();
    let (mut proven, mut caught, mut proven_at_the_edge) = (0, 0, 0);
    for _ in 0..3000 {
        let start = (rng.next_u64() % 24) as i32 - 3;
        let end = (rng.next_u64() % 40) as i32;
        let step = (rng.next_u64() % 9) as i32 - 1;
        let len = (rng.next_u64() % 48) as usize;
        let x = d.upload(&vec![1.0f32; len]).unwrap();
        let mut y = d.upload(&[0.0f32; 4]).unwrap();
        let mut args: Vec<KernelArg<'_>> = vec![
            (&x).into(),
            (&mut y).into(),
            KernelArg::I32(start),
            KernelArg::I32(end),
            KernelArg::I32(step),
        ];
        let config = LaunchConfig::new(1);
        let proof = stepped::SPEC.proven_in_bounds(&d, config, &[], &args).unwrap();
        let run = fuse::launch(&stepped::SPEC, &d, config, &[], &mut args);
        if proof[0] {
            proven += 1;
            assert!(
                !matches!(run, Err(Error::OutOfBounds { .. })),
                "start {start}, end {end}, step {step}, len {len}: proven, but out of bounds: {run:?}"
            );
            // Where the last value is below end - 1, only the step-aware bound can prove it.
            if step > 1 && end > start && (end - 1 - start) % step != 0 && (end + 3) as usize > len {
                proven_at_the_edge += 1;
            }
        }
        if matches!(run, Err(Error::OutOfBounds { .. })) {
            caught += 1;
        }
    }
    assert!(proven > 100 && caught > 100, "proven {proven}, caught {caught}: the test exercises both");
    assert!(proven_at_the_edge > 10, "the step-aware bound proved {proven_at_the_edge} launches");
}
