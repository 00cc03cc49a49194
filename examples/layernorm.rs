//! LayerNorm forward (weight and bias), f32 and f16, checked against float64: one row per program,
//! several narrow rows per program as one 2-D tile (`layernorm_rows`), and a looped form for
//! wide rows.
//! `cargo run --release --example layernorm`
use fuse_kernels::layernorm as kernels;

use fuse::half::f16;
use fuse::{Buffer, Device, Float, LaunchConfig};
use fuse_testkit::*;

const EPS: f32 = 1e-5;

struct Args<'a, T: ToF64> {
    x: &'a Buffer<T>,
    w: &'a Buffer<T>,
    b: &'a Buffer<T>,
    rows: u32,
    cols: i32,
}

type Launch<T> = fn(&Device, &Args<'_, T>, &mut Buffer<T>) -> fuse::Result<()>;

/// One tile per row: BLOCK = next power of two of the row length.
fn one_tile<T: ToF64 + Float>(d: &Device, a: &Args<'_, T>, y: &mut Buffer<T>) -> fuse::Result<()> {
    let block = (a.cols as usize).next_power_of_two();
    fuse::with_block!(block, B => kernels::layernorm::launch::<T, B>(d, a.rows, a.x, y, a.w, a.b, a.cols, a.cols, EPS))
}

/// Narrow rows, several per program: a `[ROWS, BLOCK]` tile.
fn rows_tile<T: ToF64 + Float>(d: &Device, a: &Args<'_, T>, y: &mut Buffer<T>) -> fuse::Result<()> {
    kernels::launch_rows(d, None, a.x, y, a.w, a.b, a.rows as usize, a.cols as usize, EPS)
}

/// Rows of any width: three passes over column blocks of 1024, 4 warps.
fn looped_f32(d: &Device, a: &Args<'_, f32>, y: &mut Buffer<f32>) -> fuse::Result<()> {
    kernels::layernorm_wide::launch::<1024>(
        d,
        LaunchConfig::new(a.rows).num_warps(4),
        a.x,
        y,
        a.w,
        a.b,
        a.cols,
        a.cols,
        EPS,
    )
}

fn run<T: ToF64>(
    device: &Device,
    rng: &mut rand::rngs::StdRng,
    name: &str,
    launch: Launch<T>,
    rows: usize,
    cols: usize,
    time_it: bool,
) -> fuse::Result<bool> {
    let x: Vec<T> =
        from_f64(&normal_f32(rng, rows * cols).iter().map(|&v| f64::from(v) * 2.0 + 0.5).collect::<Vec<_>>());
    let w: Vec<T> =
        from_f64(&uniform_f32(rng, cols, 0.0, 1.0).iter().map(|&v| f64::from(v)).collect::<Vec<_>>());
    let b: Vec<T> = from_f64(&normal_f32(rng, cols).iter().map(|&v| f64::from(v)).collect::<Vec<_>>());
    let (xb, wb, bb) = (device.upload(&x)?, device.upload(&w)?, device.upload(&b)?);
    let mut y = poisoned::<T>(device, rows * cols);
    let args = Args {
        x: &xb,
        w: &wb,
        b: &bb,
        rows: u32::try_from(rows).expect("fits"),
        cols: i32::try_from(cols).expect("fits"),
    };
    launch(device, &args, &mut y)?;
    let want = kernels::reference(&to_f64(&x), &to_f64(&w), &to_f64(&b), rows, cols, f64::from(EPS));
    let half = std::mem::size_of::<T>() == 2;
    let (atol, rtol) = if half { (4e-3, 4e-3) } else { (2e-5, 1e-5) };
    let what = format!("{name} {rows}x{cols}");
    let ok = check(&what, &to_f64(&y.to_vec()?), &want, atol, rtol);
    if time_it {
        let bytes = (2 * rows * cols + 2 * cols) * std::mem::size_of::<T>();
        report_speed(device, &what, bytes, 50, || launch(device, &args, &mut y));
    }
    Ok(ok)
}

fn main() {
    let device = pick_device();
    let mut rng = rng();
    // Narrow rows (256 columns or fewer) also run several rows per program: a ragged last
    // program, rows that are not a power of two.
    let mut shapes = vec![(300, 1000, false), (37, 100, false), (50, 250, false), (5, 7, false)];
    if device.is_cuda() {
        shapes.extend([(4096, 1024, true), (4096, 4096, true), (8192, 8192, true), (32768, 768, true)]);
        shapes.extend([(65536, 128, true), (16384, 256, true)]);
    }
    let mut all = true;
    let mut record = |r: fuse::Result<bool>, what: &str| match r {
        Ok(ok) => all &= ok,
        Err(e) => fail(&format!("{what}: {e}")),
    };
    for (rows, cols, time_it) in shapes {
        record(
            run::<f32>(&device, &mut rng, "layernorm f32", one_tile, rows, cols, time_it),
            "layernorm f32",
        );
        record(
            run::<f16>(&device, &mut rng, "layernorm f16", one_tile, rows, cols, time_it),
            "layernorm f16",
        );
        if cols <= 256 {
            record(
                run::<f32>(&device, &mut rng, "layernorm_rows f32", rows_tile, rows, cols, time_it),
                "layernorm_rows f32",
            );
            record(
                run::<f16>(&device, &mut rng, "layernorm_rows f16", rows_tile, rows, cols, time_it),
                "layernorm_rows f16",
            );
        }
    }
    // A row wider than any tile goes through the looped kernel.
    record(
        run::<f32>(&device, &mut rng, "layernorm_wide f32", looped_f32, 64, 20_000, false),
        "layernorm_wide f32",
    );
    finish(all)
}
