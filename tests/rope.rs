//! QK-norm + RoPE in place on a packed qkv tensor (the NeoX and the GPT-J pairing) and the
//! `split`/`join` of column pairs that GPT-J's rests on. Each body runs on the CPU interpreter and
//! on a GPU (tests/common/backend.rs: `name/cpu`, `name/gpu`, the latter ignored without a GPU),
//! on fresh random inputs, against float64; beside a GPU also against the interpreter.
mod common;

use common::backend::{every_backend, name, per_backend, with_cpu};
use common::*;
use fuse::half::bf16;
use fuse::Device;
use fuse_testkit::harness;
use qk_norm_rope::Heads;

/// qk_norm_rope in place, both pairings, every element type: q and k against float64, v
/// bit-identical (`QkCase::check`); beside a GPU the GPU's q and k within tolerance of the CPU's.
/// The shapes: the bench's heads (32 q + 8 k + 8 v of 128), heads straddling q and k in one
/// program (6 + 3 with 8 per program), a head width that is not a power of two (96 in 128 lanes),
/// and on the CPU 64-wide heads, on a GPU 256-wide ones, 1024 tokens of the bench's heads and its
/// whole shape (8192 tokens, against float64 alone).
fn qk_norm_rope_neox_and_gptj_in_place_v_untouched(d: &Device) {
    fn case<T: Elem>(d: &Device, rng: &mut Rng, atol: f64, rtol: f64) {
        let bench = Heads { q: 32, k: 8, v: 8, dim: 128 };
        let shapes = per_backend(
            d,
            [
                (11, bench),
                (6, Heads { q: 6, k: 3, v: 3, dim: 128 }),
                (5, Heads { q: 4, k: 2, v: 1, dim: 96 }),
                (4, Heads { q: 12, k: 4, v: 4, dim: 64 }),
            ],
            [
                (1024, bench),
                (6, Heads { q: 6, k: 3, v: 3, dim: 128 }),
                (5, Heads { q: 4, k: 2, v: 1, dim: 96 }),
                (33, Heads { q: 16, k: 2, v: 2, dim: 256 }),
            ],
        );
        for (tokens, h) in shapes {
            let c = QkCase::<T>::random(rng, tokens, h);
            for neox in [true, false] {
                let what = format!("qk_norm_rope {} neox={neox} {tokens}x{h:?}", T::NAME);
                let mut got = Vec::new();
                for dev in with_cpu(d) {
                    let out = c.run_on(&dev, neox);
                    c.check(&format!("{what} on the {}", name(&dev)), &out, neox, atol, rtol);
                    got.push(T::to_f64s(&out));
                }
                if let [on_gpu, on_cpu] = &got[..] {
                    assert_close(&format!("{what} gpu vs cpu"), on_gpu, on_cpu, atol, rtol);
                }
            }
        }
        if d.is_cuda() {
            let c = QkCase::<T>::random(rng, 8192, bench);
            for neox in [true, false] {
                let what = format!("qk_norm_rope {} neox={neox} 8192x{bench:?} on the GPU", T::NAME);
                c.check(&what, &c.run_on(d, neox), neox, atol, rtol);
            }
        }
    }
    let mut rng = Rng::fresh("qk_norm_rope");
    case::<f32>(d, &mut rng, per_backend(d, 2e-5, 3e-5), per_backend(d, 2e-5, 3e-5));
    case::<fuse::half::f16>(d, &mut rng, 2e-3, 2e-3);
    case::<bf16>(d, &mut rng, 1e-2, 8e-3);
}

