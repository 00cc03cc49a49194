//! Every example kernel run by the CPU interpreter against its float64 reference (no GPU needed).
//! Outputs are poisoned with NaN first, so an unwritten element fails.
mod common;
use fuse_kernels::matmul as matmul_example;

use common::*;
use fuse::half::{bf16, f16};
use fuse::Device;

fn cpu() -> Device {
    Device::cpu()
}

/// add_mul on the CPU against float64 at one tolerance.
fn add_mul_case<T: Elem>(rng: &mut Rng, tol: f64) {
    let n = 100_003; // not a multiple of the block: the tail is masked
    let (x, y, z) =
        (T::from_f32s(&rng.vec(n, 2.0)), T::from_f32s(&rng.vec(n, 2.0)), T::from_f32s(&rng.vec(n, 2.0)));
    let want = add_mul::reference(&T::to_f64s(&x), &T::to_f64s(&y), &T::to_f64s(&z));
    let got = add_mul_on::<T, 1024>(&cpu(), None, &x, &y, &z);
    assert_close(&format!("add_mul {}", T::NAME), &got, &want, tol, tol);
}

#[test]
fn add_mul_f32_f16_and_bf16() {
    let mut rng = Rng::fresh("add_mul");
    add_mul_case::<f32>(&mut rng, 1e-6);
    add_mul_case::<f16>(&mut rng, 1e-3);
    // One rounding to bf16 at the store: half a bf16 ulp (2^-9 relative) plus slack.
    add_mul_case::<bf16>(&mut rng, 4e-3);
}

#[test]
fn softmax_f32_f16_and_bf16() {
    let mut rng = Rng::fresh("softmax");
    let (rows, cols) = (67, 1000);
    let x = rng.vec(rows * cols, 5.0);
    let got = softmax_on::<f32, 1024>(&cpu(), &x, rows, cols);
    assert_close("softmax f32", &got, &softmax::reference(&f64s(&x), rows, cols), 1e-7, 1e-5);
    let xh = f16s(&x);
    let got = softmax_on::<f16, 1024>(&cpu(), &xh, rows, cols);
    assert_close("softmax f16", &got, &softmax::reference(&f16_to_f64(&xh), rows, cols), 1e-4, 2e-3);
    let xb = bf16s(&x);
    let got = softmax_on::<bf16, 1024>(&cpu(), &xb, rows, cols);
    assert_close("softmax bf16", &got, &softmax::reference(&bf16_to_f64(&xb), rows, cols), 1e-6, 4e-3);
}

#[test]
fn layernorm_one_tile_and_looped() {
    let mut rng = Rng::fresh("layernorm");
    let d = cpu();
    let (rows, cols) = (33, 1500);
    let x: Vec<f32> = rng.vec(rows * cols, 3.0).iter().map(|v| v + 0.7).collect();
    let (w, b) = (rng.vec(cols, 1.0), rng.vec(cols, 1.0));
    let want = layernorm::reference(&f64s(&x), &f64s(&w), &f64s(&b), rows, cols, 1e-5);
    let got = layernorm_on::<f32, 2048>(&d, &x, &w, &b, rows, cols);
    assert_close("layernorm f32", &got, &want, 2e-5, 1e-5);

    let got = layernorm_wide_on::<256>(&d, 2, &x, &w, &b, rows, cols);
    assert_close("layernorm_wide f32", &got, &want, 2e-5, 1e-5);

    let (xh, wh, bh) = (f16s(&x), f16s(&w), f16s(&b));
    let want = layernorm::reference(&f16_to_f64(&xh), &f16_to_f64(&wh), &f16_to_f64(&bh), rows, cols, 1e-5);
    let got = layernorm_on::<f16, 2048>(&d, &xh, &wh, &bh, rows, cols);
    assert_close("layernorm f16", &got, &want, 4e-3, 4e-3);

    let (xb, wb, bb) = (bf16s(&x), bf16s(&w), bf16s(&b));
    let want =
        layernorm::reference(&bf16_to_f64(&xb), &bf16_to_f64(&wb), &bf16_to_f64(&bb), rows, cols, 1e-5);
    let got = layernorm_on::<bf16, 2048>(&d, &xb, &wb, &bb, rows, cols);
    assert_close("layernorm bf16", &got, &want, 1e-3, 4e-3);
}

