//! The fused LayerNorm op on candle's CUDA device: the kernel launched by fuse on candle's
//! stream over candle's `CudaSlice`s, checked against candle's own ops in f64 on fresh random
//! inputs (seed printed; `FUSE_TEST_SEED` replays), with views at offsets, in a chain of candle
//! ops with no synchronisation, on both kinds of candle stream, and against the CPU interpreter.
//!
//! `harness = false` (libtest-mimic): built without the `cuda` feature, or with it but without a
//! usable GPU, every test is reported as *ignored*, with the reason printed once, never as passed
//! (`--include-ignored` runs them anyway, and each fails with the reason).

use libtest_mimic::{Arguments, Trial};

/// The tests, each `fn(&candle_core::Device) -> candle_core::Result<()>` in `gpu` below.
macro_rules! gpu_tests {
    ($($name:ident),* $(,)?) => {
        #[cfg(feature = "cuda")]
        fn tests() -> Vec<(&'static str, fn(&candle_core::Device) -> candle_core::Result<()>)> {
            vec![$((stringify!($name), gpu::$name as fn(&candle_core::Device) -> candle_core::Result<()>)),*]
        }
        #[cfg(not(feature = "cuda"))]
        fn names() -> Vec<&'static str> {
            vec![$(stringify!($name)),*]
        }
    };
}

gpu_tests!(
    matches_candle_ops_on_the_gpu,
    honours_start_offsets_on_the_gpu,
    runs_in_order_on_candles_stream,
    runs_on_a_candle_device_with_its_own_stream,
    agrees_with_the_cpu_interpreter,
    fuse_device_is_cached_per_candle_device,
    errors_on_the_gpu_name_the_argument,
);

fn ignored(name: &'static str, kind: &'static str, why: String) -> Trial {
    Trial::test(name, move || Err(why.into())).with_ignored_flag(true).with_kind(kind)
}

#[cfg(not(feature = "cuda"))]
fn trials() -> Vec<Trial> {
    let why = "fuse-candle was built without the `cuda` feature (build with `--features cuda`, or use \
               scripts/build_candle_gpu.sh)";
    eprintln!("{why}: the GPU tests are ignored");
    names().into_iter().map(|n| ignored(n, "needs --features cuda", why.to_string())).collect()
}

#[cfg(feature = "cuda")]
fn trials() -> Vec<Trial> {
    match candle_core::Device::new_cuda(0) {
        Ok(device) => tests()
            .into_iter()
            .map(|(name, test)| {
                let device = device.clone();
                Trial::test(name, move || test(&device).map_err(|e| e.to_string().into()))
            })
            .collect(),
        Err(e) => {
            let why = format!("candle found no usable CUDA device: {e}");
            eprintln!("{why}: the GPU tests are ignored");
            tests().into_iter().map(|(n, _)| ignored(n, "needs an NVIDIA GPU", why.clone())).collect()
        }
    }
}

fn main() {
    libtest_mimic::run(&Arguments::from_args(), trials()).exit()
}

#[cfg(feature = "cuda")]
mod gpu {
    use candle_core::{bail, DType, Device, Tensor};
    use fuse_candle::ops::FusedLayerNorm;
    use fuse_testkit::candle::{candle_layernorm, error_ratio, tolerance, Rng};
    use std::cell::RefCell;

    const EPS: f64 = 1e-5;
    const OP: FusedLayerNorm = FusedLayerNorm { eps: EPS as f32 };

    thread_local!(static RNG: RefCell<Rng> = RefCell::new(Rng::fresh("candle_gpu")));

    fn random(
        dims: &[usize],
        scale: f64,
        shift: f64,
        dtype: DType,
        device: &Device,
    ) -> candle_core::Result<Tensor> {
        RNG.with(|r| r.borrow_mut().tensor(dims, scale, shift, dtype, device))
    }

    fn inputs(
        dims: &[usize],
        dtype: DType,
        device: &Device,
    ) -> candle_core::Result<(Tensor, Tensor, Tensor)> {
        let cols = dims[dims.len() - 1];
        Ok((
            random(dims, 2.0, 0.5, dtype, device)?,
            random(&[cols], 0.3, 1.0, dtype, device)?,
            random(&[cols], 0.5, 0.0, dtype, device)?,
        ))
    }

