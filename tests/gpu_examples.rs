//! GPU integration tests (harness = false, fuse_testkit::harness): need an NVIDIA GPU;
//! elsewhere each is reported as ignored, "needs an NVIDIA GPU", and the reason is printed once.
//! The differential tests run the same kernel on the same inputs on the GPU and the CPU
//! interpreter: outputs within tolerance, dropout masks bit-identical. One test needs NVRTC but no
//! GPU: the kernels of the examples added after the emitted-CUDA snapshots (multi-row softmax and
//! LayerNorm, QK-norm + RoPE, cross-entropy, add + activation) compile for sm_80 and sm_90.
mod common;
use fuse_testkit::harness;

use common::*;
use fuse::fuse_ir::Specialization;
use fuse::half::f16;
use fuse::{Device, LaunchConfig};

fn add_mul_on_gpu_matches_float64_and_cpu(g: &Device) {
    let c = Device::cpu();
    let mut rng = Rng::fresh("add_mul gpu");
    for n in [1usize, 1023, 1024, 1025, 1_000_003] {
        let (x, y, z) = (rng.vec(n, 2.0), rng.vec(n, 2.0), rng.vec(n, 2.0));
        let want = add_mul::reference(&f64s(&x), &f64s(&y), &f64s(&z));
        let on_gpu = add_mul_on::<f32, 1024>(&g, None, &x, &y, &z);
        let on_cpu = add_mul_on::<f32, 1024>(&c, None, &x, &y, &z);
        assert_close(&format!("add_mul n={n} on the GPU"), &on_gpu, &want, 1e-5, 1e-5);
        assert_close(&format!("add_mul n={n} on the CPU"), &on_cpu, &want, 1e-5, 1e-5);
        assert_close("gpu vs cpu", &on_gpu, &on_cpu, 1e-6, 1e-6);
    }
}

fn add_mul_f16_unaligned_views_and_odd_sizes(g: &Device) {
    let mut rng = Rng::fresh("add_mul_f16 gpu");
    for n in [7usize, 4097, 65_537] {
        let (x, y, z) = (f16s(&rng.vec(n, 2.0)), f16s(&rng.vec(n, 2.0)), f16s(&rng.vec(n, 2.0)));
        let want = add_mul::reference(&f16_to_f64(&x), &f16_to_f64(&y), &f16_to_f64(&z));
        assert_close(
            &format!("add_mul_f16 n={n}"),
            &add_mul_on::<f16, 256>(&g, Some(2), &x, &y, &z),
            &want,
            1e-3,
            1e-3,
        );
    }
}

/// The generic kernels' instantiations other than f32 (f16 and bf16) on the GPU against the CPU
/// interpreter and float64.
fn generic_kernels_in_half_types_match_cpu(g: &Device) {
    fn case<T: Elem>(g: &Device, rng: &mut Rng, tol: f64) {
        let c = Device::cpu();
        let (rows, cols) = (19, 1000);
        let x = T::from_f32s(&rng.vec(rows * cols, 3.0));
        let (w, b) = (T::from_f32s(&rng.vec(cols, 1.0)), T::from_f32s(&rng.vec(cols, 1.0)));
        let name = T::NAME;
        let want = add_mul::reference(&T::to_f64s(&x), &T::to_f64s(&x), &T::to_f64s(&x));
        let (on_gpu, on_cpu) =
            (add_mul_on::<T, 1024>(g, None, &x, &x, &x), add_mul_on::<T, 1024>(&c, None, &x, &x, &x));
        assert_close(&format!("add_mul {name} on the GPU"), &on_gpu, &want, tol, tol);
        assert_close(&format!("add_mul {name} gpu vs cpu"), &on_gpu, &on_cpu, tol, tol);
        let want = softmax::reference(&T::to_f64s(&x), rows, cols);
        let (on_gpu, on_cpu) =
            (softmax_on::<T, 1024>(g, &x, rows, cols), softmax_on::<T, 1024>(&c, &x, rows, cols));
        assert_close(&format!("softmax {name} on the GPU"), &on_gpu, &want, 1e-4, tol);
        assert_close(&format!("softmax {name} gpu vs cpu"), &on_gpu, &on_cpu, 1e-4, tol);
        let want = layernorm::reference(&T::to_f64s(&x), &T::to_f64s(&w), &T::to_f64s(&b), rows, cols, 1e-5);
        let (on_gpu, on_cpu) = (
            layernorm_on::<T, 1024>(g, &x, &w, &b, rows, cols),
            layernorm_on::<T, 1024>(&c, &x, &w, &b, rows, cols),
        );
        assert_close(&format!("layernorm {name} on the GPU"), &on_gpu, &want, tol, tol);
        assert_close(&format!("layernorm {name} gpu vs cpu"), &on_gpu, &on_cpu, tol, tol);
    }
    let mut rng = Rng::fresh("generic kernels gpu");
    case::<f16>(g, &mut rng, 4e-3);
    case::<fuse::half::bf16>(g, &mut rng, 1.6e-2);
}

fn softmax_and_layernorm_on_gpu_match_cpu(g: &Device) {
    let c = Device::cpu();
    let mut rng = Rng::fresh("softmax/layernorm gpu");
    for (rows, cols) in [(1usize, 1usize), (5, 100), (64, 1000), (17, 4096)] {
        let x = rng.vec(rows * cols, 4.0);
        let (w, b) = (rng.vec(cols, 1.0), rng.vec(cols, 1.0));
        let sm_want = softmax::reference(&f64s(&x), rows, cols);
        let ln_want = layernorm::reference(&f64s(&x), &f64s(&w), &f64s(&b), rows, cols, 1e-5);
        let mut sm = Vec::new();
        let mut ln = Vec::new();
        for d in [g, &c] {
            let on = d.description();
            let v = softmax_on::<f32, 4096>(d, &x, rows, cols);
            assert_close(&format!("softmax {rows}x{cols} on {on}"), &v, &sm_want, 1e-7, 1e-5);
            sm.push(v);
            let v = layernorm_on::<f32, 4096>(d, &x, &w, &b, rows, cols);
            assert_close(&format!("layernorm {rows}x{cols} on {on}"), &v, &ln_want, 3e-5, 2e-5);
            ln.push(v);
            let v = layernorm_wide_on::<512>(d, 4, &x, &w, &b, rows, cols);
            assert_close(&format!("layernorm_wide {rows}x{cols} on {on}"), &v, &ln_want, 3e-5, 2e-5);
        }
        assert_close("softmax gpu vs cpu", &sm[0], &sm[1], 1e-7, 1e-5);
        assert_close("layernorm gpu vs cpu", &ln[0], &ln[1], 3e-5, 2e-5);
    }
}

