//! LayerNorm forward with weight and bias, one row per program.
//! `layernorm` keeps the whole row in one tile (BLOCK >= n_cols): one read, one write; one kernel
//! for f32, f16 and bf16 rows (statistics in f32 either way).
//! `layernorm_wide` loops over column blocks for rows wider than any tile (Triton tutorial 05).
//! `layernorm_rows` takes several narrow rows per program as one 2-D tile.
use fuse::fused_kernel;

use crate::rows_tile;

#[fused_kernel]
pub fn layernorm<T: Float, const BLOCK: usize>(
    x: *const T,
    y: *mut T,
    w: *const T,
    b: *const T,
    stride: i32,
    n_cols: i32,
    eps: f32,
) {
    let row = program_id(0);
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    let xs = load(x + row * stride + cols, mask, 0.0);
    let inv_n = 1.0 / n_cols as f32; // computed by the runtime at launch; a multiply per reduction
    let mean = sum(xs) * inv_n;
    let xc = where_(mask, xs - mean, 0.0);
    let rstd = rsqrt(sum(xc * xc) * inv_n + eps);
    let out = xc * rstd * load(w + cols, mask) + load(b + cols, mask);
    store(y + row * stride + cols, out, mask);
}

#[fused_kernel]
pub fn layernorm_wide<const BLOCK: usize>(
    x: *const f32,
    y: *mut f32,
    w: *const f32,
    b: *const f32,
    stride: i32,
    n_cols: i32,
    eps: f32,
) {
    let row = program_id(0);
    let x = x + row * stride;
    let y = y + row * stride;
    let mut acc = zeros(BLOCK);
    for start in (0..n_cols).step_by(BLOCK) {
        let cols = start + arange(0, BLOCK);
        acc += load(x + cols, cols < n_cols, 0.0);
    }
    let mean = sum(acc) / n_cols as f32;
    let mut acc2 = zeros(BLOCK);
    for start in (0..n_cols).step_by(BLOCK) {
        let cols = start + arange(0, BLOCK);
        let m = cols < n_cols;
        let d = where_(m, load(x + cols, m, 0.0) - mean, 0.0);
        acc2 += d * d;
    }
    let rstd = 1.0 / sqrt(sum(acc2) / n_cols as f32 + eps);
    for start in (0..n_cols).step_by(BLOCK) {
        let cols = start + arange(0, BLOCK);
        let m = cols < n_cols;
        let v = (load(x + cols, m) - mean) * rstd * load(w + cols, m) + load(b + cols, m);
        store(y + cols, v, m);
    }
}

/// LayerNorm of narrow rows, `ROWS` rows per program as one `[ROWS, BLOCK]` tile
/// (`BLOCK >= n_cols`): row and column masks, mean and variance as axis-1 reductions broadcast
/// back with `expand_dims(1)`, the weight and bias rows broadcast down with `expand_dims(0)`.
/// Launch on `cdiv(n_rows, ROWS)` programs.
#[fused_kernel]
pub fn layernorm_rows<T: Float, const ROWS: usize, const BLOCK: usize>(
    x: *const T,
    y: *mut T,
    w: *const T,
    b: *const T,
    stride: i32,
    n_rows: i32,
    n_cols: i32,
    eps: f32,
) {
    let rows = program_id(0) * ROWS + arange(0, ROWS);
    let cols = arange(0, BLOCK);
    let col_ok = cols < n_cols;
    let mask = (rows < n_rows).expand_dims(1) & col_ok.expand_dims(0);
    let offs = rows.expand_dims(1) * stride + cols.expand_dims(0);
    let xs = load(x + offs, mask, 0.0);
    let inv_n = 1.0 / n_cols as f32;
    let mean = xs.sum(1) * inv_n;
    let xc = where_(col_ok.expand_dims(0), xs - mean.expand_dims(1), 0.0);
    let rstd = rsqrt((xc * xc).sum(1) * inv_n + eps);
    let wb = load(w + cols, col_ok).expand_dims(0);
    let bb = load(b + cols, col_ok).expand_dims(0);
    store(y + offs, xc * rstd.expand_dims(1) * wb + bb, mask);
}

/// Launches [`layernorm_rows`] over a contiguous `n_rows x n_cols` matrix (`n_cols <= 1024`)
/// with the tile `[ROWS, BLOCK]` the width calls for (`rows_tile.rs`): BLOCK the next power of two
/// of the row (at least 16), ROWS = 2048 / BLOCK (at most 64): 16 rows of 128, 8 of 256; f32 rows
/// of 65-256 columns take 1024 lanes (8 rows of 128, 4 of 256), on one warp unless `warps` says
/// otherwise. `warps`: if `None`, one for those f32 rows, else the runtime's default.
#[allow(clippy::too_many_arguments)]
pub fn launch_rows<T: fuse::Float>(
    device: &fuse::Device,
    warps: Option<u32>,
    x: &fuse::Buffer<T>,
    y: &mut fuse::Buffer<T>,
    w: &fuse::Buffer<T>,
    b: &fuse::Buffer<T>,
    n_rows: usize,
    n_cols: usize,
    eps: f32,
) -> fuse::Result<()> {
    let (r, c) = rows_tile::dims("layernorm_rows", n_rows, n_cols)?;
    let bytes = std::mem::size_of::<T>();
    let warps = rows_tile::warps(warps, n_cols, bytes, None);
    macro_rules! go {
        ($R:literal, $B:literal) => {
            layernorm_rows::launch::<T, $R, $B>(
                device,
                rows_tile::grid(n_rows, $R, warps),
                x,
                y,
                w,
                b,
                c,
                r,
                c,
                eps,
            )
        };
    }
    with_rows_tile!(n_cols, bytes, "layernorm_rows", "layernorm", go)
}

/// Float64 reference over a row-major `rows x cols` matrix.
pub fn reference(x: &[f64], w: &[f64], b: &[f64], rows: usize, cols: usize, eps: f64) -> Vec<f64> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let mean = row.iter().sum::<f64>() / cols as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / cols as f64;
        let rstd = 1.0 / (var + eps).sqrt();
        for c in 0..cols {
            out[r * cols + c] = (row[c] - mean) * rstd * w[c] + b[c];
        }
    }
    out
}
