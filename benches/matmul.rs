//! Tensor-core matmul (`examples/kernels/matmul.rs`): plain and with the bias + GELU epilogue, f16
//! and bf16, at the shapes `triton_dot.py` times (4096^3, 8192^3, 8192x4096x11008), over the
//! example's block configurations. Then the fused int8 matmul (`examples/kernels/matmul_int8.rs`:
//! i8 x i8 -> i32, scales, requantised to int8; pattern `matmul_int8`, dtype `int8`, which
//! `triton_dot.py` has no row for) at the same shapes, in TFLOP/s-equivalent (2mnk/t, i.e. TOP/s),
//! and the one-kernel FFN sublayer (`examples/kernels/ffn_sublayer.rs`, pattern `ffn_sublayer`,
//! shape `8192x4096` for m x d, 2 m d^2 flops) in f16 and bf16, and FlashAttention's forward
//! (`examples/kernels/attention.rs`, pattern `attention_fwd`) at `triton_dot.py`'s shapes, causal
//! and not (4 b h n^2 d flops, halved when causal). Prints a table; with
//! `FUSE_BENCH_JSON=path` also writes JSON rows
//! `{pattern, shape, dtype, impl, ms, tflops}` keyed as `triton_dot.py` keys its own (`impl` is
//! `fuse` for the best configuration of a row, `fuse [BMxBNxBK Ww]` for each one timed).
//! Timing: the median of 20 CUDA-event-timed launches after one warm-up (do_bench's method).
//! `FUSE_BENCH_ONLY=substring,..` keeps matching `pattern/shape/dtype` cases; `FUSE_BENCH_CONFIGS=0,3`
//! times only those configurations (indices into the example's `CONFIGS`).
#[path = "../examples/kernels/attention.rs"]
#[allow(dead_code)]
mod attention;
#[path = "../examples/kernels/ffn_sublayer.rs"]
#[allow(dead_code)]
mod ffn;
#[path = "../examples/kernels/matmul_int8.rs"]
#[allow(dead_code)]
mod int8;
#[path = "../examples/kernels/matmul.rs"]
#[allow(dead_code)] // the float64 reference is the example's
mod kernels;
#[path = "common/roofline.rs"]
mod roofline;

use fuse::half::{bf16, f16};
use fuse::{Device, Half, Result};

struct Row {
    pattern: &'static str,
    shape: String,
    dtype: &'static str,
    imp: String,
    ms: f64,
    tflops: f64,
    /// For the `fuse` (best) rows: the cost model's FLOPs, `dot` FLOPs and compulsory bytes of one
    /// launch of the best configuration, for the roofline.
    cost: Option<(u64, u64, u64)>,
}

/// Whether `FUSE_BENCH_ONLY` keeps the case `pattern/shape/dtype`.
fn wanted(case: &str) -> bool {
    let only = std::env::var("FUSE_BENCH_ONLY").ok();
    only.as_deref().is_none_or(|o| o.split(',').any(|p| case.contains(p)))
}

/// `FUSE_BENCH_CONFIGS=0,3`: whether configuration `i` (an index into the example's CONFIGS) is
/// to be timed; all of them when the variable is unset.
fn picked(i: usize) -> bool {
    static P: std::sync::OnceLock<Option<Vec<usize>>> = std::sync::OnceLock::new();
    let p = P.get_or_init(|| {
        std::env::var("FUSE_BENCH_CONFIGS")
            .ok()
            .map(|v| v.split(',').filter_map(|i| i.trim().parse().ok()).collect())
    });
    p.as_ref().is_none_or(|p| p.contains(&i))
}

/// Times `launch(i)` for each picked configuration `i` (tag `tags[i]`; the median of `iters`
/// launches), prints and records a row per configuration and one `fuse` row for the best.
fn time_configs(
    dev: &Device,
    (pattern, shape, dtype): (&'static str, &str, &'static str),
    flops: f64,
    iters: usize,
    tags: impl IntoIterator<Item = String>,
    mut launch: impl FnMut(usize) -> Result<()>,
    rows: &mut Vec<Row>,
) {
    let mut best: Option<(f64, String, usize)> = None;
    for (i, tag) in tags.into_iter().enumerate().filter(|(i, _)| picked(*i)) {
        match dev.median_ms(iters, || Ok(()), || launch(i)) {
            Ok(ms) => {
                let tflops = flops / ms / 1e9;
                println!("{pattern:<18} {shape:<18} {dtype:<9} {tag:<28} {ms:8.3} ms {tflops:7.1} TFLOP/s");
                rows.push(Row {
                    pattern,
                    shape: shape.into(),
                    dtype,
                    imp: tag.clone(),
                    ms,
                    tflops,
                    cost: None,
                });
                if best.as_ref().is_none_or(|(b, _, _)| ms < *b) {
                    best = Some((ms, tag, i));
                }
            }
            Err(e) => println!("{pattern:<18} {shape:<18} {dtype:<9} {tag:<28} ERROR {e}"),
        }
    }
    if let Some((ms, tag, i)) = best {
        let tflops = flops / ms / 1e9;
        let what = "fuse";
        println!(
            "{pattern:<18} {shape:<18} {dtype:<9} {what:<28} {ms:8.3} ms {tflops:7.1} TFLOP/s  (best: {tag})"
        );
        let cost = roofline::cost_of(&mut || launch(i)).ok();
        rows.push(Row { pattern, shape: shape.into(), dtype, imp: "fuse".into(), ms, tflops, cost });
    }
}

