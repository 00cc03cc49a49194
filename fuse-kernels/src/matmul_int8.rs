//! Fused int8 matmul with dequantisation and requantisation (the seed's quantized matmul; the
//! pattern of vLLM's `fused_moe_kernel` with int8 weights and activations, one expert):
//!
//! ```text
//! acc[i, j] = sum_k a[i, k] * w[j, k]                               (i8 x i8 -> i32, exact)
//! t[i, j]   = (f32(acc[i, j]) * sa[i] * sw[j] + bias[j]) * (1 / out_scale)       (f32)
//! c[i, j]   = sat_i8(round_half_even(t[i, j]))
//! ```
//!
//! for `a: [m, k]` int8 activations (row-major), `w: [n, k]` int8 weights stored **K-major as vLLM
//! stores them** (row `j` of `w` is output column `j`, contiguous along k), a per-row activation
//! scale `sa: [m]`, a per-column weight scale `sw: [n]` (f32), an optional bias `[n]` (f32, when
//! `has_bias != 0`) and the output's own scale `out_scale` (a positive, finite f32).
//!
//! Not generic: the pattern's types are fixed (i8 operands, i32 accumulator, f32 scales, i8 out),
//! and a kernel's type parameters range over float element types only.
//!
//! One `[BM, BN]` block of `c` per program in Triton's grouped order (as `matmul.rs`). The K loop
//! loads a `[BM, BK]` tile of `a` and a `[BN, BK]` tile of `w` (both contiguous along k: 16-byte
//! vector loads where `k` is a multiple of 16) and passes `trans(w_tile)`, the `[BK, BN]` view, as
//! `dot`'s second operand: the form a tensor-core lowering recognises as a K-major (`.col`) B
//! operand, with no transpose in memory. Every edge is masked, so any `m`, `n`, `k` works.
//!
//! **Rounding and saturation, exactly.** The language has no round-to-nearest op, and its
//! float → int cast truncates toward zero and saturates (NaN → 0). So the kernel rounds with the
//! f32 addition itself: for `|t| < 2^22`, `(t + 1.5 * 2^23) - 1.5 * 2^23` is `t` rounded to an
//! integer, ties to even (the sum lies in `[2^23, 2^24)`, where f32's spacing is 1, and IEEE
//! addition rounds to nearest even; the subtraction is exact). Values with `|t| >= 2^22` are
//! already integers or far past the int8 range and pass unchanged, as does NaN (the comparison is
//! false). The `.to(i8)` cast then saturates to `[-128, 127]` (NaN → 0). So
//! `c = clamp(round_half_even(t), -128, 127)`, NaN → 0; [`requantize`] is the float64 rule.
//! `round(x) = floor(x + 0.5)` would round ties up (2.5 → 3, -2.5 → -2), not to even.
//!
//! **What "exact" can mean.** `t` is computed in f32 (the i32 → f32 conversion rounds past 2^24,
//! each product and the reciprocal round, and the GPU may fuse a multiply with the following add):
//! `t` is within [`t_error_bound`] of the exact value. The checks therefore compare `c` with the
//! rounding rule applied to the float64 value, and accept the neighbouring integer only where the
//! float64 value lies within that bound of a rounding boundary (a half-integer); the i32
//! accumulator itself ([`matmul_int8_i32`]) is compared bit for bit.
use fuse::fused_kernel;

