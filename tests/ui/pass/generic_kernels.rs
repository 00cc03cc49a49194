use fuse::prelude::*;

// One kernel for every float element type: instantiated by the buffers' type at the launch,
// named explicitly or inferred; `.to(T)`, `as T` and `T::MAX` follow the instantiation.
#[fused_kernel]
fn clamp_scale<T: Float, const BLOCK: usize>(x: *const T, out: *mut T, alpha: f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    // Saturates at T's largest finite value instead of overflowing to infinity in f16.
    let v = minimum(load(x + offs, mask) * alpha, T::MAX);
    store(out + offs, v.to(T), mask);
}

// Two type parameters (their cross product is compiled): a row's mean of squares of `T` values,
// written as `O`, with the `Half` bound on the output.
#[fused_kernel]
pub fn mean_sq<T: fuse::Float, O: Half, const BLOCK: usize>(x: *const T, out: *mut O, n: i32) {
    let cols = arange(0, BLOCK);
    let v = load(x + program_id(0) * n + cols, cols < n, 0.0);
    store(out + program_id(0), (sum(v * v) / n as f32) as O);
}

fn main() -> Result<(), fuse::Error> {
    let d = Device::cpu();
    let x32 = d.upload(&[1.0f32, 2.0, 3.0, 40000.0])?;
    let mut o32 = d.zeros::<f32>(4)?;
    clamp_scale::launch::<f32, 4>(&d, 1, &x32, &mut o32, 2.0, 4)?;
    assert_eq!(o32.to_vec()?, [2.0, 4.0, 6.0, 80000.0]);

    let x16 = d.upload(&[1.0f32, 2.0, 3.0, 40000.0].map(f16::from_f32))?;
    let mut o16 = d.zeros::<f16>(4)?;
    clamp_scale::launch::<_, 4>(&d, 1, &x16, &mut o16, 2.0, 4)?;
    assert_eq!(o16.to_vec()?, [2.0, 4.0, 6.0, 65504.0].map(f16::from_f32));

    let xb = d.upload(&[1.0f32, 2.0, 3.0, 4.0].map(bf16::from_f32))?;
    let mut ob = d.zeros::<bf16>(1)?;
    mean_sq::launch::<_, _, 4>(&d, 1, &xb, &mut ob, 4)?;
    assert_eq!(ob.to_vec()?, [bf16::from_f32(7.5)]);

    // Each instantiation is its own kernel: its own name, CUDA C and IR.
    assert_eq!(clamp_scale::f16::NAME, "clamp_scale_f16");
    assert_eq!(clamp_scale::spec::<bf16>().name(), "clamp_scale_bf16");
    assert_eq!(mean_sq::spec::<f32, f16>().name(), mean_sq::f32_f16::NAME);
    assert_ne!(clamp_scale::f32::SOURCE, clamp_scale::f16::SOURCE);
    Ok(())
}
