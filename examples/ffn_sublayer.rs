//! The fused FFN sublayer `y = x + gelu(LayerNorm(x) @ W + b)` as **one kernel** (f16 and bf16,
//! f32 statistics and accumulation): each program computes its rows' LayerNorm statistics in a
//! first pass over K, then normalises the `x` tiles on the way into `dot` (the kernel's docs say
//! why one kernel and what it costs against two). Checked against float64 on fresh random inputs
//! at sizes that are not multiples of the block (every edge masked), NaN-poisoned outputs, within
//! a per-element bound; on a GPU also larger sizes and m = 8192, d = 4096 timed.
//! `cargo run --release --example ffn_sublayer`
use fuse_kernels::bias_gelu_dropout;
use fuse_kernels::ffn_sublayer as kernels;

use fuse::half::{bf16, f16};
use fuse::{Device, Half};
use fuse_testkit::*;

fn run<T: ToF64 + Half>(
    device: &Device,
    rng: &mut rand::rngs::StdRng,
    cfg: kernels::Config,
    (m, d): (usize, usize),
) -> fuse::Result<bool> {
    let gen = |rng: &mut rand::rngs::StdRng, len: usize, scale: f32, shift: f32| -> Vec<T> {
        from_f64(&normal_f32(rng, len).iter().map(|&v| f64::from(v * scale + shift)).collect::<Vec<_>>())
    };
    // Rows with an offset (the statistics matter), W scaled so that outputs are O(1).
    let x = gen(rng, m * d, 2.0, 0.5);
    let w = gen(rng, d * d, 1.0 / (d as f32).sqrt(), 0.0);
    let (b, gamma, beta) = (gen(rng, d, 0.5, 0.0), gen(rng, d, 0.25, 1.0), gen(rng, d, 0.5, 0.0));
    let eps = 1e-5f32;
    let up = |v: &[T]| device.upload(v);
    let (xb, wb, bb, gb, betab) = (up(&x)?, up(&w)?, up(&b)?, up(&gamma)?, up(&beta)?);
    let mut y = poisoned::<T>(device, m * d);
    kernels::launch(device, cfg, &xb, &wb, &bb, &gb, &betab, &mut y, (m, d), eps)?;
    let u = if T::DTYPE.name() == "f16" { 2f64.powi(-11) } else { 2f64.powi(-8) };
    let (want, bound) = kernels::reference(
        &to_f64(&x),
        &to_f64(&w),
        &to_f64(&b),
        &to_f64(&gamma),
        &to_f64(&beta),
        m,
        d,
        f64::from(eps),
        u,
        bias_gelu_dropout::erf64,
    );
    let got = to_f64(&y.to_vec()?);
    let what = format!("ffn_sublayer {} {m}x{d} [{}x{}x{} {}w]", T::DTYPE, cfg.bm, cfg.bn, cfg.bk, cfg.warps);
    let (mut worst, mut bad, mut first) = (0.0f64, 0usize, None);
    let mut max_abs = 0.0f64;
    for (i, ((&g, &w), &e)) in got.iter().zip(&want).zip(&bound).enumerate() {
        let err = (g - w).abs();
        if err.is_nan() || err > e {
            bad += 1;
            first.get_or_insert((i, g, w, e));
        }
        if err.is_finite() {
            worst = worst.max(err / e);
            max_abs = max_abs.max(err);
        }
    }
    println!(
        "{what}: max abs err {max_abs:.3e}, worst error / bound {worst:.3} {}",
        if bad == 0 { "PASS" } else { "FAIL" }
    );
    if let Some((i, g, w, e)) = first {
        println!("  {bad} elements out of bound; first at {i}: got {g}, want {w} (bound {e:.3e})");
    }
    Ok(bad == 0)
}

fn main() {
    let device = pick_device();
    let mut rng = rng();
    let mut ok = true;
    let sizes: &[(usize, usize)] =
        if device.is_cuda() { &[(300, 200), (129, 264), (70, 1000)] } else { &[(70, 72), (33, 130)] };
    let configs: &[kernels::Config] =
        if device.is_cuda() { kernels::CONFIGS } else { &kernels::CONFIGS[4..] };
    let go = |f: &mut dyn FnMut() -> fuse::Result<bool>| f().unwrap_or_else(|e| fail(&format!("{e}")));
    for &cfg in configs {
        for &size in sizes {
            ok &= go(&mut || run::<f16>(&device, &mut rng, cfg, size));
            ok &= go(&mut || run::<bf16>(&device, &mut rng, cfg, size));
        }
    }
    if device.is_cuda() {
        let (m, d) = (8192, 4096);
        let x = device.upload(&vec![f16::from_f32(0.01); m * d]).unwrap();
        let w = device.upload(&vec![f16::from_f32(0.01); d * d]).unwrap();
        let v = device.upload(&vec![f16::from_f32(0.5); d]).unwrap();
        let mut y = device.zeros::<f16>(m * d).unwrap();
        let cfg = kernels::CONFIGS[0];
        let ms = device
            .median_ms(
                10,
                || Ok(()),
                || kernels::launch(&device, cfg, &x, &w, &v, &v, &v, &mut y, (m, d), 1e-5),
            )
            .unwrap();
        println!(
            "ffn_sublayer f16 {m}x{d}: {ms:.3} ms, {:.1} TFLOP/s (2 m d^2 / t)",
            2.0 * (m * d * d) as f64 / ms / 1e9
        );
    }
    finish(ok);
}
