//! Row kernels: softmax and LayerNorm (one tile per row, looped, several narrow rows per program),
//! RMSNorm with the residual add, L2 norm, LayerNorm + int8 quantisation, cross-entropy, and axis-1
//! reductions in warp slabs. Each body runs on the CPU interpreter and on a GPU
//! (tests/common/backend.rs: `name/cpu`, `name/gpu`, the latter ignored without a GPU), on fresh
//! random inputs into NaN-poisoned outputs, against float64; beside a GPU also against the
//! interpreter.
mod common;

use common::backend::{assert_close_on, every_backend, gpu_only, name, per_backend, with_cpu};
use common::*;
use fuse::half::{bf16, f16};
use fuse::{Device, LaunchConfig};
use fuse_testkit::harness;

/// Row-wise softmax of `x` (`rows` x `cols`, one tile of `B` per row) against float64.
fn softmax_case<T: Elem, const B: usize>(d: &Device, x: &[T], (rows, cols): (usize, usize), tol: (f64, f64)) {
    let want = softmax::reference(&T::to_f64s(x), rows, cols);
    let what = format!("softmax {} {rows}x{cols}", T::NAME);
    assert_close_on(d, &what, &want, tol, tol, |dev| softmax_on::<T, B>(dev, x, rows, cols));
}

/// softmax in f32, f16 and bf16 over 67 rows of 1000 on the CPU; in f32 on a GPU from one element
/// to rows of a whole 4096-lane tile.
fn softmax(d: &Device) {
    let mut rng = Rng::fresh("softmax");
    if d.is_cuda() {
        for shape in [(1usize, 1usize), (5, 100), (64, 1000), (17, 4096)] {
            let x = rng.vec(shape.0 * shape.1, 4.0);
            softmax_case::<f32, 4096>(d, &x, shape, (1e-7, 1e-5));
        }
    } else {
        let shape = (67, 1000);
        let x = rng.vec(shape.0 * shape.1, 5.0);
        softmax_case::<f32, 1024>(d, &x, shape, (1e-7, 1e-5));
        softmax_case::<f16, 1024>(d, &f16s(&x), shape, (1e-4, 2e-3));
        softmax_case::<bf16, 1024>(d, &bf16s(&x), shape, (1e-6, 4e-3));
    }
}

/// LayerNorm (eps 1e-5) of `x` with weight `w` and bias `b`, one tile of `B` per row, against
/// float64.
fn layernorm_case<T: Elem, const B: usize>(
    d: &Device,
    [x, w, b]: [&[T]; 3],
    (rows, cols): (usize, usize),
    tol: (f64, f64),
) {
    let want = layernorm::reference(&T::to_f64s(x), &T::to_f64s(w), &T::to_f64s(b), rows, cols, 1e-5);
    let what = format!("layernorm {} {rows}x{cols}", T::NAME);
    assert_close_on(d, &what, &want, tol, tol, |dev| layernorm_on::<T, B>(dev, x, w, b, rows, cols));
}

/// The looped f32 LayerNorm (`layernorm_wide`, column blocks of `B` on `warps` warps) against
/// float64, beside a GPU on the CPU too.
fn layernorm_wide_case<const B: usize>(
    d: &Device,
    warps: u32,
    [x, w, b]: [&[f32]; 3],
    (rows, cols): (usize, usize),
    (atol, rtol): (f64, f64),
) {
    let want = layernorm::reference(&f64s(x), &f64s(w), &f64s(b), rows, cols, 1e-5);
    for dev in with_cpu(d) {
        let got = layernorm_wide_on::<B>(&dev, warps, x, w, b, rows, cols);
        let what = format!("layernorm_wide {rows}x{cols} on the {}", name(&dev));
        assert_close(&what, &got, &want, atol, rtol);
    }
}

