//! SiLU-and-mul in bf16 on a 2-D grid, checked against float64. `cargo run --release --example silu_and_mul`
use fuse_kernels::silu_and_mul as kernels;

use fuse::half::bf16;
use fuse_testkit::*;

const BLOCK: usize = 1024;

fn run(
    device: &fuse::Device,
    rng: &mut rand::rngs::StdRng,
    rows: usize,
    d: usize,
    time_it: bool,
) -> fuse::Result<bool> {
    let x: Vec<bf16> = from_f64(&to_f64(&normal_f32(rng, rows * 2 * d)));
    let xb = device.upload(&x)?;
    let mut out = poisoned::<bf16>(device, rows * d);
    let grid = (rows as u32, d.div_ceil(BLOCK) as u32);
    kernels::silu_and_mul::launch::<BLOCK>(device, grid, &xb, &mut out, d as i32)?;
    let what = format!("silu_and_mul bf16 {rows}x{d}");
    // One bf16 rounding at the store: 2^-8 relative.
    let ok = check(&what, &to_f64(&out.to_vec()?), &kernels::reference(&to_f64(&x), rows, d), 1e-3, 8e-3);
    if time_it {
        report_speed(device, &what, 3 * rows * d * 2, 50, || {
            kernels::silu_and_mul::launch::<BLOCK>(device, grid, &xb, &mut out, d as i32)
        });
    }
    Ok(ok)
}

fn main() {
    run_shapes("silu_and_mul", &[(77, 3000)], &[(8192, 11008)], run)
}
