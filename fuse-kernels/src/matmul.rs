//! Matrix multiply with a fused epilogue (Triton's tutorial matmul): `c = a @ b`, or
//! `c = gelu(a @ b + bias)` when `gelu != 0`, for row-major `a: [m, k]`, `b: [k, n]`, `bias: [n]`
//! and `c: [m, n]` of one half type (f16 or bf16), accumulating in f32 on tensor cores.
//!
//! One `[BM, BN]` block of `c` per program, in Triton's grouped order (groups of 8 block rows
//! walked column by column, so the programs running together share rows of `a` and columns
//! of `b` in L2). The K loop loads `[BM, BK]` and `[BK, BN]` tiles (16-byte vector loads where `k`
//! and `n` are multiples of 8) and accumulates with `dot`; every edge is masked, so any `m`, `n`,
//! `k` works. The epilogue runs on the accumulator in registers and `c` is written once.
use fuse::fused_kernel;

#[fused_kernel]
pub fn matmul<T: Half, const BM: usize, const BN: usize, const BK: usize>(
    a: *const T,
    b: *const T,
    bias: *const T,
    c: *mut T,
    m: i32,
    n: i32,
    k: i32,
    gelu: i32,
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
    let mut acc = zeros([BM, BN]);
    for k0 in (0..k).step_by(BK) {
        let ks = k0 + rk;
        let x = load(a + rm.expand_dims(1) * k + ks.expand_dims(0), row_ok & (ks < k).expand_dims(0), 0.0);
        let y = load(b + ks.expand_dims(1) * n + rn.expand_dims(0), (ks < k).expand_dims(1) & col_ok, 0.0);
        acc = dot(x, y, acc);
    }
    if gelu != 0 {
        let v = acc + load(bias + rn, rn < n).expand_dims(0);
        acc = 0.5 * v * (1.0 + erf(v * 0.7071067811865476));
    }
    store(c + rm.expand_dims(1) * n + rn.expand_dims(0), acc, row_ok & col_ok);
}

/// Float64 reference of [`matmul`] on the inputs as stored (`erf` the float64 error function).
#[allow(clippy::too_many_arguments)]
pub fn reference(
    a: &[f64],
    b: &[f64],
    bias: &[f64],
    m: usize,
    n: usize,
    k: usize,
    gelu: bool,
    erf: fn(f64) -> f64,
) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for kk in 0..k {
            let x = a[i * k + kk];
            for j in 0..n {
                c[i * n + j] += x * b[kk * n + j];
            }
        }
    }
    if gelu {
        for (i, v) in c.iter_mut().enumerate() {
            let s = *v + bias[i % n];
            *v = 0.5 * s * (1.0 + erf(s * std::f64::consts::FRAC_1_SQRT_2));
        }
    }
    c
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

const fn cfg(bm: usize, bn: usize, bk: usize, warps: u32, stages: u32) -> Config {
    Config { bm, bn, bk, warps, stages }
}

/// The configurations this example knows (the first is the default; the last is small enough for
/// the CPU interpreter).
pub const CONFIGS: &[Config] = &[
    cfg(128, 128, 32, 4, 3),
    cfg(128, 128, 32, 4, 4),
    cfg(128, 128, 32, 4, 2),
    cfg(128, 128, 64, 4, 3),
    cfg(128, 128, 32, 8, 3),
    cfg(128, 64, 32, 4, 3),
    cfg(64, 64, 32, 4, 3),
    cfg(128, 256, 32, 8, 3),
    cfg(128, 256, 32, 8, 4),
    cfg(256, 128, 32, 8, 3),
    cfg(256, 128, 32, 8, 4),
    cfg(128, 256, 64, 8, 3),
    cfg(128, 128, 64, 8, 3),
    cfg(128, 256, 64, 8, 4),
    cfg(256, 128, 64, 8, 4),
    cfg(32, 32, 16, 1, 2),
];

/// Launches [`matmul`] with configuration `cfg` (one of [`CONFIGS`]' block shapes).
#[allow(clippy::too_many_arguments)]
pub fn launch<T: fuse::Half>(
    device: &fuse::Device,
    cfg: Config,
    a: &fuse::Buffer<T>,
    b: &fuse::Buffer<T>,
    bias: &fuse::Buffer<T>,
    c: &mut fuse::Buffer<T>,
    (m, n, k): (usize, usize, usize),
    gelu: bool,
) -> fuse::Result<()> {
    let dim = |v: usize| {
        i32::try_from(v).map_err(|_| fuse::Error::InvalidLaunch(format!("matmul: {v} does not fit an i32")))
    };
    let (mi, ni, ki) = (dim(m)?, dim(n)?, dim(k)?);
    let programs = m.div_ceil(cfg.bm) * n.div_ceil(cfg.bn);
    let grid = fuse::LaunchConfig::new(
        u32::try_from(programs).map_err(|_| fuse::Error::InvalidLaunch("matmul: too many blocks".into()))?,
    )
    .num_warps(cfg.warps)
    .num_stages(cfg.stages);
    let g = i32::from(gelu);
    macro_rules! go {
        ($bm:literal, $bn:literal, $bk:literal) => {
            matmul::launch::<T, $bm, $bn, $bk>(device, grid, a, b, bias, c, mi, ni, ki, g)
        };
    }
    match (cfg.bm, cfg.bn, cfg.bk) {
        (128, 128, 32) => go!(128, 128, 32),
        (128, 64, 32) => go!(128, 64, 32),
        (64, 64, 32) => go!(64, 64, 32),
        (128, 256, 32) => go!(128, 256, 32),
        (256, 128, 32) => go!(256, 128, 32),
        (128, 128, 64) => go!(128, 128, 64),
        (128, 256, 64) => go!(128, 256, 64),
        (256, 128, 64) => go!(256, 128, 64),
        (32, 32, 16) => go!(32, 32, 16),
        other => Err(fuse::Error::InvalidLaunch(format!("matmul: block {other:?} is not one of CONFIGS"))),
    }
}
