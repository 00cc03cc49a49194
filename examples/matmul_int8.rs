//! The fused int8 matmul (vLLM `fused_moe_kernel`'s pattern): `c = sat_i8(round_half_even((a @ w^T
//! * sa[:, None] * sw[None, :] + bias) / out_scale))` with `a: [m, k]` and K-major `w: [n, k]` int8,
//! i32 accumulation, f32 scales, int8 out; and the accumulator alone, `a @ w^T` in i32. Checked on
//! fresh random inputs at sizes that are not multiples of the block (every edge masked), over the
//! block configurations, against the exact i64 product (bit for bit) and the float64 rounding rule
//! (exact but where the kernel's f32 error straddles a half-integer: see the kernel's docs); plus
//! a case where every second value is an exact tie, checked exactly. On a GPU also larger sizes
//! and 4096^3 timed. `cargo run --release --example matmul_int8`
use fuse_kernels::matmul_int8 as kernels;

use fuse::Device;
use fuse_testkit::*;
use rand::{rngs::StdRng, Rng};

fn bytes(rng: &mut StdRng, len: usize, lo: i8, hi: i8) -> Vec<i8> {
    (0..len).map(|_| rng.gen_range(lo..=hi)).collect()
}

/// The i32 accumulator against the exact i64 product.
fn run_i32(
    device: &Device,
    rng: &mut StdRng,
    cfg: kernels::Config,
    (m, n, k): (usize, usize, usize),
) -> fuse::Result<bool> {
    let (a, w) = (bytes(rng, m * k, i8::MIN, i8::MAX), bytes(rng, n * k, i8::MIN, i8::MAX));
    let (ab, wb) = (device.upload(&a)?, device.upload(&w)?);
    let mut c = device.upload(&vec![i32::MIN + 12345; m * n])?; // a sentinel: unwritten fails
    kernels::launch_i32(device, cfg, &ab, &wb, &mut c, (m, n, k))?;
    let got = c.to_vec()?;
    let want = kernels::reference_i32(&a, &w, m, n, k);
    let bad = got.iter().zip(&want).filter(|(&g, &w)| i64::from(g) != w).count();
    let what =
        format!("matmul_int8 i32 accumulator {m}x{n}x{k} [{}x{}x{} {}w]", cfg.bm, cfg.bn, cfg.bk, cfg.warps);
    println!("{what}: {} of {} exact {}", got.len() - bad, got.len(), if bad == 0 { "PASS" } else { "FAIL" });
    Ok(bad == 0)
}

