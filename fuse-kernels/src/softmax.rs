//! Row-wise softmax, one row per program, the row in one tile (BLOCK >= n_cols): the row is read
//! once, max and sum are reductions in registers, and the result is written once. One kernel for
//! f32, f16 and bf16 rows (f16/bf16 widen to f32 at the load and round at the store).
//! `softmax_rows` takes several narrow rows per program as one 2-D tile.
use fuse::fused_kernel;

use crate::rows_tile;

#[fused_kernel]
pub fn softmax<T: Float, const BLOCK: usize>(
    out: *mut T,
    inp: *const T,
    in_stride: i32,
    out_stride: i32,
    n_cols: i32,
) {
    let row = program_id(0);
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    let x = load(inp + row * in_stride + cols, mask, f32::NEG_INFINITY);
    let x = x - max(x);
    // exp(x) as 2^(x log2 e), the formula Triton's `tl.exp` compiles to: one multiply and the
    // hardware exp2, three instructions per element fewer than `exp`'s within-1-ulp sequence; the
    // rounding of `x * log2 e` costs at most |x| * 2^-24 relative error (x <= 0 here).
    let num = exp2(x * 1.4426950408889634);
    let y = num * (1.0 / sum(num)); // one division per row, a multiply per element
    store(out + row * out_stride + cols, y, mask);
}

/// Row-wise softmax of narrow rows, `ROWS` rows per program as one `[ROWS, BLOCK]` tile
/// (`BLOCK >= n_cols`): a row mask for the last program's missing rows and a column mask for the
/// tile's columns past the row, per-row max and sum as axis-1 reductions broadcast back with
/// `expand_dims(1)`. Launch on `cdiv(n_rows, ROWS)` programs. For rows of 128–256 columns, where
/// one row per program would leave each program a few hundred bytes.
#[fused_kernel]
pub fn softmax_rows<T: Float, const ROWS: usize, const BLOCK: usize>(
    out: *mut T,
    inp: *const T,
    in_stride: i32,
    out_stride: i32,
    n_rows: i32,
    n_cols: i32,
) {
    let rows = program_id(0) * ROWS + arange(0, ROWS);
    let cols = arange(0, BLOCK);
    let mask = (rows < n_rows).expand_dims(1) & (cols < n_cols).expand_dims(0);
    let x = load(inp + rows.expand_dims(1) * in_stride + cols.expand_dims(0), mask, f32::NEG_INFINITY);
    // As in `softmax`: exp(x - max) as exp2((x - max) log2 e), one division per row.
    let num = exp2((x - x.max(1).expand_dims(1)) * 1.4426950408889634);
    let y = num * (1.0 / num.sum(1)).expand_dims(1);
    store(out + rows.expand_dims(1) * out_stride + cols.expand_dims(0), y, mask);
}

/// Launches [`softmax_rows`] over a contiguous `n_rows x n_cols` matrix (`n_cols <= 1024`) with
/// the tile `[ROWS, BLOCK]` the width calls for (`rows_tile.rs`): BLOCK the next power of two of
/// the row (at least 16), ROWS = 2048 / BLOCK (at most 64), so a tile of 1024–2048 lanes: 16 rows
/// of 128, 8 of 256; f32 rows of 65-256 columns take 1024 lanes (8 rows of 128, 4 of 256), on one
/// warp unless `warps` says otherwise. `warps`: if `None`, one for those f32 rows, 4 for other
/// rows of up to 128 columns (at copy speed there, where the runtime's default 8 warps are about
/// 4 % slower), else the runtime's default.
pub fn launch_rows<T: fuse::Float>(
    device: &fuse::Device,
    warps: Option<u32>,
    out: &mut fuse::Buffer<T>,
    x: &fuse::Buffer<T>,
    n_rows: usize,
    n_cols: usize,
) -> fuse::Result<()> {
    let (r, c) = rows_tile::dims("softmax_rows", n_rows, n_cols)?;
    let bytes = std::mem::size_of::<T>();
    let warps = rows_tile::warps(warps, n_cols, bytes, if n_cols <= 128 { Some(4) } else { None });
    macro_rules! go {
        ($R:literal, $B:literal) => {
            softmax_rows::launch::<T, $R, $B>(device, rows_tile::grid(n_rows, $R, warps), out, x, c, c, r, c)
        };
    }
    with_rows_tile!(n_cols, bytes, "softmax_rows", "softmax", go)
}

/// Float64 reference over a row-major `rows x cols` matrix.
pub fn reference(x: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = row.iter().map(|v| (v - m).exp()).sum();
        for c in 0..cols {
            out[r * cols + c] = (row[c] - m).exp() / s;
        }
    }
    out
}
