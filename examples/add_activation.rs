//! Residual add + GELU / SiLU, the sum written back into the residual in place, in f32, f16 and
//! bf16, checked against float64. `cargo run --release --example add_activation`
use fuse_kernels::add_activation as kernels;
use fuse_kernels::bias_gelu_dropout;

use fuse::half::{bf16, f16};
use fuse::{Device, Float};
use fuse_testkit::*;
use kernels::Act;

fn run<T: ToF64 + Float>(
    device: &Device,
    rng: &mut rand::rngs::StdRng,
    act: Act,
    rows: usize,
    cols: usize,
    time_it: bool,
) -> fuse::Result<bool> {
    let n = rows * cols;
    let gen = |rng: &mut rand::rngs::StdRng| -> Vec<T> {
        from_f64(&normal_f32(rng, n).iter().map(|&v| f64::from(v) * 2.0).collect::<Vec<_>>())
    };
    let (x, res) = (gen(rng), gen(rng));
    let xb = device.upload(&x)?;
    let mut resb = device.upload(&res)?;
    let mut out = poisoned::<T>(device, n);
    kernels::launch(device, act, kernels::BLOCK, None, &xb, &mut resb, &mut out)?;
    let (want_res, want) = kernels::reference(&to_f64(&x), &to_f64(&res), act, bias_gelu_dropout::erf64);
    // One rounding to T at each store (the sum of two f16/bf16 values is exact in f32).
    let (atol, rtol) = match T::DTYPE.name() {
        "f32" => (1e-6, 1e-6),
        "f16" => (1e-4, 1e-3),
        _ => (1e-3, 8e-3),
    };
    let what = format!("{} {} {rows}x{cols}", act.name(), T::DTYPE);
    let ok = check(&format!("{what} residual"), &to_f64(&resb.to_vec()?), &want_res, atol, rtol)
        & check(&format!("{what} output"), &to_f64(&out.to_vec()?), &want, atol, rtol);
    if time_it {
        // Reads x and residual; writes residual and out.
        let bytes = 4 * n * std::mem::size_of::<T>();
        report_speed(device, &what, bytes, 50, || {
            kernels::launch(device, act, kernels::BLOCK, None, &xb, &mut resb, &mut out)
        });
    }
    Ok(ok)
}

fn main() {
    run_shapes("add_activation", &[(129, 1000)], &[(8192, 4096)], |device, rng, rows, cols, time_it| {
        let mut ok = true;
        for act in [Act::Gelu, Act::Silu] {
            // f32 only where nothing is timed: the bench shape is f16 and bf16.
            if !time_it {
                ok &= run::<f32>(device, rng, act, rows, cols, time_it)?;
            }
            ok &= run::<f16>(device, rng, act, rows, cols, time_it)?;
            ok &= run::<bf16>(device, rng, act, rows, cols, time_it)?;
        }
        Ok(ok)
    })
}