#[test]
fn bias_gelu_dropout_matches_reference_and_statistics() {
    let mut rng = Rng::fresh("bias_gelu_dropout");
    let d = cpu();
    let (rows, h) = (97, 512);
    let n = rows * h;
    let (x, bias) = (rng.vec(n, 3.0), rng.vec(h, 1.0));
    let p = 0.25f32;
    let gelu = bias_gelu_dropout::reference_gelu(&f64s(&x), &f64s(&bias), h);
    let (xb, bb) = (d.upload(&x).unwrap(), d.upload(&bias).unwrap());
    let run = |seed: u64| {
        let mut out = d.upload(&vec![f32::NAN; n]).unwrap();
        bias_gelu_dropout::bias_gelu_dropout::launch::<f32, 1024>(
            &d,
            n.div_ceil(1024) as u32,
            &xb,
            &bb,
            &mut out,
            seed,
            p,
            n as i32,
            h as i32,
        )
        .unwrap();
        out.to_vec().unwrap()
    };
    let seed = rng.next_u64();
    let out = run(seed);
    let mut kept = 0usize;
    for i in 0..n {
        assert!(!out[i].is_nan(), "element {i} unwritten or NaN");
        // The mask is the Philox reference's, lane for lane.
        let keep = fuse::fuse_ir::philox::rand(seed, i as u64) > p;
        if keep {
            kept += 1;
            let want = gelu[i] / (1.0 - f64::from(p));
            assert!(
                (f64::from(out[i]) - want).abs() <= 1e-5 + 1e-5 * want.abs(),
                "kept {i}: {} vs {want}",
                out[i]
            );
        } else {
            assert_eq!(out[i], 0.0, "dropped element {i} must be exactly 0");
        }
    }
    let frac = kept as f64 / n as f64;
    let sigma = (f64::from(p) * (1.0 - f64::from(p)) / n as f64).sqrt();
    assert!((frac - (1.0 - f64::from(p))).abs() <= 4.0 * sigma, "kept fraction {frac}");
    assert_eq!(run(seed), out, "same seed, same output");
    let other = run(seed.wrapping_add(1));
    let differ = out.iter().zip(&other).filter(|(a, b)| (**a == 0.0) != (**b == 0.0)).count();
    assert!(differ > n / 10, "another seed must give another mask ({differ} differences)");
}

#[test]
fn out_of_bounds_is_an_error_naming_the_parameter() {
    let d = cpu();
    let n = 1000;
    let x = d.upload(&vec![1.0f32; n]).unwrap();
    let mut out = d.upload(&vec![0.0f32; n]).unwrap();
    // Claim 2000 elements: the mask lets lanes 1000.. through, past the buffers' ends.
    let err = add_mul::add_mul::launch::<f32, 1024>(&d, 2, &x, &x, &x, &mut out, 2000).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, fuse::Error::OutOfBounds { .. }), "{msg}");
    assert!(msg.contains('x') && msg.contains("1000"), "names the parameter and index: {msg}");
}

#[test]
fn add_rmsnorm_updates_the_residual_and_normalises() {
    let mut rng = Rng::fresh("add_rmsnorm");
    let d = cpu();
    let (rows, cols) = (31, 700);
    let (x, res, w) =
        (f16s(&rng.vec(rows * cols, 2.0)), f16s(&rng.vec(rows * cols, 2.0)), f16s(&rng.vec(cols, 1.0)));
    let mut resb = d.upload(&res).unwrap();
    let mut out = d.upload(&vec![f16::NAN; rows * cols]).unwrap();
    add_rmsnorm::add_rmsnorm::launch::<1024>(
        &d,
        rows as u32,
        &d.upload(&x).unwrap(),
        &mut resb,
        &d.upload(&w).unwrap(),
        &mut out,
        cols as i32,
        1e-6,
    )
    .unwrap();
    let (want_res, want) =
        add_rmsnorm::reference(&f16_to_f64(&x), &f16_to_f64(&res), &f16_to_f64(&w), rows, cols, 1e-6);
    assert_close("residual", &f16_to_f64(&resb.to_vec().unwrap()), &want_res, 2e-3, 1e-3);
    assert_close("output", &f16_to_f64(&out.to_vec().unwrap()), &want, 4e-3, 4e-3);
}

#[test]
fn silu_and_mul_on_a_2d_grid() {
    let mut rng = Rng::fresh("silu_and_mul");
    let d = cpu();
    let (rows, dd) = (19, 1500);
    let x = bf16s(&rng.vec(rows * 2 * dd, 3.0));
    let mut out = d.upload(&vec![fuse::half::bf16::NAN; rows * dd]).unwrap();
    silu_and_mul::silu_and_mul::launch::<512>(
        &d,
        (rows as u32, dd.div_ceil(512) as u32),
        &d.upload(&x).unwrap(),
        &mut out,
        dd as i32,
    )
    .unwrap();
    assert_close(
        "silu_and_mul",
        &bf16_to_f64(&out.to_vec().unwrap()),
        &silu_and_mul::reference(&bf16_to_f64(&x), rows, dd),
        1e-3,
        8e-3,
    );
}

#[test]
fn layernorm_quant_codes_and_scales() {
    let mut rng = Rng::fresh("layernorm_quant");
    let d = cpu();
    let (rows, cols) = (23, 900);
    let (x, w, b) = (rng.vec(rows * cols, 3.0), rng.vec(cols, 1.0), rng.vec(cols, 1.0));
    let mut q = d.upload(&vec![i8::MIN; rows * cols]).unwrap();
    let mut scales = d.upload(&vec![f32::NAN; rows]).unwrap();
    layernorm_quant::layernorm_quant::launch::<1024>(
        &d,
        rows as u32,
        &d.upload(&x).unwrap(),
        &d.upload(&w).unwrap(),
        &d.upload(&b).unwrap(),
        &mut q,
        &mut scales,
        cols as i32,
        1e-5,
    )
    .unwrap();
    let (y, want_scales) = layernorm_quant::reference(&f64s(&x), &f64s(&w), &f64s(&b), rows, cols, 1e-5);
    assert_close("scales", &f64s(&scales.to_vec().unwrap()), &want_scales, 1e-9, 1e-5);
    let codes = q.to_vec().unwrap();
    let off_by_one = codes
        .iter()
        .enumerate()
        .filter(|&(i, &c)| {
            let want = (y[i] / want_scales[i / cols]).round();
            let diff = (f64::from(c) - want).abs();
            assert!(diff <= 1.0, "code {i}: {c} vs {want}");
            diff == 1.0
        })
        .count();
    assert!(off_by_one * 1000 <= codes.len(), "{off_by_one} codes off by one");
    assert!(codes.iter().any(|&c| c == 127 || c == -127), "the row maximum maps to ±127");
}

