//! The main example: `out = (x + y) * z` fused into one kernel, checked against float64.
//! Runs on the first GPU, else on the CPU interpreter.  `cargo run --release --example add_mul`
use fuse_kernels::add_mul as kernels;

use fuse::half::f16;
use fuse::{Device, Float};
use fuse_testkit::*;

const BLOCK: usize = 1024;

/// One dtype: f32 or f16 buffers through the same generic kernel.
fn run<T: ToF64 + Float>(
    device: &Device,
    rng: &mut rand::rngs::StdRng,
    n: usize,
    time_it: bool,
) -> fuse::Result<bool> {
    let gen = |rng: &mut rand::rngs::StdRng| -> Vec<T> {
        normal_f32(rng, n).into_iter().map(|v| T::from_f64(f64::from(v))).collect()
    };
    let (x, y, z) = (gen(rng), gen(rng), gen(rng));
    let (xb, yb, zb) = (device.upload(&x)?, device.upload(&y)?, device.upload(&z)?);
    let mut out = poisoned::<T>(device, n);
    let len = i32::try_from(n).expect("example sizes fit i32");
    let grid = grid_1d(n, BLOCK);
    // The element type is taken from the buffers (`launch::<f16, BLOCK>` would name it).
    kernels::add_mul::launch::<_, BLOCK>(device, grid, &xb, &yb, &zb, &mut out, len)?;
    let want = kernels::reference(&to_f64(&x), &to_f64(&y), &to_f64(&z));
    // f16: f32 arithmetic, one rounding to f16 at the store: half an f16 ulp (2^-11 relative) plus slack.
    let tol = if std::mem::size_of::<T>() == 2 { 1e-3 } else { 1e-5 };
    let what = format!("add_mul {} n={n}", T::DTYPE);
    let ok = check(&what, &to_f64(&out.to_vec()?), &want, tol, tol);
    if time_it {
        report_speed(device, &what, 4 * std::mem::size_of::<T>() * n, 50, || {
            kernels::add_mul::launch::<T, BLOCK>(device, grid, &xb, &yb, &zb, &mut out, len)
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
        for run in [run::<f32>, run::<f16>] {
            match run(&device, &mut rng, n, time_it) {
                Ok(ok) => all &= ok,
                Err(e) => fail(&format!("add_mul n={n}: {e}")),
            }
        }
    }
    finish(all)
}
