//! Row-wise L2 normalisation, checked against float64. `cargo run --release --example l2norm`
use fuse_kernels::l2norm as kernels;

use fuse_testkit::*;

fn run(
    device: &fuse::Device,
    rng: &mut rand::rngs::StdRng,
    rows: usize,
    cols: usize,
    time_it: bool,
) -> fuse::Result<bool> {
    let mut x = normal_f32(rng, rows * cols);
    x[..cols].iter_mut().for_each(|v| *v = 0.0); // an all-zero row exercises eps
    let xb = device.upload(&x)?;
    let mut out = poisoned::<f32>(device, rows * cols);
    let (g, c, block) = (rows as u32, cols as i32, cols.next_power_of_two());
    let launch = |out: &mut fuse::Buffer<f32>| fuse::with_block!(block, B => kernels::l2norm::launch::<B>(device, g, &xb, out, c, 1e-12));
    launch(&mut out)?;
    let what = format!("l2norm f32 {rows}x{cols}");
    let ok = check(
        &what,
        &to_f64(&out.to_vec()?),
        &kernels::reference(&to_f64(&x), rows, cols, 1e-12),
        1e-7,
        1e-5,
    );
    if time_it {
        report_speed(device, &what, 2 * rows * cols * 4, 50, || launch(&mut out));
    }
    Ok(ok)
}

fn main() {
    run_shapes("l2norm", &[(65, 1000)], &[(16384, 4096)], run)
}