#[test]
fn l2norm_including_a_zero_row() {
    let mut rng = Rng::fresh("l2norm");
    let d = cpu();
    let (rows, cols) = (17, 1000);
    let mut x = rng.vec(rows * cols, 2.0);
    x[..cols].iter_mut().for_each(|v| *v = 0.0);
    let mut out = d.upload(&vec![f32::NAN; rows * cols]).unwrap();
    l2norm::l2norm::launch::<1024>(&d, rows as u32, &d.upload(&x).unwrap(), &mut out, cols as i32, 1e-12)
        .unwrap();
    assert_close(
        "l2norm",
        &f64s(&out.to_vec().unwrap()),
        &l2norm::reference(&f64s(&x), rows, cols, 1e-12),
        1e-7,
        1e-5,
    );
}

#[test]
fn softmax_rows_and_layernorm_rows_on_ragged_shapes() {
    fn case<T: Elem>(rng: &mut Rng, tol: f64) {
        let d = cpu();
        let name = T::NAME;
        // A ragged last program (37 rows of 16 per program), rows that are not a power of two,
        // a tile mostly masked (5x7 in a [64, 16] tile), and the bench widths.
        for (rows, cols) in [(37usize, 100usize), (50, 250), (5, 7), (33, 128), (19, 256), (3, 1000)] {
            let x = T::from_f32s(&rng.vec(rows * cols, 4.0));
            let (w, b) = (T::from_f32s(&rng.vec(cols, 1.0)), T::from_f32s(&rng.vec(cols, 1.0)));
            let want = softmax::reference(&T::to_f64s(&x), rows, cols);
            let got = softmax_rows_on(&d, &x, rows, cols);
            assert_close(&format!("softmax_rows {name} {rows}x{cols}"), &got, &want, tol * 1e-2, tol);
            let want =
                layernorm::reference(&T::to_f64s(&x), &T::to_f64s(&w), &T::to_f64s(&b), rows, cols, 1e-5);
            let got = layernorm_rows_on(&d, &x, &w, &b, rows, cols);
            assert_close(&format!("layernorm_rows {name} {rows}x{cols}"), &got, &want, tol, tol);
        }
    }
    let mut rng = Rng::fresh("softmax_rows/layernorm_rows");
    case::<f32>(&mut rng, 2e-5);
    case::<f16>(&mut rng, 4e-3);
    case::<bf16>(&mut rng, 1.6e-2);
}

#[test]
fn qk_norm_rope_neox_and_gptj_in_place_v_untouched() {
    use qk_norm_rope::Heads;
    fn case<T: Elem>(rng: &mut Rng, atol: f64, rtol: f64) {
        let d = cpu();
        // The bench's heads (32 q + 8 k + 8 v of 128), heads straddling q and k in one program
        // (6 + 3 with 8 per program), a head width that is not a power of two (96 in 128 lanes).
        let shapes = [
            (11, Heads { q: 32, k: 8, v: 8, dim: 128 }),
            (6, Heads { q: 6, k: 3, v: 3, dim: 128 }),
            (5, Heads { q: 4, k: 2, v: 1, dim: 96 }),
            (4, Heads { q: 12, k: 4, v: 4, dim: 64 }),
        ];
        for (tokens, h) in shapes {
            let c = QkCase::<T>::random(rng, tokens, h);
            for neox in [true, false] {
                let what = format!("qk_norm_rope {} neox={neox} {tokens}x{h:?}", T::NAME);
                c.check(&what, &c.run_on(&d, neox), neox, atol, rtol);
            }
        }
    }
    let mut rng = Rng::fresh("qk_norm_rope");
    case::<f32>(&mut rng, 2e-5, 2e-5);
    case::<f16>(&mut rng, 2e-3, 2e-3);
    case::<bf16>(&mut rng, 1e-2, 8e-3);
}

#[test]
fn float_constants_are_each_types_values() {
    // `T::INFINITY` .. `T::EPSILON` of f32, f16 and bf16 as the kernel stores them (README's
    // table): Rust's and the `half` crate's values, NaN a NaN.
    fn case<T: Elem>(want: [f64; 7]) {
        let d = cpu();
        let mut out = d.upload(&vec![T::from_f32s(&[1.5])[0]; 8]).unwrap();
        paths::float_consts::launch::<T>(&d, 1, &mut out).unwrap();
        let got = T::to_f64s(&out.to_vec().unwrap());
        for (k, (&g, &w)) in got.iter().zip(want.iter().chain([0.0].iter())).enumerate() {
            if w.is_nan() {
                assert!(g.is_nan(), "{} constant {k}: {g}, want NaN", T::NAME);
            } else {
                assert_eq!(g, w, "{} constant {k}", T::NAME);
            }
        }
    }
    let f = |m: f64, mp: f64, e: f64| [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, m, -m, mp, e];
    case::<f32>(f(f32::MAX.into(), f32::MIN_POSITIVE.into(), f32::EPSILON.into()));
    case::<f16>(f(f16::MAX.into(), f16::MIN_POSITIVE.into(), f16::EPSILON.into()));
    case::<bf16>(f(bf16::MAX.into(), bf16::MIN_POSITIVE.into(), bf16::EPSILON.into()));
}

