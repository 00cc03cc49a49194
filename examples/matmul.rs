//! `c = a @ b` and `c = gelu(a @ b + bias)` on tensor cores (f16 and bf16, f32 accumulation),
//! checked against float64 at sizes that are not multiples of the block (every edge masked), over
//! several block configurations; on a GPU also timed at 4096^3.
//! `cargo run --release --example matmul`
use fuse_kernels::bias_gelu_dropout;
use fuse_kernels::matmul as kernels;

use fuse::half::{bf16, f16};
use fuse::{Device, Half};
use fuse_testkit::*;

fn run<T: ToF64 + Half>(
    device: &Device,
    rng: &mut rand::rngs::StdRng,
    cfg: kernels::Config,
    (m, n, k): (usize, usize, usize),
    gelu: bool,
) -> fuse::Result<bool> {
    let gen = |rng: &mut rand::rngs::StdRng, len: usize| -> Vec<T> {
        from_f64(&normal_f32(rng, len).iter().map(|&v| f64::from(v)).collect::<Vec<_>>())
    };
    let (a, b, bias) = (gen(rng, m * k), gen(rng, k * n), gen(rng, n));
    let (ab, bb, biasb) = (device.upload(&a)?, device.upload(&b)?, device.upload(&bias)?);
    let mut c = poisoned::<T>(device, m * n);
    kernels::launch(device, cfg, &ab, &bb, &biasb, &mut c, (m, n, k), gelu)?;
    let want =
        kernels::reference(&to_f64(&a), &to_f64(&b), &to_f64(&bias), m, n, k, gelu, bias_gelu_dropout::erf64);
    // f32 accumulation of k exact products (error ~ k 2^-24 sum|ab|), then one rounding to T.
    let scale = (k as f64).sqrt();
    let (atol, rtol) = match T::DTYPE.name() {
        "f16" => (2e-3 * scale, 2e-3),
        _ => (1e-2 * scale, 1e-2),
    };
    let what = format!(
        "matmul{} {} {m}x{n}x{k} [{}x{}x{} {}w {}s]",
        if gelu { "+bias+gelu" } else { "" },
        T::DTYPE,
        cfg.bm,
        cfg.bn,
        cfg.bk,
        cfg.warps,
        cfg.stages
    );
    Ok(check(&what, &to_f64(&c.to_vec()?), &want, atol, rtol))
}

fn main() {
    let device = pick_device();
    let mut rng = rng();
    let mut ok = true;
    let sizes: &[(usize, usize, usize)] =
        if device.is_cuda() { &[(300, 200, 100), (129, 257, 64)] } else { &[(70, 45, 40)] };
    // On a GPU a spread of the block shapes, warps and stage counts (each one NVRTC compile per
    // dtype and launch-time specialisation: the bench times them all); on the CPU the small one.
    let configs: Vec<kernels::Config> = if device.is_cuda() {
        [0, 2, 3, 6, 10].iter().map(|&i| kernels::CONFIGS[i]).collect()
    } else {
        vec![kernels::CONFIGS[kernels::CONFIGS.len() - 1]]
    };
    let go = |f: &mut dyn FnMut() -> fuse::Result<bool>| f().unwrap_or_else(|e| fail(&format!("{e}")));
    for &cfg in &configs {
        for &size in sizes {
            for gelu in [false, true] {
                ok &= go(&mut || run::<f16>(&device, &mut rng, cfg, size, gelu));
                ok &= go(&mut || run::<bf16>(&device, &mut rng, cfg, size, gelu));
            }
        }
    }
    if device.is_cuda() {
        let (m, n, k) = (4096, 4096, 4096);
        let a = device.upload(&vec![f16::from_f32(0.01); m * k]).unwrap();
        let b = device.upload(&vec![f16::from_f32(0.01); k * n]).unwrap();
        let bias = device.upload(&vec![f16::from_f32(0.0); n]).unwrap();
        let mut c = device.zeros::<f16>(m * n).unwrap();
        let cfg = kernels::CONFIGS[0];
        let ms = device
            .median_ms(
                20,
                || Ok(()),
                || kernels::launch(&device, cfg, &a, &b, &bias, &mut c, (m, n, k), false),
            )
            .unwrap();
        println!("matmul f16 {m}x{n}x{k}: {ms:.3} ms, {:.1} TFLOP/s", 2.0 * (m * n * k) as f64 / ms / 1e9);
    }
    finish(ok);
}
