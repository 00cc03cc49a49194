//! Element-wise kernels: add_mul, SiLU-and-multiply, the residual add + GELU/SiLU, the float
//! constants, `erf` and `sigmoid`, gathers whose offsets are remainders or XORs of the lane, and
//! launches that reach past their buffers. Each body runs on the CPU interpreter and on a GPU
//! (tests/common/backend.rs: `name/cpu`, `name/gpu`, the latter ignored without a GPU), on fresh
//! random inputs into NaN-poisoned outputs, against float64 (beside a GPU also against the
//! interpreter).
mod common;

use common::backend::{assert_close_on, every_backend, gpu_only, name, per_backend, with_cpu};
use common::*;
use fuse::half::{bf16, f16};
use fuse::{Buffer, Device};
use fuse_testkit::harness;

/// `add_mul` of `T` at `n` elements in blocks of `B` (`warps`: the runtime's choice if `None`)
/// against float64 within `tol`; with `vs_cpu`, beside a GPU also on the CPU, the two within it.
fn add_mul_case<T: Elem, const B: usize>(
    d: &Device,
    rng: &mut Rng,
    n: usize,
    warps: Option<u32>,
    tol: f64,
    vs_cpu: Option<f64>,
) {
    let (x, y, z) =
        (T::from_f32s(&rng.vec(n, 2.0)), T::from_f32s(&rng.vec(n, 2.0)), T::from_f32s(&rng.vec(n, 2.0)));
    let want = add_mul::reference(&T::to_f64s(&x), &T::to_f64s(&y), &T::to_f64s(&z));
    let what = format!("add_mul {} n={n}", T::NAME);
    let run = |dev: &Device| add_mul_on::<T, B>(dev, warps, &x, &y, &z);
    match vs_cpu {
        Some(v) => {
            assert_close_on(d, &what, &want, (tol, tol), (v, v), run);
        }
        None => assert_close(&format!("{what} on the {}", name(d)), &run(d), &want, tol, tol),
    }
}

/// add_mul: on the CPU in f32, f16 and bf16 at a size that is not a multiple of the block (the tail
/// masked); on a GPU in f32 at sizes around one block and a large one, also against the CPU (the
/// half types on a GPU: rows.rs's `generic_kernels_in_half_types`).
fn add_mul(d: &Device) {
    let mut rng = Rng::fresh("add_mul");
    if d.is_cuda() {
        for n in [1, 1023, 1024, 1025, 1_000_003] {
            add_mul_case::<f32, 1024>(d, &mut rng, n, None, 1e-5, Some(1e-6));
        }
    } else {
        let n = 100_003;
        add_mul_case::<f32, 1024>(d, &mut rng, n, None, 1e-6, None);
        add_mul_case::<f16, 1024>(d, &mut rng, n, None, 1e-3, None);
        // One rounding to bf16 at the store: half a bf16 ulp (2^-9 relative) plus slack.
        add_mul_case::<bf16, 1024>(d, &mut rng, n, None, 4e-3, None);
    }
}

/// add_mul f16 in blocks of 256 lanes on 2 warps at odd sizes (partial vector chunks at the end).
fn add_mul_f16_odd_sizes_in_small_blocks(d: &Device) {
    let mut rng = Rng::fresh("add_mul_f16 odd sizes");
    for n in [7usize, 4097, 65_537] {
        add_mul_case::<f16, 256>(d, &mut rng, n, Some(2), 1e-3, None);
    }
}