/// LayerNorm in one tile per row and looped over column blocks: on the CPU 33 rows of 1500 with a
/// mean away from 0, f32, f16 and bf16; on a GPU f32 from one element to rows of a whole
/// 4096-lane tile.
fn layernorm_one_tile_and_looped(d: &Device) {
    let mut rng = Rng::fresh("layernorm");
    if d.is_cuda() {
        for shape in [(1usize, 1usize), (5, 100), (64, 1000), (17, 4096)] {
            let x = rng.vec(shape.0 * shape.1, 4.0);
            let (w, b) = (rng.vec(shape.1, 1.0), rng.vec(shape.1, 1.0));
            layernorm_case::<f32, 4096>(d, [&x, &w, &b], shape, (3e-5, 2e-5));
            layernorm_wide_case::<512>(d, 4, [&x, &w, &b], shape, (3e-5, 2e-5));
        }
    } else {
        let shape = (33, 1500);
        let x: Vec<f32> = rng.vec(shape.0 * shape.1, 3.0).iter().map(|v| v + 0.7).collect();
        let (w, b) = (rng.vec(shape.1, 1.0), rng.vec(shape.1, 1.0));
        layernorm_case::<f32, 2048>(d, [&x, &w, &b], shape, (2e-5, 1e-5));
        layernorm_wide_case::<256>(d, 2, [&x, &w, &b], shape, (2e-5, 1e-5));
        let (xh, wh, bh) = (f16s(&x), f16s(&w), f16s(&b));
        layernorm_case::<f16, 2048>(d, [&xh, &wh, &bh], shape, (4e-3, 4e-3));
        let (xb, wb, bb) = (bf16s(&x), bf16s(&w), bf16s(&b));
        layernorm_case::<bf16, 2048>(d, [&xb, &wb, &bb], shape, (1e-3, 4e-3));
    }
}

/// The generic kernels' half-precision instantiations (add_mul, softmax, LayerNorm in f16 and
/// bf16, 19 rows of 1000) against float64.
fn generic_kernels_in_half_types(d: &Device) {
    fn case<T: Elem>(d: &Device, rng: &mut Rng, tol: f64) {
        let (rows, cols) = (19, 1000);
        let x = T::from_f32s(&rng.vec(rows * cols, 3.0));
        let (w, b) = (T::from_f32s(&rng.vec(cols, 1.0)), T::from_f32s(&rng.vec(cols, 1.0)));
        let name = T::NAME;
        let want = add_mul::reference(&T::to_f64s(&x), &T::to_f64s(&x), &T::to_f64s(&x));
        assert_close_on(d, &format!("add_mul {name}"), &want, (tol, tol), (tol, tol), |dev| {
            add_mul_on::<T, 1024>(dev, None, &x, &x, &x)
        });
        softmax_case::<T, 1024>(d, &x, (rows, cols), (1e-4, tol));
        layernorm_case::<T, 1024>(d, [&x, &w, &b], (rows, cols), (tol, tol));
    }
    let mut rng = Rng::fresh("generic kernels in half types");
    case::<f16>(d, &mut rng, 4e-3);
    case::<bf16>(d, &mut rng, 1.6e-2);
}

/// softmax_rows and layernorm_rows (several narrow rows per program, the tile their launchers
/// pick) in f32, f16 and bf16: a ragged last program (37 rows of 16 per program), rows that are
/// not a power of two, a tile mostly masked (5x7 in a [64, 16] tile), and the bench widths; on a
/// GPU with thousands of rows.
fn softmax_rows_and_layernorm_rows_on_ragged_shapes(d: &Device) {
    fn case<T: Elem>(d: &Device, rng: &mut Rng, tol: f64) {
        let name = T::NAME;
        let shapes: &[(usize, usize)] = per_backend(
            d,
            &[(37, 100), (50, 250), (5, 7), (33, 128), (19, 256), (3, 1000)],
            &[(37, 100), (5, 7), (4099, 128), (1025, 256), (77, 1000)],
        );
        for &(rows, cols) in shapes {
            let x = T::from_f32s(&rng.vec(rows * cols, 4.0));
            let (w, b) = (T::from_f32s(&rng.vec(cols, 1.0)), T::from_f32s(&rng.vec(cols, 1.0)));
            let want = softmax::reference(&T::to_f64s(&x), rows, cols);
            let what = format!("softmax_rows {name} {rows}x{cols}");
            let tols = (tol * 1e-2, tol);
            assert_close_on(d, &what, &want, tols, tols, |dev| softmax_rows_on(dev, &x, rows, cols));
            let want =
                layernorm::reference(&T::to_f64s(&x), &T::to_f64s(&w), &T::to_f64s(&b), rows, cols, 1e-5);
            let what = format!("layernorm_rows {name} {rows}x{cols}");
            assert_close_on(d, &what, &want, (tol, tol), (tol, tol), |dev| {
                layernorm_rows_on(dev, &x, &w, &b, rows, cols)
            });
        }
    }
    let mut rng = Rng::fresh("softmax_rows/layernorm_rows");
    case::<f32>(d, &mut rng, per_backend(d, 2e-5, 3e-5));
    case::<f16>(d, &mut rng, 4e-3);
    case::<bf16>(d, &mut rng, 1.6e-2);
}

