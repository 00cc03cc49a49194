//! The fused FFN sublayer (the seed's): `y = x + gelu(LayerNorm(x) @ W + b)` for `x: [m, d]`,
//! `W: [d, d]` row-major (`[K = d, N = d]`, like `matmul.rs`'s `b`), bias `b: [d]`, LayerNorm
//! weight `gamma: [d]` and bias `beta: [d]` (eps as given), GELU in its erf form, all of one half
//! type `T` (f16 or bf16); statistics, normalisation, accumulation and the epilogue in f32.
//!
//! **One kernel.** A program owns a `[BM, BN]` block of `y` and loops over K = d, like a matmul;
//! the LayerNorm of its BM rows needs their statistics over the whole row, which no other program
//! can hand it without a second launch. So the program first walks its rows of `x` in `[BM, BK]`
//! tiles and folds each tile's per-row mean and sum of squared deviations (axis-1 reductions into
//! `[BM]` accumulators) into the running ones by Chan's pairwise update — as stable as a two-pass
//! variance, in one pass. Then the K loop loads the same `[BM, BK]` tiles again, normalises them
//! with the `[BM, 1]` mean and rstd and the `[1, BK]` gamma and beta, rounds them to `T` (the
//! precision a separate LayerNorm kernel would have stored them in) and `dot`s them with the
//! `[BK, BN]` tile of `W` into an f32 accumulator. The epilogue adds the bias, applies GELU, adds
//! the residual `x[rows, cols]` (a `[BM, BN]` tile of `x`: N = d) and stores once.
//!
//! **The trade-off.** Against two kernels (a LayerNorm writing the normalised rows in `T`, then a
//! matmul with a bias + GELU + residual epilogue) this one never writes or re-reads the `m x d`
//! normalised activations and launches once, but every column block of programs reads its rows of
//! `x` twice (statistics, then operands) instead of once — `2 (d / BN)` reads of each row instead
//! of `d / BN` (+ 2 for the separate LayerNorm), mostly from L2 thanks to the grouped order — and
//! recomputes the statistics `d / BN` times. And its A operand is computed, not loaded: `W` goes
//! through the `cp.async` pipeline straight to shared memory, but the normalised `x` tile passes
//! through registers and is staged into shared memory each K step. At large `d` (compute bound)
//! the extra reads are cheap; the staging of A is what the two-kernel form avoids.
//!
//! Masked edges: any `m` and `d`. Columns past `d` load 0 (and gamma, beta 0), so their
//! normalised value is exactly 0 and adds nothing to the product.
use fuse::fused_kernel;

#[fused_kernel]
pub fn ffn_sublayer<T: Half, const BM: usize, const BN: usize, const BK: usize>(
    x: *const T,
    w: *const T,
    b: *const T,
    gamma: *const T,
    beta: *const T,
    y: *mut T,
    m: i32,
    d: i32,
    eps: f32,
) {
    // Grouped program order (Triton's `GROUP_SIZE_M = 8`): programs running together share rows.
    let pid = program_id(0);
    let blocks_n = cdiv(d, BN);
    let per_group = 8 * blocks_n;
    let first_m = (pid / per_group) * 8;
    let group_rows = minimum(cdiv(m, BM) - first_m, 8);
    let pm = first_m + (pid % per_group) % group_rows;
    let pn = (pid % per_group) / group_rows;

    let rm = pm * BM + arange(0, BM);
    let rn = pn * BN + arange(0, BN);
    let rk = arange(0, BK);
    let row_ok = (rm < m).expand_dims(1); // [BM, 1]
    let col_ok = (rn < d).expand_dims(0); // [1, BN]
    let x_rows = x + rm.expand_dims(1) * d; // [BM, 1] row starts

    // 1. Row statistics: each tile's mean and squared deviations, merged by Chan's update.
    let mut count = 0.0;
    let mut mean = zeros(BM);
    let mut m2 = zeros(BM);
    for k0 in (0..d).step_by(BK) {
        let ks = k0 + rk;
        let k_ok = (ks < d).expand_dims(0); // [1, BK]
        let xt = load(x_rows + ks.expand_dims(0), row_ok & k_ok, 0.0);
        let c = minimum(d - k0, BK).to(f32);
        let t_mean = sum(xt, 1) / c;
        let dev = where_(k_ok, xt - t_mean.expand_dims(1), 0.0);
        let t_m2 = sum(dev * dev, 1);
        let total = count + c;
        let delta = t_mean - mean;
        mean = mean + delta * (c / total);
        m2 = m2 + t_m2 + delta * delta * (count * c / total);
        count = total;
    }
    let mean_r = mean.expand_dims(1); // [BM, 1]
    let rstd_r = rsqrt(m2 / d.to(f32) + eps).expand_dims(1);

    // 2. The K loop: normalise the x tile, round it to T, multiply with W's tile.
    let mut acc = zeros([BM, BN]);
    for k0 in (0..d).step_by(BK) {
        let ks = k0 + rk;
        let k_ok = ks < d;
        let xt = load(x_rows + ks.expand_dims(0), row_ok & k_ok.expand_dims(0), 0.0);
        let g = load(gamma + ks, k_ok, 0.0).expand_dims(0);
        let be = load(beta + ks, k_ok, 0.0).expand_dims(0);
        let xn = (xt - mean_r) * rstd_r * g + be;
        let wt = load(w + ks.expand_dims(1) * d + rn.expand_dims(0), k_ok.expand_dims(1) & col_ok, 0.0);
        acc = dot(xn.to(T), wt, acc);
    }

    // 3. Epilogue: bias, GELU (erf form), residual.
    let v = acc + load(b + rn, rn < d, 0.0).expand_dims(0);
    let act = 0.5 * v * (1.0 + erf(v * 0.7071067811865476));
    let res = load(x_rows + rn.expand_dims(0), row_ok & col_ok, 0.0);
    store(y + rm.expand_dims(1) * d + rn.expand_dims(0), res + act, row_ok & col_ok);
}

