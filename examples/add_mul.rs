//! The main example: `out = (x + y) * z` fused into one kernel, checked against float64.
//! Runs on the first GPU, else on the CPU interpreter.  `cargo run --release --example add_mul`
#[path = "common/mod.rs"]
mod common;
#[path = "kernels/add_mul.rs"]
mod kernels;

use common::*;
use fuse::half::f16;
use fuse::Device;

const BLOCK: usize = 1024;

fn run_f32(device: &Device, rng: &mut rand::rngs::StdRng, n: usize, time_it: bool) -> fuse::Result<bool> {
    let (x, y, z) = (normal_f32(rng, n), normal_f32(rng, n), normal_f32(rng, n));
    let (xb, yb, zb) = (device.upload(&x)?, device.upload(&y)?, device.upload(&z)?);
    let mut out = poisoned::<f32>(device, n);
    let len = i32::try_from(n).expect("example sizes fit i32");
    let grid = grid_1d(n, BLOCK);
    kernels::add_mul::launch::<BLOCK>(device, grid, &xb, &yb, &zb, &mut out, len)?;
    let want = kernels::reference(&to_f64(&x), &to_f64(&y), &to_f64(&z));
    let ok = check(&format!("add_mul f32 n={n}"), &to_f64(&out.to_vec()?), &want, 1e-5, 1e-5);
    if time_it {
        report_speed(device, &format!("add_mul f32 n={n}"), 4 * 4 * n, 50, || {
            kernels::add_mul::launch::<BLOCK>(device, grid, &xb, &yb, &zb, &mut out, len)
        });
    }
    Ok(ok)
}

fn run_f16(device: &Device, rng: &mut rand::rngs::StdRng, n: usize, time_it: bool) -> fuse::Result<bool> {
    let gen = |rng: &mut rand::rngs::StdRng| -> Vec<f16> {
        normal_f32(rng, n).into_iter().map(f16::from_f32).collect()
    };
    let (x, y, z) = (gen(rng), gen(rng), gen(rng));
    let (xb, yb, zb) = (device.upload(&x)?, device.upload(&y)?, device.upload(&z)?);
    let mut out = poisoned::<f16>(device, n);
    let len = i32::try_from(n).expect("example sizes fit i32");
    let grid = grid_1d(n, BLOCK);
    kernels::add_mul_f16::launch::<BLOCK>(device, grid, &xb, &yb, &zb, &mut out, len)?;
    let want = kernels::reference(&to_f64(&x), &to_f64(&y), &to_f64(&z));
    // f32 arithmetic, one rounding to f16 at the store: half an f16 ulp (2^-11 relative) plus slack.
    let ok = check(&format!("add_mul f16 n={n}"), &to_f64(&out.to_vec()?), &want, 1e-3, 1e-3);
    if time_it {
        report_speed(device, &format!("add_mul f16 n={n}"), 4 * 2 * n, 50, || {
            kernels::add_mul_f16::launch::<BLOCK>(device, grid, &xb, &yb, &zb, &mut out, len)
        });
    }
    Ok(ok)
}

fn main() {
    let device = pick_device();
    let mut rng = rng();
    // An odd size exercises the masked tail; on a GPU the anchor sizes are timed too.
    let mut sizes = vec![(1_000_003, false)];
    if device.is_cuda() {
        sizes.extend([(1 << 20, true), (64 << 20, true)]);
    }
    let mut all = true;
    for (n, time_it) in sizes {
        for run in [run_f32, run_f16] {
            match run(&device, &mut rng, n, time_it) {
                Ok(ok) => all &= ok,
                Err(e) => fail(&format!("add_mul n={n}: {e}")),
            }
        }
    }
    finish(all)
}