/// A launch that claims more elements than its buffers hold is an `OutOfBounds` error, not an
/// access past the end, and the device stays usable; also where a 4-lane chunk straddles the end
/// (the per-lane path, which still reads the last element). The interpreter stops at the first
/// lane past the end and names it; a GPU reports whichever lane it caught first but has computed
/// every lane in bounds. On a GPU the launches run on a device of their own
/// (`harness::isolated_gpu`), so that the error reaches no other test's `synchronize`.
fn out_of_bounds_is_reported_not_performed(d: &Device) {
    let d = &if d.is_cuda() { harness::isolated_gpu() } else { d.clone() };
    let x = d.upload(&vec![1.0f32; 1000]).unwrap();
    let mut out = d.upload(&vec![0.0f32; 1000]).unwrap();
    // Claim 2000 elements: the mask lets lanes 1000.. through, past the buffers' ends.
    let err = add_mul::add_mul::launch::<f32, 1024>(d, 2, &x, &x, &x, &mut out, 2000)
        .and_then(|_| d.synchronize())
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, fuse::Error::OutOfBounds { .. }), "{msg}");
    if d.is_cuda() {
        // In-bounds lanes were still computed.
        assert!(out.to_vec().unwrap().iter().all(|&v| v == 2.0));
    } else {
        assert!(msg.contains('x') && msg.contains("1000"), "names the parameter and index: {msg}");
    }
    // The error was consumed: the device is usable again.
    let mut out2 = d.upload(&vec![0.0f32; 1000]).unwrap();
    add_mul::add_mul::launch::<f32, 1024>(d, 1, &x, &x, &x, &mut out2, 1000).unwrap();
    assert!(out2.to_vec().unwrap().iter().all(|&v| v == 2.0));
    // Above, every 4-lane chunk was wholly in bounds or wholly past the end. With 1001 elements
    // the chunk at 1000..1004 straddles the end: it takes the per-lane path and still reads
    // element 1000.
    let x = d.upload(&vec![1.0f32; 1001]).unwrap();
    let mut out = d.upload(&vec![0.0f32; 1001]).unwrap();
    let r =
        add_mul::add_mul::launch::<f32, 1024>(d, 2, &x, &x, &x, &mut out, 2000).and_then(|_| d.synchronize());
    assert!(matches!(r, Err(fuse::Error::OutOfBounds { .. })), "{r:?}");
    if d.is_cuda() {
        assert!(out.to_vec().unwrap().iter().all(|&v| v == 2.0));
    }
}

