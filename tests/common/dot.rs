//! `dot` kernels and their checks, shared by the tests of `dot` on every backend (`tests/dot.rs`),
//! the emitted-CUDA snapshots and NVRTC compiles (`tests/emitted_cuda.rs`) and the host emulation
//! of the tensor-core lowering (`tests/emulated_tensor_cores.rs`).
//!
//! Every check runs a kernel on fresh random inputs into NaN-poisoned (or, for i32, sentinel
//! filled) outputs and compares with a float64 (exact integer) reference computed from the inputs
//! as stored; f32 inputs are rounded to TF32 by the reference's own rounding first. Floats must be
//! within the bound of a K-term f32 summation whose terms are exact:
//! `|got - want| <= 2 (K + 2) 2^-24 sum_k |a b|` (+ the accumulator's magnitude); NaN never passes.
use super::{Elem, Rng};
use fuse::prelude::*;
use fuse::{Device, KernelSpec, LaunchConfig};

/// The Triton tutorial's matmul: `c = a @ b` for row-major `a: [m, k]`, `b: [k, n]`, `c: [m, n]`
/// (f32), one `[BM, BN]` block of `c` per program, the K loop in steps of `BK`, every edge masked.
#[fused_kernel]
pub fn matmul<T: Float, const BM: usize, const BN: usize, const BK: usize>(
    a: *const T,
    b: *const T,
    c: *mut f32,
    m: i32,
    n: i32,
    k: i32,
) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let rk = arange(0, BK);
    let mut acc = zeros([BM, BN]);
    for k0 in (0..k).step_by(BK) {
        let ks = k0 + rk;
        let x = load(
            a + rm.expand_dims(1) * k + ks.expand_dims(0),
            (rm < m).expand_dims(1) & (ks < k).expand_dims(0),
            0.0,
        );
        let y = load(
            b + ks.expand_dims(1) * n + rn.expand_dims(0),
            (ks < k).expand_dims(1) & (rn < n).expand_dims(0),
            0.0,
        );
        acc = dot(x, y, acc);
    }
    store(
        c + rm.expand_dims(1) * n + rn.expand_dims(0),
        acc,
        (rm < m).expand_dims(1) & (rn < n).expand_dims(0),
    );
}

/// The same over i8, accumulating in i32 (the method form).
#[fused_kernel]
pub fn matmul_i8<const BM: usize, const BN: usize, const BK: usize>(
    a: *const i8,
    b: *const i8,
    c: *mut i32,
    m: i32,
    n: i32,
    k: i32,
) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let rk = arange(0, BK);
    let mut acc = full([BM, BN], 0);
    for k0 in (0..k).step_by(BK) {
        let ks = k0 + rk;
        let x = load(
            a + rm.expand_dims(1) * k + ks.expand_dims(0),
            (rm < m).expand_dims(1) & (ks < k).expand_dims(0),
            0,
        );
        let y = load(
            b + ks.expand_dims(1) * n + rn.expand_dims(0),
            (ks < k).expand_dims(1) & (rn < n).expand_dims(0),
            0,
        );
        acc = x.dot(y, acc);
    }
    store(
        c + rm.expand_dims(1) * n + rn.expand_dims(0),
        acc,
        (rm < m).expand_dims(1) & (rn < n).expand_dims(0),
    );
}

/// `c = a @ w^T` with `w: [n, k]` stored K-major (a linear layer's weight, the keys of attention):
/// `dot(x, trans(y))` of a `[BN, BK]` tile of `w`, which the tensor cores read as B's K-major form.
#[fused_kernel]
pub fn matmul_nt<T: Float, const BM: usize, const BN: usize, const BK: usize>(
    a: *const T,
    w: *const T,
    c: *mut f32,
    m: i32,
    n: i32,
    k: i32,
) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let rk = arange(0, BK);
    let mut acc = zeros([BM, BN]);
    for k0 in (0..k).step_by(BK) {
        let ks = k0 + rk;
        let x = load(
            a + rm.expand_dims(1) * k + ks.expand_dims(0),
            (rm < m).expand_dims(1) & (ks < k).expand_dims(0),
            0.0,
        );
        let y = load(
            w + rn.expand_dims(1) * k + ks.expand_dims(0),
            (rn < n).expand_dims(1) & (ks < k).expand_dims(0),
            0.0,
        );
        acc = dot(x, trans(y), acc);
    }
    store(
        c + rm.expand_dims(1) * n + rn.expand_dims(0),
        acc,
        (rm < m).expand_dims(1) & (rn < n).expand_dims(0),
    );
}