fn dropout_masks_are_bit_identical_on_gpu_and_cpu(g: &Device) {
    let c = Device::cpu();
    let mut rng = Rng::fresh("dropout gpu/cpu");
    let (rows, h) = (37, 768);
    let n = rows * h;
    let (x, bias) = (rng.vec(n, 3.0), rng.vec(h, 1.0));
    let seed = rng.next_u64();
    let mut outs = Vec::new();
    for d in [g, &c] {
        let mut out = d.upload(&vec![f32::NAN; n]).unwrap();
        bias_gelu_dropout::bias_gelu_dropout::launch::<f32, 1024>(
            d,
            n.div_ceil(1024) as u32,
            &d.upload(&x).unwrap(),
            &d.upload(&bias).unwrap(),
            &mut out,
            seed,
            0.1,
            n as i32,
            h as i32,
        )
        .unwrap();
        outs.push(out.to_vec().unwrap());
    }
    let gelu = bias_gelu_dropout::reference_gelu(&f64s(&x), &f64s(&bias), h);
    let mut mismatched = 0;
    for i in 0..n {
        let keep = fuse::fuse_ir::philox::rand(seed, i as u64) > 0.1;
        for (o, who) in outs.iter().zip(["gpu", "cpu"]) {
            if keep {
                let want = gelu[i] / 0.9;
                assert!(
                    (f64::from(o[i]) - want).abs() <= 1e-5 + 1e-5 * want.abs(),
                    "{who} kept {i}: {} vs {want}",
                    o[i]
                );
            } else {
                assert_eq!(o[i], 0.0, "{who} dropped {i}");
            }
        }
        if (outs[0][i] == 0.0) != (outs[1][i] == 0.0) {
            mismatched += 1;
        }
    }
    assert_eq!(mismatched, 0, "dropout masks differ between GPU and CPU");
    println!("dropout: {n} elements, masks bit-identical on GPU and CPU");
}

fn rand_thresholds_match_cpu_for_every_kind_of_p(g: &Device) {
    let c = Device::cpu();
    let mut rng = Rng::fresh("rand threshold gpu/cpu");
    let n = 1 << 16;
    // Every branch of the integer bound: NaN, negative, -0, 0, tiny, below and above 2^-7 (where
    // p * 2^31 passes 2^24), odd and even significands, just below 1, 1 and above.
    let mut ps = vec![
        f32::NAN,
        -1.0,
        -0.0,
        0.0,
        1e-30,
        1e-9,
        0.001,
        0.0078125,
        0.1,
        0.5,
        0.75,
        0.9,
        0.99999994,
        1.0,
        2.0,
        f32::INFINITY,
    ];
    ps.extend((0..8).map(|_| (rng.next_u64() % 1_000_000) as f32 / 1_000_000.0));
    ps.extend([0.1f32, 0.5, 0.75].iter().map(|p| f32::from_bits(p.to_bits() + 1)));
    for p in ps {
        let seed = rng.next_u64();
        let mut outs = Vec::new();
        for d in [g, &c] {
            let mut out = d.upload(&vec![f32::NAN; n]).unwrap();
            paths::rand_threshold::launch::<1024>(d, (n / 1024) as u32, &mut out, seed, p, n as i32).unwrap();
            outs.push(out.to_vec().unwrap());
        }
        for i in 0..n {
            let r = fuse::fuse_ir::philox::rand(seed, i as u64);
            let want = f32::from(u8::from(r > p))
                + 2.0 * f32::from(u8::from(p < r))
                + 4.0 * f32::from(u8::from(r >= p));
            assert_eq!(outs[0][i].to_bits(), want.to_bits(), "gpu p={p} i={i} r={r}");
            assert_eq!(outs[1][i].to_bits(), want.to_bits(), "cpu p={p} i={i} r={r}");
        }
    }
    println!("rand threshold: GPU and CPU agree lane for lane");
}

/// `rand16` on the GPU against `fuse_ir::philox::rand16` and the CPU interpreter bit for bit: its
/// values, and `r > p`, `p < r` (integer tests of the half-word on the GPU) beside `r >= p`, for
/// every kind of `p` (NaN, negative, 0, tiny, on, between and beside the 2^-16 steps, 1, above),
/// at offsets starting on a multiple of 8 (one Philox per eight lanes) and off it (per lane).
fn rand16_matches_cpu_for_every_kind_of_p(g: &Device) {
    let c = Device::cpu();
    let mut rng = Rng::fresh("rand16 gpu/cpu");
    let n = 1 << 16;
    let mut ps = vec![
        f32::NAN,
        -1.0,
        -0.0,
        0.0,
        1e-30,
        2f32.powi(-17),
        2f32.powi(-16),
        0.1,
        0.5,
        0.5 - 2f32.powi(-25),
        1.0 - 2f32.powi(-17),
        1.0,
        2.0,
        f32::INFINITY,
    ];
    ps.extend((0..6).map(|_| (rng.next_u64() % 65536) as f32 / 65536.0));
    ps.extend((0..6).map(|_| (rng.next_u64() % 1_000_000) as f32 / 1_000_000.0));
    for (k, p) in ps.into_iter().enumerate() {
        let (seed, base) = (rng.next_u64(), [0i32, 8, 3, 1 << 20][k % 4]);
        let mut outs = Vec::new();
        for d in [g, &c] {
            let mut out = d.upload(&vec![f32::NAN; n]).unwrap();
            let mut vals = d.upload(&vec![f32::NAN; n]).unwrap();
            paths::rand16_threshold::launch::<1024>(
                d,
                (n / 1024) as u32,
                &mut out,
                &mut vals,
                seed,
                p,
                base,
                n as i32,
            )
            .unwrap();
            outs.push((out.to_vec().unwrap(), vals.to_vec().unwrap()));
        }
        for i in 0..n {
            let r = fuse::fuse_ir::philox::rand16(seed, (i as i64 + i64::from(base)) as u64);
            let want = f32::from(u8::from(r > p))
                + 2.0 * f32::from(u8::from(p < r))
                + 4.0 * f32::from(u8::from(r >= p));
            for ((out, vals), who) in outs.iter().zip(["gpu", "cpu"]) {
                assert_eq!(vals[i].to_bits(), r.to_bits(), "{who} value p={p} base={base} i={i}");
                assert_eq!(out[i].to_bits(), want.to_bits(), "{who} p={p} base={base} i={i} r={r}");
            }
        }
    }
    println!("rand16: GPU and CPU agree lane for lane");
}

