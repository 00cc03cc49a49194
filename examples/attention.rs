//! FlashAttention-2 forward in the language (`fuse-kernels/src/attention.rs`): causal and not,
//! grouped-query heads, dropout, the row log-sum-exp, f16 and bf16, checked against float64 at
//! sequence lengths that are not multiples of the blocks; on a GPU also timed.
//! `cargo run --release --example attention`
use fuse_kernels::attention as kernels;

use fuse::half::{bf16, f16};
use fuse::{Device, Half};
use fuse_testkit::*;
use kernels::{Config, Options, Shape};

/// One checked call: fresh inputs, poisoned outputs, the float64 reference (with the kernel's own
/// dropout decisions from the Philox reference when `p_drop > 0`).
/// Whether dropout keeps element `(bh, i, j)` of the attention matrix.
type KeepRule<'a> = &'a dyn Fn(usize, usize, usize) -> bool;

fn run<T: ToF64 + Half>(
    device: &Device,
    rng: &mut rand::rngs::StdRng,
    cfg: Config,
    s: Shape,
    causal: bool,
    p_drop: f32,
) -> fuse::Result<bool> {
    use rand::Rng;
    let gen = |rng: &mut rand::rngs::StdRng, len: usize| -> Vec<T> {
        from_f64(&normal_f32(rng, len).iter().map(|&v| f64::from(v)).collect::<Vec<_>>())
    };
    let (q, k, v) = (
        gen(rng, s.batch * s.heads * s.n * s.d),
        gen(rng, s.batch * s.kv_heads * s.n * s.d),
        gen(rng, s.batch * s.kv_heads * s.n * s.d),
    );
    let (qb, kb, vb) = (device.upload(&q)?, device.upload(&k)?, device.upload(&v)?);
    let mut o = poisoned::<T>(device, q.len());
    let mut lse = poisoned::<f32>(device, s.batch * s.heads * s.n);
    let opt = Options { scale: 1.0 / (s.d as f32).sqrt(), causal, p_drop, seed: rng.gen() };
    kernels::launch(device, cfg, s, &qb, &kb, &vb, &mut o, &mut lse, opt)?;
    let n = s.n as u64;
    let keep = |bh: usize, i: usize, j: usize| {
        fuse::fuse_ir::philox::rand(opt.seed, (bh as u64 * n + i as u64) * n + j as u64) > p_drop
    };
    let keep_scale = 1.0 / (1.0 - f64::from(p_drop));
    let dropout: Option<(KeepRule<'_>, f64)> = if p_drop > 0.0 { Some((&keep, keep_scale)) } else { None };
    let (want_o, want_lse, o_abs) =
        kernels::reference(&to_f64(&q), &to_f64(&k), &to_f64(&v), s, f64::from(opt.scale), causal, dropout);
    let what = format!(
        "attention {} b{} h{}/{} n{} d{}{}{} [{}x{} {}w]",
        T::DTYPE,
        s.batch,
        s.heads,
        s.kv_heads,
        s.n,
        s.d,
        if causal { " causal" } else { "" },
        if p_drop > 0.0 { format!(" dropout {p_drop}") } else { String::new() },
        cfg.bm,
        cfg.bn,
        cfg.warps
    );
    // P is rounded to T before the second product (as in FlashAttention): the bound per element
    // scales with sum_j p_j |v_j| (kernels::error_bound).
    let u = if T::DTYPE.name() == "f16" { 2f64.powi(-11) } else { 2f64.powi(-8) };
    let got = to_f64(&o.to_vec()?);
    let worst = got
        .iter()
        .zip(&want_o)
        .zip(&o_abs)
        .map(|((g, w), a)| if (g - w).abs() <= kernels::error_bound(*a, u) { 0.0 } else { f64::INFINITY })
        .fold(0.0, f64::max);
    // `check` prints the errors; the bound decides.
    let o_ok = check(&format!("{what} o"), &got, &want_o, 1.0, 0.0) && worst == 0.0;
    if worst != 0.0 {
        println!("{what} o: some element is past its error bound FAIL");
    }
    let lse_ok = check(&format!("{what} lse"), &to_f64(&lse.to_vec()?), &want_lse, 1e-3, 1e-4);
    Ok(o_ok && lse_ok)
}

fn main() {
    let device = pick_device();
    let mut rng = rng();
    let mut ok = true;
    let go = |f: &mut dyn FnMut() -> fuse::Result<bool>| f().unwrap_or_else(|e| fail(&format!("{e}")));
    // (config, shape): GPU blocks at head dims 64 and 128; on the CPU the small block.
    let cases: Vec<(Config, Shape)> = if device.is_cuda() {
        let c = kernels::CONFIGS;
        vec![
            (c[0], Shape { batch: 2, heads: 4, kv_heads: 2, n: 300, d: 64 }),
            (c[0], Shape { batch: 1, heads: 4, kv_heads: 1, n: 257, d: 128 }),
            (c[1], Shape { batch: 1, heads: 2, kv_heads: 2, n: 200, d: 128 }),
            (c[3], Shape { batch: 1, heads: 2, kv_heads: 1, n: 129, d: 64 }),
        ]
    } else {
        let small = kernels::CONFIGS[kernels::CONFIGS.len() - 1];
        vec![
            (small, Shape { batch: 2, heads: 4, kv_heads: 2, n: 37, d: 16 }),
            (small, Shape { batch: 1, heads: 2, kv_heads: 1, n: 50, d: 32 }),
        ]
    };
    for &(cfg, shape) in &cases {
        for causal in [false, true] {
            for p_drop in [0.0, 0.2] {
                ok &= go(&mut || run::<f16>(&device, &mut rng, cfg, shape, causal, p_drop));
                ok &= go(&mut || run::<bf16>(&device, &mut rng, cfg, shape, causal, p_drop));
            }
        }
    }
    if device.is_cuda() {
        for causal in [false, true] {
            let s = Shape { batch: 4, heads: 32, kv_heads: 32, n: 4096, d: 128 };
            let len = s.batch * s.heads * s.n * s.d;
            let x = device.upload(&vec![f16::from_f32(0.01); len]).unwrap();
            let mut o = device.zeros::<f16>(len).unwrap();
            let mut lse = device.zeros::<f32>(s.batch * s.heads * s.n).unwrap();
            let cfg = kernels::CONFIGS[0];
            let opt = Options { scale: 1.0 / (s.d as f32).sqrt(), causal, p_drop: 0.0, seed: 0 };
            let ms = device
                .median_ms(
                    10,
                    || Ok(()),
                    || kernels::launch(&device, cfg, s, &x, &x, &x, &mut o, &mut lse, opt),
                )
                .unwrap();
            let flops =
                4.0 * (s.batch * s.heads) as f64 * (s.n * s.n * s.d) as f64 / if causal { 2.0 } else { 1.0 };
            println!(
                "attention f16 b4 h32 n4096 d128{}: {ms:.3} ms, {:.1} TFLOP/s",
                if causal { " causal" } else { "" },
                flops / ms / 1e9
            );
        }
    }
    finish(ok);
}
