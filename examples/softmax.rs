//! Row-wise softmax, one row per program, checked against float64.
//! `cargo run --release --example softmax`
#[path = "common/mod.rs"]
mod common;
#[path = "kernels/softmax.rs"]
mod kernels;

use common::*;
use fuse::half::f16;
use fuse::{Buffer, Device, Float};

/// Launches the kernel for `T` with BLOCK = the next power of two of the row length.
fn launch<T: Float>(
    device: &Device,
    rows: u32,
    out: &mut Buffer<T>,
    x: &Buffer<T>,
    block: usize,
    cols: i32,
) -> fuse::Result<()> {
    fuse::with_block!(block, B => kernels::softmax::launch::<T, B>(device, rows, out, x, cols, cols, cols))
}

fn run<T: ToF64 + Float>(
    device: &Device,
    rng: &mut rand::rngs::StdRng,
    rows: usize,
    cols: usize,
    time_it: bool,
) -> fuse::Result<bool> {
    let x: Vec<T> =
        from_f64(&normal_f32(rng, rows * cols).iter().map(|&v| f64::from(v) * 3.0).collect::<Vec<_>>());
    let xb = device.upload(&x)?;
    let mut out = poisoned::<T>(device, rows * cols);
    let (grid, ncols, block) =
        (u32::try_from(rows).expect("fits"), i32::try_from(cols).expect("fits"), cols.next_power_of_two());
    launch(device, grid, &mut out, &xb, block, ncols)?;
    let half = std::mem::size_of::<T>() == 2;
    let (atol, rtol) = if half { (1e-3, 2e-3) } else { (1e-6, 1e-5) };
    let what = format!("softmax {} {rows}x{cols}", T::DTYPE);
    let ok = check(&what, &to_f64(&out.to_vec()?), &kernels::reference(&to_f64(&x), rows, cols), atol, rtol);
    if time_it {
        report_speed(device, &what, 2 * rows * cols * std::mem::size_of::<T>(), 50, || {
            launch(device, grid, &mut out, &xb, block, ncols)
        });
    }
    Ok(ok)
}

fn main() {
    run_shapes(
        "softmax",
        &[(257, 1000)],
        &[(1024, 512), (4096, 4096), (32768, 1024), (8192, 8192)],
        |device, rng, rows, cols, time_it| {
            let f32_ok = run::<f32>(device, rng, rows, cols, time_it)?;
            let f16_ok = run::<f16>(device, rng, rows, cols, time_it)?;
            Ok(f32_ok && f16_ok)
        },
    )
}
