//! The benches' roofline: the ceilings measured in the same run — a device-to-device
//! copy of 1 GiB, an FP32 FMA peak and an `mma.sync` f16 tensor-core peak (small CUDA C kernels
//! compiled with NVRTC through cudarc, launched on the bench's own stream) — and each fused
//! kernel's FLOPs from `KernelSpec::cost`, recorded from whatever a timed closure launches.
//! Plot and table: `fuse_roofline`, written beside `$FUSE_BENCH_JSON`.

use fuse::{Device, Result};
pub use fuse_roofline::{Ceilings, Point};

/// FLOPs and `dot` FLOPs of everything `f` launches (each launch's `KernelSpec::cost`; a
/// cost that cannot be computed counts 0 and is printed).
pub fn flops_of(f: &mut dyn FnMut() -> Result<()>) -> Result<(u64, u64)> {
    cost_of(f).map(|(flops, dot, _)| (flops, dot))
}

/// [`flops_of`] and the compulsory bytes (per launch, summed).
pub fn cost_of(f: &mut dyn FnMut() -> Result<()>) -> Result<(u64, u64, u64)> {
    fuse::cost::record_costs();
    let r = f();
    let costs = fuse::cost::take_recorded_costs();
    r?;
    let (mut flops, mut dot, mut bytes) = (0u64, 0u64, 0u64);
    for (name, c) in costs {
        match c {
            Ok(c) => {
                flops += c.flops;
                dot += c.dot_flops;
                bytes += c.bytes();
            }
            Err(e) => println!("roofline: no cost for {name}: {e}"),
        }
    }
    Ok((flops, dot, bytes))
}

const PEAKS: &str = r#"
// FP32 FMA peak: 8 independent chains per thread, 16 FMAs each per iteration (2 FLOPs each).
extern "C" __global__ void fuse_fma_peak(float* out, float a, float b, int iters) {
  float x[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) x[j] = (float)(threadIdx.x + j) * 1e-3f;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int u = 0; u < 16; ++u) {
#pragma unroll
      for (int j = 0; j < 8; ++j) x[j] = __fmaf_rn(x[j], a, b);
    }
  }
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += x[j];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
// Tensor-core peak: mma.sync m16n8k16 f16 x f16 -> f32 on registers, 8 independent accumulators
// per warp (2 * 16 * 8 * 16 = 4096 FLOPs per mma per warp).
extern "C" __global__ void fuse_mma_peak(float* out, int iters) {
  const unsigned int one = 0x3C003C00u;  // two f16 ones
  unsigned int a0 = one, a1 = one, a2 = one, a3 = one, b0 = one, b1 = one;
  float d[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j) { d[j][0] = 0.0f; d[j][1] = 0.0f; d[j][2] = 0.0f; d[j][3] = 0.0f; }
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                   : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
                   : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += d[j][0] + d[j][1] + d[j][2] + d[j][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"#;

/// Today's date (UTC) as `YYYY-MM-DD`.
pub fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86400)
        .unwrap_or(0) as i64;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The ceilings of this device, measured now: a 1 GiB device-to-device copy (GB/s counting the
/// bytes read and written, median of 10), and the FMA and `mma.sync` peaks (TFLOP/s, median of 5
/// launches each of a few hundred ms of work).
pub fn measure_ceilings(dev: &Device) -> std::result::Result<Ceilings, String> {
    use fuse::cudarc::driver::{LaunchConfig, PushKernelArg};
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let n = 256usize << 20; // 1 GiB of f32
    let src = dev.zeros::<f32>(n).map_err(|e| err(&e))?;
    let mut dst = dev.zeros::<f32>(n).map_err(|e| err(&e))?;
    let copy_ms = dev.median_ms(10, || Ok(()), || dst.copy_from(&src)).map_err(|e| err(&e))?;
    drop((src, dst));
    let copy_gbs = 2.0 * (n * 4) as f64 / (copy_ms * 1e-3) / 1e9;

    let (Some(ctx), Some(stream), Some(arch)) = (dev.cudarc_context(), dev.cudarc_stream(), dev.arch())
    else {
        return Err("not a CUDA device".into());
    };
    let opts = fuse::cudarc::nvrtc::CompileOptions {
        options: vec![format!("--gpu-architecture={arch}")],
        ..Default::default()
    };
    let ptx = fuse::cudarc::nvrtc::compile_ptx_with_opts(PEAKS, opts).map_err(|e| err(&e))?;
    let module = ctx.load_module(ptx).map_err(|e| err(&e))?;
    let (fma, mma) = (
        module.load_function("fuse_fma_peak").map_err(|e| err(&e))?,
        module.load_function("fuse_mma_peak").map_err(|e| err(&e))?,
    );
    let (blocks, threads) = (4096u32, 256u32);
    let mut out = stream.alloc_zeros::<f32>((blocks * threads) as usize).map_err(|e| err(&e))?;
    let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
    let (a, b, fma_iters) = (0.999_9f32, 1e-4f32, 256i32);
    let fma_ms = dev
        .median_ms(
            5,
            || Ok(()),
            || {
                let mut l = stream.launch_builder(&fma);
                l.arg(&mut out).arg(&a).arg(&b).arg(&fma_iters);
                // SAFETY: the kernel writes one float per thread of `out`, which has that many.
                unsafe { l.launch(cfg) }.map(|_| ()).map_err(|e| fuse::Error::Cuda(e.to_string()))
            },
        )
        .map_err(|e| err(&e))?;
    let fma_flops = 2.0 * 8.0 * 16.0 * f64::from(fma_iters) * f64::from(blocks * threads);
    let mma_iters = 128i32;
    let mma_ms = dev
        .median_ms(
            5,
            || Ok(()),
            || {
                let mut l = stream.launch_builder(&mma);
                l.arg(&mut out).arg(&mma_iters);
                // SAFETY: as above.
                unsafe { l.launch(cfg) }.map(|_| ()).map_err(|e| fuse::Error::Cuda(e.to_string()))
            },
        )
        .map_err(|e| err(&e))?;
    let warps = f64::from(blocks * threads / 32);
    let mma_flops = 4096.0 * 8.0 * f64::from(mma_iters) * warps;
    dev.synchronize().map_err(|e| err(&e))?;
    Ok(Ceilings {
        device: format!("{} ({arch})", dev.description()),
        date: today(),
        copy_gbs,
        fma_tflops: fma_flops / (fma_ms * 1e-3) / 1e12,
        mma_tflops: mma_flops / (mma_ms * 1e-3) / 1e12,
    })
}

/// Measures the ceilings and writes the plot and table beside `$FUSE_BENCH_JSON` (if set),
/// printing the table; `points` are the fused kernels' rows.
pub fn report(dev: &Device, points: &[Point]) {
    let ceilings = match measure_ceilings(dev) {
        Ok(c) => c,
        Err(e) => {
            println!("roofline: ceilings not measured: {e}");
            return;
        }
    };
    println!("\n{}", fuse_roofline::table(&ceilings, points));
    if let Ok(path) = std::env::var("FUSE_BENCH_JSON") {
        match fuse_roofline::write_beside(std::path::Path::new(&path), &ceilings, points) {
            Ok((svg, md)) => println!("roofline: wrote {svg} and {md}"),
            Err(e) => println!("roofline: could not write the plot: {e}"),
        }
    }
}