/// RoPE pairs the columns: an odd head width is a launch error, and the tensor is left as it was.
fn qk_norm_rope_refuses_an_odd_head_width(d: &Device) {
    let h = Heads { q: 2, k: 1, v: 1, dim: 65 };
    let tokens = 3;
    let input: Vec<f32> = (0..tokens * 4 * 65).map(|i| i as f32).collect();
    let mut qkv = d.upload(&input).unwrap();
    let pos = d.upload(&vec![0i64; tokens]).unwrap();
    let (cs, w) = (d.upload(&vec![1.0f32; 8 * 65]).unwrap(), d.upload(&vec![1.0f32; 65]).unwrap());
    for neox in [true, false] {
        let err = qk_norm_rope::launch(d, None, tokens, 4, &mut qkv, &pos, &cs, &w, &w, h, 1e-6, neox)
            .expect_err("an odd head width must be refused");
        assert!(matches!(err, fuse::Error::InvalidLaunch(ref m) if m.contains("odd")), "{err}");
    }
    assert_eq!(qkv.to_vec().unwrap(), input);
}

/// The two pairings give different results (so the checks above can tell them apart).
fn qk_norm_rope_styles_differ(d: &Device) {
    let mut rng = Rng::fresh("qk_norm_rope styles");
    let c = QkCase::<f32>::random(&mut rng, 3, Heads { q: 2, k: 1, v: 1, dim: 64 });
    let (neox, gptj) = (c.run_on(d, true), c.run_on(d, false));
    let differ = neox.iter().zip(&gptj).filter(|(a, b)| (**a - **b).abs() > 1e-3).count();
    assert!(
        differ > neox.len() / 4,
        "NeoX and GPT-J agree on {} of {} elements",
        neox.len() - differ,
        neox.len()
    );
}

/// `split` and `join` (common::paths::pair_rotate) against float64, at widths and warp counts that
/// take both of a GPU's lowerings: in registers (a thread's chunks hold both lanes of its pairs:
/// N = 64 on 2 warps) and through shared memory (N = 256 on 1 warp, N = 8 on 8 warps); outputs
/// poisoned first; the pair swap exact.
fn split_join_match_float64(d: &Device) {
    let mut rng = Rng::fresh("split/join");
    let grid = 3usize;
    for n in [2usize, 8, 32, 64, 128, 256] {
        for w in [1u32, 2, 4, 8] {
            let x = rng.vec(grid * 4 * n, 4.0);
            let cs: Vec<f32> =
                (0..n).map(|i| ((i as f64) * 0.37 + rng.vec(1, 1.0)[0] as f64).cos() as f32).collect();
            let case = format!("pair_rotate N={n} {w} warps");
            let [out, norms, sw] = paths::pair_rotate_reference(&x, &cs, n, grid);
            for dev in with_cpu(d) {
                let (xb, cb) = (dev.upload(&x).unwrap(), dev.upload(&cs).unwrap());
                let mut ob = dev.upload(&vec![f32::NAN; x.len()]).unwrap();
                let mut nb = dev.upload(&vec![f32::NAN; grid * 4]).unwrap();
                let mut sb = dev.upload(&vec![f32::NAN; grid * n]).unwrap();
                let cfg = fuse::LaunchConfig::new(grid as u32).num_warps(w);
                fuse::with_block!(n, N => paths::pair_rotate::launch::<N>(&dev, cfg, &xb, &cb, &mut ob, &mut nb, &mut sb))
                    .unwrap();
                let on = name(&dev);
                for (what, want, got) in [("out", &out, &ob), ("norms", &norms, &nb)] {
                    let got = f64s(&got.to_vec().unwrap());
                    assert_close(&format!("{case} {what} on the {on}"), &got, want, 1e-5, 1e-5);
                }
                // The swap moves values: exact.
                for (k, (&have, &want)) in sb.to_vec().unwrap().iter().zip(&sw).enumerate() {
                    assert!(
                        f64::from(have) == want,
                        "{case} swapped lane {k} on the {on}: {have}, want {want}"
                    );
                }
            }
        }
    }
}

fn main() {
    harness::run(every_backend![
        qk_norm_rope_neox_and_gptj_in_place_v_untouched,
        qk_norm_rope_refuses_an_odd_head_width,
        qk_norm_rope_styles_differ,
        split_join_match_float64,
    ])
}
