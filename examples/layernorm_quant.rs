//! LayerNorm + per-row int8 quantisation, checked against float64: every code within 1 of the
//! reference's rounding (a value near a .5 boundary may round either way), at most 0.1 % of codes
//! off by one, scales to 1e-5 relative. `cargo run --release --example layernorm_quant`
use fuse_kernels::layernorm_quant as kernels;

use fuse_testkit::*;

fn run(
    device: &fuse::Device,
    rng: &mut rand::rngs::StdRng,
    rows: usize,
    cols: usize,
    time_it: bool,
) -> fuse::Result<bool> {
    let (x, w, b) = (normal_f32(rng, rows * cols), uniform_f32(rng, cols, 0.5, 1.5), normal_f32(rng, cols));
    let (xb, wb, bb) = (device.upload(&x)?, device.upload(&w)?, device.upload(&b)?);
    let mut q = device.upload(&vec![i8::MIN; rows * cols])?; // -128 is never a valid code: poison
    let mut scales = poisoned::<f32>(device, rows);
    let (g, c, block) = (rows as u32, cols as i32, cols.next_power_of_two());
    let launch = |q: &mut fuse::Buffer<i8>, scales: &mut fuse::Buffer<f32>| fuse::with_block!(block, B => kernels::layernorm_quant::launch::<B>(device, g, &xb, &wb, &bb, q, scales, c, 1e-5));
    launch(&mut q, &mut scales)?;
    let (y, want_scales) = kernels::reference(&to_f64(&x), &to_f64(&w), &to_f64(&b), rows, cols, 1e-5);
    let what = format!("layernorm_quant {rows}x{cols}");
    let got_scales = to_f64(&scales.to_vec()?);
    let mut ok = check(&format!("{what} scales"), &got_scales, &want_scales, 1e-9, 1e-5);
    let codes = q.to_vec()?;
    let (mut off_by_one, mut bad) = (0usize, 0usize);
    for (i, &code) in codes.iter().enumerate() {
        let want = (y[i] / want_scales[i / cols]).round(); // f64 round: half away from zero
        let d = (f64::from(code) - want).abs();
        if d != 0.0 {
            if d <= 1.0 {
                off_by_one += 1;
            } else {
                bad += 1; // NaN too
            }
        }
    }
    let codes_ok = bad == 0 && off_by_one * 1000 <= codes.len();
    println!(
        "{what} codes: {bad} wrong, {off_by_one} off by one at a rounding boundary (of {}) {}",
        codes.len(),
        if codes_ok { "PASS" } else { "FAIL" }
    );
    ok &= codes_ok;
    if time_it {
        let bytes = rows * cols * 4 + 2 * cols * 4 + rows * cols + rows * 4;
        report_speed(device, &what, bytes, 50, || launch(&mut q, &mut scales));
    }
    Ok(ok)
}

fn main() {
    run_shapes("layernorm_quant", &[(97, 1000)], &[(8192, 4096)], run)
}