/// The requantised output. `ties`: unit scales and `out_scale` 2, so every f32 step is exact and
/// every odd accumulator is a tie: checked exactly (bound 0).
fn run_requant(
    device: &Device,
    rng: &mut StdRng,
    cfg: kernels::Config,
    (m, n, k): (usize, usize, usize),
    with_bias: bool,
    ties: bool,
) -> fuse::Result<bool> {
    let (a, w, sa, sw, bias, out_scale) = if ties {
        (
            bytes(rng, m * k, -4, 4),
            bytes(rng, n * k, -4, 4),
            vec![1.0f32; m],
            vec![1.0f32; n],
            vec![0.0f32; n],
            2.0f32,
        )
    } else {
        let (a, w) = (bytes(rng, m * k, i8::MIN, i8::MAX), bytes(rng, n * k, i8::MIN, i8::MAX));
        let sa = uniform_f32(rng, m, 0.005, 0.015);
        let sw = uniform_f32(rng, n, 0.01, 0.03);
        // |acc| ~ 5461 sqrt(k) (uniform bytes): about 1 % of outputs saturate.
        let out_scale = 5461.0 * (k as f32).sqrt() * 0.01 * 0.02 / 50.0;
        let bias = uniform_f32(rng, n, -20.0 * out_scale, 20.0 * out_scale);
        (a, w, sa, sw, bias, out_scale)
    };
    let acc = kernels::reference_i32(&a, &w, m, n, k);
    let bias_ref = if with_bias { Some(&bias[..]) } else { None };
    let t = kernels::reference_t(&acc, &sa, &sw, bias_ref, out_scale);
    let up = |v: &[f32]| device.upload(v);
    let (ab, wb, sab, swb, bb) = (device.upload(&a)?, device.upload(&w)?, up(&sa)?, up(&sw)?, up(&bias)?);
    // int8 has no NaN: each element is poisoned with a value the rule forbids there (64 away from
    // the right one), so an element the kernel leaves unwritten fails.
    let mut c = device.upload(&kernels::poison(&t))?;
    let b = if with_bias { Some(&bb) } else { None };
    kernels::launch(device, cfg, &ab, &wb, &sab, &swb, b, &mut c, (m, n, k), out_scale)?;
    let got = c.to_vec()?;
    let bound: Vec<f64> = if ties {
        vec![0.0; m * n]
    } else {
        (0..m * n)
            .map(|i| {
                let bj = if with_bias { bias[i % n] } else { 0.0 };
                kernels::t_error_bound(acc[i], sa[i / n], sw[i % n], bj, out_scale)
            })
            .collect()
    };
    let v = kernels::verify(&got, &t, &bound);
    let what = format!(
        "matmul_int8{} {m}x{n}x{k} [{}x{}x{} {}w]",
        if ties {
            " ties"
        } else if with_bias {
            "+bias"
        } else {
            ""
        },
        cfg.bm,
        cfg.bn,
        cfg.bk,
        cfg.warps
    );
    let ok = v.bad == 0 && (!ties || v.ties > 0);
    println!(
        "{what}: {} exact, {} within the f32 bound of a half-integer ({} took the other neighbour), {} saturated, {} exact ties {}",
        v.exact,
        v.ambiguous,
        v.took_other,
        v.saturated,
        v.ties,
        if ok { "PASS" } else { "FAIL" }
    );
    if let Some((i, g, want, t)) = v.first_bad {
        println!("  {} elements wrong; first at {i}: got {g}, want {want} (t = {t})", v.bad);
    }
    Ok(ok)
}

fn main() {
    let device = pick_device();
    let mut rng = rng();
    let mut ok = true;
    let sizes: &[(usize, usize, usize)] = if device.is_cuda() {
        &[(300, 200, 100), (129, 257, 192), (1000, 33, 70)]
    } else {
        &[(70, 45, 100), (33, 50, 64)]
    };
    let configs: &[kernels::Config] =
        if device.is_cuda() { kernels::CONFIGS } else { &kernels::CONFIGS[4..] };
    let go = |f: &mut dyn FnMut() -> fuse::Result<bool>| f().unwrap_or_else(|e| fail(&format!("{e}")));
    for &cfg in configs {
        for &size in sizes {
            ok &= go(&mut || run_i32(&device, &mut rng, cfg, size));
            ok &= go(&mut || run_requant(&device, &mut rng, cfg, size, false, false));
            ok &= go(&mut || run_requant(&device, &mut rng, cfg, size, true, false));
            ok &= go(&mut || run_requant(&device, &mut rng, cfg, size, false, true));
        }
    }
    if device.is_cuda() {
        let (m, n, k) = (4096, 4096, 4096);
        let a = device.upload(&vec![1i8; m * k]).unwrap();
        let w = device.upload(&vec![1i8; n * k]).unwrap();
        let sa = device.upload(&vec![1e-3f32; m]).unwrap();
        let sw = device.upload(&vec![1e-3f32; n]).unwrap();
        let mut c = device.zeros::<i8>(m * n).unwrap();
        let cfg = kernels::CONFIGS[0];
        let ms = device
            .median_ms(
                5,
                || Ok(()),
                || kernels::launch(&device, cfg, &a, &w, &sa, &sw, None, &mut c, (m, n, k), 0.05),
            )
            .unwrap();
        println!(
            "matmul_int8 {m}x{n}x{k}: {ms:.3} ms, {:.1} TOP/s (2mnk/t)",
            2.0 * (m * n * k) as f64 / ms / 1e9
        );
    }
    finish(ok);
}
