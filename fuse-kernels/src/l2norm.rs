//! Row-wise L2 normalisation: `out = x / max(||x||_2, eps)`.
use fuse::fused_kernel;

#[fused_kernel]
pub fn l2norm<const BLOCK: usize>(x: *const f32, out: *mut f32, n_cols: i32, eps: f32) {
    let row = program_id(0);
    let cols = arange(0, BLOCK);
    let m = cols < n_cols;
    let v = load(x + row * n_cols + cols, m, 0.0);
    let norm = sqrt(sum(v * v));
    store(out + row * n_cols + cols, v * (1.0 / maximum(norm, eps)), m);
}

pub fn reference(x: &[f64], rows: usize, cols: usize, eps: f64) -> Vec<f64> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let norm = row.iter().map(|v| v * v).sum::<f64>().sqrt().max(eps);
        for c in 0..cols {
            out[r * cols + c] = row[c] / norm;
        }
    }
    out
}
