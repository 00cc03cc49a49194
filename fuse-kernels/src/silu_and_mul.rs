//! SiLU-and-mul (the gated MLP activation): for each row of `[a | b]` (2·d columns),
//! `out = silu(a) * b` with `silu(a) = a * sigmoid(a)`. A 2-D grid: rows × column blocks.
use fuse::fused_kernel;

#[fused_kernel]
pub fn silu_and_mul<const BLOCK: usize>(x: *const bf16, out: *mut bf16, d: i32) {
    let row = program_id(0);
    let cols = program_id(1) * BLOCK + arange(0, BLOCK);
    let m = cols < d;
    let a = load(x + row * 2 * d + cols, m);
    let b = load(x + row * 2 * d + d + cols, m);
    store(out + row * d + cols, a * sigmoid(a) * b, m);
}

pub fn reference(x: &[f64], rows: usize, d: usize) -> Vec<f64> {
    let mut out = vec![0.0; rows * d];
    for r in 0..rows {
        for i in 0..d {
            let (a, b) = (x[r * 2 * d + i], x[r * 2 * d + d + i]);
            out[r * d + i] = a / (1.0 + (-a).exp()) * b;
        }
    }
    out
}
