//! Philox random numbers in kernels: `rand` and `rand16` lane for lane against
//! `fuse_ir::philox`, their threshold tests for every kind of `p`, and bias + GELU + dropout with
//! either as its mask. Each body runs on the CPU interpreter and on a GPU
//! (tests/common/backend.rs: `name/cpu`, `name/gpu`, the latter ignored without a GPU); beside a
//! GPU the kernel also runs on the interpreter, whose masks must be the same.
mod common;

use common::backend::{every_backend, name, per_backend, with_cpu};
use common::*;
use fuse::Device;
use fuse_testkit::harness;

/// Checks one dropout output against the float64 GELU (`gelu`) and the mask `keep`: every kept
/// lane is gelu / (1 - p) within `tol`, every dropped one exactly 0, none NaN. The kept count.
fn check_dropout(
    what: &str,
    out: &[f64],
    gelu: &[f64],
    keep: impl Fn(usize) -> bool,
    p: f32,
    tol: f64,
) -> usize {
    let mut kept = 0usize;
    for i in 0..out.len() {
        assert!(!out[i].is_nan(), "{what}: element {i} unwritten or NaN");
        if keep(i) {
            kept += 1;
            let want = gelu[i] / (1.0 - f64::from(p));
            assert!((out[i] - want).abs() <= tol + tol * want.abs(), "{what} kept {i}: {} vs {want}", out[i]);
        } else {
            assert_eq!(out[i], 0.0, "{what}: dropped element {i} must be exactly 0");
        }
    }
    kept
}

/// A dropout kernel's output on a device for a seed, as f64.
type Run<'a> = &'a dyn Fn(&Device, u64) -> Vec<f64>;

/// The checks of a dropout kernel with mask `keep` (of `seed`) at `p`: on `d` and beside a GPU on
/// the CPU, each of `kinds` (a name, its run, the float64 GELU, a tolerance) lane by lane
/// ([`check_dropout`]) with its kept fraction within 4 sigma of 1 - p; then on `d` the first
/// kind's bits the same for the same seed, and another seed another mask (more than a tenth of
/// the lanes differ in being dropped).
fn check_dropout_kernel(
    d: &Device,
    seed: u64,
    keep: impl Fn(usize) -> bool + Copy,
    p: f32,
    kinds: &[(&str, Run, &[f64], f64)],
) {
    for dev in with_cpu(d) {
        for &(what, run, gelu, tol) in kinds {
            let what = format!("{what} on the {}", name(&dev));
            let out = run(&dev, seed);
            let kept = check_dropout(&what, &out, gelu, keep, p, tol);
            let (n, frac) = (out.len(), kept as f64 / out.len() as f64);
            let sigma = (f64::from(p) * (1.0 - f64::from(p)) / n as f64).sqrt();
            assert!((frac - (1.0 - f64::from(p))).abs() <= 4.0 * sigma, "{what}: kept fraction {frac}");
        }
    }
    let run = kinds[0].1;
    let out = run(d, seed);
    assert_eq!(run(d, seed), out, "same seed, same output");
    let other = run(d, seed.wrapping_add(1));
    let differ = out.iter().zip(&other).filter(|(a, b)| (**a == 0.0) != (**b == 0.0)).count();
    assert!(differ > out.len() / 10, "another seed must give another mask ({differ} differences)");
    println!("{}: {} elements, the reference mask on the {}", kinds[0].0, out.len(), name(d));
}

/// The Philox stream a dropout kernel draws its mask from.
#[derive(Clone, Copy)]
enum Mask {
    /// `bias_gelu_dropout`: `rand`, one Philox call per 4 lanes.
    Rand,
    /// `bias_gelu_dropout16`: `rand16`, one per 8 lanes.
    Rand16,
}

/// bias + GELU + dropout of `x` (rows of `h`, bias `bias`) with `seed` and `p` on `dev`, in blocks
/// of 1024, into a NaN-poisoned output, as f64.
fn dropout_on<T: Elem>(
    dev: &Device,
    mask: Mask,
    x: &[T],
    bias: &[T],
    h: usize,
    seed: u64,
    p: f32,
) -> Vec<f64> {
    let n = x.len();
    let (xb, bb) = (dev.upload(x).unwrap(), dev.upload(bias).unwrap());
    let mut out = dev.upload(&vec![T::NAN; n]).unwrap();
    let (grid, n, h) = (n.div_ceil(1024) as u32, n as i32, h as i32);
    match mask {
        Mask::Rand => bias_gelu_dropout::bias_gelu_dropout::launch::<T, 1024>(
            dev, grid, &xb, &bb, &mut out, seed, p, n, h,
        ),
        Mask::Rand16 => bias_gelu_dropout::bias_gelu_dropout16::launch::<T, 1024>(
            dev, grid, &xb, &bb, &mut out, seed, p, n, h,
        ),
    }
    .unwrap();
    T::to_f64s(&out.to_vec().unwrap())
}

