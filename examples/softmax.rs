//! Row-wise softmax, one row per program (`softmax`) and, for narrow rows, several rows per
//! program as one 2-D tile (`softmax_rows`), checked against float64.
//! `cargo run --release --example softmax`
use fuse_kernels::softmax as kernels;

use fuse::half::f16;
use fuse::{Buffer, Device, Float};
use fuse_testkit::*;

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

/// Which kernel runs a shape.
#[derive(Clone, Copy, PartialEq)]
enum Kernel {
    /// `softmax`: one row per program.
    OneRow,
    /// `softmax_rows`: several narrow rows per program.
    Rows,
}

fn run<T: ToF64 + Float>(
    device: &Device,
    rng: &mut rand::rngs::StdRng,
    kernel: Kernel,
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
    let go = |out: &mut Buffer<T>| match kernel {
        Kernel::OneRow => launch(device, grid, out, &xb, block, ncols),
        Kernel::Rows => kernels::launch_rows(device, None, out, &xb, rows, cols),
    };
    go(&mut out)?;
    let half = std::mem::size_of::<T>() == 2;
    let (atol, rtol) = if half { (1e-3, 2e-3) } else { (1e-6, 1e-5) };
    let name = if kernel == Kernel::Rows { "softmax_rows" } else { "softmax" };
    let what = format!("{name} {} {rows}x{cols}", T::DTYPE);
    let ok = check(&what, &to_f64(&out.to_vec()?), &kernels::reference(&to_f64(&x), rows, cols), atol, rtol);
    if time_it {
        report_speed(device, &what, 2 * rows * cols * std::mem::size_of::<T>(), 50, || go(&mut out));
    }
    Ok(ok)
}

fn main() {
    run_shapes(
        "softmax",
        // One row per program; then narrow rows (256 columns or fewer) also several per program,
        // with a ragged last program and rows that are not a power of two.
        &[(257, 1000), (37, 100), (50, 250), (5, 7)],
        &[(1024, 512), (4096, 4096), (32768, 1024), (8192, 8192), (65536, 128), (16384, 256)],
        |device, rng, rows, cols, time_it| {
            let mut ok = true;
            let kernels: &[Kernel] =
                if cols <= 256 { &[Kernel::OneRow, Kernel::Rows] } else { &[Kernel::OneRow] };
            for &k in kernels {
                ok &= run::<f32>(device, rng, k, rows, cols, time_it)?;
                ok &= run::<f16>(device, rng, k, rows, cols, time_it)?;
            }
            Ok(ok)
        },
    )
}