/// One `[64, 32] @ trans([32, 32])` product outside any loop (the K-major B staged from registers).
#[fused_kernel]
pub fn nt_once<T: Float>(a: *const T, w: *const T, c: *mut f32) {
    let r = arange(0, 64);
    let n = arange(0, 32);
    let kk = arange(0, 32);
    let x = load(a + r.expand_dims(1) * 32 + kk.expand_dims(0));
    let y = load(w + n.expand_dims(1) * 32 + kk.expand_dims(0));
    store(c + r.expand_dims(1) * 32 + n.expand_dims(0), dot(x, trans(y)));
}

/// [`nt_once`] with `warps` warps against float64.
pub fn check_nt_once<T: DotElem>(d: &Device, rng: &mut Rng, warps: u32) {
    let (a, w) = (random::<T>(rng, 64 * 32), random::<T>(rng, 32 * 32));
    let (ab, wb) = (d.upload(&a).unwrap(), d.upload(&w).unwrap());
    let mut c = d.upload(&vec![f32::NAN; 64 * 32]).unwrap();
    nt_once::launch::<T>(d, LaunchConfig::new(1).num_warps(warps), &ab, &wb, &mut c).unwrap();
    let av: Vec<f64> = a.iter().map(|x| x.dot_value()).collect();
    let mut bt = vec![0.0; 32 * 32];
    for j in 0..32 {
        for kk in 0..32 {
            bt[kk * 32 + j] = w[j * 32 + kk].dot_value();
        }
    }
    let (want, bound) = reference(&av, &bt, None, 64, 32, 32);
    assert_within(&format!("{} a @ w^T once, {warps} warps", T::NAME), &c.to_vec().unwrap(), &want, &bound);
}

/// [`matmul_nt`] at `m x n x k` with `[bm, bn, 32]` blocks, `warps` warps and `stages` stages
/// against float64, NaN-poisoned output.
#[allow(clippy::too_many_arguments)]
pub fn check_nt<T: DotElem>(
    d: &Device,
    rng: &mut Rng,
    (m, n, k): (usize, usize, usize),
    (bm, bn): (usize, usize),
    warps: u32,
    stages: u32,
) {
    let (a, w) = (random::<T>(rng, m * k), random::<T>(rng, n * k));
    let (ab, wb) = (d.upload(&a).unwrap(), d.upload(&w).unwrap());
    let mut c = d.upload(&vec![f32::NAN; m * n]).unwrap();
    let config =
        LaunchConfig::new((m.div_ceil(bm) as u32, n.div_ceil(bn) as u32)).num_warps(warps).num_stages(stages);
    let (mi, ni, ki) = (m as i32, n as i32, k as i32);
    match (bm, bn) {
        (64, 64) => matmul_nt::launch::<T, 64, 64, 32>(d, config, &ab, &wb, &mut c, mi, ni, ki),
        (128, 128) => matmul_nt::launch::<T, 128, 128, 32>(d, config, &ab, &wb, &mut c, mi, ni, ki),
        _ => matmul_nt::launch::<T, 32, 32, 32>(d, config, &ab, &wb, &mut c, mi, ni, ki),
    }
    .unwrap();
    let got = c.to_vec().unwrap();
    let av: Vec<f64> = a.iter().map(|x| x.dot_value()).collect();
    // w^T as a row-major [k, n] matrix for the reference.
    let mut bt = vec![0.0; k * n];
    for j in 0..n {
        for kk in 0..k {
            bt[kk * n + j] = w[j * k + kk].dot_value();
        }
    }
    let (want, bound) = reference(&av, &bt, None, m, n, k);
    let what =
        format!("{} a @ w^T {m}x{n}x{k} [{bm}x{bn}x32 {warps}w {stages}s] on {}", T::NAME, d.description());
    assert_within(&what, &got, &want, &bound);
}

