//! LayerNorm + dynamic per-row int8 quantisation: the normalised row `y` is written as
//! `q = round(y / scale)` in i8 with `scale = max|y| / 127`, and `scale` per row, in one pass.
use fuse::fused_kernel;

#[fused_kernel]
pub fn layernorm_quant<const BLOCK: usize>(
    x: *const f32,
    w: *const f32,
    b: *const f32,
    q: *mut i8,
    scales: *mut f32,
    n_cols: i32,
    eps: f32,
) {
    let row = program_id(0);
    let cols = arange(0, BLOCK);
    let m = cols < n_cols;
    let xs = load(x + row * n_cols + cols, m, 0.0);
    let mean = sum(xs) / n_cols as f32;
    let xc = where_(m, xs - mean, 0.0);
    let rstd = rsqrt(sum(xc * xc) / n_cols as f32 + eps);
    let y = xc * rstd * load(w + cols, m) + load(b + cols, m);
    let scale = maximum(max(where_(m, abs(y), 0.0)) / 127.0, 1e-12);
    let t = y / scale;
    // Round half away from zero, then store: the value is within [-127, 127].
    let rounded = where_(t >= 0.0, floor(t + 0.5), ceil(t - 0.5));
    store(q + row * n_cols + cols, rounded.to(i32), m);
    store(scales + row, scale);
}

/// Float64 reference: (normalised rows, per-row scales).
pub fn reference(
    x: &[f64],
    w: &[f64],
    b: &[f64],
    rows: usize,
    cols: usize,
    eps: f64,
) -> (Vec<f64>, Vec<f64>) {
    let mut y = vec![0.0; rows * cols];
    let mut scales = vec![0.0; rows];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let mean = row.iter().sum::<f64>() / cols as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / cols as f64;
        let rstd = 1.0 / (var + eps).sqrt();
        let mut amax = 0.0f64;
        for c in 0..cols {
            let v = (row[c] - mean) * rstd * w[c] + b[c];
            y[r * cols + c] = v;
            amax = amax.max(v.abs());
        }
        scales[r] = (amax / 127.0).max(1e-12);
    }
    (y, scales)
}