#[fused_kernel]
pub fn matmul_int8<const BM: usize, const BN: usize, const BK: usize>(
    a: *const i8,
    w: *const i8,
    sa: *const f32,
    sw: *const f32,
    bias: *const f32,
    c: *mut i8,
    m: i32,
    n: i32,
    k: i32,
    has_bias: i32,
    out_scale: f32,
) {
    // Grouped program order (Triton's `GROUP_SIZE_M = 8`).
    let pid = program_id(0);
    let blocks_n = cdiv(n, BN);
    let per_group = 8 * blocks_n;
    let first_m = (pid / per_group) * 8;
    let group_rows = minimum(cdiv(m, BM) - first_m, 8);
    let pm = first_m + (pid % per_group) % group_rows;
    let pn = (pid % per_group) / group_rows;

    let rm = pm * BM + arange(0, BM);
    let rn = pn * BN + arange(0, BN);
    let rk = arange(0, BK);
    let row_ok = (rm < m).expand_dims(1); // [BM, 1]
    let col_ok = (rn < n).expand_dims(0); // [1, BN]
    let mut acc = full([BM, BN], 0); // i32
    for k0 in (0..k).step_by(BK) {
        let ks = k0 + rk;
        let k_ok = (ks < k).expand_dims(0); // [1, BK]
        let x = load(a + rm.expand_dims(1) * k + ks.expand_dims(0), row_ok & k_ok, 0); // [BM, BK]
        let wt = load(w + rn.expand_dims(1) * k + ks.expand_dims(0), (rn < n).expand_dims(1) & k_ok, 0); // [BN, BK]
        acc = dot(x, trans(wt), acc);
    }
    // Dequantise: per-row and per-column scales, then the optional bias.
    let mut y =
        acc.to(f32) * load(sa + rm, rm < m, 0.0).expand_dims(1) * load(sw + rn, rn < n, 0.0).expand_dims(0);
    if has_bias != 0 {
        y = y + load(bias + rn, rn < n, 0.0).expand_dims(0);
    }
    // Requantise: round half to even by the f32 addition of 1.5 * 2^23, then the saturating cast.
    let t = y * (1.0 / out_scale);
    let r = where_(abs(t) < 4194304.0, (t + 12582912.0) - 12582912.0, t);
    store(c + rm.expand_dims(1) * n + rn.expand_dims(0), r.to(i8), row_ok & col_ok);
}

/// The accumulator alone: `c32 = a @ w^T` in i32 (wrapping), for `a: [m, k]` and K-major
/// `w: [n, k]` int8 — the same K loop as [`matmul_int8`], checked bit for bit against an i64 sum.
#[fused_kernel]
pub fn matmul_int8_i32<const BM: usize, const BN: usize, const BK: usize>(
    a: *const i8,
    w: *const i8,
    c32: *mut i32,
    m: i32,
    n: i32,
    k: i32,
) {
    let pid = program_id(0);
    let blocks_n = cdiv(n, BN);
    let per_group = 8 * blocks_n;
    let first_m = (pid / per_group) * 8;
    let group_rows = minimum(cdiv(m, BM) - first_m, 8);
    let pm = first_m + (pid % per_group) % group_rows;
    let pn = (pid % per_group) / group_rows;

    let rm = pm * BM + arange(0, BM);
    let rn = pn * BN + arange(0, BN);
    let rk = arange(0, BK);
    let row_ok = (rm < m).expand_dims(1);
    let col_ok = (rn < n).expand_dims(0);
    let mut acc = full([BM, BN], 0);
    for k0 in (0..k).step_by(BK) {
        let ks = k0 + rk;
        let k_ok = (ks < k).expand_dims(0);
        let x = load(a + rm.expand_dims(1) * k + ks.expand_dims(0), row_ok & k_ok, 0);
        let wt = load(w + rn.expand_dims(1) * k + ks.expand_dims(0), (rn < n).expand_dims(1) & k_ok, 0);
        acc = dot(x, trans(wt), acc);
    }
    store(c32 + rm.expand_dims(1) * n + rn.expand_dims(0), acc, row_ok & col_ok);
}

/// `a @ w^T` exactly (i64), for `a: [m, k]` and K-major `w: [n, k]`.
pub fn reference_i32(a: &[i8], w: &[i8], m: usize, n: usize, k: usize) -> Vec<i64> {
    let mut c = vec![0i64; m * n];
    for i in 0..m {
        let row = &a[i * k..(i + 1) * k];
        for j in 0..n {
            let col = &w[j * k..(j + 1) * k];
            c[i * n + j] = row.iter().zip(col).map(|(&x, &y)| i64::from(x) * i64::from(y)).sum();
        }
    }
    c
}

/// The float64 value [`matmul_int8`] rounds, `(acc sa[i] sw[j] + bias[j]) / out_scale`, from the
/// exact accumulator `acc` (of [`reference_i32`]).
pub fn reference_t(acc: &[i64], sa: &[f32], sw: &[f32], bias: Option<&[f32]>, out_scale: f32) -> Vec<f64> {
    let n = sw.len();
    acc.iter()
        .enumerate()
        .map(|(idx, &v)| {
            let (i, j) = (idx / n, idx % n);
            let b = bias.map_or(0.0, |b| f64::from(b[j]));
            (v as f64 * f64::from(sa[i]) * f64::from(sw[j]) + b) / f64::from(out_scale)
        })
        .collect()
}

