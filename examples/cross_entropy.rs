//! Softmax cross-entropy per row with a label gather and torch's `ignore_index`, over
//! vocabularies wider than a tile (an online logsumexp over column blocks), f32 and bf16 logits,
//! checked against float64. `cargo run --release --example cross_entropy`
use fuse_kernels::cross_entropy as kernels;

use fuse::half::bf16;
use fuse::{Device, Float};
use fuse_testkit::*;
use rand::Rng;

fn run<T: ToF64 + Float>(
    device: &Device,
    rng: &mut rand::rngs::StdRng,
    rows: usize,
    cols: usize,
    time_it: bool,
) -> fuse::Result<bool> {
    // Logits ~ N(0, 3^2) plus a per-row offset, so rows differ in scale, and in every other row a
    // spike of +25 at a random column, so the running max jumps in whichever block holds it; about
    // one label in eight is ignore_index.
    let offsets: Vec<f64> = (0..rows).map(|_| rng.gen_range(-20.0..20.0)).collect();
    let mut x64: Vec<f64> = normal_f32(rng, rows * cols)
        .iter()
        .enumerate()
        .map(|(i, &v)| f64::from(v) * 3.0 + offsets[i / cols])
        .collect();
    for r in (0..rows).step_by(2) {
        x64[r * cols + rng.gen_range(0..cols)] += 25.0;
    }
    let x: Vec<T> = from_f64(&x64);
    let labels: Vec<i64> = (0..rows)
        .map(|_| if rng.gen_range(0..8) == 0 { kernels::IGNORE_INDEX } else { rng.gen_range(0..cols as i64) })
        .collect();
    let (xb, lb) = (device.upload(&x)?, device.upload(&labels)?);
    let mut loss = poisoned::<f32>(device, rows);
    kernels::launch(device, None, &xb, &lb, &mut loss, rows, cols)?;
    let want = kernels::reference(&to_f64(&x), &labels, cols, kernels::IGNORE_INDEX);
    let what = format!("cross_entropy {} {rows}x{cols}", T::DTYPE);
    // The logits are exact in either type and the loss is f32: the same tolerance for both.
    let ok = check(&what, &to_f64(&loss.to_vec()?), &want, 2e-5, 2e-6);
    if time_it {
        // The logits and labels read once, the losses written once.
        let bytes = rows * cols * std::mem::size_of::<T>() + rows * (8 + 4);
        report_speed(device, &what, bytes, 20, || {
            kernels::launch(device, None, &xb, &lb, &mut loss, rows, cols)
        });
    }
    Ok(ok)
}

fn main() {
    run_shapes(
        "cross_entropy",
        // A vocabulary in one block, one with a ragged last block, and GPT-2's in 13 blocks.
        &[(16, 1000), (37, 5000), (9, 50257)],
        &[(4096, 50257), (8192, 32000), (4096, 128256)],
        |device, rng, rows, cols, time_it| {
            let f32_ok = run::<f32>(device, rng, rows, cols, time_it)?;
            let bf16_ok = run::<bf16>(device, rng, rows, cols, time_it)?;
            Ok(f32_ok && bf16_ok)
        },
    )
}
