//! Tensor-core matmul (`examples/kernels/matmul.rs`): plain and with the bias + GELU epilogue, f16
//! and bf16, at the shapes `triton_dot.py` times (4096^3, 8192^3, 8192x4096x11008), over the
//! example's block configurations. Prints a table; with `FUSE_BENCH_JSON=path` also writes JSON rows
//! `{pattern, shape, dtype, impl, ms, tflops}` keyed as `triton_dot.py` keys its own (`impl` is
//! `fuse` for the best configuration of a row, `fuse [BMxBNxBK Ww]` for each one timed).
//! Timing: the median of 20 CUDA-event-timed launches after one warm-up (do_bench's method).
//! `FUSE_BENCH_ONLY=substring,..` keeps matching `pattern/shape/dtype` cases; `FUSE_BENCH_CONFIGS=0,3`
//! times only those configurations (indices into the example's `CONFIGS`).
#[path = "../examples/kernels/matmul.rs"]
#[allow(dead_code)] // the float64 reference is the example's
mod kernels;

use fuse::half::{bf16, f16};
use fuse::{Device, Half, Result};

struct Row {
    pattern: &'static str,
    shape: String,
    dtype: &'static str,
    imp: String,
    ms: f64,
    tflops: f64,
}

fn bench<T: Half>(dev: &Device, dtype: &'static str, conv: fn(f32) -> T, rows: &mut Vec<Row>) -> Result<()> {
    let only = std::env::var("FUSE_BENCH_ONLY").ok();
    // `FUSE_BENCH_CONFIGS=0,3`: only these indices of the example's CONFIGS.
    let picked: Option<Vec<usize>> = std::env::var("FUSE_BENCH_CONFIGS")
        .ok()
        .map(|v| v.split(',').filter_map(|i| i.trim().parse().ok()).collect());
    for (m, n, k) in [(4096usize, 4096usize, 4096usize), (8192, 8192, 8192), (8192, 4096, 11008)] {
        let shape = format!("{m}x{n}x{k}");
        let fill = |len: usize, seed: u32| -> Vec<T> {
            (0..len).map(|i| conv((((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 1000.0 - 0.5)).collect()
        };
        let a = dev.upload(&fill(m * k, 1))?;
        let b = dev.upload(&fill(k * n, 2))?;
        let bias = dev.upload(&fill(n, 3))?;
        let mut c = dev.zeros::<T>(m * n)?;
        for (pattern, gelu) in [("matmul", false), ("matmul_bias_gelu", true)] {
            let case = format!("{pattern}/{shape}/{dtype}");
            if only.as_deref().is_some_and(|o| !o.split(',').any(|p| case.contains(p))) {
                continue;
            }
            let flops = 2.0 * (m * n * k) as f64;
            let mut best: Option<(f64, String)> = None;
            for (ci, &cfg) in kernels::CONFIGS[..kernels::CONFIGS.len() - 1].iter().enumerate() {
                if picked.as_ref().is_some_and(|p| !p.contains(&ci)) {
                    continue;
                }
                let tag = format!("fuse [{}x{}x{} {}w {}s]", cfg.bm, cfg.bn, cfg.bk, cfg.warps, cfg.stages);
                let res = dev.median_ms(20, || Ok(()), || {
                    kernels::launch(dev, cfg, &a, &b, &bias, &mut c, (m, n, k), gelu)
                });
                match res {
                    Ok(ms) => {
                        println!("{pattern:<18} {shape:<18} {dtype:<9} {tag:<28} {ms:8.3} ms {:7.1} TFLOP/s", flops / ms / 1e9);
                        rows.push(Row { pattern, shape: shape.clone(), dtype, imp: tag.clone(), ms, tflops: flops / ms / 1e9 });
                        if best.as_ref().is_none_or(|(b, _)| ms < *b) {
                            best = Some((ms, tag));
                        }
                    }
                    Err(e) => println!("{pattern:<18} {shape:<18} {dtype:<9} {tag:<28} ERROR {e}"),
                }
            }
            if let Some((ms, tag)) = best {
                println!("{pattern:<18} {shape:<18} {dtype:<9} {:<28} {ms:8.3} ms {:7.1} TFLOP/s  (best: {tag})", "fuse", flops / ms / 1e9);
                rows.push(Row { pattern, shape: shape.clone(), dtype, imp: "fuse".into(), ms, tflops: flops / ms / 1e9 });
            }
        }
    }
    Ok(())
}

fn main() -> Result<()> {
    let dev = Device::cuda(0).or_else(|e| {
        println!("matmul bench: no GPU ({e}); nothing to time");
        Err(e)
    });
    let Ok(dev) = dev else { return Ok(()) };
    println!("device: {}", dev.description());
    let mut rows = Vec::new();
    bench::<f16>(&dev, "float16", f16::from_f32, &mut rows)?;
    bench::<bf16>(&dev, "bfloat16", bf16::from_f32, &mut rows)?;
    if let Ok(path) = std::env::var("FUSE_BENCH_JSON") {
        let json: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{{\"pattern\": \"{}\", \"shape\": \"{}\", \"dtype\": \"{}\", \"impl\": \"{}\", \"ms\": {}, \"tflops\": {}}}",
                    r.pattern, r.shape, r.dtype, r.imp, r.ms, r.tflops
                )
            })
            .collect();
        std::fs::write(&path, format!("[\n{}\n]\n", json.join(",\n")))
            .map_err(|e| fuse::Error::InvalidArgument(format!("cannot write {path}: {e}")))?;
    }
    Ok(())
}