#[test]
fn qk_norm_rope_refuses_an_odd_head_width() {
    // RoPE pairs the columns: an odd width is a launch error, and the tensor is left as it was.
    let d = cpu();
    let h = qk_norm_rope::Heads { q: 2, k: 1, v: 1, dim: 65 };
    let tokens = 3;
    let input: Vec<f32> = (0..tokens * 4 * 65).map(|i| i as f32).collect();
    let mut qkv = d.upload(&input).unwrap();
    let pos = d.upload(&vec![0i64; tokens]).unwrap();
    let (cs, w) = (d.upload(&vec![1.0f32; 8 * 65]).unwrap(), d.upload(&vec![1.0f32; 65]).unwrap());
    for neox in [true, false] {
        let err = qk_norm_rope::launch(&d, None, tokens, 4, &mut qkv, &pos, &cs, &w, &w, h, 1e-6, neox)
            .expect_err("an odd head width must be refused");
        assert!(matches!(err, fuse::Error::InvalidLaunch(ref m) if m.contains("odd")), "{err}");
    }
    assert_eq!(qkv.to_vec().unwrap(), input);
}

#[test]
fn qk_norm_rope_styles_differ() {
    // The two pairings must give different results (the check above can tell them apart).
    let mut rng = Rng::fresh("qk_norm_rope styles");
    let c = QkCase::<f32>::random(&mut rng, 3, qk_norm_rope::Heads { q: 2, k: 1, v: 1, dim: 64 });
    let (neox, gptj) = (c.run_on(&cpu(), true), c.run_on(&cpu(), false));
    let differ = neox.iter().zip(&gptj).filter(|(a, b)| (**a - **b).abs() > 1e-3).count();
    assert!(
        differ > neox.len() / 4,
        "NeoX and GPT-J agree on {} of {} elements",
        neox.len() - differ,
        neox.len()
    );
}

#[test]
fn cross_entropy_online_logsumexp_with_ignore_index() {
    fn case<T: Elem>(rng: &mut Rng) {
        // A vocabulary in one block, a ragged last block, GPT-2's vocabulary (13 blocks), rows of
        // whole blocks (and one past the block of their aligned start), and one column.
        for (rows, cols) in [(16usize, 1000usize), (21, 5000), (5, 50257), (9, 4096), (11, 8185), (6, 1)] {
            let (x, labels) = cross_entropy_inputs::<T>(rng, rows, cols, 5, 3);
            let got = cross_entropy_on(&cpu(), &x, &labels, cols);
            let want = cross_entropy::reference(&T::to_f64s(&x), &labels, cols, cross_entropy::IGNORE_INDEX);
            let what = format!("cross_entropy {} {rows}x{cols}", T::NAME);
            assert_close(&what, &f64s(&got), &want, 2e-5, 2e-6);
            for (r, &l) in labels.iter().enumerate() {
                if l == cross_entropy::IGNORE_INDEX {
                    assert_eq!(got[r].to_bits(), 0.0f32.to_bits(), "{what}: ignored row {r} must be +0");
                }
            }
        }
    }
    let mut rng = Rng::fresh("cross_entropy");
    case::<f32>(&mut rng);
    case::<bf16>(&mut rng);
    case::<f16>(&mut rng);
}

#[test]
fn cross_entropy_label_out_of_range_is_nan_not_a_read() {
    let mut rng = Rng::fresh("cross_entropy bad labels");
    let (rows, cols) = (4, 300);
    let x = rng.vec(rows * cols, 2.0);
    // Past the row (inside the buffer: it would read the next row), negative, far past the buffer.
    let labels = [cols as i64, -1, 7, i64::MAX];
    let got = cross_entropy_on(&cpu(), &x, &labels, cols);
    assert!(got[0].is_nan() && got[1].is_nan() && got[3].is_nan(), "{got:?}");
    let row2 = cross_entropy::reference(&f64s(&x[2 * cols..3 * cols]), &[7], cols, -100);
    assert_close("the valid row", &f64s(&got[2..3]), &row2, 2e-5, 2e-6);
}

#[test]
fn add_gelu_and_add_silu_update_the_residual() {
    use add_activation::Act;
    fn case<T: Elem>(rng: &mut Rng, atol: f64, rtol: f64) {
        let n = 37 * 1000 + 13; // a ragged last program
        let (x, res) = (T::from_f32s(&rng.vec(n, 6.0)), T::from_f32s(&rng.vec(n, 6.0)));
        for act in [Act::Gelu, Act::Silu] {
            let (got_res, got) = add_activation_on(&cpu(), act, &x, &res);
            let (want_res, want) =
                add_activation::reference(&T::to_f64s(&x), &T::to_f64s(&res), act, bias_gelu_dropout::erf64);
            let what = format!("{} {}", act.name(), T::NAME);
            assert_close(&format!("{what} residual"), &got_res, &want_res, atol, rtol);
            assert_close(&format!("{what} output"), &got, &want, atol, rtol);
        }
    }
    let mut rng = Rng::fresh("add_activation");
    case::<f32>(&mut rng, 1e-6, 1e-6);
    case::<f16>(&mut rng, 1e-4, 1e-3);
    case::<bf16>(&mut rng, 1e-3, 8e-3);
}

