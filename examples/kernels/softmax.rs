//! Row-wise softmax, one row per program, the row in one tile (BLOCK >= n_cols): the row is read
//! once, max and sum are reductions in registers, and the result is written once. One kernel for
//! f32, f16 and bf16 rows (f16/bf16 widen to f32 at the load and round at the store).
use fuse::fused_kernel;

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