/// `bias_gelu_dropout` (f32, the mask from `rand`): the mask is the Philox reference's lane for
/// lane, kept values gelu / (1 - p) against float64, dropped ones exactly 0, the kept fraction
/// within 4 sigma of 1 - p, the same seed gives the same bits and another seed another mask;
/// beside a GPU the CPU's output passes the same checks (so the masks are bit-identical).
fn bias_gelu_dropout_matches_reference_and_statistics(d: &Device) {
    let mut rng = Rng::fresh("bias_gelu_dropout");
    let ((rows, h), p) = per_backend(d, ((97, 512), 0.25f32), ((37, 768), 0.1));
    let n = rows * h;
    let (x, bias) = (rng.vec(n, 3.0), rng.vec(h, 1.0));
    let gelu = bias_gelu_dropout::reference_gelu(&f64s(&x), &f64s(&bias), h);
    let run = |dev: &Device, seed: u64| dropout_on(dev, Mask::Rand, &x, &bias, h, seed, p);
    let seed = rng.next_u64();
    let keep = |i: usize| fuse::fuse_ir::philox::rand(seed, i as u64) > p;
    check_dropout_kernel(d, seed, keep, p, &[("bias_gelu_dropout", &run, &gelu, 1e-5)]);
}

/// `bias_gelu_dropout16` (the mask from `rand16`), f32 and f16: the mask is
/// `fuse_ir::philox::rand16`'s lane for lane, kept values gelu / (1 - p) against float64 within
/// f32 (f16) rounding, dropped ones exactly 0, the kept fraction within 4 sigma of 1 - p (p
/// rounded to 2^-16, which moves 0.25 and 0.1 by less than the bound), the same seed gives the
/// same bits and another seed another mask. Rows whose length is not a multiple of 8 start mid
/// Philox block; on a GPU a partial last program too. Beside a GPU the CPU passes the same checks.
fn bias_gelu_dropout16_matches_reference_and_statistics(d: &Device) {
    let mut rng = Rng::fresh("bias_gelu_dropout16");
    let ((rows, h, extra), p) = per_backend(d, ((61, 520, 0), 0.25f32), ((41, 1000, 5), 0.1));
    let n = rows * h + extra;
    let (x, bias) = (rng.vec(n, 3.0), rng.vec(h, 1.0));
    let (xh, bh) = (f16s(&x), f16s(&bias));
    let run32 = |dev: &Device, seed: u64| dropout_on(dev, Mask::Rand16, &x, &bias, h, seed, p);
    let run16 = |dev: &Device, seed: u64| dropout_on(dev, Mask::Rand16, &xh, &bh, h, seed, p);
    let gelu32 = bias_gelu_dropout::reference_gelu(&f64s(&x), &f64s(&bias), h);
    let gelu16 = bias_gelu_dropout::reference_gelu(&f16_to_f64(&xh), &f16_to_f64(&bh), h);
    let seed = rng.next_u64();
    let keep = |i: usize| fuse::fuse_ir::philox::rand16(seed, i as u64) > p;
    check_dropout_kernel(d, seed, keep, p, &[("f32", &run32, &gelu32, 1e-5), ("f16", &run16, &gelu16, 2e-3)]);
}