/// How far the kernel's f32 `t` may be from the float64 one: the i32 → f32 conversion, two
/// products, the bias sum, the reciprocal and the last product each round once (relative
/// 2^-24), a fused multiply-add rounds less; 8 roundings of the largest magnitude involved, plus
/// the smallest normal.
pub fn t_error_bound(acc: i64, sa: f32, sw: f32, bias: f32, out_scale: f32) -> f64 {
    let mag =
        ((acc as f64 * f64::from(sa) * f64::from(sw)).abs() + f64::from(bias).abs()) / f64::from(out_scale);
    8.0 * 2f64.powi(-24) * mag + f64::from(f32::MIN_POSITIVE)
}

/// The requantisation rule in float64: round half to even, saturate to `[-128, 127]`, NaN → 0.
pub fn requantize(t: f64) -> i8 {
    if t.is_nan() {
        0
    } else {
        t.round_ties_even().clamp(-128.0, 127.0) as i8
    }
}

/// An output to launch into, each element a value [`verify`] rejects there (`requantize(t)`
/// plus 64, wrapping): int8 has no NaN to poison with.
pub fn poison(t: &[f64]) -> Vec<i8> {
    t.iter().map(|&t| requantize(t).wrapping_add(64)).collect()
}

/// The outcome of comparing [`matmul_int8`]'s output with the rule.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Elements equal to `requantize(t)` of the float64 `t`.
    pub exact: usize,
    /// Elements where the f32 error bound straddles a rounding boundary (either neighbour is
    /// right); how many of them took the other neighbour.
    pub ambiguous: usize,
    pub took_other: usize,
    /// Elements that saturated (`round(t) > 127` or `< -128`).
    pub saturated: usize,
    /// Elements whose float64 `t` is exactly a half-integer inside the int8 range: where ties to
    /// even and ties away from zero differ half the time.
    pub ties: usize,
    /// The first element outside the allowed set: (index, got, want, t).
    pub first_bad: Option<(usize, i8, i8, f64)>,
    pub bad: usize,
}

/// Compares `got` with `requantize(t)` element by element: `got` must be `requantize` of some
/// value within `bound[i]` of `t[i]` (the rule is monotone, so `requantize(t - e) ..=
/// requantize(t + e)`); with `bound` all zero, exactly `requantize(t)`.
pub fn verify(got: &[i8], t: &[f64], bound: &[f64]) -> Verdict {
    let mut v = Verdict::default();
    for (i, ((&g, &t), &e)) in got.iter().zip(t).zip(bound).enumerate() {
        let want = requantize(t);
        let (lo, hi) = (requantize(t - e), requantize(t + e));
        if lo != hi {
            v.ambiguous += 1;
        }
        if t.round_ties_even() > 127.0 || t.round_ties_even() < -128.0 {
            v.saturated += 1;
        } else if t.fract().abs() == 0.5 {
            v.ties += 1;
        }
        if g == want {
            v.exact += 1;
        } else if lo <= g && g <= hi {
            v.took_other += 1;
        } else {
            v.bad += 1;
            v.first_bad.get_or_insert((i, g, want, t));
        }
    }
    v
}

/// A launch configuration: the block shape, warps and pipeline stages.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub bm: usize,
    pub bn: usize,
    pub bk: usize,
    pub warps: u32,
    pub stages: u32,
}

/// The configurations this example knows (the first is the default; the last is the CPU's).
///
/// K steps of 128 bytes, one 128-byte swizzled row of each operand per stage. With 4 stages a
/// Hopper K loop keeps its MMAs in flight across iterations and still copies two stages ahead
/// (docs/LANGUAGE.md, "dot"). At 4096^3 on Hopper no other tile, warp count or stage count
/// (`[128, 256, 128]`, 5-6 stages, 4 warps, `[128, 64, 128]`) beats `[128, 128, 128]` on 8 warps
/// with 4 stages.
pub const CONFIGS: &[Config] = &[
    Config { bm: 128, bn: 128, bk: 128, warps: 8, stages: 3 },
    Config { bm: 128, bn: 64, bk: 128, warps: 4, stages: 3 },
    Config { bm: 64, bn: 64, bk: 128, warps: 4, stages: 3 },
    Config { bm: 256, bn: 128, bk: 128, warps: 8, stages: 3 },
    Config { bm: 256, bn: 128, bk: 128, warps: 8, stages: 4 },
    Config { bm: 128, bn: 128, bk: 128, warps: 8, stages: 4 },
    Config { bm: 32, bn: 32, bk: 32, warps: 4, stages: 3 },
];