    /// fuse's own check on the device: no kernel recorded an out-of-bounds lane.
    fn fuse_sync(device: &Device) -> candle_core::Result<()> {
        let fused = fuse_candle::cuda::device(device.as_cuda_device()?)?;
        fused.synchronize().map_err(|e| fuse_candle::kernel_error("fuse-candle test", e))
    }

    fn check(what: &str, got: &Tensor, want: &Tensor, (atol, rtol): (f64, f64)) -> candle_core::Result<()> {
        let (ratio, max_abs) = error_ratio(got, want, atol, rtol)?;
        if ratio > 1.0 {
            bail!("{what}: max abs error {max_abs:e} is {ratio:.2} times the tolerance ({atol:e} + {rtol:e}|want|)")
        }
        Ok(())
    }

    fn fused_vs_candle(what: &str, x: &Tensor, w: &Tensor, b: &Tensor) -> candle_core::Result<()> {
        let got = x.apply_op3_no_bwd(w, b, &OP)?;
        if !got.device().is_cuda() || got.dims() != x.dims() || got.dtype() != x.dtype() {
            bail!("{what}: got {:?} {:?} on {:?}", got.dims(), got.dtype(), got.device())
        }
        check(what, &got, &candle_layernorm(x, w, b, EPS)?, tolerance(x.dtype()))
    }