/// `rand(seed, offs) > p`, `p < rand(seed, offs)` (on the GPU integer tests of the Philox words)
/// and `rand >= p` (on the floats) lane for lane against `fuse_ir::philox::rand` for every branch
/// of the integer bound: NaN, negative, -0, 0, tiny, below and above 2^-7 (where p * 2^31 passes
/// 2^24), odd and even significands, just below 1, 1 and above; beside a GPU on the CPU too.
fn rand_thresholds_match_the_reference_for_every_kind_of_p(d: &Device) {
    let mut rng = Rng::fresh("rand threshold");
    let n = 1 << 16;
    let mut ps = vec![
        f32::NAN,
        -1.0,
        -0.0,
        0.0,
        1e-30,
        1e-9,
        0.001,
        0.0078125,
        0.1,
        0.5,
        0.75,
        0.9,
        0.99999994,
        1.0,
        2.0,
        f32::INFINITY,
    ];
    ps.extend((0..8).map(|_| (rng.next_u64() % 1_000_000) as f32 / 1_000_000.0));
    ps.extend([0.1f32, 0.5, 0.75].iter().map(|p| f32::from_bits(p.to_bits() + 1)));
    for p in ps {
        let seed = rng.next_u64();
        for dev in with_cpu(d) {
            let mut out = dev.upload(&vec![f32::NAN; n]).unwrap();
            paths::rand_threshold::launch::<1024>(&dev, (n / 1024) as u32, &mut out, seed, p, n as i32)
                .unwrap();
            let out = out.to_vec().unwrap();
            for (i, o) in out.iter().enumerate() {
                let r = fuse::fuse_ir::philox::rand(seed, i as u64);
                let want = f32::from(u8::from(r > p))
                    + 2.0 * f32::from(u8::from(p < r))
                    + 4.0 * f32::from(u8::from(r >= p));
                assert_eq!(o.to_bits(), want.to_bits(), "{} p={p} i={i} r={r}", name(&dev));
            }
        }
    }
}

/// `rand16` against `fuse_ir::philox::rand16` bit for bit: its values, and `r > p`, `p < r`
/// (integer tests of the half-word on the GPU) beside `r >= p`, for every kind of `p` (NaN,
/// negative, 0, tiny, on, between and beside the 2^-16 steps, 1, above), at offsets starting on a
/// multiple of 8 (one Philox per eight lanes) and off it (per lane); beside a GPU on the CPU too.
fn rand16_is_the_reference_lane_for_lane(d: &Device) {
    let mut rng = Rng::fresh("rand16");
    let n = per_backend(d, 3000, 1 << 16);
    let mut ps = vec![
        f32::NAN,
        -1.0,
        0.0,
        1e-30,
        2f32.powi(-17),
        2f32.powi(-16),
        0.1,
        0.5,
        1.0 - 2f32.powi(-17),
        1.0,
        2.0,
    ];
    if d.is_cuda() {
        ps.extend([-0.0, 0.5 - 2f32.powi(-25), f32::INFINITY]);
    }
    // Random p on the 2^-16 steps (and, on a GPU, off them).
    let (on_steps, off_steps) = per_backend(d, (4, 0), (6, 6));
    ps.extend((0..on_steps).map(|_| (rng.next_u64() % 65536) as f32 / 65536.0));
    ps.extend((0..off_steps).map(|_| (rng.next_u64() % 1_000_000) as f32 / 1_000_000.0));
    let bases = per_backend(d, [0i32, 3, 8, 5], [0i32, 8, 3, 1 << 20]);
    for (k, p) in ps.into_iter().enumerate() {
        let (seed, base) = (rng.next_u64(), bases[k % 4]);
        for dev in with_cpu(d) {
            let mut out = dev.upload(&vec![f32::NAN; n]).unwrap();
            let mut vals = dev.upload(&vec![f32::NAN; n]).unwrap();
            paths::rand16_threshold::launch::<1024>(
                &dev,
                n.div_ceil(1024) as u32,
                &mut out,
                &mut vals,
                seed,
                p,
                base,
                n as i32,
            )
            .unwrap();
            let (out, vals) = (out.to_vec().unwrap(), vals.to_vec().unwrap());
            let who = name(&dev);
            for i in 0..n {
                let r = fuse::fuse_ir::philox::rand16(seed, (i as i64 + i64::from(base)) as u64);
                let want = f32::from(u8::from(r > p))
                    + 2.0 * f32::from(u8::from(p < r))
                    + 4.0 * f32::from(u8::from(r >= p));
                assert_eq!(vals[i].to_bits(), r.to_bits(), "{who} value p={p} base={base} i={i}");
                assert_eq!(out[i].to_bits(), want.to_bits(), "{who} p={p} base={base} i={i} r={r}");
            }
        }
    }
}

fn main() {
    harness::run(every_backend![
        bias_gelu_dropout_matches_reference_and_statistics,
        bias_gelu_dropout16_matches_reference_and_statistics,
        rand_thresholds_match_the_reference_for_every_kind_of_p,
        rand16_is_the_reference_lane_for_lane,
    ])
}
