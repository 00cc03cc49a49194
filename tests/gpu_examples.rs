//! GPU integration tests (harness = false, fuse-runtime/tests/common/harness.rs): need an NVIDIA GPU;
//! elsewhere each is reported as ignored, "needs an NVIDIA GPU", and the reason is printed once.
//! The differential tests run the same kernel on the same inputs on the GPU and the CPU
//! interpreter: outputs within tolerance, dropout masks bit-identical.
mod common;
#[path = "../fuse-runtime/tests/common/harness.rs"]
mod harness;

use common::*;
use fuse::half::f16;
use fuse::Device;

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

fn main() {
    harness::run(harness::gpu_trials(vec![
        ("add_mul_on_gpu_matches_float64_and_cpu", add_mul_on_gpu_matches_float64_and_cpu),
        ("add_mul_f16_unaligned_views_and_odd_sizes", add_mul_f16_unaligned_views_and_odd_sizes),
        ("softmax_and_layernorm_on_gpu_match_cpu", softmax_and_layernorm_on_gpu_match_cpu),
        ("generic_kernels_in_half_types_match_cpu", generic_kernels_in_half_types_match_cpu),
        ("dropout_masks_are_bit_identical_on_gpu_and_cpu", dropout_masks_are_bit_identical_on_gpu_and_cpu),
        ("rand_thresholds_match_cpu_for_every_kind_of_p", rand_thresholds_match_cpu_for_every_kind_of_p),
        ("erf_is_within_two_ulp_of_float64", erf_is_within_two_ulp_of_float64),
        ("gpu_out_of_bounds_is_reported_not_performed", gpu_out_of_bounds_is_reported_not_performed),
        (
            "chunk_uniform_masks_and_rem_gathers_match_cpu_bit_for_bit",
            chunk_uniform_masks_and_rem_gathers_match_cpu_bit_for_bit,
        ),
    ]))
}