/// silu_and_mul (bf16) on a 2-D grid (rows x column blocks), the row width not a multiple of the
/// block.
fn silu_and_mul_on_a_2d_grid(d: &Device) {
    let mut rng = Rng::fresh("silu_and_mul");
    let (rows, dd) = (19, 1500);
    let x = bf16s(&rng.vec(rows * 2 * dd, 3.0));
    let mut out = d.upload(&vec![bf16::NAN; rows * dd]).unwrap();
    silu_and_mul::silu_and_mul::launch::<512>(
        d,
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

/// add_gelu and add_silu: the residual updated in place and the activation's output, in f32, f16
/// and bf16, against float64; beside a GPU the residual (exact arithmetic) equal to the CPU's and
/// the output within tolerance of it. On the CPU one ragged size, on a GPU one element, a block and
/// one past it, and a large ragged size.
fn add_gelu_and_add_silu_update_the_residual(d: &Device) {
    use add_activation::Act;
    fn case<T: Elem>(d: &Device, rng: &mut Rng, atol: f64, rtol: f64) {
        let sizes: &[usize] = per_backend(d, &[37 * 1000 + 13], &[1, 1025, 1000 * 4096 + 3]);
        for &n in sizes {
            let (x, res) = (T::from_f32s(&rng.vec(n, 6.0)), T::from_f32s(&rng.vec(n, 6.0)));
            for act in [Act::Gelu, Act::Silu] {
                let (want_res, want) = add_activation::reference(
                    &T::to_f64s(&x),
                    &T::to_f64s(&res),
                    act,
                    bias_gelu_dropout::erf64,
                );
                let what = format!("{} {} n={n}", act.name(), T::NAME);
                let mut got = Vec::new();
                for dev in with_cpu(d) {
                    let (got_res, got_out) = add_activation_on(&dev, act, &x, &res);
                    let on = name(&dev);
                    assert_close(&format!("{what} residual on the {on}"), &got_res, &want_res, atol, rtol);
                    assert_close(&format!("{what} output on the {on}"), &got_out, &want, atol, rtol);
                    got.push((got_res, got_out));
                }
                if let [(g_res, g_out), (c_res, c_out)] = &got[..] {
                    assert_eq!(g_res, c_res, "{what}: the residual is exact arithmetic, the same on both");
                    assert_close(&format!("{what} gpu vs cpu"), g_out, c_out, atol, rtol);
                }
            }
        }
    }
    let mut rng = Rng::fresh("add_activation");
    case::<f32>(d, &mut rng, per_backend(d, 1e-6, 2e-6), per_backend(d, 1e-6, 2e-6));
    case::<f16>(d, &mut rng, 1e-4, 1e-3);
    case::<bf16>(d, &mut rng, 1e-3, 8e-3);
}

/// `T::INFINITY` .. `T::EPSILON` of f32, f16 and bf16 as the kernel stores them (the language reference's table):
/// Rust's and the `half` crate's values, NaN a NaN; beside a GPU the GPU's bits (NaN's pattern
/// too) equal to the CPU interpreter's.
fn float_constants_are_each_types_values(d: &Device) {
    fn case<T: Elem>(d: &Device, want: [f64; 7]) {
        let mut bits = Vec::new();
        for dev in with_cpu(d) {
            let mut out = dev.upload(&[T::from_f32s(&[1.5])[0]; 8]).unwrap();
            paths::float_consts::launch::<T>(&dev, 1, &mut out).unwrap();
            let stored = out.to_vec().unwrap();
            let got = T::to_f64s(&stored);
            for (k, (&g, &w)) in got.iter().zip(want.iter().chain([0.0].iter())).enumerate() {
                if w.is_nan() {
                    assert!(g.is_nan(), "{} constant {k} on the {}: {g}, want NaN", T::NAME, name(&dev));
                } else {
                    assert_eq!(g, w, "{} constant {k} on the {}", T::NAME, name(&dev));
                }
            }
            bits.push(T::bits(&stored));
        }
        if let [on_gpu, on_cpu] = &bits[..] {
            assert_eq!(on_gpu, on_cpu, "{}: GPU and CPU constants differ", T::NAME);
        }
    }
    let f = |m: f64, mp: f64, e: f64| [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, m, -m, mp, e];
    case::<f32>(d, f(f32::MAX.into(), f32::MIN_POSITIVE.into(), f32::EPSILON.into()));
    case::<f16>(d, f(f16::MAX.into(), f16::MIN_POSITIVE.into(), f16::EPSILON.into()));
    case::<bf16>(d, f(bf16::MAX.into(), bf16::MIN_POSITIVE.into(), bf16::EPSILON.into()));
}

/// A one-input f32 kernel over `x` on `dev`, `launch(dev, grid, x, out)` in blocks of 1024, into a
/// NaN-poisoned output.
fn unary_on(
    dev: &Device,
    x: &[f32],
    launch: impl Fn(&Device, u32, &Buffer<f32>, &mut Buffer<f32>) -> fuse::Result<()>,
) -> Vec<f32> {
    let mut out = dev.upload(&vec![f32::NAN; x.len()]).unwrap();
    launch(dev, x.len().div_ceil(1024) as u32, &dev.upload(x).unwrap(), &mut out).unwrap();
    out.to_vec().unwrap()
}

/// Each of `got` (`f` of `x` on `d`) within `bound` units `ulp(want)` of `f` in float64, NaN where
/// `x` is NaN; the worst error in those units.
fn assert_within_ulp(
    f_name: &str,
    d: &Device,
    x: &[f32],
    got: &[f32],
    f: impl Fn(f64) -> f64,
    ulp: impl Fn(f64) -> f64,
    bound: f64,
) -> f64 {
    let on = name(d);
    let mut worst = 0.0f64;
    for (&xi, &yi) in x.iter().zip(got) {
        if xi.is_nan() {
            assert!(yi.is_nan(), "{f_name}(NaN) = {yi} on the {on}");
            continue;
        }
        let want = f(f64::from(xi));
        let err = (f64::from(yi) - want).abs() / ulp(want);
        worst = worst.max(err);
        assert!(err <= bound, "{f_name}({xi:e}) = {yi:e} on the {on}, float64 {want:e}: {err:.2} ulp");
    }
    worst
}

/// `erf` within two ulp of float64: dense over [-6, 6] (both polynomial ranges and the
/// switch at |x| = 1.0037584), tiny and huge magnitudes, signed zeros, infinities and NaN.
fn erf_is_within_two_ulp_of_float64(d: &Device) {
    let mut x: Vec<f32> = (0..(1 << 20)).map(|i| -6.0 + 12.0 * i as f32 / (1 << 20) as f32).collect();
    x.extend([
        0.0f32,
        -0.0,
        1e-30,
        -1e-30,
        1e-45,
        1.0037584,
        -1.0037584,
        1.0037583,
        3.9,
        10.0,
        -10.0,
        1e30,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ]);
    let n = x.len();
    let out =
        unary_on(d, &x, |dev, grid, xb, out| paths::erf_only::launch::<1024>(dev, grid, xb, out, n as i32));
    // The ulp at the float64 result rounded to f32 (the smallest normal's below it).
    let ulp = |want: f64| f64::from((want as f32).abs().max(f32::MIN_POSITIVE)) * f64::from(f32::EPSILON);
    let worst = assert_within_ulp("erf", d, &x, &out, bias_gelu_dropout::erf64, ulp, 2.0);
    println!("erf: {n} inputs, worst {worst:.2} ulp on the {}", name(d));
}

/// `sigmoid` against float64 on both of the GPU's branches: dense over [-100, 100] (the
/// reciprocal fast path where `1 + e^-x < 2^126`, `e^x` past x = -87.3), every float near the
/// switch, signed zeros, infinities and NaN; on the CPU interpreter and, beside it, a GPU.
/// Errors in ulp of the float64 result rounded to f32 (the subnormal step below 2^-126). The bound:
/// `expf`'s 2 ulp on `e^-x`, damped by `e^-x / (1 + e^-x) < 1`, plus the roundings of the sum and
/// the (correctly rounded) reciprocal, and the ulp's halving at the result's binade edges.
fn sigmoid_is_within_four_ulp_of_float64(d: &Device) {
    let mut x: Vec<f32> = (0..(1 << 20)).map(|i| -100.0 + 200.0 * i as f32 / (1 << 20) as f32).collect();
    let switch = 87.33655f32; // 1 + e^x = 2^126 near here
    x.extend((-2000..2000).map(|k| f32::from_bits((-switch).to_bits().wrapping_add_signed(k))));
    x.extend([0.0f32, -0.0, 1e-30, -1e-30, 16.6, 88.7, -88.7, -103.0, -104.0, 1e30, -1e30]);
    x.extend([f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::MAX, f32::MIN]);
    let n = x.len();
    let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
    // The distance to the next f32 above the float64 result's magnitude rounded to f32.
    let ulp = |want: f64| {
        let near = (want as f32).abs();
        f64::from(f32::from_bits(near.to_bits() + 1)) - f64::from(near)
    };
    for dev in with_cpu(d) {
        let out = unary_on(&dev, &x, |dev, grid, xb, out| {
            paths::sigmoid_only::launch::<1024>(dev, grid, xb, out, n as i32)
        });
        let worst = assert_within_ulp("sigmoid", &dev, &x, &out, sigmoid, ulp, 4.0);
        println!("sigmoid: {n} inputs, worst {worst:.2} ulp on the {}", name(&dev));
    }
}

/// [`paths::rem_gather`] (chunk-uniform masks, remainders of the lane as offsets, negative for the
/// first lanes when shifted) on the GPU, bit for bit the CPU interpreter's, masked lanes NaN.
fn chunk_uniform_masks_and_rem_gathers_match_cpu_bit_for_bit(g: &Device) {
    let mut rng = Rng::fresh("rem gather gpu/cpu");
    let mut cases = 0;
    for n in [4096usize, 4100, 77] {
        for lo in [0i32, 16, 3] {
            for h in [768i32, 100, 13] {
                for shift in [0i32, 32, 5, i32::MIN + 3000] {
                    let x = f16s(&rng.vec(n, 2.0));
                    let bias = f16s(&rng.vec(h as usize, 2.0));
                    let mut outs = Vec::new();
                    for d in with_cpu(g) {
                        let mut out = d.upload(&vec![f16::NAN; n]).unwrap();
                        let (xb, bb) = (d.upload(&x).unwrap(), d.upload(&bias).unwrap());
                        paths::rem_gather::launch::<1024>(
                            &d,
                            n.div_ceil(1024) as u32,
                            &xb,
                            &bb,
                            &mut out,
                            n as i32,
                            lo,
                            h,
                            shift,
                        )
                        .unwrap();
                        outs.push(out.to_vec().unwrap());
                    }
                    for (i, (&gv, &cv)) in outs[0].iter().zip(&outs[1]).enumerate() {
                        assert_eq!(
                            gv.to_bits(),
                            cv.to_bits(),
                            "n={n} lo={lo} h={h} shift={shift} i={i}: gpu {gv} cpu {cv}"
                        );
                        let masked = (i as i32) < lo;
                        assert_eq!(gv.is_nan(), masked, "n={n} lo={lo} h={h} shift={shift} i={i}: {gv}");
                    }
                    cases += 1;
                }
            }
        }
    }
    println!("rem gather: {cases} cases bit-identical on GPU and CPU");
}

/// [`paths::xor_gather`] against its definition, bit for bit, in f32 and f16 (chunks of 4 and 8
/// lanes at 1024 lanes and 4 warps), limits on and off chunk edges; beside a GPU on the CPU too.
fn xor_gathers_match_their_definition(d: &Device) {
    fn case<T: Elem>(d: &Device, rng: &mut Rng) {
        let (n, grid) = (1024usize, 3usize);
        let src = T::from_f32s(&rng.vec(n * grid, 4.0));
        let src64 = T::to_f64s(&src);
        for lim in [0i32, 5, 8, 13, 512, 1021, 1024] {
            for dev in with_cpu(d) {
                let (sb, lb) = (dev.upload(&src).unwrap(), dev.upload(&[lim]).unwrap());
                let mut o1 = dev.upload(&vec![T::NAN; n * grid]).unwrap();
                let mut o3 = dev.upload(&vec![T::NAN; n * grid]).unwrap();
                let cfg = fuse::LaunchConfig::new(grid as u32).num_warps(4);
                paths::xor_gather::launch::<T, 1024>(&dev, cfg, &sb, &lb, &mut o1, &mut o3).unwrap();
                let got = [T::to_f64s(&o1.to_vec().unwrap()), T::to_f64s(&o3.to_vec().unwrap())];
                for (x, got) in [1usize, 3].into_iter().zip(&got) {
                    for (i, &g) in got.iter().enumerate() {
                        let (p, c) = (i / n, i % n);
                        let want = if (c as i32) < lim { src64[p * n + (c ^ x)] } else { -1.0 };
                        assert!(
                            g == want,
                            "xor_gather {} XOR {x} limit {lim} program {p} lane {c}: {} {g} want {want}",
                            T::NAME,
                            name(&dev),
                        );
                    }
                }
            }
        }
    }
    let mut rng = Rng::fresh("xor gather");
    case::<f32>(d, &mut rng);
    case::<f16>(d, &mut rng);
}

fn main() {
    let mut trials = every_backend![
        add_mul,
        add_mul_f16_odd_sizes_in_small_blocks,
        out_of_bounds_is_reported_not_performed,
        silu_and_mul_on_a_2d_grid,
        add_gelu_and_add_silu_update_the_residual,
        float_constants_are_each_types_values,
        sigmoid_is_within_four_ulp_of_float64,
        xor_gathers_match_their_definition,
        erf_is_within_two_ulp_of_float64,
    ];
    trials.extend(gpu_only![chunk_uniform_masks_and_rem_gathers_match_cpu_bit_for_bit]);
    harness::run(trials)
}
