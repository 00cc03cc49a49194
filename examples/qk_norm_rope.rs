//! vLLM's fused QK-norm + RoPE, in place on a packed qkv tensor, NeoX and GPT-J pairings, in f32,
//! f16 and bf16, checked against float64 (v must come back bit-identical).
//! `cargo run --release --example qk_norm_rope`
use fuse_kernels::qk_norm_rope as kernels;

use fuse::half::{bf16, f16};
use fuse::{Device, Float};
use fuse_testkit::*;
use kernels::Heads;
use rand::Rng;

const EPS: f32 = 1e-6;
const MAX_POS: usize = 4096;

fn run<T: ToF64 + Float>(
    device: &Device,
    rng: &mut rand::rngs::StdRng,
    tokens: usize,
    h: Heads,
    neox: bool,
    time_it: bool,
) -> fuse::Result<bool> {
    let row_len = (h.q + h.k + h.v) * h.dim;
    let gen = |rng: &mut rand::rngs::StdRng, n: usize, scale: f64, shift: f64| -> Vec<T> {
        from_f64(&normal_f32(rng, n).iter().map(|&v| f64::from(v) * scale + shift).collect::<Vec<_>>())
    };
    let qkv: Vec<T> = gen(rng, tokens * row_len, 2.0, 0.3);
    let (q_w, k_w): (Vec<T>, Vec<T>) = (gen(rng, h.dim, 0.3, 1.0), gen(rng, h.dim, 0.3, 1.0));
    let positions: Vec<i64> = (0..tokens).map(|_| rng.gen_range(0..MAX_POS as i64)).collect();
    let cos_sin: Vec<T> = from_f64(&kernels::cos_sin_cache(MAX_POS, h.dim, 10000.0));

    let mut qkv_b = device.upload(&qkv)?;
    let (pos_b, cs_b) = (device.upload(&positions)?, device.upload(&cos_sin)?);
    let (qw_b, kw_b) = (device.upload(&q_w)?, device.upload(&k_w)?);
    let per = kernels::heads_per_program(h);
    let go = |qkv_b: &mut fuse::Buffer<T>| {
        kernels::launch(device, None, tokens, per, qkv_b, &pos_b, &cs_b, &qw_b, &kw_b, h, EPS, neox)
    };
    go(&mut qkv_b)?;
    let got = qkv_b.to_vec()?;

    let style = if neox { "neox" } else { "gptj" };
    let what = format!("qk_norm_rope {style} {} {tokens}x({}+{}+{})x{}", T::DTYPE, h.q, h.k, h.v, h.dim);
    let want = kernels::reference(
        &to_f64(&qkv),
        &positions,
        &to_f64(&cos_sin),
        &to_f64(&q_w),
        &to_f64(&k_w),
        h,
        f64::from(EPS),
        neox,
    );
    // q and k against float64; v bit for bit against the input.
    let (mut qk_got, mut qk_want) = (Vec::new(), Vec::new());
    let mut v_changed = 0usize;
    let qk = (h.q + h.k) * h.dim;
    for t in 0..tokens {
        let row = t * row_len;
        qk_got.extend(to_f64(&got[row..row + qk]));
        qk_want.extend_from_slice(&want[row..row + qk]);
        let v = row + qk..row + row_len;
        v_changed += got[v.clone()]
            .iter()
            .zip(&qkv[v])
            .filter(|(a, b)| a.to_f64().to_bits() != b.to_f64().to_bits())
            .count();
    }
    let (atol, rtol) = match T::DTYPE.name() {
        "f32" => (2e-5, 2e-5),
        "f16" => (2e-3, 2e-3),
        _ => (1e-2, 8e-3),
    };
    let mut ok = check(&format!("{what} q,k"), &qk_got, &qk_want, atol, rtol);
    if v_changed == 0 {
        println!("{what} v: bit-identical PASS");
    } else {
        println!("{what} v: {v_changed} elements changed FAIL");
        ok = false;
    }
    if time_it {
        // q and k read and written; per token a cache row and a position; the two weight rows.
        let es = std::mem::size_of::<T>();
        let bytes = (2 * tokens * qk + tokens * h.dim + 2 * h.dim) * es + tokens * 8;
        let mut scratch = device.upload(&qkv)?;
        report_speed(device, &what, bytes, 50, || go(&mut scratch));
    }
    Ok(ok)
}

fn main() {
    let device = pick_device();
    let mut rng = rng();
    let qwen = |q, k| Heads { q, k, v: k, dim: 128 };
    // Small token counts for the CPU: the bench's heads; heads that straddle q and k in one
    // program (12 + 4 with 8 per program is exact, 6 + 3 is not); a head width that is not a
    // power of two (96 in a 128-wide tile).
    let mut shapes = vec![
        (37, qwen(32, 8)),
        (5, Heads { q: 12, k: 4, v: 4, dim: 64 }),
        (9, Heads { q: 6, k: 3, v: 3, dim: 128 }),
        (7, Heads { q: 4, k: 2, v: 1, dim: 96 }),
    ];
    if device.is_cuda() {
        shapes.push((8192, qwen(32, 8)));
    }
    let mut all = true;
    for (tokens, h) in shapes {
        let time_it = device.is_cuda() && tokens >= 8192;
        for neox in [true, false] {
            let r = run::<f32>(&device, &mut rng, tokens, h, neox, time_it)
                .and_then(|a| Ok(a & run::<f16>(&device, &mut rng, tokens, h, neox, time_it)?))
                .and_then(|a| Ok(a & run::<bf16>(&device, &mut rng, tokens, h, neox, time_it)?));
            match r {
                Ok(ok) => all &= ok,
                Err(e) => fail(&format!("qk_norm_rope {tokens} tokens {h:?}: {e}")),
            }
        }
    }
    finish(all)
}