/// The fused int8 matmul (`w` K-major, per-row and per-column scales, no bias, int8 out) at
/// `triton_dot.py`'s shapes; 2mnk operations per launch, the median of 5 launches.
fn bench_int8(dev: &Device, rows: &mut Vec<Row>) -> Result<()> {
    for (m, n, k) in [(4096usize, 4096usize, 4096usize), (8192, 8192, 8192), (8192, 4096, 11008)] {
        let shape = format!("{m}x{n}x{k}");
        if !wanted(&format!("matmul_int8/{shape}/int8")) {
            continue;
        }
        let fill = |len: usize, seed: u32| -> Vec<i8> {
            (0..len).map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 255) as i32 as i8).collect()
        };
        let a = dev.upload(&fill(m * k, 1))?;
        let w = dev.upload(&fill(n * k, 2))?;
        let sa = dev.upload(&vec![1e-3f32; m])?;
        let sw = dev.upload(&vec![1e-3f32; n])?;
        let mut c = dev.zeros::<i8>(m * n)?;
        let configs = &int8::CONFIGS[..int8::CONFIGS.len() - 1]; // not the CPU's
        let tags =
            configs.iter().map(|c| format!("fuse [{}x{}x{} {}w {}s]", c.bm, c.bn, c.bk, c.warps, c.stages));
        let launch =
            |i: usize| int8::launch(dev, configs[i], &a, &w, &sa, &sw, None, &mut c, (m, n, k), 0.05);
        let flops = 2.0 * (m * n * k) as f64;
        time_configs(dev, ("matmul_int8", &shape, "int8"), flops, 5, tags, launch, rows);
    }
    Ok(())
}