/// `bias_gelu_dropout16` (the mask from `rand16`) on the CPU interpreter, f32 and f16: the mask is
/// `fuse_ir::philox::rand16`'s lane for lane, kept values are gelu / (1 - p) against float64,
/// dropped ones exactly 0, the kept fraction within 4 sigma of 1 - p (p rounded to 2^-16, which
/// moves 0.25 not at all), the same seed gives the same bits and another seed another mask.
#[test]
fn bias_gelu_dropout16_matches_reference_and_statistics() {
    let mut rng = Rng::fresh("bias_gelu_dropout16");
    let d = cpu();
    let (rows, h) = (61, 520); // h not a multiple of 8: rows start mid Philox block
    let n = rows * h;
    let (x, bias) = (rng.vec(n, 3.0), rng.vec(h, 1.0));
    let p = 0.25f32;
    let run32 = |seed: u64| {
        let mut out = d.upload(&vec![f32::NAN; n]).unwrap();
        bias_gelu_dropout::bias_gelu_dropout16::launch::<f32, 1024>(
            &d,
            n.div_ceil(1024) as u32,
            &d.upload(&x).unwrap(),
            &d.upload(&bias).unwrap(),
            &mut out,
            seed,
            p,
            n as i32,
            h as i32,
        )
        .unwrap();
        out.to_vec().unwrap()
    };
    let (xh, bh) = (f16s(&x), f16s(&bias));
    let run16 = |seed: u64| {
        let mut out = d.upload(&vec![f16::NAN; n]).unwrap();
        bias_gelu_dropout::bias_gelu_dropout16::launch::<f16, 1024>(
            &d,
            n.div_ceil(1024) as u32,
            &d.upload(&xh).unwrap(),
            &d.upload(&bh).unwrap(),
            &mut out,
            seed,
            p,
            n as i32,
            h as i32,
        )
        .unwrap();
        out.to_vec().unwrap().iter().map(|v| v.to_f32()).collect::<Vec<f32>>()
    };
    let gelu32 = bias_gelu_dropout::reference_gelu(&f64s(&x), &f64s(&bias), h);
    let to64 = |v: &[f16]| v.iter().map(|x| f64::from(x.to_f32())).collect::<Vec<f64>>();
    let gelu16 = bias_gelu_dropout::reference_gelu(&to64(&xh), &to64(&bh), h);
    let seed = rng.next_u64();
    for (what, out, gelu, tol) in [("f32", run32(seed), &gelu32, 1e-5), ("f16", run16(seed), &gelu16, 2e-3)] {
        let mut kept = 0usize;
        for i in 0..n {
            assert!(!out[i].is_nan(), "{what}: element {i} unwritten or NaN");
            let keep = fuse::fuse_ir::philox::rand16(seed, i as u64) > p;
            if keep {
                kept += 1;
                let want = gelu[i] / (1.0 - f64::from(p));
                assert!(
                    (f64::from(out[i]) - want).abs() <= tol + tol * want.abs(),
                    "{what} kept {i}: {} vs {want}",
                    out[i]
                );
            } else {
                assert_eq!(out[i], 0.0, "{what}: dropped element {i} must be exactly 0");
            }
        }
        let frac = kept as f64 / n as f64;
        let sigma = (f64::from(p) * (1.0 - f64::from(p)) / n as f64).sqrt();
        assert!((frac - (1.0 - f64::from(p))).abs() <= 4.0 * sigma, "{what}: kept fraction {frac}");
    }
    let out = run32(seed);
    assert_eq!(run32(seed), out, "same seed, same output");
    let other = run32(seed.wrapping_add(1));
    let differ = out.iter().zip(&other).filter(|(a, b)| (**a == 0.0) != (**b == 0.0)).count();
    assert!(differ > n / 10, "another seed must give another mask ({differ} differences)");
}

/// `rand16` on the CPU interpreter against `fuse_ir::philox::rand16` bit for bit, at aligned and
/// unaligned starts, and its `>`, `<`, `>=` tests for p at, between and beside the 2^-16 steps.
#[test]
fn rand16_is_the_reference_lane_for_lane() {
    let mut rng = Rng::fresh("rand16 cpu");
    let d = cpu();
    let n = 3000;
    let mut ps = vec![
        f32::NAN,
        -1.0,
        0.0,
        1e-30,
        2f32.powi(-17),
        2f32.powi(-16),
        0.1,
        0.5,
        1.0 - 2f32.powi(-17),
        1.0,
        2.0,
    ];
    ps.extend((0..4).map(|_| (rng.next_u64() % 65536) as f32 / 65536.0));
    for (k, p) in ps.into_iter().enumerate() {
        let (seed, base) = (rng.next_u64(), [0i32, 3, 8, 5][k % 4]);
        let mut out = d.upload(&vec![f32::NAN; n]).unwrap();
        let mut vals = d.upload(&vec![f32::NAN; n]).unwrap();
        paths::rand16_threshold::launch::<1024>(
            &d,
            n.div_ceil(1024) as u32,
            &mut out,
            &mut vals,
            seed,
            p,
            base,
            n as i32,
        )
        .unwrap();
        let (out, vals) = (out.to_vec().unwrap(), vals.to_vec().unwrap());
        for i in 0..n {
            let r = fuse::fuse_ir::philox::rand16(seed, (i as i32 + base) as u64);
            assert_eq!(vals[i].to_bits(), r.to_bits(), "p={p} base={base} i={i}");
            let want = f32::from(u8::from(r > p))
                + 2.0 * f32::from(u8::from(p < r))
                + 4.0 * f32::from(u8::from(r >= p));
            assert_eq!(out[i].to_bits(), want.to_bits(), "p={p} base={base} i={i} r={r}");
        }
    }
}

