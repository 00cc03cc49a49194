//! A fused fuse LayerNorm inside a small candle computation (matmul → fused LayerNorm → GELU →
//! matmul), checked against candle's own ops on fresh random inputs in f32, f16 and bf16. Prints
//! the max error per check and PASS/FAIL; the exit status follows.
//!
//! ```sh
//! cargo run --release -p fuse-candle --example candle_layernorm                  # on the CPU
//! cargo run --release -p fuse-candle --features cuda --example candle_layernorm  # on candle's GPU
//! ```
//!
//! With `--features cuda` it uses candle's CUDA device 0 when there is one (the fused kernel runs
//! on candle's stream over candle's memory) and says so; otherwise the CPU, where the same kernel
//! runs on fuse's interpreter. `FUSE_DEVICE=cpu` forces the CPU. The op is
//! `fuse_candle::ops::FusedLayerNorm`.

use candle_core::{DType, Device, Tensor};
use fuse_candle::ops::FusedLayerNorm;
use fuse_testkit::candle::{candle_layernorm, candle_layernorm_native, error_ratio, tolerance, Rng};

const EPS: f64 = 1e-5;

/// candle's CUDA device 0 when built with `cuda` and one is usable, else the CPU; and why.
fn pick_device() -> (Device, String) {
    if std::env::var("FUSE_DEVICE").is_ok_and(|v| v.eq_ignore_ascii_case("cpu")) {
        return (Device::Cpu, "CPU (FUSE_DEVICE=cpu)".into());
    }
    #[cfg(feature = "cuda")]
    match Device::new_cuda(0) {
        Ok(d) => (d, "candle's CUDA device 0 (fuse launches on candle's stream)".into()),
        Err(e) => (Device::Cpu, format!("CPU: candle found no usable CUDA device ({e})")),
    }
    #[cfg(not(feature = "cuda"))]
    (Device::Cpu, "CPU (built without the `cuda` feature; fuse's CPU interpreter runs the kernel)".into())
}

/// The model's parameters in one dtype.
struct Params {
    w1: Tensor,
    gamma: Tensor,
    beta: Tensor,
    w2: Tensor,
}

/// `gelu(layernorm(x @ w1)) @ w2`, with the fused op or with candle's ops; returns the
/// LayerNorm's input, its output and the final result.
fn forward(x: &Tensor, p: &Params, fused: bool) -> candle_core::Result<(Tensor, Tensor, Tensor)> {
    let h = x.matmul(&p.w1)?;
    let ln = if fused {
        h.apply_op3_no_bwd(&p.gamma, &p.beta, &FusedLayerNorm { eps: EPS as f32 })?
    } else {
        candle_layernorm_native(&h, &p.gamma, &p.beta, EPS)?
    };
    let out = ln.gelu_erf()?.matmul(&p.w2)?;
    Ok((h, ln, out))
}

fn verdict(what: &str, ratio: f64, max_abs: f64) -> bool {
    let ok = ratio <= 1.0;
    println!(
        "{what:<58} max abs err {max_abs:.3e} ({:.2} of tolerance)  {}",
        ratio,
        if ok { "PASS" } else { "FAIL" }
    );
    ok
}

/// Mean milliseconds of `f` over `iters` calls after a warm-up, waiting for the device.
fn time_ms(
    device: &Device,
    iters: usize,
    mut f: impl FnMut() -> candle_core::Result<Tensor>,
) -> candle_core::Result<f64> {
    f()?;
    device.synchronize()?;
    let t = std::time::Instant::now();
    for _ in 0..iters {
        f()?;
    }
    device.synchronize()?;
    Ok(t.elapsed().as_secs_f64() * 1e3 / iters as f64)
}

fn run(
    device: &Device,
    rng: &mut Rng,
    dtype: DType,
    (rows, d_in, hidden, d_out): (usize, usize, usize, usize),
) -> candle_core::Result<bool> {
    let x = rng.tensor(&[rows, d_in], 1.0, 0.0, dtype, device)?;
    let p = Params {
        w1: rng.tensor(&[d_in, hidden], 1.0 / (d_in as f64).sqrt(), 0.0, dtype, device)?,
        gamma: rng.tensor(&[hidden], 0.2, 1.0, dtype, device)?,
        beta: rng.tensor(&[hidden], 0.5, 0.0, dtype, device)?,
        w2: rng.tensor(&[hidden, d_out], 1.0 / (hidden as f64).sqrt(), 0.0, dtype, device)?,
    };
    let (h, ln, out) = forward(&x, &p, true)?;
    let mut ok = true;

    // 1. The fused op against candle's ops (in f64) on the same input.
    let want = candle_layernorm(&h, &p.gamma, &p.beta, EPS)?;
    let (atol, rtol) = tolerance(dtype);
    let (ratio, max_abs) = error_ratio(&ln, &want, atol, rtol)?;
    ok &= verdict(&format!("{dtype:?} fused layernorm {rows}x{hidden} vs candle ops (f64)"), ratio, max_abs);

    // 2. The whole computation against the same one written with candle's ops only (f32: in
    //    half precision candle's own mean/var round in the half type, so no fair comparison).
    if dtype == DType::F32 {
        let (_, _, want) = forward(&x, &p, false)?;
        let (ratio, max_abs) = error_ratio(&out, &want, 1e-4, 1e-4)?;
        ok &= verdict(
            &format!("{dtype:?} matmul-layernorm-gelu-matmul {rows}x{d_out} vs candle"),
            ratio,
            max_abs,
        );
    }

    // A fuse kernel on a GPU records an out-of-bounds lane instead of touching memory; fuse
    // reports it at its device's next synchronize, which candle never calls: check here.
    #[cfg(feature = "cuda")]
    if let Device::Cuda(d) = device {
        fuse_candle::cuda::device(d)?
            .synchronize()
            .map_err(|e| fuse_candle::kernel_error("fused-layernorm", e))?;
    }

    if device.is_cuda() {
        let op = FusedLayerNorm { eps: EPS as f32 };
        let fused = time_ms(device, 50, || h.apply_op3_no_bwd(&p.gamma, &p.beta, &op))?;
        let ops = time_ms(device, 50, || candle_layernorm_native(&h, &p.gamma, &p.beta, EPS))?;
        println!(
            "    {dtype:?} layernorm {rows}x{hidden}: fused {:.1} us, candle ops {:.1} us",
            fused * 1e3,
            ops * 1e3
        );
    }
    Ok(ok)
}

fn main() {
    let (device, why) = pick_device();
    println!("device: {why}");
    let mut rng = Rng::fresh("candle_layernorm");
    let shape = if device.is_cuda() { (8192, 256, 1024, 256) } else { (256, 128, 768, 64) };
    let mut all = true;
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        match run(&device, &mut rng, dtype, shape) {
            Ok(ok) => all &= ok,
            Err(e) => {
                println!("{dtype:?}: error: {e}");
                all = false;
            }
        }
    }
    println!("{}", if all { "PASS" } else { "FAIL" });
    std::process::exit(if all { 0 } else { 1 });
}
