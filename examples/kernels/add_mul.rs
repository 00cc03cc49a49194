//! `out = (x + y) * z`, element-wise: three reads and one write fused into one pass.
use fuse::fused_kernel;

#[fused_kernel]
pub fn add_mul<const BLOCK: usize>(x: *const f32, y: *const f32, z: *const f32, out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let x = load(x + offs, mask);
    let y = load(y + offs, mask);
    let z = load(z + offs, mask);
    store(out + offs, (x + y) * z, mask);
}

/// The same in f16 storage: loads widen to f32, the store rounds to nearest even.
#[fused_kernel]
pub fn add_mul_f16<const BLOCK: usize>(x: *const f16, y: *const f16, z: *const f16, out: *mut f16, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    store(out + offs, (load(x + offs, mask) + load(y + offs, mask)) * load(z + offs, mask), mask);
}

/// Float64 reference.
pub fn reference(x: &[f64], y: &[f64], z: &[f64]) -> Vec<f64> {
    x.iter().zip(y).zip(z).map(|((x, y), z)| (x + y) * z).collect()
}
