//! `out = (x + y) * z`, element-wise: three reads and one write fused into one pass, for f32, f16
//! and bf16 buffers (f16/bf16 loads widen to f32, the store rounds to nearest even).
use fuse::fused_kernel;

#[fused_kernel]
pub fn add_mul<T: Float, const BLOCK: usize>(x: *const T, y: *const T, z: *const T, out: *mut T, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let x = load(x + offs, mask);
    let y = load(y + offs, mask);
    let z = load(z + offs, mask);
    store(out + offs, (x + y) * z, mask);
}

/// Float64 reference.
pub fn reference(x: &[f64], y: &[f64], z: &[f64]) -> Vec<f64> {
    x.iter().zip(y).zip(z).map(|((x, y), z)| (x + y) * z).collect()
}