/// Float64 reference of [`ffn_sublayer`] on the inputs as stored (`erf` the float64 error
/// function), with a per-element error bound for a kernel of unit roundoff `u` (`T`'s: 2^-11 for
/// f16, 2^-8 for bf16). Returns `(y, bound)`.
///
/// The bound, per output element: each normalised activation `gamma (x - mean) rstd + beta` is
/// off by its f32 statistics' error (taken as `s = 2e-5 + d 2^-24` relative to the row's spread:
/// `s |gamma| (1 + |x - mean| rstd)`) and then rounded to `T` (relative `u`); the K-term f32 sum
/// adds `2 (d + 2) 2^-24` of its terms' magnitudes; GELU's slope is at most 1.13; then the f32
/// residual sum, GELU's own few-ulp error and the final rounding to `T` (`(u + 2^-22) |y|`).
#[allow(clippy::too_many_arguments)]
pub fn reference(
    x: &[f64],
    w: &[f64],
    b: &[f64],
    gamma: &[f64],
    beta: &[f64],
    m: usize,
    d: usize,
    eps: f64,
    u: f64,
    erf: fn(f64) -> f64,
) -> (Vec<f64>, Vec<f64>) {
    let mut y = vec![0.0; m * d];
    let mut bound = vec![0.0; m * d];
    let (mut xn, mut xn_err) = (vec![0.0; d], vec![0.0; d]);
    let sum_err = 2.0 * (d as f64 + 2.0) * 2f64.powi(-24);
    let stat_err = 2e-5 + d as f64 * 2f64.powi(-24);
    for i in 0..m {
        let row = &x[i * d..(i + 1) * d];
        let mean = row.iter().sum::<f64>() / d as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / d as f64;
        let rstd = 1.0 / (var + eps).sqrt();
        for k in 0..d {
            let xhat = (row[k] - mean) * rstd;
            xn[k] = xhat * gamma[k] + beta[k];
            xn_err[k] = stat_err * gamma[k].abs() * (1.0 + xhat.abs()) + (u + sum_err) * xn[k].abs();
        }
        for j in 0..d {
            let (mut s, mut err) = (b[j], 2f64.powi(-24) * b[j].abs());
            for k in 0..d {
                s += xn[k] * w[k * d + j];
                err += xn_err[k] * w[k * d + j].abs();
            }
            let out = row[j] + 0.5 * s * (1.0 + erf(s * std::f64::consts::FRAC_1_SQRT_2));
            y[i * d + j] = out;
            bound[i * d + j] = 1.13 * err * (1.0 + 2.0 * u) + (u + 2f64.powi(-22)) * out.abs() + 1e-6;
        }
    }
    (y, bound)
}

/// A launch configuration: the block shape and warps.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub bm: usize,
    pub bn: usize,
    pub bk: usize,
    pub warps: u32,
}

/// The configurations this example knows (the first is the default; the last is the CPU's).
pub const CONFIGS: &[Config] = &[
    Config { bm: 128, bn: 128, bk: 32, warps: 8 },
    Config { bm: 128, bn: 64, bk: 32, warps: 4 },
    Config { bm: 64, bn: 64, bk: 32, warps: 4 },
    Config { bm: 128, bn: 128, bk: 64, warps: 8 },
    Config { bm: 32, bn: 32, bk: 32, warps: 1 },
];

/// Launches [`ffn_sublayer`] with configuration `cfg` (one of [`CONFIGS`]' block shapes) on
/// `x: [m, d]`, `w: [d, d]`, and `b`, `gamma`, `beta` of `[d]`, into `y: [m, d]`.
#[allow(clippy::too_many_arguments)]
pub fn launch<T: fuse::Half>(
    device: &fuse::Device,
    cfg: Config,
    x: &fuse::Buffer<T>,
    w: &fuse::Buffer<T>,
    b: &fuse::Buffer<T>,
    gamma: &fuse::Buffer<T>,
    beta: &fuse::Buffer<T>,
    y: &mut fuse::Buffer<T>,
    (m, d): (usize, usize),
    eps: f32,
) -> fuse::Result<()> {
    let dim = |v: usize| {
        i32::try_from(v)
            .map_err(|_| fuse::Error::InvalidLaunch(format!("ffn_sublayer: {v} does not fit an i32")))
    };
    let (mi, di) = (dim(m)?, dim(d)?);
    let programs = m.div_ceil(cfg.bm) * d.div_ceil(cfg.bn);
    let grid = fuse::LaunchConfig::new(
        u32::try_from(programs)
            .map_err(|_| fuse::Error::InvalidLaunch("ffn_sublayer: too many blocks".into()))?,
    )
    .num_warps(cfg.warps);
    macro_rules! go {
        ($bm:literal, $bn:literal, $bk:literal) => {
            ffn_sublayer::launch::<T, $bm, $bn, $bk>(device, grid, x, w, b, gamma, beta, y, mi, di, eps)
        };
    }
    match (cfg.bm, cfg.bn, cfg.bk) {
        (128, 128, 32) => go!(128, 128, 32),
        (128, 64, 32) => go!(128, 64, 32),
        (64, 64, 32) => go!(64, 64, 32),
        (128, 128, 64) => go!(128, 128, 64),
        (32, 32, 32) => go!(32, 32, 32),
        other => {
            Err(fuse::Error::InvalidLaunch(format!("ffn_sublayer: block {other:?} is not one of CONFIGS")))
        }
    }
}