// ---- `KernelSpec::cost` against hand counts (fuse_runtime::cost's rules) ----

use fuse::CostArg::{Int, Len, F32};

/// add_mul: 2 FLOPs per lane of the 1024-lane tile (masked lanes too), 3 reads and 1 write of
/// exactly `n` elements (the mask `offs < n` narrows the range), no transcendentals.
#[test]
fn cost_add_mul_by_hand() {
    for (n, grid) in [(1000u64, 1u32), (4096, 4), (1_000_003, 977)] {
        let c = add_mul::add_mul::f32::SPEC
            .cost(&[1024], grid, &[Len(n), Len(n), Len(n), Len(n), Int(n.into())])
            .unwrap();
        assert_eq!(c.programs, u64::from(grid));
        assert_eq!(c.flops, 2 * 1024 * u64::from(grid), "n={n}");
        assert_eq!((c.transcendentals, c.dot_flops, c.philox_calls), (0, 0, 0));
        assert_eq!(c.bytes_read(), 12 * n);
        assert_eq!(c.bytes_written(), 4 * n);
        assert_eq!(c.bytes(), 16 * n);
        assert!(c.exact && c.buffers.iter().all(|b| b.proven && b.range == (0, n)), "{c:?}");
        assert!((c.intensity() - (2 * 1024 * u64::from(grid)) as f64 / (16 * n) as f64).abs() < 1e-12);
    }
    // f16: the same FLOPs, half the bytes; buffers longer than `n` count only `n`.
    let c = add_mul::add_mul::f16::SPEC
        .cost(&[1024], 4u32, &[Len(9000), Len(9000), Len(9000), Len(9000), Int(4096)])
        .unwrap();
    assert_eq!((c.flops, c.bytes()), (8192, 8 * 4096));
}

/// softmax (one row per program, BLOCK 1024 over 1000 columns, 37 rows): per program max (1023)
/// and subtract (1024), the `* log2 e` (1024), the sum (1023), one scalar division, the final
/// multiply (1024): 5119 FLOPs and 1024 `exp2`; bytes 37 x 1000 in and out.
#[test]
fn cost_softmax_by_hand() {
    let rows = 37u64;
    let c = softmax::softmax::f32::SPEC
        .cost(&[1024], rows as u32, &[Len(rows * 1000), Len(rows * 1000), Int(1000), Int(1000), Int(1000)])
        .unwrap();
    assert_eq!(c.flops, 5119 * rows);
    assert_eq!(c.transcendentals, 1024 * rows);
    assert_eq!((c.bytes_read(), c.bytes_written()), (4 * rows * 1000, 4 * rows * 1000));
    // A stride wider than the row: the hull counts the gaps (documented), but never past the buffer.
    let c = softmax::softmax::f32::SPEC
        .cost(&[1024], 3u32, &[Len(3 * 1500), Len(3 * 1500), Int(1500), Int(1500), Int(1000)])
        .unwrap();
    assert_eq!(c.bytes_read(), 4 * (2 * 1500 + 1000));
}

/// LayerNorm (f32, 1000 columns, BLOCK 1024, 37 rows): per program 1 (1 / n, counted from the IR
/// though the runtime computes it once per launch) + 1023 + 1 (mean)
/// + 1024 (xs - mean) + 1024 + 1023 + 1 + 1 (variance + eps) + 3 x 1024 (xc * rstd * w + b) =
/// 7170 FLOPs and one rsqrt; bytes: x and y 37 x 1000 each, w and b 1000 each (read once).
#[test]
fn cost_layernorm_by_hand() {
    let rows = 37u64;
    let n = rows * 1000;
    let c = layernorm::layernorm::f32::SPEC
        .cost(&[1024], rows as u32, &[Len(n), Len(n), Len(1000), Len(1000), Int(1000), Int(1000), F32(1e-5)])
        .unwrap();
    assert_eq!(c.flops, 7170 * rows);
    assert_eq!(c.transcendentals, rows);
    assert_eq!(c.bytes(), 4 * (2 * n + 2000));
    assert_eq!(c.bytes_read(), 4 * (n + 2000));
    assert!(c.exact, "{:?}", c.notes);
}