fn dims(cfg: Config, (m, n, k): (usize, usize, usize)) -> fuse::Result<(i32, i32, i32, fuse::LaunchConfig)> {
    let dim = |v: usize| {
        i32::try_from(v)
            .map_err(|_| fuse::Error::InvalidLaunch(format!("matmul_int8: {v} does not fit an i32")))
    };
    let programs = m.div_ceil(cfg.bm) * n.div_ceil(cfg.bn);
    let grid = fuse::LaunchConfig::new(
        u32::try_from(programs)
            .map_err(|_| fuse::Error::InvalidLaunch("matmul_int8: too many blocks".into()))?,
    )
    .num_warps(cfg.warps)
    .num_stages(cfg.stages);
    Ok((dim(m)?, dim(n)?, dim(k)?, grid))
}

fn unknown<T>(cfg: Config) -> fuse::Result<T> {
    Err(fuse::Error::InvalidLaunch(format!(
        "matmul_int8: block {:?} is not one of CONFIGS",
        (cfg.bm, cfg.bn, cfg.bk)
    )))
}

/// Launches [`matmul_int8`] with configuration `cfg` (one of [`CONFIGS`]' block shapes): `w` is
/// `[n, k]` K-major; without `bias` the kernel reads none (`sw` is passed in its place).
#[allow(clippy::too_many_arguments)]
pub fn launch(
    device: &fuse::Device,
    cfg: Config,
    a: &fuse::Buffer<i8>,
    w: &fuse::Buffer<i8>,
    sa: &fuse::Buffer<f32>,
    sw: &fuse::Buffer<f32>,
    bias: Option<&fuse::Buffer<f32>>,
    c: &mut fuse::Buffer<i8>,
    size: (usize, usize, usize),
    out_scale: f32,
) -> fuse::Result<()> {
    let (m, n, k, grid) = dims(cfg, size)?;
    let (b, has_bias) = match bias {
        Some(b) => (b, 1),
        None => (sw, 0),
    };
    macro_rules! go {
        ($bm:literal, $bn:literal, $bk:literal) => {
            matmul_int8::launch::<$bm, $bn, $bk>(
                device, grid, a, w, sa, sw, b, c, m, n, k, has_bias, out_scale,
            )
        };
    }
    match (cfg.bm, cfg.bn, cfg.bk) {
        (128, 128, 128) => go!(128, 128, 128),
        (128, 64, 128) => go!(128, 64, 128),
        (64, 64, 128) => go!(64, 64, 128),
        (256, 128, 128) => go!(256, 128, 128),
        (32, 32, 32) => go!(32, 32, 32),
        _ => unknown(cfg),
    }
}

/// Launches [`matmul_int8_i32`] (the accumulator alone) with configuration `cfg`.
pub fn launch_i32(
    device: &fuse::Device,
    cfg: Config,
    a: &fuse::Buffer<i8>,
    w: &fuse::Buffer<i8>,
    c32: &mut fuse::Buffer<i32>,
    size: (usize, usize, usize),
) -> fuse::Result<()> {
    let (m, n, k, grid) = dims(cfg, size)?;
    macro_rules! go {
        ($bm:literal, $bn:literal, $bk:literal) => {
            matmul_int8_i32::launch::<$bm, $bn, $bk>(device, grid, a, w, c32, m, n, k)
        };
    }
    match (cfg.bm, cfg.bn, cfg.bk) {
        (128, 128, 128) => go!(128, 128, 128),
        (128, 64, 128) => go!(128, 64, 128),
        (64, 64, 128) => go!(64, 64, 128),
        (256, 128, 128) => go!(256, 128, 128),
        (32, 32, 32) => go!(32, 32, 32),
        _ => unknown(cfg),
    }
}