/// One `[M, K] @ [K, N]` product three ways: onto a loaded accumulator, alone (method form, then
/// scaled), and of a computed operand converted back to `T` (`(2 a).to(T)`, exact).
#[fused_kernel]
pub fn dot_forms<T: Float, const M: usize, const N: usize, const K: usize>(
    a: *const T,
    b: *const T,
    acc: *const f32,
    with_acc: *mut f32,
    half_plain: *mut f32,
    doubled: *mut f32,
) {
    let rm = arange(0, M);
    let rn = arange(0, N);
    let rk = arange(0, K);
    let x = load(a + rm.expand_dims(1) * K + rk.expand_dims(0));
    let y = load(b + rk.expand_dims(1) * N + rn.expand_dims(0));
    let oc = rm.expand_dims(1) * N + rn.expand_dims(0);
    store(with_acc + oc, dot(x, y, load(acc + oc)));
    store(half_plain + oc, x.dot(y) * 0.5);
    store(doubled + oc, dot((x * 2.0).to(T), y));
}

/// Reductions of a dot result: each row's sum (axis 1, read from the accumulator's layout) and
/// each column's max (axis 0, which moves the result out of the tensor cores' layout).
#[fused_kernel]
pub fn dot_reductions<T: Float, const M: usize, const N: usize, const K: usize>(
    a: *const T,
    b: *const T,
    row_sums: *mut f32,
    col_maxes: *mut f32,
) {
    let rm = arange(0, M);
    let rn = arange(0, N);
    let rk = arange(0, K);
    let c = dot(
        load(a + rm.expand_dims(1) * K + rk.expand_dims(0)),
        load(b + rk.expand_dims(1) * N + rn.expand_dims(0)),
    );
    store(row_sums + rm, sum(c, 1));
    store(col_maxes + rn, max(c, 0));
}

pub const BM: usize = 32;
pub const BN: usize = 32;
pub const BK: usize = 16;
pub const FM: usize = 32;
pub const FN: usize = 16;
pub const FK: usize = 64;

/// The dot kernels with their const generic values, for the snapshots and NVRTC compiles.
pub fn dot_specs() -> Vec<(&'static KernelSpec, Vec<u64>)> {
    let tile = vec![BM as u64, BN as u64, BK as u64];
    let forms = vec![FM as u64, FN as u64, FK as u64];
    vec![
        (&matmul::f32::SPEC, tile.clone()),
        (&matmul::f16::SPEC, tile.clone()),
        (&matmul::bf16::SPEC, tile.clone()),
        (&matmul_i8::SPEC, tile.clone()),
        (&matmul_nt::f16::SPEC, tile.clone()),
        (&matmul_nt::bf16::SPEC, tile.clone()),
        (&matmul_nt::f32::SPEC, tile),
        (&dot_forms::f32::SPEC, forms.clone()),
        (&dot_forms::f16::SPEC, forms.clone()),
        (&dot_forms::bf16::SPEC, forms),
    ]
}

/// f32 → TF32 as the reference takes it: the nearest multiple of the TF32 spacing at the value's
/// binade, ties away from zero (computed in f64, independently of `fuse_ir::tf32`).
pub fn tf32_reference(x: f32) -> f64 {
    let v = f64::from(x);
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let exp = (v.abs().log2().floor() as i32).max(-126);
    let spacing = 2f64.powi(exp - 10);
    ((v.abs() / spacing + 0.5).floor() * spacing).copysign(v)
}

/// The element types of the float `dot`: how the reference sees an input.
pub trait DotElem: Elem {
    /// The value `dot` multiplies (f32: rounded to TF32).
    fn dot_value(self) -> f64;
}

impl DotElem for f32 {
    fn dot_value(self) -> f64 {
        tf32_reference(self)
    }
}

impl DotElem for fuse::half::f16 {
    fn dot_value(self) -> f64 {
        f64::from(self.to_f32())
    }
}

