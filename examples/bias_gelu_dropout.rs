//! Bias + GELU(erf) + dropout, f32 and f16, checked against float64 and the dropout statistics;
//! the mask drawn with `rand` (one Philox4x32-10 per four elements) and with `rand16` (one per
//! eight, 16 threshold bits each). `cargo run --release --example bias_gelu_dropout`
use fuse_kernels::bias_gelu_dropout as kernels;

use fuse::half::f16;
use fuse::{Buffer, Device, Float};
use fuse_testkit::*;

const BLOCK: usize = 1024;
const P: f32 = 0.1;

#[allow(clippy::too_many_arguments)]
fn launch<T: Float>(
    d: &Device,
    sixteen: bool,
    x: &Buffer<T>,
    b: &Buffer<T>,
    o: &mut Buffer<T>,
    seed: u64,
    n: i32,
    h: i32,
) -> fuse::Result<()> {
    let g = grid_1d(n as usize, BLOCK);
    if sixteen {
        kernels::bias_gelu_dropout16::launch::<T, BLOCK>(d, g, x, b, o, seed, P, n, h)
    } else {
        kernels::bias_gelu_dropout::launch::<T, BLOCK>(d, g, x, b, o, seed, P, n, h)
    }
}

fn run<T: ToF64 + Float>(
    device: &Device,
    sixteen: bool,
    rng: &mut rand::rngs::StdRng,
    rows: usize,
    h: usize,
    time_it: bool,
) -> fuse::Result<bool> {
    use rand::Rng;
    let n = rows * h;
    let x: Vec<T> = from_f64(&normal_f32(rng, n).iter().map(|&v| f64::from(v)).collect::<Vec<_>>());
    let bias: Vec<T> = from_f64(&normal_f32(rng, h).iter().map(|&v| f64::from(v)).collect::<Vec<_>>());
    let (xb, bb) = (device.upload(&x)?, device.upload(&bias)?);
    let (nn, hh) = (i32::try_from(n).expect("fits"), i32::try_from(h).expect("fits"));
    let seed: u64 = rng.gen();
    let run_seed = |seed: u64| -> fuse::Result<Vec<f64>> {
        let mut out = poisoned::<T>(device, n);
        launch(device, sixteen, &xb, &bb, &mut out, seed, nn, hh)?;
        Ok(to_f64(&out.to_vec()?))
    };
    let (out, again, other) = (run_seed(seed)?, run_seed(seed)?, run_seed(seed ^ 0x9E37_79B9_7F4A_7C15)?);
    let gelu = kernels::reference_gelu(&to_f64(&x), &to_f64(&bias), h);
    let half = std::mem::size_of::<T>() == 2;
    let what = format!("bias_gelu_dropout{} {} {rows}x{h}", if sixteen { " rand16" } else { "" }, T::DTYPE);

    // Kept elements must equal gelu / (1 - p); dropped ones exactly 0. A kept element whose value
    // rounds to 0 in the output type is indistinguishable from a dropped one, so the mask counts
    // only elements whose reference is clearly nonzero there (f16: |ref| >= 1e-4, far above its
    // subnormals; f32: >= 1e-30). That set depends on the inputs alone, so the kept fraction over
    // it stays an unbiased estimate of 1 - p.
    let scale = 1.0 / (1.0 - f64::from(P));
    let tiny = if half { 1e-4 } else { 1e-30 };
    let (mut kept, mut decided) = (0usize, 0usize);
    let mut got_kept = Vec::new();
    let mut want_kept = Vec::new();
    let mut bad_dropped = 0usize;
    for i in 0..n {
        let want = gelu[i] * scale;
        if want.abs() < tiny {
            if out[i].is_nan() {
                bad_dropped += 1;
            }
            continue;
        }
        decided += 1;
        if out[i] != 0.0 {
            kept += 1;
            got_kept.push(out[i]);
            want_kept.push(want);
        }
        if out[i].is_nan() {
            bad_dropped += 1;
        }
    }
    let (atol, rtol) = if half { (2e-3, 2e-3) } else { (1e-5, 1e-5) };
    let values_ok =
        check(&format!("{what} kept values"), &got_kept, &want_kept, atol, rtol) && bad_dropped == 0;
    // rand16 drops with probability m / 2^16, m = floor(p 2^16 + 1/2) (p = 0.1: 0.100006).
    let p_eff =
        if sixteen { f64::from(fuse::fuse_ir::philox::rand16_gt_bound(P)) / 65536.0 } else { f64::from(P) };
    let frac = kept as f64 / decided.max(1) as f64;
    let sigma = (p_eff * (1.0 - p_eff) / decided.max(1) as f64).sqrt();
    let frac_ok = (frac - (1.0 - p_eff)).abs() <= 4.0 * sigma;
    println!(
        "{what}: kept fraction {frac:.5} (expected {:.5} ± {:.5}) {}",
        1.0 - p_eff,
        4.0 * sigma,
        if frac_ok { "PASS" } else { "FAIL" }
    );
    let same_ok = out.iter().zip(&again).all(|(a, b)| a.to_bits() == b.to_bits());
    let differs = out.iter().zip(&other).filter(|(a, b)| (**a == 0.0) != (**b == 0.0)).count();
    // Two independent masks disagree on about 2p(1-p) of the elements.
    let other_ok = differs as f64 > 0.5 * 2.0 * f64::from(P) * (1.0 - f64::from(P)) * n as f64;
    println!(
        "{what}: same seed gives the same output {}; another seed changes {differs} mask bits {}",
        if same_ok { "PASS" } else { "FAIL" },
        if other_ok { "PASS" } else { "FAIL" }
    );
    if time_it {
        let mut out = poisoned::<T>(device, n);
        let bytes = (2 * n + h) * std::mem::size_of::<T>();
        report_speed(device, &what, bytes, 50, || launch(device, sixteen, &xb, &bb, &mut out, seed, nn, hh));
    }
    Ok(values_ok && frac_ok && same_ok && other_ok)
}

fn main() {
    run_shapes(
        "bias_gelu_dropout",
        &[(333, 1000)],
        &[(8192, 4096), (16384, 8192)],
        |device, rng, rows, cols, time_it| {
            let mut ok = true;
            for sixteen in [false, true] {
                ok &= run::<f32>(device, sixteen, rng, rows, cols, time_it)?;
                ok &= run::<f16>(device, sixteen, rng, rows, cols, time_it)?;
            }
            Ok(ok)
        },
    )
}