/// The one-kernel FFN sublayer `x + gelu(LayerNorm(x) @ W + b)` at m = 8192, d = 4096; 2 m d^2
/// flops per launch (the matmul's; the LayerNorm and epilogue are not counted).
fn bench_ffn<T: Half>(
    dev: &Device,
    dtype: &'static str,
    conv: fn(f32) -> T,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let (m, d) = (8192usize, 4096usize);
    let shape = format!("{m}x{d}");
    if !wanted(&format!("ffn_sublayer/{shape}/{dtype}")) {
        return Ok(());
    }
    let fill = |len: usize, seed: u32| -> Vec<T> {
        let v = |i: usize| (((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 1000.0 - 0.5;
        (0..len).map(|i| conv(v(i))).collect()
    };
    let x = dev.upload(&fill(m * d, 1))?;
    let w = dev.upload(&fill(d * d, 2))?;
    let (b, gamma, beta) = (dev.upload(&fill(d, 3))?, dev.upload(&fill(d, 4))?, dev.upload(&fill(d, 5))?);
    let mut y = dev.zeros::<T>(m * d)?;
    let configs = &ffn::CONFIGS[..ffn::CONFIGS.len() - 1]; // not the CPU's
    let tags = configs.iter().map(|c| format!("fuse [{}x{}x{} {}w]", c.bm, c.bn, c.bk, c.warps));
    let launch = |i: usize| ffn::launch(dev, configs[i], &x, &w, &b, &gamma, &beta, &mut y, (m, d), 1e-5);
    time_configs(dev, ("ffn_sublayer", &shape, dtype), 2.0 * (m * d * d) as f64, 20, tags, launch, rows);
    Ok(())
}

/// FlashAttention forward at `triton_dot.py`'s shapes (`b4h32n4096d64`, `b4h32n4096d128`,
/// `b1h32n16384d128`, each causal and not), over the example's GPU configurations that fit the
/// head dim.
fn bench_attention<T: Half>(
    dev: &Device,
    dtype: &'static str,
    conv: fn(f32) -> T,
    rows: &mut Vec<Row>,
) -> Result<()> {
    use attention::{Options, Shape};
    for (b, h, n, d) in [(4usize, 32usize, 4096usize, 64usize), (4, 32, 4096, 128), (1, 32, 16384, 128)] {
        let s = Shape { batch: b, heads: h, kv_heads: h, n, d };
        let len = b * h * n * d;
        let fill = |seed: u32| -> Vec<T> {
            (0..len)
                .map(|i| conv((((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 500.0 - 1.0))
                .collect()
        };
        let (q, k, v) = (dev.upload(&fill(1))?, dev.upload(&fill(2))?, dev.upload(&fill(3))?);
        let mut o = dev.zeros::<T>(len)?;
        let mut lse = dev.zeros::<f32>(b * h * n)?;
        for causal in [false, true] {
            let shape = format!("b{b}h{h}n{n}d{d}{}", if causal { " causal" } else { "" });
            if !wanted(&format!("attention_fwd/{shape}/{dtype}")) {
                continue;
            }
            let configs = &attention::CONFIGS[..attention::CONFIGS.len() - 1]; // not the CPU's
            let tags = configs.iter().map(|c| format!("fuse [{}x{} {}w {}s]", c.bm, c.bn, c.warps, c.stages));
            let opt = Options { scale: 1.0 / (d as f32).sqrt(), causal, p_drop: 0.0, seed: 0 };
            let launch = |i: usize| attention::launch(dev, configs[i], s, &q, &k, &v, &mut o, &mut lse, opt);
            let flops = 4.0 * (b * h) as f64 * (n * n * d) as f64 * if causal { 0.5 } else { 1.0 };
            time_configs(dev, ("attention_fwd", &shape, dtype), flops, 10, tags, launch, rows);
        }
    }
    Ok(())
}

fn bench<T: Half>(dev: &Device, dtype: &'static str, conv: fn(f32) -> T, rows: &mut Vec<Row>) -> Result<()> {
    for (m, n, k) in [(4096usize, 4096usize, 4096usize), (8192, 8192, 8192), (8192, 4096, 11008)] {
        let shape = format!("{m}x{n}x{k}");
        let fill = |len: usize, seed: u32| -> Vec<T> {
            (0..len)
                .map(|i| conv((((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 1000.0 - 0.5))
                .collect()
        };
        let a = dev.upload(&fill(m * k, 1))?;
        let b = dev.upload(&fill(k * n, 2))?;
        let bias = dev.upload(&fill(n, 3))?;
        let mut c = dev.zeros::<T>(m * n)?;
        for (pattern, gelu) in [("matmul", false), ("matmul_bias_gelu", true)] {
            if !wanted(&format!("{pattern}/{shape}/{dtype}")) {
                continue;
            }
            let configs = &kernels::CONFIGS[..kernels::CONFIGS.len() - 1]; // not the CPU's
            let tags = configs
                .iter()
                .map(|c| format!("fuse [{}x{}x{} {}w {}s]", c.bm, c.bn, c.bk, c.warps, c.stages));
            let launch = |i: usize| kernels::launch(dev, configs[i], &a, &b, &bias, &mut c, (m, n, k), gelu);
            time_configs(dev, (pattern, &shape, dtype), 2.0 * (m * n * k) as f64, 20, tags, launch, rows);
        }
    }
    Ok(())
}

fn main() -> Result<()> {
    let dev = Device::cuda(0).inspect_err(|e| println!("matmul bench: no GPU ({e}); nothing to time"));
    let Ok(dev) = dev else { return Ok(()) };
    println!("device: {}", dev.description());
    let mut rows = Vec::new();
    bench::<f16>(&dev, "float16", f16::from_f32, &mut rows)?;
    bench::<bf16>(&dev, "bfloat16", bf16::from_f32, &mut rows)?;
    bench_int8(&dev, &mut rows)?;
    bench_ffn::<f16>(&dev, "float16", f16::from_f32, &mut rows)?;
    bench_ffn::<bf16>(&dev, "bfloat16", bf16::from_f32, &mut rows)?;
    bench_attention::<f16>(&dev, "float16", f16::from_f32, &mut rows)?;
    bench_attention::<bf16>(&dev, "bfloat16", bf16::from_f32, &mut rows)?;
    let points: Vec<roofline::Point> = rows
        .iter()
        .filter_map(|r| {
            let (flops, dot, bytes) = r.cost?;
            let s = r.ms * 1e-3;
            let label = format!("{} {} {}", r.pattern, r.shape, r.dtype);
            Some(roofline::Point {
                label,
                gbs: bytes as f64 / s / 1e9,
                tflops: flops as f64 / s / 1e12,
                tensor: 2 * dot > flops,
            })
        })
        .collect();
    roofline::report(&dev, &points);
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