impl DotElem for fuse::half::bf16 {
    fn dot_value(self) -> f64 {
        f64::from(self.to_f32())
    }
}

/// `acc + a @ b` in f64 with `a: [m, k]`, `b: [k, n]` row-major, and per element the error bound
/// of an in-order f32 sum of its exact terms (`2 (k + 2) 2^-24` times their magnitudes).
pub fn reference(
    a: &[f64],
    b: &[f64],
    acc: Option<&[f64]>,
    m: usize,
    n: usize,
    k: usize,
) -> (Vec<f64>, Vec<f64>) {
    let mut want = vec![0.0; m * n];
    let mut bound = vec![0.0; m * n];
    let u = 2f64.powi(-24);
    for i in 0..m {
        for j in 0..n {
            let start = acc.map_or(0.0, |c| c[i * n + j]);
            let (mut s, mut mag) = (start, start.abs());
            for kk in 0..k {
                let t = a[i * k + kk] * b[kk * n + j];
                s += t;
                mag += t.abs();
            }
            want[i * n + j] = s;
            bound[i * n + j] = 2.0 * (k as f64 + 2.0) * u * mag + f64::from(f32::MIN_POSITIVE);
        }
    }
    (want, bound)
}

/// Every element within its bound (NaN fails); the largest error relative to its bound.
pub fn assert_within(what: &str, got: &[f32], want: &[f64], bound: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst: f64 = 0.0;
    for (i, ((&g, &w), &e)) in got.iter().zip(want).zip(bound).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(err <= e, "{what}: element {i}: got {g}, want {w} (error {err:e}, bound {e:e})");
        worst = worst.max(err / e);
    }
    worst
}

fn random<T: Elem>(rng: &mut Rng, n: usize) -> Vec<T> {
    T::from_f32s(&rng.vec(n, 1.0))
}

/// The tiled matmul of `T` at `m x n x k` (any sizes: the edges are masked) against float64.
pub fn check_matmul<T: DotElem>(d: &Device, rng: &mut Rng, (m, n, k): (usize, usize, usize)) {
    let (a, b) = (random::<T>(rng, m * k), random::<T>(rng, k * n));
    let (ab, bb) = (d.upload(&a).unwrap(), d.upload(&b).unwrap());
    let mut c = d.upload(&vec![f32::NAN; m * n]).unwrap();
    let grid = (m.div_ceil(BM) as u32, n.div_ceil(BN) as u32);
    matmul::launch::<T, BM, BN, BK>(d, grid, &ab, &bb, &mut c, m as i32, n as i32, k as i32).unwrap();
    let got = c.to_vec().unwrap();
    let (av, bv): (Vec<f64>, Vec<f64>) =
        (a.iter().map(|x| x.dot_value()).collect(), b.iter().map(|x| x.dot_value()).collect());
    let (want, bound) = reference(&av, &bv, None, m, n, k);
    let what = format!("{} matmul {m}x{n}x{k} on {}", T::NAME, d.description());
    assert_within(&what, &got, &want, &bound);
    if T::NAME == "f32" && k >= 32 {
        // The inputs were rounded to TF32: against the unrounded products some element is off by
        // more than an f32 sum could be (a kernel that skipped the rounding would pass this
        // check and fail the one above).
        let (exact, _) = reference(&f32_values(&a), &f32_values(&b), None, m, n, k);
        let off = got.iter().zip(&exact).zip(&bound).any(|((&g, &w), &e)| (f64::from(g) - w).abs() > e);
        assert!(off, "{what}: indistinguishable from full-precision f32 products");
    }
}

/// Values for [`check_tf32_rounding`]: `±(j + f)` with `j` in `1024..2048` (where TF32's spacing
/// is 1) and `f` one of 1/4, 1/2 (a tie: away from zero, to `±(j + 1)`) or 3/4, at least half of
/// them ties.
fn tf32_ties(rng: &mut Rng, len: usize) -> Vec<f32> {
    (0..len)
        .map(|_| {
            let r = rng.next_u64();
            let j = 1024 + (r % 1024) as i32;
            let f = [0.5, 0.5, 0.25, 0.75][(r >> 10) as usize % 4];
            let v = j as f32 + f;
            if (r >> 12) & 1 == 1 {
                -v
            } else {
                v
            }
        })
        .collect()
}

