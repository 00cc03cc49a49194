//! Residual add + RMSNorm in f16, checked against float64. `cargo run --release --example add_rmsnorm`
use fuse_kernels::add_rmsnorm as kernels;

use fuse::half::f16;
use fuse_testkit::*;

fn run(
    device: &fuse::Device,
    rng: &mut rand::rngs::StdRng,
    rows: usize,
    cols: usize,
    time_it: bool,
) -> fuse::Result<bool> {
    let gen = |rng: &mut rand::rngs::StdRng, n| -> Vec<f16> { from_f64(&to_f64(&normal_f32(rng, n))) };
    let (x, res, w) = (gen(rng, rows * cols), gen(rng, rows * cols), gen(rng, cols));
    let (xb, wb) = (device.upload(&x)?, device.upload(&w)?);
    let mut resb = device.upload(&res)?;
    let mut out = poisoned::<f16>(device, rows * cols);
    let (g, c, block) = (rows as u32, cols as i32, cols.next_power_of_two());
    fuse::with_block!(block, B => kernels::add_rmsnorm::launch::<B>(device, g, &xb, &mut resb, &wb, &mut out, c, 1e-6))?;
    let (want_res, want) = kernels::reference(&to_f64(&x), &to_f64(&res), &to_f64(&w), rows, cols, 1e-6);
    let what = format!("add_rmsnorm f16 {rows}x{cols}");
    let ok = check(&format!("{what} residual"), &to_f64(&resb.to_vec()?), &want_res, 2e-3, 1e-3)
        & check(&format!("{what} output"), &to_f64(&out.to_vec()?), &want, 4e-3, 4e-3);
    if time_it {
        // Reads x, residual, w; writes residual and out.
        let bytes = (4 * rows * cols + cols) * 2;
        report_speed(
            device,
            &what,
            bytes,
            50,
            || fuse::with_block!(block, B => kernels::add_rmsnorm::launch::<B>(device, g, &xb, &mut resb, &wb, &mut out, c, 1e-6)),
        );
    }
    Ok(ok)
}

fn main() {
    run_shapes("add_rmsnorm", &[(129, 1000)], &[(8192, 4096)], run)
}