/// add_rmsnorm (f16): the residual updated in place (x + residual) and the RMS-normalised output,
/// against float64.
fn add_rmsnorm_updates_the_residual_and_normalises(d: &Device) {
    let mut rng = Rng::fresh("add_rmsnorm");
    let (rows, cols) = (31, 700);
    let (x, res, w) =
        (f16s(&rng.vec(rows * cols, 2.0)), f16s(&rng.vec(rows * cols, 2.0)), f16s(&rng.vec(cols, 1.0)));
    let mut resb = d.upload(&res).unwrap();
    let mut out = d.upload(&vec![f16::NAN; rows * cols]).unwrap();
    add_rmsnorm::add_rmsnorm::launch::<1024>(
        d,
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

/// layernorm_quant: per-row scales against float64, int8 codes within one of the float64 rule's
/// (off by one for at most 1 in 1000), and some row maximum at ±127.
fn layernorm_quant_codes_and_scales(d: &Device) {
    let mut rng = Rng::fresh("layernorm_quant");
    let (rows, cols) = (23, 900);
    let (x, w, b) = (rng.vec(rows * cols, 3.0), rng.vec(cols, 1.0), rng.vec(cols, 1.0));
    let mut q = d.upload(&vec![i8::MIN; rows * cols]).unwrap();
    let mut scales = d.upload(&vec![f32::NAN; rows]).unwrap();
    layernorm_quant::layernorm_quant::launch::<1024>(
        d,
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

/// l2norm against float64, its first row all zeros (the eps keeps it finite).
fn l2norm_including_a_zero_row(d: &Device) {
    let mut rng = Rng::fresh("l2norm");
    let (rows, cols) = (17, 1000);
    let mut x = rng.vec(rows * cols, 2.0);
    x[..cols].iter_mut().for_each(|v| *v = 0.0);
    let mut out = d.upload(&vec![f32::NAN; rows * cols]).unwrap();
    l2norm::l2norm::launch::<1024>(d, rows as u32, &d.upload(&x).unwrap(), &mut out, cols as i32, 1e-12)
        .unwrap();
    assert_close(
        "l2norm",
        &f64s(&out.to_vec().unwrap()),
        &l2norm::reference(&f64s(&x), rows, cols, 1e-12),
        1e-7,
        1e-5,
    );
}

/// cross_entropy (an online log-sum-exp over the row) against float64, in f32, bf16 and (on the
/// CPU) f16, with
/// ignored rows exactly +0, spiked, masked (-inf) and huge logits (tests/common's inputs). On the
/// CPU: a vocabulary in one block, a ragged last block, GPT-2's vocabulary (13 blocks), rows of
/// whole blocks (and one past the block of their aligned start), and one column; on a GPU the
/// bench's vocabularies (fewer rows) and the bench's first shape at full size.
fn cross_entropy_online_logsumexp_with_ignore_index(d: &Device) {
    fn case<T: Elem>(d: &Device, rng: &mut Rng) {
        let (shapes, (every, at), tol): (&[(usize, usize)], _, _) = per_backend(
            d,
            (&[(16, 1000), (21, 5000), (5, 50257), (9, 4096), (11, 8185), (6, 1)], (5, 3), (2e-5, 2e-6)),
            // A loss is a log-sum-exp of `cols` f32 terms less one logit: a GPU's f32 sums, in
            // another order, may be off by several ulps of the sum (1e-4 of float64 for a loss of
            // 27.69 over 32000 columns), hence 1e-5 relative.
            (&[(100, 1000), (64, 50257), (48, 32000), (16, 128256)], (7, 2), (3e-5, 1e-5)),
        );
        for &(rows, cols) in shapes {
            let (x, labels) = cross_entropy_inputs::<T>(rng, rows, cols, every, at);
            let want = cross_entropy::reference(&T::to_f64s(&x), &labels, cols, cross_entropy::IGNORE_INDEX);
            let what = format!("cross_entropy {} {rows}x{cols}", T::NAME);
            let mut got = Vec::new();
            for dev in with_cpu(d) {
                let loss = cross_entropy_on(&dev, &x, &labels, cols);
                assert_close(&format!("{what} on the {}", name(&dev)), &f64s(&loss), &want, tol.0, tol.1);
                for (r, &l) in labels.iter().enumerate() {
                    if l == cross_entropy::IGNORE_INDEX {
                        assert_eq!(loss[r].to_bits(), 0.0f32.to_bits(), "{what}: ignored row {r} must be +0");
                    }
                }
                got.push(f64s(&loss));
            }
            if let [on_gpu, on_cpu] = &got[..] {
                assert_close(&format!("{what} gpu vs cpu"), on_gpu, on_cpu, tol.0, tol.1);
            }
        }
        if d.is_cuda() {
            let (rows, cols) = (4096, 50257);
            let (x, labels) = cross_entropy_inputs::<T>(rng, rows, cols, 7, 2);
            let want = cross_entropy::reference(&T::to_f64s(&x), &labels, cols, cross_entropy::IGNORE_INDEX);
            let what = format!("cross_entropy {} {rows}x{cols} on the GPU", T::NAME);
            assert_close(&what, &f64s(&cross_entropy_on(d, &x, &labels, cols)), &want, tol.0, tol.1);
        }
    }
    let mut rng = Rng::fresh("cross_entropy");
    case::<f32>(d, &mut rng);
    case::<bf16>(d, &mut rng);
    if !d.is_cuda() {
        case::<f16>(d, &mut rng);
    }
}

/// A label outside the row (past it but inside the buffer, negative, far past the buffer) gives a
/// NaN loss, not a read of another row; a valid row beside them is right.
fn cross_entropy_label_out_of_range_is_nan_not_a_read(d: &Device) {
    let mut rng = Rng::fresh("cross_entropy bad labels");
    let (rows, cols) = (4, 300);
    let x = rng.vec(rows * cols, 2.0);
    let labels = [cols as i64, -1, 7, i64::MAX];
    let got = cross_entropy_on(d, &x, &labels, cols);
    assert!(got[0].is_nan() && got[1].is_nan() && got[3].is_nan(), "{got:?}");
    let row2 = cross_entropy::reference(&f64s(&x[2 * cols..3 * cols]), &[7], cols, -100);
    assert_close("the valid row", &f64s(&got[2..3]), &row2, 2e-5, 2e-6);
}

/// Axis-1 reductions in warp slabs (common::paths::row_stats: `[8, N]` f32 rows of 32-1024
/// columns on 1-16 warps, slabs where a row is wider than 32 chunks and the warps divide the
/// rows) against float64; outputs poisoned first. The interpreter ignores the warp count.
fn axis_1_reductions_in_warp_slabs_match_float64(d: &Device) {
    let mut rng = Rng::fresh("row stats");
    let grid = 5usize;
    for n in [32usize, 128, 256, 512, 1024] {
        for w in [1u32, 2, 4, 8, 16] {
            let x = rng.vec(grid * 8 * n, 4.0);
            let wv = rng.vec(n, 2.0);
            // Above a slab's chunk step (32 VEC): `%` steps chunk by chunk; 48 on 1 warp: divided.
            let m = if w == 1 { 48 } else { 1000 + (n as i32 % 7) };
            let case = format!("row_stats N={n} {w} warps");
            let (y, sums, pairs, cols, groups) = paths::row_stats_reference(&x, &wv, n, m, grid);
            for dev in with_cpu(d) {
                let (xb, wb, mb) =
                    (dev.upload(&x).unwrap(), dev.upload(&wv).unwrap(), dev.upload(&[m]).unwrap());
                let mut yb = dev.upload(&vec![f32::NAN; x.len()]).unwrap();
                let mut sb = dev.upload(&vec![f32::NAN; grid * 8]).unwrap();
                let mut pb = dev.upload(&vec![f32::NAN; grid * 2]).unwrap();
                let mut cb = dev.upload(&vec![-1i32; x.len()]).unwrap();
                let mut gb = dev.upload(&vec![f32::NAN; x.len() / 32]).unwrap();
                let cfg = LaunchConfig::new(grid as u32).num_warps(w);
                fuse::with_block!(n, N => paths::row_stats::launch::<N>(&dev, cfg, &xb, &wb, &mb, &mut yb, &mut sb, &mut pb, &mut cb, &mut gb))
                    .unwrap();
                let on = name(&dev);
                for (what, want, got) in
                    [("y", &y, &yb), ("sums", &sums, &sb), ("pairs", &pairs, &pb), ("groups", &groups, &gb)]
                {
                    assert_close(
                        &format!("{case} {what} on the {on}"),
                        &f64s(&got.to_vec().unwrap()),
                        want,
                        1e-5,
                        1e-5,
                    );
                }
                assert!(cb.to_vec().unwrap() == cols, "{case} cols on the {on} differ");
            }
        }
    }
}

/// One-warp variants that need more than the one-warp cap of 64 registers (`FUSE_LAUNCH_BOUNDS`,
/// emit_cuda/lower/finish.rs), which the runtime compiles again without the cap where it spills
/// (cuda/nvrtc.rs `compile_capped`; tests/ptxas_resources.rs checks with NVRTC alone which
/// variants take more than 64 registers, without spills): bias+GELU+dropout f32 `[1024]` against
/// float64 with the CPU's mask, and the one-row LayerNorm f32 `[1024]` against float64 and the
/// CPU, at 1000 columns (aligned and in bounds but masked: ptxas_resources finds that variant
/// over the cap) and 1024 (every fact proven: within the cap), each on one warp.
fn one_warp_variants_past_the_register_cap_match_float64(g: &Device) {
    let mut rng = Rng::fresh("one-warp variants past the cap");
    for (rows, cols) in [(33usize, 1000usize), (8, 1024)] {
        let x = rng.vec(rows * cols, 4.0);
        let (w, b) = (rng.vec(cols, 1.0), rng.vec(cols, 1.0));
        let want = layernorm::reference(&f64s(&x), &f64s(&w), &f64s(&b), rows, cols, 1e-5);
        let what = format!("layernorm [1024] on one warp {rows}x{cols}");
        assert_close_on(g, &what, &want, (3e-5, 2e-5), (3e-5, 2e-5), |d| {
            run_on(d, &[&x, &w, &b], rows * cols, |inputs, y| {
                let grid = LaunchConfig::new(rows as u32).num_warps(1);
                let n = cols as i32;
                layernorm::layernorm::launch::<f32, 1024>(
                    d, grid, inputs[0], y, inputs[1], inputs[2], n, n, 1e-5,
                )
            })
        });
    }
    let (rows, h) = (9, 768);
    let n = rows * h;
    let (x, bias) = (rng.vec(n, 3.0), rng.vec(h, 1.0));
    let seed = rng.next_u64();
    let out = run_on(g, &[&x, &bias], n, |inputs, out| {
        let grid = LaunchConfig::new(n.div_ceil(1024) as u32).num_warps(1);
        bias_gelu_dropout::bias_gelu_dropout::launch::<f32, 1024>(
            g, grid, inputs[0], inputs[1], out, seed, 0.1, n as i32, h as i32,
        )
    });
    let gelu = bias_gelu_dropout::reference_gelu(&f64s(&x), &f64s(&bias), h);
    for i in 0..n {
        let keep = fuse::fuse_ir::philox::rand(seed, i as u64) > 0.1;
        if keep {
            let want = gelu[i] / 0.9;
            assert!(
                (out[i] - want).abs() <= 1e-5 + 1e-5 * want.abs(),
                "bias_gelu_dropout [1024] on one warp kept {i}: {} vs {want}",
                out[i]
            );
        } else {
            assert_eq!(out[i], 0.0, "bias_gelu_dropout [1024] on one warp dropped {i}");
        }
    }
}

fn main() {
    let mut trials = every_backend![
        softmax,
        layernorm_one_tile_and_looped,
        generic_kernels_in_half_types,
        softmax_rows_and_layernorm_rows_on_ragged_shapes,
        add_rmsnorm_updates_the_residual_and_normalises,
        layernorm_quant_codes_and_scales,
        l2norm_including_a_zero_row,
        cross_entropy_online_logsumexp_with_ignore_index,
        cross_entropy_label_out_of_range_is_nan_not_a_read,
        axis_1_reductions_in_warp_slabs_match_float64,
    ];
    trials.extend(gpu_only![one_warp_variants_past_the_register_cap_match_float64]);
    harness::run(trials)
}