/// Small integers (`-3..=3`, exact in TF32) for [`check_tf32_rounding`].
fn small_ints(rng: &mut Rng, len: usize) -> Vec<f32> {
    (0..len).map(|_| (rng.next_u64() % 7) as f32 - 3.0).collect()
}

/// The TF32 rounding of f32 `dot` inputs, exactly: [`matmul`] of `f32` with `[BM, BN, BK]`
/// blocks, `warps` and `stages`, on `a` of [`tf32_ties`] and `b` of small integers, then the other
/// way round. Every product and partial sum is an integer below 2^23, so every summation order
/// (the interpreter's, the tensor cores') gives the same exact result: the output must equal the
/// float64 sum of the inputs rounded to nearest, ties away from zero, bit for bit, and the CPU
/// interpreter's. Rounding ties to even, or truncating, gives another result (checked on the data).
pub fn check_tf32_rounding<const BM: usize, const BN: usize, const BK: usize>(
    d: &Device,
    rng: &mut Rng,
    (m, n, k): (usize, usize, usize),
    warps: u32,
    stages: u32,
) {
    assert!(k * 2048 * 3 < 1 << 23, "k = {k}: the sums must stay exact in f32");
    for ties_in_a in [true, false] {
        let (a, b) = if ties_in_a {
            (tf32_ties(rng, m * k), small_ints(rng, k * n))
        } else {
            (small_ints(rng, m * k), tf32_ties(rng, k * n))
        };
        let config = LaunchConfig::new((m.div_ceil(BM) as u32, n.div_ceil(BN) as u32))
            .num_warps(warps)
            .num_stages(stages);
        let run = |dev: &Device, config: LaunchConfig| {
            let (ab, bb) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
            let mut c = dev.upload(&vec![f32::NAN; m * n]).unwrap();
            matmul::launch::<f32, BM, BN, BK>(dev, config, &ab, &bb, &mut c, m as i32, n as i32, k as i32)
                .unwrap();
            c.to_vec().unwrap()
        };
        let got = run(d, config);
        let exact = |round: &dyn Fn(f32) -> f64| -> Vec<f64> {
            let (av, bv): (Vec<f64>, Vec<f64>) =
                (a.iter().map(|&x| round(x)).collect(), b.iter().map(|&x| round(x)).collect());
            reference(&av, &bv, None, m, n, k).0
        };
        let want = exact(&tf32_reference);
        let what = format!(
            "f32 (TF32) matmul of exact sums, ties in {}, {m}x{n}x{k} [{BM}x{BN}x{BK} {warps}w {stages}s] on {}",
            if ties_in_a { "a" } else { "b" },
            d.description()
        );
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(f64::from(g) == w, "{what}: element {i}: got {g}, want {w} (exactly)");
        }
        // The data tells the roundings apart: to nearest even, and truncation.
        let even = |x: f32| {
            let (f, j) = (f64::from(x).abs().fract(), f64::from(x).abs().trunc());
            let r = if f == 0.5 { j + j % 2.0 } else { f64::from(x).abs().round() };
            r.copysign(f64::from(x))
        };
        let trunc = |x: f32| f64::from(x).trunc();
        if k > 0 && m * n > 0 {
            assert_ne!(exact(&even), want, "{what}: ties to even would pass");
            assert_ne!(exact(&trunc), want, "{what}: truncation would pass");
        }
        if d.arch().is_some() {
            let cpu = run(&Device::cpu(), LaunchConfig::new((m.div_ceil(BM) as u32, n.div_ceil(BN) as u32)));
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
            assert_eq!(bits(&got), bits(&cpu), "{what}: GPU and CPU interpreter differ");
        }
    }
}