/// The tensor-core matmul example (f16, 64 x 64 x 64 in 32 x 32 x 32 blocks: 4 programs, 2 trips
/// of the K loop): 2 M N K FLOPs of `dot`; with `gelu != 0` also the epilogue per element of C
/// (bias add, 0.5 *, * 0.7071, 1 +, the product: 5 FLOPs and one erf) and the bias read.
#[test]
fn cost_matmul_by_hand() {
    let spec = &matmul_example::matmul::f16::SPEC;
    let (m, n, k) = (64u64, 64u64, 64u64);
    let args =
        |gelu: i32| [Len(m * k), Len(k * n), Len(n), Len(m * n), Int(64), Int(64), Int(64), Int(gelu.into())];
    let c = spec.cost(&[32, 32, 32], 4u32, &args(0)).unwrap();
    assert_eq!(c.dot_flops, 2 * m * n * k);
    assert_eq!(c.flops, 2 * m * n * k);
    assert_eq!(c.transcendentals, 0);
    assert_eq!(c.bytes(), 2 * (m * k + k * n + m * n), "bias not read: {:?}", c.buffers);
    assert!(c.exact, "{:?}", c.notes);
    let c = spec.cost(&[32, 32, 32], 4u32, &args(1)).unwrap();
    assert_eq!(c.flops, 2 * m * n * k + 5 * m * n);
    assert_eq!(c.transcendentals, m * n);
    assert_eq!(c.bytes(), 2 * (m * k + k * n + m * n + n));
    // k not a multiple of BK: the loop runs cdiv(k, BK) times.
    let c = spec
        .cost(
            &[32, 32, 32],
            4u32,
            &[Len(64 * 80), Len(80 * 64), Len(64), Len(64 * 64), Int(64), Int(64), Int(80), Int(0)],
        )
        .unwrap();
    assert_eq!(c.dot_flops, 4 * 3 * 2 * 32 * 32 * 32);
}

/// bias+GELU+dropout: per lane the bias add, `half_scale *` (GELU's 1/2 and the dropout scale in
/// one), `* 0.7071`, `1 +` and the product (5 FLOPs) plus one scalar `1 - p` and `0.5 / (1 - p)`
/// per program, one erf per lane; one Philox call per 4 lanes (`rand`) or per 8 (`rand16`); bytes
/// 2n + h elements.
#[test]
fn cost_bias_gelu_dropout_by_hand() {
    let (rows, h) = (8u64, 512u64);
    let n = rows * h;
    let args = [Len(n), Len(h), Len(n), Int(7), F32(0.1), Int(n.into()), Int(h.into())];
    for (spec, per_call) in [
        (&bias_gelu_dropout::bias_gelu_dropout::f16::SPEC, 4),
        (&bias_gelu_dropout::bias_gelu_dropout16::f16::SPEC, 8),
    ] {
        let c = spec.cost(&[1024], 4u32, &args).unwrap();
        assert_eq!(c.flops, 4 * (5 * 1024 + 2), "{}", spec.name());
        assert_eq!(c.transcendentals, 4 * 1024);
        assert_eq!(c.philox_calls, 4 * 1024 / per_call);
        assert_eq!(c.bytes(), 2 * (2 * n + h));
    }
}

mod gather_kernel {
    use fuse::fused_kernel;
    /// `out[i] = src[idx[i]]`: offsets read from memory.
    #[fused_kernel]
    pub fn gather<const BLOCK: usize>(idx: *const i32, src: *const f32, out: *mut f32, n: i32) {
        let offs = program_id(0) * BLOCK + arange(0, BLOCK);
        let m = offs < n;
        let i = load(idx + offs, m);
        store(out + offs, load(src + i, m), m);
    }
}

/// A gather (offsets from loaded values) cannot be bounded: the whole buffer counts, flagged.
/// Wrong arguments are errors that say what is wrong, not panics.
#[test]
fn cost_of_an_unbounded_access_is_the_whole_buffer_and_flagged() {
    let c =
        gather_kernel::gather::SPEC.cost(&[256], 2u32, &[Len(500), Len(7777), Len(500), Int(500)]).unwrap();
    assert_eq!(c.bytes(), 4 * (500 + 7777 + 500));
    assert!(!c.exact);
    let src = &c.buffers[1];
    assert!(!src.proven && src.read && !src.written && src.range == (0, 7777), "{src:?}");
    assert!(c.buffers[0].proven && c.buffers[2].proven);
    assert!(c.notes.iter().any(|n| n.contains("`src`")), "{:?}", c.notes);
    assert_eq!(c.flops, 0);

    let e = add_mul::add_mul::f32::SPEC
        .cost(&[1024], 1u32, &[Len(1), Len(1), Len(1), Int(1), Int(1)])
        .unwrap_err();
    assert!(e.to_string().contains("parameter `out` needs a buffer length"), "{e}");
    let e =
        add_mul::add_mul::f32::SPEC.cost(&[], 1u32, &[Len(1), Len(1), Len(1), Len(1), Int(1)]).unwrap_err();
    assert!(e.to_string().contains("const generics"), "{e}");
    let e = add_mul::add_mul::f32::SPEC.cost(&[1024], 1u32, &[Len(1), Len(1)]).unwrap_err();
    assert!(e.to_string().contains("arguments"), "{e}");
}