    pub fn matches_candle_ops_on_the_gpu(device: &Device) -> candle_core::Result<()> {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            for dims in
                [&[1, 1][..], &[3, 7], &[17, 100], &[300, 1000], &[4, 8, 768], &[4096, 1024], &[64, 16384]]
            {
                let (x, w, b) = inputs(dims, dtype, device)?;
                fused_vs_candle(&format!("{dtype:?} {dims:?}"), &x, &w, &b)?;
            }
        }
        fuse_sync(device)
    }

    pub fn honours_start_offsets_on_the_gpu(device: &Device) -> candle_core::Result<()> {
        for dtype in [DType::F32, DType::BF16] {
            let (rows, cols) = (333, 512);
            let big = random(&[rows + 9, cols], 2.0, 0.5, dtype, device)?;
            let x = big.narrow(0, 5, rows)?;
            let w = random(&[cols + 3], 0.3, 1.0, dtype, device)?.narrow(0, 3, cols)?;
            let b = random(&[2 * cols], 0.5, 0.0, dtype, device)?.narrow(0, cols, cols)?;
            if x.layout().start_offset() != 5 * cols || w.layout().start_offset() != 3 {
                bail!("the views do not start where expected")
            }
            fused_vs_candle(&format!("{dtype:?} narrowed"), &x, &w, &b)?;
        }
        fuse_sync(device)
    }

    /// matmul → fused LayerNorm → GELU → matmul, queued back to back on candle's stream and read
    /// back once at the end: the stream alone orders the fused kernel with candle's.
    pub fn runs_in_order_on_candles_stream(device: &Device) -> candle_core::Result<()> {
        let (rows, d_in, hidden) = (2048, 128, 1024);
        let x = random(&[rows, d_in], 1.0, 0.0, DType::F32, device)?;
        let w1 = random(&[d_in, hidden], 1.0 / (d_in as f64).sqrt(), 0.0, DType::F32, device)?;
        let (_, g, b) = inputs(&[1, hidden], DType::F32, device)?;
        let mut outs = Vec::new();
        for i in 0..8 {
            let h = (x.matmul(&w1)? * (1.0 + i as f64))?; // a new input each time
            let y = h.apply_op3_no_bwd(&g, &b, &OP)?.gelu_erf()?;
            outs.push((h, y));
        }
        for (i, (h, y)) in outs.iter().enumerate() {
            let want = candle_layernorm(h, &g, &b, EPS)?.gelu_erf()?;
            check(&format!("chain {i}"), y, &want, (1e-4, 1e-4))?;
        }
        fuse_sync(device)
    }

    /// candle's `new_cuda_with_stream` device (its own stream, not the per-thread default one).
    pub fn runs_on_a_candle_device_with_its_own_stream(_: &Device) -> candle_core::Result<()> {
        let device = Device::new_cuda_with_stream(0)?;
        let (x, w, b) = inputs(&[1000, 768], DType::F32, &device)?;
        fused_vs_candle("own stream", &x, &w, &b)?;
        let (x, w, b) = inputs(&[1000, 768], DType::F16, &device)?;
        fused_vs_candle("own stream f16", &x, &w, &b)?;
        fuse_sync(&device)
    }

    /// The same inputs on the GPU and on the CPU (fuse's interpreter): the two back ends agree.
    pub fn agrees_with_the_cpu_interpreter(device: &Device) -> candle_core::Result<()> {
        let (x, w, b) = inputs(&[512, 1000], DType::F32, &Device::Cpu)?;
        let cpu = x.apply_op3_no_bwd(&w, &b, &OP)?;
        let gpu = x.to_device(device)?.apply_op3_no_bwd(&w.to_device(device)?, &b.to_device(device)?, &OP)?;
        check("gpu vs cpu", &gpu.to_device(&Device::Cpu)?, &cpu, (1e-5, 1e-5))?;
        fuse_sync(device)
    }

    pub fn fuse_device_is_cached_per_candle_device(device: &Device) -> candle_core::Result<()> {
        let cd = device.as_cuda_device()?;
        let a = fuse_candle::cuda::device(cd)?;
        let b = fuse_candle::cuda::device(cd)?;
        if a != b {
            bail!("two calls gave two fuse devices")
        }
        if !a.description().contains("caller's stream") {
            bail!("not on candle's stream: {}", a.description())
        }
        let stream = cd.cuda_stream();
        match a.cudarc_stream() {
            Some(s) if s.cu_stream() == stream.cu_stream() => {}
            _ => bail!("the fuse device does not launch on candle's stream"),
        }
        let other = Device::new_cuda_with_stream(0)?;
        if fuse_candle::cuda::device(other.as_cuda_device()?)? == a {
            bail!("two candle devices share one fuse device")
        }
        if !fuse_candle::cuda::forget(other.as_cuda_device()?)
            || fuse_candle::cuda::forget(other.as_cuda_device()?)
        {
            bail!("forget should drop the entry once")
        }
        Ok(())
    }

    pub fn errors_on_the_gpu_name_the_argument(device: &Device) -> candle_core::Result<()> {
        let expect_err = |r: candle_core::Result<Tensor>, parts: &[&str]| -> candle_core::Result<()> {
            match r {
                Ok(_) => bail!("expected an error mentioning {parts:?}"),
                Err(e) => {
                    let msg = e.to_string();
                    match parts.iter().find(|p| !msg.contains(*p)) {
                        Some(p) => bail!("the error should mention {p:?}: {msg}"),
                        None => Ok(()),
                    }
                }
            }
        };
        let (x, w, b) = inputs(&[64, 32], DType::F32, device)?;
        let xt = x.reshape((32, 64))?.t()?;
        // xt is [64, 32]: its rows have 32 elements, so the weight and bias have 32.
        let (w32, b32) = inputs(&[1, 32], DType::F32, device).map(|(_, w, b)| (w, b))?;
        expect_err(
            xt.apply_op3_no_bwd(&w32, &b32, &OP),
            &["argument `x`", "not contiguous", ".contiguous()"],
        )?;
        fused_vs_candle("transposed then contiguous", &xt.contiguous()?, &w32, &b32)?;
        expect_err(
            x.apply_op3_no_bwd(&w.to_dtype(DType::F16)?, &b, &OP),
            &["argument `weight`", "F16", "written for F32"],
        )?;
        expect_err(
            x.to_dtype(DType::F64)?.apply_op3_no_bwd(&w, &b, &OP),
            &["argument `x`", "F64", "F32, F16, BF16"],
        )?;
        fuse_sync(device)
    }
}