/// [`check_matmul`] for half types with `[64, 64, 32]` blocks, `warps` warps and `stages`
/// pipeline stages: the K loop's loads go through `cp.async` into a ring of `stages` buffers, so
/// long K (the ring wraps many times), K not a multiple of the block (a zero-filled last stage)
/// and K not a multiple of 8 (the per-lane path into the stages) are the cases to cover.
pub fn check_pipelined<T: DotElem>(
    d: &Device,
    rng: &mut Rng,
    size: (usize, usize, usize),
    warps: u32,
    stages: u32,
) {
    check_pipelined_block::<T, 64, 64, 32>(d, rng, size, warps, stages);
}

/// [`check_pipelined`] with `BM x BN x BK` blocks.
pub fn check_pipelined_block<T: DotElem, const BM: usize, const BN: usize, const BK: usize>(
    d: &Device,
    rng: &mut Rng,
    (m, n, k): (usize, usize, usize),
    warps: u32,
    stages: u32,
) {
    let (a, b) = (random::<T>(rng, m * k), random::<T>(rng, k * n));
    let (ab, bb) = (d.upload(&a).unwrap(), d.upload(&b).unwrap());
    let mut c = d.upload(&vec![f32::NAN; m * n]).unwrap();
    let config =
        LaunchConfig::new((m.div_ceil(BM) as u32, n.div_ceil(BN) as u32)).num_warps(warps).num_stages(stages);
    matmul::launch::<T, BM, BN, BK>(d, config, &ab, &bb, &mut c, m as i32, n as i32, k as i32).unwrap();
    let got = c.to_vec().unwrap();
    let (av, bv): (Vec<f64>, Vec<f64>) =
        (a.iter().map(|x| x.dot_value()).collect(), b.iter().map(|x| x.dot_value()).collect());
    let (want, bound) = reference(&av, &bv, None, m, n, k);
    let what = format!(
        "{} matmul {m}x{n}x{k}, {BM}x{BN}x{BK} blocks, {warps} warps, {stages} stages on {} ({:?}, {:?} loads through TMA)",
        T::NAME,
        d.description(),
        fuse::dot_path(&format!("matmul_{}", T::NAME)),
        fuse::tma_loads(&format!("matmul_{}", T::NAME))
    );
    assert_within(&what, &got, &want, &bound);
}

fn f32_values<T: Elem>(v: &[T]) -> Vec<f64> {
    T::to_f64s(v)
}

/// The i8 matmul at `m x n x k`, exactly (i32 accumulation of values that cannot overflow here;
/// the interpreter's unit tests cover the wrap). The output is filled with a sentinel first.
pub fn check_matmul_i8(d: &Device, rng: &mut Rng, (m, n, k): (usize, usize, usize)) {
    let bytes = |rng: &mut Rng, len: usize| -> Vec<i8> { (0..len).map(|_| rng.next_u64() as i8).collect() };
    let (a, b) = (bytes(rng, m * k), bytes(rng, k * n));
    let (ab, bb) = (d.upload(&a).unwrap(), d.upload(&b).unwrap());
    let sentinel = i32::MIN + 12345;
    let mut c = d.upload(&vec![sentinel; m * n]).unwrap();
    let grid = (m.div_ceil(BM) as u32, n.div_ceil(BN) as u32);
    matmul_i8::launch::<BM, BN, BK>(d, grid, &ab, &bb, &mut c, m as i32, n as i32, k as i32).unwrap();
    let got = c.to_vec().unwrap();
    for i in 0..m {
        for j in 0..n {
            let want: i64 = (0..k).map(|kk| i64::from(a[i * k + kk]) * i64::from(b[kk * n + j])).sum();
            assert_eq!(
                i64::from(got[i * n + j]),
                want,
                "i8 matmul {m}x{n}x{k} on {}: element ({i}, {j})",
                d.description()
            );
        }
    }
}