/// `bias_gelu_dropout16` f16 and f32 on the GPU and the CPU interpreter: on both, every lane
/// `philox::rand16` drops is exactly 0 and every lane it keeps is gelu / (1 - p) within f16 (f32)
/// rounding of float64 (so the masks are the reference's on both), at a row length that is not a
/// multiple of 8 and a size with a partial last program.
fn dropout16_masks_are_bit_identical_on_gpu_and_cpu(g: &Device) {
    let c = Device::cpu();
    let mut rng = Rng::fresh("dropout16 gpu/cpu");
    let (rows, h) = (41, 1000);
    let n = rows * h + 5;
    let (x, bias) = (rng.vec(n, 3.0), rng.vec(h, 1.0));
    let seed = rng.next_u64();
    let p = 0.1f32;
    let gelu = bias_gelu_dropout::reference_gelu(&f64s(&x), &f64s(&bias), h);
    let (xh, bh) = (f16s(&x), f16s(&bias));
    let to64 = |v: &[f16]| v.iter().map(|x| f64::from(x.to_f32())).collect::<Vec<f64>>();
    let gelu16 = bias_gelu_dropout::reference_gelu(&to64(&xh), &to64(&bh), h);
    let mut outs32 = Vec::new();
    let mut outs16 = Vec::new();
    for d in [g, &c] {
        let mut out = d.upload(&vec![f32::NAN; n]).unwrap();
        bias_gelu_dropout::bias_gelu_dropout16::launch::<f32, 1024>(
            d,
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
        outs32.push(out.to_vec().unwrap().into_iter().map(f64::from).collect::<Vec<f64>>());
        let mut out = d.upload(&vec![f16::NAN; n]).unwrap();
        bias_gelu_dropout::bias_gelu_dropout16::launch::<f16, 1024>(
            d,
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
        outs16.push(to64(&out.to_vec().unwrap()));
    }
    for (what, outs, gelu, tol) in [("f32", &outs32, &gelu, 1e-5), ("f16", &outs16, &gelu16, 2e-3)] {
        for i in 0..n {
            let keep = fuse::fuse_ir::philox::rand16(seed, i as u64) > p;
            for (o, who) in outs.iter().zip(["gpu", "cpu"]) {
                if keep {
                    let want = gelu[i] / (1.0 - f64::from(p));
                    assert!(
                        (o[i] - want).abs() <= tol + tol * want.abs(),
                        "{what} {who} kept {i}: {} vs {want}",
                        o[i]
                    );
                } else {
                    assert_eq!(o[i], 0.0, "{what} {who} dropped {i}");
                }
            }
        }
    }
    println!("dropout16: {n} elements, f32 and f16, the reference mask on GPU and CPU");
}

fn erf_is_within_two_ulp_of_float64(g: &Device) {
    // Dense over [-6, 6] (both polynomial ranges and the switch at |x| = 1.0037584), tiny and
    // huge magnitudes, signed zeros, infinities and NaN.
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
    let mut out = g.upload(&vec![f32::NAN; n]).unwrap();
    paths::erf_only::launch::<1024>(&g, n.div_ceil(1024) as u32, &g.upload(&x).unwrap(), &mut out, n as i32)
        .unwrap();
    let out = out.to_vec().unwrap();
    let mut worst = 0.0f64;
    for (&xi, &yi) in x.iter().zip(&out) {
        if xi.is_nan() {
            assert!(yi.is_nan(), "erf(NaN) = {yi}");
            continue;
        }
        let want = bias_gelu_dropout::erf64(f64::from(xi));
        let ulp = f64::from((want as f32).abs().max(f32::MIN_POSITIVE)) * f64::from(f32::EPSILON);
        let err = (f64::from(yi) - want).abs() / ulp;
        worst = worst.max(err);
        assert!(err <= 2.0, "erf({xi:e}) = {yi:e}, float64 {want:e}: {err:.2} ulp");
    }
    println!("erf: {n} inputs, worst {worst:.2} ulp");
}

/// `sigmoid` against float64 on both of the GPU's branches: dense over [-100, 100] (the
/// reciprocal fast path where `1 + e^-x < 2^126`, `e^x` past x = -87.3), every float near the
/// switch, signed zeros, infinities and NaN; and against the CPU interpreter on the same inputs.
/// Errors in ulp of the float64 result rounded to f32 (the subnormal step below 2^-126). The bound:
/// `expf`'s 2 ulp on `e^-x`, damped by `e^-x / (1 + e^-x) < 1`, plus the roundings of the sum and
/// the (correctly rounded) reciprocal, and the ulp's halving at the result's binade edges. (H200,
/// 2026-11-27: worst 1.70 in units of `|result| * 2^-23`, between one and two ulp each; the
/// libm-based CPU interpreter measured 2.09 ulp.)
fn sigmoid_is_within_four_ulp_of_float64(g: &Device) {
    let mut x: Vec<f32> = (0..(1 << 20)).map(|i| -100.0 + 200.0 * i as f32 / (1 << 20) as f32).collect();
    let switch = 87.33655f32; // 1 + e^x = 2^126 near here
    x.extend((-2000..2000).map(|k| f32::from_bits((-switch).to_bits().wrapping_add_signed(k))));
    x.extend([0.0f32, -0.0, 1e-30, -1e-30, 16.6, 88.7, -88.7, -103.0, -104.0, 1e30, -1e30]);
    x.extend([f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::MAX, f32::MIN]);
    let n = x.len();
    let xs = g.upload(&x).unwrap();
    let mut out = g.upload(&vec![f32::NAN; n]).unwrap();
    paths::sigmoid_only::launch::<1024>(g, n.div_ceil(1024) as u32, &xs, &mut out, n as i32).unwrap();
    let out = out.to_vec().unwrap();
    let c = Device::cpu();
    let mut cpu = c.upload(&vec![f32::NAN; n]).unwrap();
    paths::sigmoid_only::launch::<1024>(
        &c,
        n.div_ceil(1024) as u32,
        &c.upload(&x).unwrap(),
        &mut cpu,
        n as i32,
    )
    .unwrap();
    let cpu = cpu.to_vec().unwrap();
    let mut worst = 0.0f64;
    for ((&xi, &yi), &ci) in x.iter().zip(&out).zip(&cpu) {
        if xi.is_nan() {
            assert!(yi.is_nan() && ci.is_nan(), "sigmoid(NaN) = {yi} on the GPU, {ci} on the CPU");
            continue;
        }
        let want = 1.0 / (1.0 + (-f64::from(xi)).exp());
        let near = (want as f32).abs();
        let ulp = f64::from(f32::from_bits(near.to_bits() + 1)) - f64::from(near);
        let err = (f64::from(yi) - want).abs() / ulp;
        worst = worst.max(err);
        assert!(err <= 4.0, "sigmoid({xi:e}) = {yi:e} on the GPU, float64 {want:e}: {err:.2} ulp");
        let cpu_err = (f64::from(ci) - want).abs() / ulp;
        assert!(cpu_err <= 4.0, "sigmoid({xi:e}) = {ci:e} on the CPU, float64 {want:e}: {cpu_err:.2} ulp");
    }
    println!("sigmoid: {n} inputs, worst {worst:.2} ulp on the GPU");
}

/// `T::INFINITY` .. `T::EPSILON` (and `T::NAN`'s bit pattern) stored by the GPU as by the CPU
/// interpreter, bit for bit, in f32, f16 and bf16.
fn float_constants_match_cpu_bit_for_bit(g: &Device) {
    macro_rules! case {
        ($t:ty) => {{
            let c = Device::cpu();
            let mut bits = Vec::new();
            for d in [g, &c] {
                let mut out = d.upload(&vec![<$t as Elem>::from_f32s(&[1.5])[0]; 8]).unwrap();
                paths::float_consts::launch::<$t>(d, 1, &mut out).unwrap();
                bits.push(out.to_vec().unwrap().iter().map(|v| u64::from(v.to_bits())).collect::<Vec<_>>());
            }
            assert_eq!(bits[0], bits[1], "{}: GPU and CPU constants differ", <$t as Elem>::NAME);
        }};
    }
    case!(f32);
    case!(f16);
    case!(fuse::half::bf16);
}

fn gpu_out_of_bounds_is_reported_not_performed(_: &Device) {
    let g = &harness::isolated_gpu();
    let x = g.upload(&vec![1.0f32; 1000]).unwrap();
    let mut out = g.upload(&vec![0.0f32; 1000]).unwrap();
    let r = add_mul::add_mul::launch::<f32, 1024>(&g, 2, &x, &x, &x, &mut out, 2000)
        .and_then(|_| g.synchronize());
    let err = r.unwrap_err();
    assert!(matches!(err, fuse::Error::OutOfBounds { .. }), "{err}");
    // In-bounds lanes were still computed.
    assert!(out.to_vec().unwrap().iter().all(|&v| v == 2.0));
    // The error was consumed: the device is usable again.
    let mut out2 = g.upload(&vec![0.0f32; 1000]).unwrap();
    add_mul::add_mul::launch::<f32, 1024>(&g, 1, &x, &x, &x, &mut out2, 1000).unwrap();
    assert!(out2.to_vec().unwrap().iter().all(|&v| v == 2.0));
    // Above, every 4-lane chunk was wholly in bounds or wholly past the end. With 1001 elements
    // the chunk at 1000..1004 straddles the end: it takes the per-lane path and still reads
    // element 1000.
    let x = g.upload(&vec![1.0f32; 1001]).unwrap();
    let mut out = g.upload(&vec![0.0f32; 1001]).unwrap();
    let r = add_mul::add_mul::launch::<f32, 1024>(&g, 2, &x, &x, &x, &mut out, 2000)
        .and_then(|_| g.synchronize());
    assert!(matches!(r, Err(fuse::Error::OutOfBounds { .. })), "{r:?}");
    assert!(out.to_vec().unwrap().iter().all(|&v| v == 2.0));
}

fn chunk_uniform_masks_and_rem_gathers_match_cpu_bit_for_bit(g: &Device) {
    let c = Device::cpu();
    let mut rng = Rng::fresh("rem gather gpu/cpu");
    let mut cases = 0;
    for n in [4096usize, 4100, 77] {
        for lo in [0i32, 16, 3] {
            for h in [768i32, 100, 13] {
                for shift in [0i32, 32, 5, i32::MIN + 3000] {
                    let x = f16s(&rng.vec(n, 2.0));
                    let bias = f16s(&rng.vec(h as usize, 2.0));
                    let mut outs = Vec::new();
                    for d in [g, &c] {
                        let mut out = d.upload(&vec![f16::NAN; n]).unwrap();
                        let (xb, bb) = (d.upload(&x).unwrap(), d.upload(&bias).unwrap());
                        paths::rem_gather::launch::<1024>(
                            d,
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

/// [`paths::xor_gather`] on the GPU against its definition and the CPU interpreter, bit for bit, in f32
/// and f16 (chunks of 4 and 8 lanes at 1024 lanes and 4 warps), limits on and off chunk edges.
fn xor_gathers_match_cpu_bit_for_bit(g: &Device) {
    fn case<T: Elem>(g: &Device, rng: &mut Rng) {
        let (n, grid) = (1024usize, 3usize);
        let src = T::from_f32s(&rng.vec(n * grid, 4.0));
        for lim in [0i32, 5, 8, 13, 512, 1021, 1024] {
            let mut got = Vec::new();
            for d in [g, &Device::cpu()] {
                let (sb, lb) = (d.upload(&src).unwrap(), d.upload(&[lim]).unwrap());
                let mut o1 = d.upload(&vec![T::NAN; n * grid]).unwrap();
                let mut o3 = d.upload(&vec![T::NAN; n * grid]).unwrap();
                let cfg = fuse::LaunchConfig::new(grid as u32).num_warps(4);
                paths::xor_gather::launch::<T, 1024>(d, cfg, &sb, &lb, &mut o1, &mut o3).unwrap();
                got.push((T::to_f64s(&o1.to_vec().unwrap()), T::to_f64s(&o3.to_vec().unwrap())));
            }
            let src = T::to_f64s(&src);
            for (x, gpu, cpu) in [(1usize, &got[0].0, &got[1].0), (3, &got[0].1, &got[1].1)] {
                for i in 0..n * grid {
                    let (p, c) = (i / n, i % n);
                    let want = if (c as i32) < lim { src[p * n + (c ^ x)] } else { -1.0 };
                    assert!(
                        gpu[i] == want && cpu[i] == want,
                        "xor_gather {} XOR {x} limit {lim} program {p} lane {c}: gpu {} cpu {} want {want}",
                        T::NAME,
                        gpu[i],
                        cpu[i]
                    );
                }
            }
        }
    }
    let mut rng = Rng::fresh("xor gather gpu");
    case::<f32>(g, &mut rng);
    case::<f16>(g, &mut rng);
}

/// `split` and `join` on the GPU (common::paths::pair_rotate) against float64 and the CPU
/// interpreter, at widths and warp counts that take both lowerings: in registers (a thread's
/// chunks hold both lanes of its pairs: N = 64 on 2 warps) and through shared memory (N = 256 on
/// 1 warp, N = 8 on 8 warps); outputs poisoned first.
fn split_join_on_gpu_match_float64_and_cpu(g: &Device) {
    const POISON: f32 = f32::NAN;
    let mut rng = Rng::fresh("split/join gpu");
    let grid = 3usize;
    for n in [2usize, 8, 32, 64, 128, 256] {
        for w in [1u32, 2, 4, 8] {
            let x = rng.vec(grid * 4 * n, 4.0);
            let cs: Vec<f32> =
                (0..n).map(|i| ((i as f64) * 0.37 + rng.vec(1, 1.0)[0] as f64).cos() as f32).collect();
            let mut got = Vec::new();
            for d in [g, &Device::cpu()] {
                let (xb, cb) = (d.upload(&x).unwrap(), d.upload(&cs).unwrap());
                let mut out = d.upload(&vec![POISON; x.len()]).unwrap();
                let mut norms = d.upload(&vec![POISON; grid * 4]).unwrap();
                let mut sw = d.upload(&vec![POISON; grid * n]).unwrap();
                let cfg = fuse::LaunchConfig::new(grid as u32).num_warps(w);
                fuse::with_block!(n, N => paths::pair_rotate::launch::<N>(d, cfg, &xb, &cb, &mut out, &mut norms, &mut sw))
                    .unwrap();
                got.push([out.to_vec().unwrap(), norms.to_vec().unwrap(), sw.to_vec().unwrap()]);
            }
            let case = format!("pair_rotate N={n} {w} warps");
            let [out, norms, sw] = paths::pair_rotate_reference(&x, &cs, n, grid);
            for (what, want, i) in [("out", &out, 0), ("norms", &norms, 1)] {
                for (dev, j) in [("GPU", 0), ("CPU", 1)] {
                    let have: Vec<f64> = got[j][i].iter().map(|&v| f64::from(v)).collect();
                    assert_close(&format!("{case} {what} on the {dev}"), &have, want, 1e-5, 1e-5);
                }
            }
            // The swap moves values: exact on both.
            for (dev, j) in [("GPU", 0), ("CPU", 1)] {
                for (k, (&have, &want)) in got[j][2].iter().zip(&sw).enumerate() {
                    assert!(
                        f64::from(have) == want,
                        "{case} swapped lane {k} on the {dev}: {have}, want {want}"
                    );
                }
            }
        }
    }
}

/// Axis-1 reductions in warp slabs on the GPU (common::paths::row_stats: `[8, N]` f32 rows of
/// 32-1024 columns on 1-16 warps, slabs where a row is wider than 32 chunks and the warps divide
/// the rows) against float64 and the CPU interpreter; outputs poisoned first.
fn row_stats_on_gpu_match_float64_and_cpu(g: &Device) {
    let mut rng = Rng::fresh("row stats gpu");
    let grid = 5usize;
    for n in [32usize, 128, 256, 512, 1024] {
        for w in [1u32, 2, 4, 8, 16] {
            let x = rng.vec(grid * 8 * n, 4.0);
            let wv = rng.vec(n, 2.0);
            // Above a slab's chunk step (32 VEC): `%` steps chunk by chunk; 48 on 1 warp: divided.
            let m = if w == 1 { 48 } else { 1000 + (n as i32 % 7) };
            let mut got = Vec::new();
            for d in [g, &Device::cpu()] {
                let (xb, wb, mb) = (d.upload(&x).unwrap(), d.upload(&wv).unwrap(), d.upload(&[m]).unwrap());
                let mut y = d.upload(&vec![f32::NAN; x.len()]).unwrap();
                let mut sums = d.upload(&vec![f32::NAN; grid * 8]).unwrap();
                let mut pairs = d.upload(&vec![f32::NAN; grid * 2]).unwrap();
                let mut cols = d.upload(&vec![-1i32; x.len()]).unwrap();
                let mut groups = d.upload(&vec![f32::NAN; x.len() / 32]).unwrap();
                let cfg = fuse::LaunchConfig::new(grid as u32).num_warps(w);
                fuse::with_block!(n, N => paths::row_stats::launch::<N>(d, cfg, &xb, &wb, &mb, &mut y, &mut sums, &mut pairs, &mut cols, &mut groups))
                    .unwrap();
                let f = |v: Vec<f32>| v.into_iter().map(f64::from).collect::<Vec<f64>>();
                got.push((
                    [
                        f(y.to_vec().unwrap()),
                        f(sums.to_vec().unwrap()),
                        f(pairs.to_vec().unwrap()),
                        f(groups.to_vec().unwrap()),
                    ],
                    cols.to_vec().unwrap(),
                ));
            }
            let case = format!("row_stats N={n} {w} warps");
            let (y, sums, pairs, cols, groups) = paths::row_stats_reference(&x, &wv, n, m, grid);
            for (dev, (have, have_cols)) in ["GPU", "CPU"].iter().zip(&got) {
                for (what, want, i) in
                    [("y", &y, 0), ("sums", &sums, 1), ("pairs", &pairs, 2), ("groups", &groups, 3)]
                {
                    assert_close(&format!("{case} {what} on the {dev}"), &have[i], want, 1e-5, 1e-5);
                }
                assert!(have_cols == &cols, "{case} cols on the {dev} differ");
            }
        }
    }
}

/// softmax_rows and layernorm_rows on the GPU against float64 and the CPU interpreter: ragged
/// shapes and the narrow bench widths, every element type.
fn rows_kernels_on_gpu_match_float64_and_cpu(g: &Device) {
    fn case<T: Elem>(g: &Device, rng: &mut Rng, tol: f64) {
        let c = Device::cpu();
        let name = T::NAME;
        for (rows, cols) in [(37usize, 100usize), (5, 7), (4099, 128), (1025, 256), (77, 1000)] {
            let x = T::from_f32s(&rng.vec(rows * cols, 4.0));
            let (w, b) = (T::from_f32s(&rng.vec(cols, 1.0)), T::from_f32s(&rng.vec(cols, 1.0)));
            let want = softmax::reference(&T::to_f64s(&x), rows, cols);
            let (on_gpu, on_cpu) = (softmax_rows_on(g, &x, rows, cols), softmax_rows_on(&c, &x, rows, cols));
            assert_close(
                &format!("softmax_rows {name} {rows}x{cols} on the GPU"),
                &on_gpu,
                &want,
                tol * 1e-2,
                tol,
            );
            assert_close(
                &format!("softmax_rows {name} {rows}x{cols} gpu vs cpu"),
                &on_gpu,
                &on_cpu,
                tol * 1e-2,
                tol,
            );
            let want =
                layernorm::reference(&T::to_f64s(&x), &T::to_f64s(&w), &T::to_f64s(&b), rows, cols, 1e-5);
            let (on_gpu, on_cpu) =
                (layernorm_rows_on(g, &x, &w, &b, rows, cols), layernorm_rows_on(&c, &x, &w, &b, rows, cols));
            assert_close(
                &format!("layernorm_rows {name} {rows}x{cols} on the GPU"),
                &on_gpu,
                &want,
                tol,
                tol,
            );
            assert_close(
                &format!("layernorm_rows {name} {rows}x{cols} gpu vs cpu"),
                &on_gpu,
                &on_cpu,
                tol,
                tol,
            );
        }
    }
    let mut rng = Rng::fresh("rows kernels gpu");
    case::<f32>(g, &mut rng, 3e-5);
    case::<f16>(g, &mut rng, 4e-3);
    case::<fuse::half::bf16>(g, &mut rng, 1.6e-2);
}

/// qk_norm_rope in place on the GPU, both pairings (GPT-J also by `split`/`join`), every element type: q and k against float64
/// and the CPU interpreter, v bit-identical; the bench shape (8192 tokens of 32 + 8 + 8 heads of
/// 128) against float64.
fn qk_norm_rope_on_gpu_matches_float64_and_cpu(g: &Device) {
    use qk_norm_rope::Heads;
    fn case<T: Elem>(g: &Device, rng: &mut Rng, atol: f64, rtol: f64) {
        let c = Device::cpu();
        let bench = Heads { q: 32, k: 8, v: 8, dim: 128 };
        let shapes = [
            (1024, bench),
            (6, Heads { q: 6, k: 3, v: 3, dim: 128 }),
            (5, Heads { q: 4, k: 2, v: 1, dim: 96 }),
            (33, Heads { q: 16, k: 2, v: 2, dim: 256 }),
        ];
        for (tokens, h) in shapes {
            let case = QkCase::<T>::random(rng, tokens, h);
            for neox in [true, false] {
                let what = format!("qk_norm_rope {} neox={neox} {tokens}x{h:?}", T::NAME);
                let on_gpu = case.run_on(g, neox);
                case.check(&format!("{what} on the GPU"), &on_gpu, neox, atol, rtol);
                let on_cpu = case.run_on(&c, neox);
                assert_close(
                    &format!("{what} gpu vs cpu"),
                    &T::to_f64s(&on_gpu),
                    &T::to_f64s(&on_cpu),
                    atol,
                    rtol,
                );
            }
        }
        let case = QkCase::<T>::random(rng, 8192, bench);
        for neox in [true, false] {
            let what = format!("qk_norm_rope {} neox={neox} 8192x{bench:?} on the GPU", T::NAME);
            case.check(&what, &case.run_on(g, neox), neox, atol, rtol);
        }
    }
    let mut rng = Rng::fresh("qk_norm_rope gpu");
    case::<f32>(g, &mut rng, 3e-5, 3e-5);
    case::<f16>(g, &mut rng, 2e-3, 2e-3);
    case::<fuse::half::bf16>(g, &mut rng, 1e-2, 8e-3);
}

/// cross_entropy on the GPU against float64 and the CPU interpreter, with ignored rows, over the
/// bench's vocabularies (fewer rows).
fn cross_entropy_on_gpu_matches_float64_and_cpu(g: &Device) {
    fn case<T: Elem>(g: &Device, rng: &mut Rng) {
        let c = Device::cpu();
        for (rows, cols) in [(100usize, 1000usize), (64, 50257), (48, 32000), (16, 128256)] {
            let (x, labels) = cross_entropy_inputs::<T>(rng, rows, cols, 7, 2);
            let want = cross_entropy::reference(&T::to_f64s(&x), &labels, cols, cross_entropy::IGNORE_INDEX);
            let (on_gpu, on_cpu) =
                (cross_entropy_on(g, &x, &labels, cols), cross_entropy_on(&c, &x, &labels, cols));
            let what = format!("cross_entropy {} {rows}x{cols}", T::NAME);
            // A loss is a log-sum-exp of `cols` f32 terms less one logit: its f32 sums may be
            // off by several ulps of the sum (a loss of 27.69 over 32000 columns was 1.2e-4 off
            // float64, session 10 call 4), hence 1e-5 relative, not 3e-6.
            assert_close(&format!("{what} on the GPU"), &f64s(&on_gpu), &want, 3e-5, 1e-5);
            assert_close(&format!("{what} gpu vs cpu"), &f64s(&on_gpu), &f64s(&on_cpu), 3e-5, 1e-5);
        }
        // The bench's first shape at full size (GPU only).
        let (rows, cols) = (4096, 50257);
        let (x, labels) = cross_entropy_inputs::<T>(rng, rows, cols, 7, 2);
        let want = cross_entropy::reference(&T::to_f64s(&x), &labels, cols, cross_entropy::IGNORE_INDEX);
        let what = format!("cross_entropy {} {rows}x{cols} on the GPU", T::NAME);
        assert_close(&what, &f64s(&cross_entropy_on(g, &x, &labels, cols)), &want, 3e-5, 1e-5);
    }
    let mut rng = Rng::fresh("cross_entropy gpu");
    case::<f32>(g, &mut rng);
    case::<fuse::half::bf16>(g, &mut rng);
}

/// add_gelu and add_silu on the GPU against float64 and the CPU interpreter.
fn add_activation_on_gpu_matches_float64_and_cpu(g: &Device) {
    use add_activation::Act;
    fn case<T: Elem>(g: &Device, rng: &mut Rng, atol: f64, rtol: f64) {
        let c = Device::cpu();
        for n in [1usize, 1025, 1000 * 4096 + 3] {
            let (x, res) = (T::from_f32s(&rng.vec(n, 6.0)), T::from_f32s(&rng.vec(n, 6.0)));
            for act in [Act::Gelu, Act::Silu] {
                let (want_res, want) = add_activation::reference(
                    &T::to_f64s(&x),
                    &T::to_f64s(&res),
                    act,
                    bias_gelu_dropout::erf64,
                );
                let what = format!("{} {} n={n}", act.name(), T::NAME);
                let (g_res, g_out) = add_activation_on(g, act, &x, &res);
                let (c_res, c_out) = add_activation_on(&c, act, &x, &res);
                assert_close(&format!("{what} residual on the GPU"), &g_res, &want_res, atol, rtol);
                assert_close(&format!("{what} output on the GPU"), &g_out, &want, atol, rtol);
                assert_eq!(g_res, c_res, "{what}: the residual is exact arithmetic, the same on both");
                assert_close(&format!("{what} gpu vs cpu"), &g_out, &c_out, atol, rtol);
            }
        }
    }
    let mut rng = Rng::fresh("add_activation gpu");
    case::<f32>(g, &mut rng, 2e-6, 2e-6);
    case::<f16>(g, &mut rng, 1e-4, 1e-3);
    case::<fuse::half::bf16>(g, &mut rng, 1e-3, 8e-3);
}

/// One-warp variants that need more than the one-warp cap of 64 registers (`FUSE_LAUNCH_BOUNDS`,
/// emit_cuda/mod.rs), which the runtime compiles again without the cap where it spills
/// (cuda/nvrtc.rs `compile_capped`; tests/ptxas_resources.rs checks with NVRTC alone which
/// variants take more than 64 registers, without spills): bias+GELU+dropout f32 `[1024]` against
/// float64 with the CPU's mask, and the one-row LayerNorm f32 `[1024]` against float64 and the
/// CPU, at 1000 columns (aligned and in bounds but masked: ptxas_resources finds that variant
/// over the cap) and 1024 (every fact proven: within the cap), each on one warp.
fn one_warp_variants_past_the_register_cap_match_float64(g: &Device) {
    let c = Device::cpu();
    let mut rng = Rng::fresh("one-warp variants past the cap");
    for (rows, cols) in [(33usize, 1000usize), (8, 1024)] {
        let x = rng.vec(rows * cols, 4.0);
        let (w, b) = (rng.vec(cols, 1.0), rng.vec(cols, 1.0));
        let want = layernorm::reference(&f64s(&x), &f64s(&w), &f64s(&b), rows, cols, 1e-5);
        let mut got = Vec::new();
        for d in [g, &c] {
            let v = run_on(d, &[&x, &w, &b], rows * cols, |inputs, y| {
                let grid = LaunchConfig::new(rows as u32).num_warps(1);
                let n = cols as i32;
                layernorm::layernorm::launch::<f32, 1024>(
                    d, grid, inputs[0], y, inputs[1], inputs[2], n, n, 1e-5,
                )
            });
            assert_close(
                &format!("layernorm [1024] on one warp {rows}x{cols} on {}", d.description()),
                &v,
                &want,
                3e-5,
                2e-5,
            );
            got.push(v);
        }
        assert_close("layernorm [1024] on one warp, gpu vs cpu", &got[0], &got[1], 3e-5, 2e-5);
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

/// The kernels of the examples that have no emitted-CUDA snapshot compile with NVRTC (no GPU
/// needed) for sm_80 and sm_90, at the tiles their launchers use, with every launch-time
/// specialisation on (the proven, unchecked paths) and off (the checked ones).
fn newer_example_kernels_compile_with_nvrtc() {
    use fuse::KernelSpec;
    let specs: Vec<(&'static KernelSpec, Vec<u64>)> = vec![
        (&softmax::softmax_rows::f32::SPEC, vec![16, 128]),
        (&softmax::softmax_rows::f16::SPEC, vec![8, 256]),
        (&softmax::softmax_rows::bf16::SPEC, vec![64, 16]),
        (&layernorm::layernorm_rows::f32::SPEC, vec![16, 128]),
        (&layernorm::layernorm_rows::f16::SPEC, vec![8, 256]),
        (&layernorm::layernorm_rows::bf16::SPEC, vec![2, 1024]),
        (&qk_norm_rope::qk_norm_rope::f32::SPEC, vec![8, 64]),
        (&qk_norm_rope::qk_norm_rope::f16::SPEC, vec![8, 64]),
        (&qk_norm_rope::qk_norm_rope::bf16::SPEC, vec![4, 128]),
        (&qk_norm_rope::qk_norm_rope_gptj::f16::SPEC, vec![8, 64]),
        (&qk_norm_rope::qk_norm_rope_gptj::bf16::SPEC, vec![4, 128]),
        (&cross_entropy::cross_entropy::f32::SPEC, vec![cross_entropy::BLOCK as u64]),
        (&cross_entropy::cross_entropy::bf16::SPEC, vec![cross_entropy::BLOCK_16BIT as u64]),
        (&add_activation::add_gelu::f16::SPEC, vec![1024]),
        (&add_activation::add_gelu::bf16::SPEC, vec![1024]),
        (&add_activation::add_silu::f16::SPEC, vec![1024]),
        (&add_activation::add_silu::bf16::SPEC, vec![1024]),
    ];
    let mut compiled = 0;
    for (spec, consts) in specs {
        // Every fact on, every fact off, and a launch that proves no access in bounds and no mask
        // true but passes aligned buffers (the checked vector paths).
        let n = spec.specializations().len();
        let unproven: Vec<bool> = spec
            .specializations()
            .iter()
            .map(|s| !matches!(s, Specialization::InBounds(_) | Specialization::AllTrue(_)))
            .collect();
        for arch in ["sm_80", "sm_90"] {
            for (what, values) in
                [("on", vec![true; n]), ("off", vec![false; n]), ("unproven", unproven.clone())]
            {
                match spec.compile_for_arch_with(arch, &consts, 4, &values) {
                    Ok(cubin) => assert!(cubin.len() > 64, "{} {arch}: empty cubin", spec.name()),
                    Err(e) => {
                        panic!("{} {consts:?} for {arch} (specialisations {what}) failed:\n{e}", spec.name())
                    }
                }
                compiled += 1;
            }
        }
    }
    println!("compiled {compiled} kernel variants");
}

fn main() {
    let mut trials = harness::gpu_trials(vec![
        ("add_mul_on_gpu_matches_float64_and_cpu", add_mul_on_gpu_matches_float64_and_cpu),
        ("add_mul_f16_unaligned_views_and_odd_sizes", add_mul_f16_unaligned_views_and_odd_sizes),
        ("softmax_and_layernorm_on_gpu_match_cpu", softmax_and_layernorm_on_gpu_match_cpu),
        ("generic_kernels_in_half_types_match_cpu", generic_kernels_in_half_types_match_cpu),
        ("dropout_masks_are_bit_identical_on_gpu_and_cpu", dropout_masks_are_bit_identical_on_gpu_and_cpu),
        ("rand_thresholds_match_cpu_for_every_kind_of_p", rand_thresholds_match_cpu_for_every_kind_of_p),
        ("rand16_matches_cpu_for_every_kind_of_p", rand16_matches_cpu_for_every_kind_of_p),
        (
            "dropout16_masks_are_bit_identical_on_gpu_and_cpu",
            dropout16_masks_are_bit_identical_on_gpu_and_cpu,
        ),
        ("erf_is_within_two_ulp_of_float64", erf_is_within_two_ulp_of_float64),
        ("sigmoid_is_within_four_ulp_of_float64", sigmoid_is_within_four_ulp_of_float64),
        ("float_constants_match_cpu_bit_for_bit", float_constants_match_cpu_bit_for_bit),
        ("gpu_out_of_bounds_is_reported_not_performed", gpu_out_of_bounds_is_reported_not_performed),
        (
            "chunk_uniform_masks_and_rem_gathers_match_cpu_bit_for_bit",
            chunk_uniform_masks_and_rem_gathers_match_cpu_bit_for_bit,
        ),
        ("xor_gathers_match_cpu_bit_for_bit", xor_gathers_match_cpu_bit_for_bit),
        ("split_join_on_gpu_match_float64_and_cpu", split_join_on_gpu_match_float64_and_cpu),
        ("row_stats_on_gpu_match_float64_and_cpu", row_stats_on_gpu_match_float64_and_cpu),
        ("rows_kernels_on_gpu_match_float64_and_cpu", rows_kernels_on_gpu_match_float64_and_cpu),
        ("qk_norm_rope_on_gpu_matches_float64_and_cpu", qk_norm_rope_on_gpu_matches_float64_and_cpu),
        ("cross_entropy_on_gpu_matches_float64_and_cpu", cross_entropy_on_gpu_matches_float64_and_cpu),
        ("add_activation_on_gpu_matches_float64_and_cpu", add_activation_on_gpu_matches_float64_and_cpu),
        (
            "one_warp_variants_past_the_register_cap_match_float64",
            one_warp_variants_past_the_register_cap_match_float64,
        ),
    ]);
    trials.extend(harness::nvrtc_trials(vec![(
        "newer_example_kernels_compile_with_nvrtc",
        newer_example_kernels_compile_with_nvrtc,
    )]));
    harness::run(trials)
}