/// A loop whose trip count differs between programs (a causal-style bound on `program_id`)
/// counts its most trips and says so.
mod ragged_kernel {
    use fuse::fused_kernel;
    #[fused_kernel]
    pub fn ragged<const BLOCK: usize>(x: *const f32, out: *mut f32) {
        let row = program_id(0);
        let cols = arange(0, BLOCK);
        let mut acc = zeros(BLOCK);
        for j in 0..row + 1 {
            acc += load(x + j * BLOCK + cols);
        }
        store(out + row * BLOCK + cols, acc);
    }
}

#[test]
fn cost_of_a_ragged_loop_counts_the_most_trips_and_says_so() {
    let c = ragged_kernel::ragged::SPEC.cost(&[64], 4u32, &[Len(256), Len(256)]).unwrap();
    assert_eq!(c.flops, 4 * 4 * 64, "4 programs x at most 4 trips x 64 adds");
    assert!(!c.exact);
    assert!(c.notes.iter().any(|n| n.contains("1 to 4 times")), "{:?}", c.notes);
    assert_eq!(c.bytes(), 4 * (256 + 256));
}

/// `fuse::cost::record_costs` records each launch's cost (the same as `KernelSpec::cost` for
/// that launch), across launches, until `take_recorded_costs`; nothing is recorded otherwise.
#[test]
fn launches_record_their_cost_while_recording() {
    let d = cpu();
    let n = 3000usize;
    let x = d.upload(&vec![1.0f32; n]).unwrap();
    let mut o = d.zeros::<f32>(n).unwrap();
    add_mul::add_mul::launch::<f32, 1024>(&d, 3, &x, &x, &x, &mut o, n as i32).unwrap();
    assert!(fuse::cost::take_recorded_costs().is_empty());
    fuse::cost::record_costs();
    add_mul::add_mul::launch::<f32, 1024>(&d, 3, &x, &x, &x, &mut o, n as i32).unwrap();
    add_mul::add_mul::launch::<f32, 1024>(&d, 2, &x, &x, &x, &mut o, 2048).unwrap();
    let got = fuse::cost::take_recorded_costs();
    assert_eq!(got.len(), 2);
    let want = add_mul::add_mul::f32::SPEC
        .cost(&[1024], 3u32, &[Len(3000), Len(3000), Len(3000), Len(3000), Int(3000)])
        .unwrap();
    assert_eq!(got[0].0, "add_mul_f32");
    assert_eq!(got[0].1.as_ref().unwrap(), &want);
    assert_eq!(got[1].1.as_ref().unwrap().bytes(), 16 * 2048);
    add_mul::add_mul::launch::<f32, 1024>(&d, 3, &x, &x, &x, &mut o, n as i32).unwrap();
    assert!(fuse::cost::take_recorded_costs().is_empty(), "recording stopped");
}

/// The scalars the runtime computes at each launch (fuse-ir's host_scalars.rs): LayerNorm's
/// `1 / n_cols` and dropout's `0.5 / (1 - p)` are found, evaluate to the f32 the device's IEEE `/`
/// gives, and a source that does not declare them as parameters is refused.
#[test]
fn divisions_of_arguments_are_computed_by_the_host_with_f32_rounding() {
    use fuse::fuse_ir::{HostScalar, Kernel};
    fn only(k: &Kernel, var: &str) -> fuse::fuse_ir::HostProgram {
        let hs = k.host_scalars();
        assert_eq!(hs.len(), 1, "{}", k.name);
        assert_eq!(k.var(hs[0].var()).name, var, "{}", k.name);
        hs.into_iter().next().unwrap()
    }
    let param = |k: &Kernel, name: &str| k.params.iter().position(|p| p.name == name).unwrap() as u32;
    for spec in [&layernorm::layernorm::f32::SPEC, &layernorm::layernorm::f16::SPEC] {
        let k = spec.kernel().unwrap();
        let (program, n_cols) = (only(k, "inv_n"), param(k, "n_cols"));
        for n in [1i32, 3, 7, 1000, 50257, 0] {
            let got = program.eval(&|p| (p == n_cols).then_some(HostScalar::Int(n.into())), &[1024]);
            assert_eq!(got, Some(HostScalar::Float(f64::from(1.0f32 / n as f32))), "{} n = {n}", k.name);
            assert_eq!(got.unwrap().launch_word(), u64::from((1.0f32 / n as f32).to_bits()));
        }
    }
    let k = bias_gelu_dropout::bias_gelu_dropout::f32::SPEC.kernel().unwrap();
    let (program, p_index) = (only(k, "half_scale"), param(k, "p"));
    for p in [0.0f32, 0.1, 0.3, 0.999_999, 1.0] {
        let got = program.eval(&|q| (q == p_index).then_some(HostScalar::Float(p.into())), &[1024]);
        assert_eq!(got, Some(HostScalar::Float(f64::from(0.5f32 / (1.0 - p)))), "p = {p}");
    }
    // The source and the IR disagree: the runtime says so instead of launching with the wrong words.
    let spec = &layernorm::layernorm::f32::SPEC;
    let source: &'static str = Box::leak(spec.source().replace("fuse_host0", "renamed").into_boxed_str());
    let bad: &'static fuse::KernelSpec = Box::leak(Box::new(fuse::KernelSpec::new(
        spec.name(),
        source,
        spec.ir_json(),
        spec.specializations(),
    )));
    let e = bad.kernel().unwrap_err().to_string();
    assert!(e.contains("takes 0 host-computed scalars but the IR has 1"), "{e}");
}