/// `dot_forms` of `T`: the accumulator, the method form and a converted operand.
pub fn check_forms<T: DotElem>(d: &Device, rng: &mut Rng, warps: Option<u32>) {
    let (a, b) = (random::<T>(rng, FM * FK), random::<T>(rng, FK * FN));
    let acc: Vec<f32> = rng.vec(FM * FN, 8.0);
    let (ab, bb, cb) = (d.upload(&a).unwrap(), d.upload(&b).unwrap(), d.upload(&acc).unwrap());
    let nan = || d.upload(&vec![f32::NAN; FM * FN]).unwrap();
    let (mut with_acc, mut half_plain, mut doubled) = (nan(), nan(), nan());
    let config = match warps {
        Some(w) => LaunchConfig::new(1).num_warps(w),
        None => LaunchConfig::new(1),
    };
    dot_forms::launch::<T, FM, FN, FK>(
        d,
        config,
        &ab,
        &bb,
        &cb,
        &mut with_acc,
        &mut half_plain,
        &mut doubled,
    )
    .unwrap();
    let (av, bv): (Vec<f64>, Vec<f64>) =
        (a.iter().map(|x| x.dot_value()).collect(), b.iter().map(|x| x.dot_value()).collect());
    let what = |form: &str| {
        format!("{} dot {form} ({FM}x{FN}x{FK}, {:?} warps) on {}", T::NAME, warps, d.description())
    };
    let accs: Vec<f64> = acc.iter().map(|&x| f64::from(x)).collect();
    let (want, bound) = reference(&av, &bv, Some(&accs), FM, FN, FK);
    assert_within(&what("with an accumulator"), &with_acc.to_vec().unwrap(), &want, &bound);
    let (want, bound) = reference(&av, &bv, None, FM, FN, FK);
    let halves: Vec<f64> = want.iter().map(|w| w * 0.5).collect();
    let half_bound: Vec<f64> = bound.iter().map(|e| e * 0.5).collect();
    assert_within(&what("method form, halved"), &half_plain.to_vec().unwrap(), &halves, &half_bound);
    let twice: Vec<f64> = want.iter().map(|w| w * 2.0).collect();
    let twice_bound: Vec<f64> = bound.iter().map(|e| e * 2.0).collect();
    assert_within(&what("of (2 a).to(T)"), &doubled.to_vec().unwrap(), &twice, &twice_bound);
}

/// [`dot_reductions`] against float64: row sums within the dot's bound summed plus the f32 sum's
/// own rounding, column maxima within the largest bound of the column.
pub fn check_reductions<T: DotElem>(d: &Device, rng: &mut Rng, warps: u32) {
    let (a, b) = (random::<T>(rng, FM * FK), random::<T>(rng, FK * FN));
    let (ab, bb) = (d.upload(&a).unwrap(), d.upload(&b).unwrap());
    let mut sums = d.upload(&[f32::NAN; FM]).unwrap();
    let mut maxes = d.upload(&[f32::NAN; FN]).unwrap();
    dot_reductions::launch::<T, FM, FN, FK>(
        d,
        LaunchConfig::new(1).num_warps(warps),
        &ab,
        &bb,
        &mut sums,
        &mut maxes,
    )
    .unwrap();
    let (av, bv): (Vec<f64>, Vec<f64>) =
        (a.iter().map(|x| x.dot_value()).collect(), b.iter().map(|x| x.dot_value()).collect());
    let (want, bound) = reference(&av, &bv, None, FM, FN, FK);
    let what =
        |r: &str| format!("{} dot then {r} ({FM}x{FN}x{FK}, {warps} warps) on {}", T::NAME, d.description());
    let (mut ws, mut bs) = (vec![0.0; FM], vec![0.0; FM]);
    for m in 0..FM {
        let row = &want[m * FN..(m + 1) * FN];
        ws[m] = row.iter().sum();
        let mag: f64 = row.iter().map(|v| v.abs()).sum();
        bs[m] =
            bound[m * FN..(m + 1) * FN].iter().sum::<f64>() + 2.0 * (FN as f64 + 2.0) * 2f64.powi(-24) * mag;
    }
    assert_within(&what("row sums"), &sums.to_vec().unwrap(), &ws, &bs);
    let (mut wm, mut bm) = (vec![f64::NEG_INFINITY; FN], vec![0.0f64; FN]);
    for m in 0..FM {
        for n in 0..FN {
            wm[n] = wm[n].max(want[m * FN + n]);
            bm[n] = bm[n].max(bound[m * FN + n]);
        }
    }
    assert_within(&what("column maxima"), &maxes.to_vec().unwrap(), &wm, &bm);
}
