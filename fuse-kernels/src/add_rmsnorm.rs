//! Residual add + RMSNorm (vLLM's `fused_add_rms_norm`): `h = x + residual` is written back as the new
//! residual stream and normalised, `out = h / rms(h) * w`, in one pass over the row.
use fuse::fused_kernel;

#[fused_kernel]
pub fn add_rmsnorm<const BLOCK: usize>(
    x: *const f16,
    residual: *mut f16,
    w: *const f16,
    out: *mut f16,
    n_cols: i32,
    eps: f32,
) {
    let row = program_id(0);
    let cols = arange(0, BLOCK);
    let m = cols < n_cols;
    let at = row * n_cols + cols;
    let h = load(x + at, m, 0.0) + load(residual + at, m, 0.0);
    store(residual + at, h, m);
    let inv_rms = rsqrt(sum(h * h) / n_cols as f32 + eps);
    store(out + at, h * inv_rms * load(w + cols, m), m);
}

/// Float64 reference: (new residual, output). The residual is rounded to f16 as the kernel stores it,
/// but the norm uses the unrounded sum, as the kernel does.
pub fn reference(
    x: &[f64],
    res: &[f64],
    w: &[f64],
    rows: usize,
    cols: usize,
    eps: f64,
) -> (Vec<f64>, Vec<f64>) {
    let h: Vec<f64> = x.iter().zip(res).map(|(a, b)| a + b).collect();
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &h[r * cols..(r + 1) * cols];
        let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / cols as f64 + eps).sqrt();
        for c in 0..cols {
            out[r * cols + c] = row[c] * inv * w[c];
        }
    }
    (h, out)
}
