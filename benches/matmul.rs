//! Tensor-core matmul (`fuse-kernels/src/matmul.rs`): plain and with the bias + GELU epilogue, f16
//! and bf16, at the shapes `triton_dot.py` times (4096^3, 8192^3, 8192x4096x11008), over the
//! example's block configurations. Then the fused int8 matmul (`fuse-kernels/src/matmul_int8.rs`:
//! i8 x i8 -> i32, scales, requantised to int8; pattern `matmul_int8`, dtype `int8`, which
//! `triton_dot.py` has no row for) at the same shapes, in TFLOP/s-equivalent (2mnk/t, i.e. TOP/s),
//! and the one-kernel FFN sublayer (`fuse-kernels/src/ffn_sublayer.rs`, pattern `ffn_sublayer`,
//! shape `8192x4096` for m x d, 2 m d^2 flops) in f16 and bf16, and FlashAttention's forward
//! (`fuse-kernels/src/attention.rs`, pattern `attention_fwd`) at `triton_dot.py`'s shapes, causal
//! and not (4 b h n^2 d flops, halved when causal). Prints a table; with
//! `FUSE_BENCH_JSON=path` also writes JSON rows
//! `{pattern, shape, dtype, impl, ms, tflops}` keyed as `triton_dot.py` keys its own (`impl` is
//! `fuse` for the best configuration of a row, `fuse [BMxBNxBK Ww]` for each one timed).
//! Timing: the median of 20 CUDA-event-timed launches after one warm-up (do_bench's method).
//! Every timed configuration is then checked: its output is poisoned, one more launch runs, and
//! sampled entries (rows, for attention) are compared with float64 (int8: the requantisation
//! rule; attention also its log-sum-exp); a configuration that fails prints `WRONG`, is neither
//! recorded nor ranked, and makes the bench exit non-zero at the end.
//! `FUSE_BENCH_ONLY=substring,..` keeps matching `pattern/shape/dtype` cases; `FUSE_BENCH_CONFIGS=0,3`
//! times only those configurations (indices into the example's `CONFIGS`).
use fuse_kernels::attention;
use fuse_kernels::bias_gelu_dropout;
use fuse_kernels::ffn_sublayer as ffn;
use fuse_kernels::matmul as kernels;
use fuse_kernels::matmul_int8 as int8;
use fuse_testkit::bench::roofline;

use fuse::half::{bf16, f16};
use fuse::{Device, Half, Result};
use std::cell::RefCell;

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

/// Configurations whose output failed its check: the bench then exits non-zero.
static WRONG: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

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

/// An element type's conversions from and to f32.
type Conv<T> = (fn(f32) -> T, fn(T) -> f32);

/// The unit roundoff of the half type named `dtype` (f16 or bf16).
fn unit_roundoff(dtype: &str) -> f64 {
    if dtype == "float16" {
        2f64.powi(-11)
    } else {
        2f64.powi(-8)
    }
}

/// `|got - want| <= bound`, false for NaN.
fn within(got: f64, want: f64, bound: f64) -> bool {
    (got - want).abs() <= bound
}

/// How a case checks a configuration after timing it: `poison` fills the output with values the
/// check rejects, one launch runs, and `compare` reads the output back and names the first
/// sampled entry that is wrong (`None`: all right).
struct Check<'a> {
    poison: Box<dyn FnMut() -> Result<()> + 'a>,
    compare: Box<dyn FnMut() -> Result<Option<String>> + 'a>,
}

/// The positions a check samples in a `rows x cols` output: the four corners and 60 more spread
/// by a fixed linear congruential sequence.
fn samples(rows: usize, cols: usize) -> Vec<(usize, usize)> {
    let mut at = vec![(0, 0), (0, cols - 1), (rows - 1, 0), (rows - 1, cols - 1)];
    let mut x = 0x2545_f491_u64;
    for _ in 0..60 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        at.push(((x >> 33) as usize % rows, (x >> 13) as usize % cols));
    }
    at
}

/// Times `launch(i)` for each picked configuration `i` (tag `tags[i]`; the median of `iters`
/// launches), checks its output ([`Check`]), prints and records a row per right configuration and
/// one `fuse` row for the best.
#[allow(clippy::too_many_arguments)]
fn time_configs(
    dev: &Device,
    (pattern, shape, dtype): (&'static str, &str, &'static str),
    flops: f64,
    iters: usize,
    tags: impl IntoIterator<Item = String>,
    mut launch: impl FnMut(usize) -> Result<()>,
    mut check: Check<'_>,
    rows: &mut Vec<Row>,
) {
    let mut best: Option<(f64, String, usize)> = None;
    for (i, tag) in tags.into_iter().enumerate().filter(|(i, _)| picked(*i)) {
        let timed = dev.median_ms(iters, || Ok(()), || launch(i));
        let verdict = timed.and_then(|ms| {
            (check.poison)()?;
            launch(i)?;
            Ok((ms, (check.compare)()?))
        });
        match verdict {
            Ok((_, Some(bad))) => {
                println!("{pattern:<18} {shape:<18} {dtype:<9} {tag:<28} WRONG {bad}");
                WRONG.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Ok((ms, None)) => {
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
        let (ah, wh, scale, out_scale) = (fill(m * k, 1), fill(n * k, 2), 1e-3f32, 0.05f32);
        let (a, w) = (dev.upload(&ah)?, dev.upload(&wh)?);
        let sa = dev.upload(&vec![scale; m])?;
        let sw = dev.upload(&vec![scale; n])?;
        let c = RefCell::new(dev.zeros::<i8>(m * n)?);
        // The sampled entries' float64 `t` and its bound; the poison is `requantize(t) + 64` there.
        let at = samples(m, n);
        let t: Vec<(f64, f64)> = at
            .iter()
            .map(|&(i, j)| {
                let acc: i64 = (0..k).map(|kk| i64::from(ah[i * k + kk]) * i64::from(wh[j * k + kk])).sum();
                let t = int8::reference_t(&[acc], &[scale], &[scale], None, out_scale)[0];
                (t, int8::t_error_bound(acc, scale, scale, 0.0, out_scale))
            })
            .collect();
        let mut poisoned = vec![0i8; m * n];
        for (&(i, j), &(t, _)) in at.iter().zip(&t) {
            poisoned[i * n + j] = int8::poison(&[t])[0];
        }
        let check = Check {
            poison: Box::new(|| c.borrow_mut().copy_from_host(&poisoned)),
            compare: Box::new(|| {
                let got = c.borrow().to_vec()?;
                let got: Vec<i8> = at.iter().map(|&(i, j)| got[i * n + j]).collect();
                let (ts, bounds): (Vec<f64>, Vec<f64>) = t.iter().copied().unzip();
                Ok(int8::verify(&got, &ts, &bounds)
                    .first_bad
                    .map(|(x, g, want, t)| format!("at {:?}: {g}, want {want} (t = {t})", at[x])))
            }),
        };
        let configs = &int8::CONFIGS[..int8::CONFIGS.len() - 1]; // not the CPU's
        let tags =
            configs.iter().map(|c| format!("fuse [{}x{}x{} {}w {}s]", c.bm, c.bn, c.bk, c.warps, c.stages));
        let launch = |i: usize| {
            int8::launch(dev, configs[i], &a, &w, &sa, &sw, None, &mut c.borrow_mut(), (m, n, k), out_scale)
        };
        let flops = 2.0 * (m * n * k) as f64;
        time_configs(dev, ("matmul_int8", &shape, "int8"), flops, 5, tags, launch, check, rows);
    }
    Ok(())
}

/// The one-kernel FFN sublayer `x + gelu(LayerNorm(x) @ W + b)` at m = 8192, d = 4096; 2 m d^2
/// flops per launch (the matmul's; the LayerNorm and epilogue are not counted).
fn bench_ffn<T: Half>(
    dev: &Device,
    dtype: &'static str,
    (conv, back): Conv<T>,
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
    let host: Vec<Vec<T>> = [(m * d, 1), (d * d, 2), (d, 3), (d, 4), (d, 5)].map(|(l, s)| fill(l, s)).into();
    let [x, w, b, gamma, beta] = [0, 1, 2, 3, 4].map(|i| dev.upload(&host[i]));
    let (x, w, b, gamma, beta) = (x?, w?, b?, gamma?, beta?);
    let y = RefCell::new(dev.zeros::<T>(m * d)?);
    // Whole rows of the float64 reference (rows are independent): up to 12 sampled rows.
    let f64s = |v: &[T]| v.iter().map(|&e| f64::from(back(e))).collect::<Vec<f64>>();
    let (wf, bf, gf, betaf) = (f64s(&host[1]), f64s(&host[2]), f64s(&host[3]), f64s(&host[4]));
    let u = unit_roundoff(dtype);
    let mut picked_rows: Vec<usize> = samples(m, 1).into_iter().map(|(i, _)| i).take(12).collect();
    picked_rows.sort_unstable();
    picked_rows.dedup();
    let want: Vec<(Vec<f64>, Vec<f64>)> = picked_rows
        .iter()
        .map(|&i| {
            let row = f64s(&host[0][i * d..(i + 1) * d]);
            ffn::reference(&row, &wf, &bf, &gf, &betaf, 1, d, 1e-5, u, bias_gelu_dropout::erf64)
        })
        .collect();
    let nan = vec![conv(f32::NAN); m * d];
    let check = Check {
        poison: Box::new(|| y.borrow_mut().copy_from_host(&nan)),
        compare: Box::new(|| {
            let got = y.borrow().to_vec()?;
            for (&i, (yw, bound)) in picked_rows.iter().zip(&want) {
                for j in 0..d {
                    let g = f64::from(back(got[i * d + j]));
                    if !within(g, yw[j], bound[j]) {
                        return Ok(Some(format!("at ({i}, {j}): {g}, want {} (bound {})", yw[j], bound[j])));
                    }
                }
            }
            Ok(None)
        }),
    };
    let configs = &ffn::CONFIGS[..ffn::CONFIGS.len() - 1]; // not the CPU's
    let tags = configs.iter().map(|c| format!("fuse [{}x{}x{} {}w]", c.bm, c.bn, c.bk, c.warps));
    let launch =
        |i: usize| ffn::launch(dev, configs[i], &x, &w, &b, &gamma, &beta, &mut y.borrow_mut(), (m, d), 1e-5);
    let flops = 2.0 * (m * d * d) as f64;
    time_configs(dev, ("ffn_sublayer", &shape, dtype), flops, 20, tags, launch, check, rows);
    Ok(())
}

/// FlashAttention forward at `triton_dot.py`'s shapes (`b4h32n4096d64`, `b4h32n4096d128`,
/// `b1h32n16384d128`, each causal and not), over the example's GPU configurations that fit the
/// head dim.
fn bench_attention<T: Half>(
    dev: &Device,
    dtype: &'static str,
    (conv, back): Conv<T>,
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
        let (qh, kh, vh) = (fill(1), fill(2), fill(3));
        let (q, k, v) = (dev.upload(&qh)?, dev.upload(&kh)?, dev.upload(&vh)?);
        let f64s = |v: &[T]| v.iter().map(|&e| f64::from(back(e))).collect::<Vec<f64>>();
        let (qf, kf, vf) = (f64s(&qh), f64s(&kh), f64s(&vh));
        let o = RefCell::new(dev.zeros::<T>(len)?);
        let lse = RefCell::new(dev.zeros::<f32>(b * h * n)?);
        let (nan, nan_lse) = (vec![conv(f32::NAN); len], vec![f32::NAN; b * h * n]);
        let u = unit_roundoff(dtype);
        for causal in [false, true] {
            let shape = format!("b{b}h{h}n{n}d{d}{}", if causal { " causal" } else { "" });
            if !wanted(&format!("attention_fwd/{shape}/{dtype}")) {
                continue;
            }
            let configs = &attention::CONFIGS[..attention::CONFIGS.len() - 1]; // not the CPU's
            let tags = configs.iter().map(|c| format!("fuse [{}x{} {}w {}s]", c.bm, c.bn, c.warps, c.stages));
            let opt = Options { scale: 1.0 / (d as f32).sqrt(), causal, p_drop: 0.0, seed: 0 };
            // 16 sampled rows (head, query) of the float64 reference, within its error bound.
            let picked_rows: Vec<(usize, usize)> = samples(b * h, n).into_iter().take(16).collect();
            let want: Vec<(Vec<f64>, Vec<f64>, f64)> = picked_rows
                .iter()
                .map(|&at| {
                    let (mut row, mut row_abs) = (vec![0.0; d], vec![0.0; d]);
                    let ins = (&qf[..], &kf[..], &vf[..]);
                    let how = (f64::from(opt.scale), causal);
                    let row_lse = attention::reference_row(ins, s, how, None, at, (&mut row, &mut row_abs));
                    (row, row_abs, row_lse)
                })
                .collect();
            let check = Check {
                poison: Box::new(|| {
                    o.borrow_mut().copy_from_host(&nan)?;
                    lse.borrow_mut().copy_from_host(&nan_lse)
                }),
                compare: Box::new(|| {
                    let (got, got_lse) = (o.borrow().to_vec()?, lse.borrow().to_vec()?);
                    for (&(bh, i), (row, row_abs, want_lse)) in picked_rows.iter().zip(&want) {
                        // f32 exp2/log2 of sums of up to 16384 f32 terms: ten times the bound of
                        // tests/common/attention_checks.rs (short rows); a wrong row is off by O(1).
                        let g = f64::from(got_lse[bh * n + i]);
                        if !within(g, *want_lse, 1e-4 * (1.0 + want_lse.abs()) + 1e-5 * d as f64) {
                            return Ok(Some(format!("lse at ({bh}, {i}): {g}, want {want_lse}")));
                        }
                        for c in 0..d {
                            let g = f64::from(back(got[(bh * n + i) * d + c]));
                            let bound = attention::error_bound(row_abs[c], u);
                            if !within(g, row[c], bound) {
                                return Ok(Some(format!("at ({bh}, {i}, {c}): {g}, want {}", row[c])));
                            }
                        }
                    }
                    Ok(None)
                }),
            };
            let launch = |i: usize| {
                attention::launch(
                    dev,
                    configs[i],
                    s,
                    &q,
                    &k,
                    &v,
                    &mut o.borrow_mut(),
                    &mut lse.borrow_mut(),
                    opt,
                )
            };
            let flops = 4.0 * (b * h) as f64 * (n * n * d) as f64 * if causal { 0.5 } else { 1.0 };
            time_configs(dev, ("attention_fwd", &shape, dtype), flops, 10, tags, launch, check, rows);
        }
    }
    Ok(())
}

fn bench<T: Half>(
    dev: &Device,
    dtype: &'static str,
    (conv, back): Conv<T>,
    rows: &mut Vec<Row>,
) -> Result<()> {
    for (m, n, k) in [(4096usize, 4096usize, 4096usize), (8192, 8192, 8192), (8192, 4096, 11008)] {
        let shape = format!("{m}x{n}x{k}");
        let fill = |len: usize, seed: u32| -> Vec<T> {
            (0..len)
                .map(|i| conv((((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 1000.0 - 0.5))
                .collect()
        };
        let (ah, bh, biash) = (fill(m * k, 1), fill(k * n, 2), fill(n, 3));
        let (a, b, bias) = (dev.upload(&ah)?, dev.upload(&bh)?, dev.upload(&biash)?);
        let c = RefCell::new(dev.zeros::<T>(m * n)?);
        let nan = vec![conv(f32::NAN); m * n];
        // The f32 sum of k exact products (its error far below 1e-3 sqrt(k) at these sizes),
        // then one rounding to T: twice T's unit roundoff relative. The example's own test
        // tolerances are looser; here a bf16 kernel that drops one k step must not pass.
        let u = unit_roundoff(dtype);
        let (atol, rtol) = (1e-3 * (k as f64).sqrt(), 2.0 * u);
        for (pattern, gelu) in [("matmul", false), ("matmul_bias_gelu", true)] {
            if !wanted(&format!("{pattern}/{shape}/{dtype}")) {
                continue;
            }
            let want: Vec<f64> = samples(m, n)
                .into_iter()
                .map(|(i, j)| {
                    let at = |v: &[T], x: usize| f64::from(back(v[x]));
                    let s: f64 = (0..k).map(|kk| at(&ah, i * k + kk) * at(&bh, kk * n + j)).sum();
                    let v = s + at(&biash, j);
                    if gelu {
                        0.5 * v * (1.0 + bias_gelu_dropout::erf64(v * std::f64::consts::FRAC_1_SQRT_2))
                    } else {
                        s
                    }
                })
                .collect();
            let check = Check {
                poison: Box::new(|| c.borrow_mut().copy_from_host(&nan)),
                compare: Box::new(|| {
                    let got = c.borrow().to_vec()?;
                    Ok(samples(m, n).into_iter().zip(&want).find_map(|((i, j), &w)| {
                        let g = f64::from(back(got[i * n + j]));
                        (!within(g, w, atol + rtol * w.abs()))
                            .then(|| format!("at ({i}, {j}): {g}, want {w}"))
                    }))
                }),
            };
            let configs = &kernels::CONFIGS[..kernels::CONFIGS.len() - 1]; // not the CPU's
            let tags = configs
                .iter()
                .map(|c| format!("fuse [{}x{}x{} {}w {}s]", c.bm, c.bn, c.bk, c.warps, c.stages));
            let launch = |i: usize| {
                kernels::launch(dev, configs[i], &a, &b, &bias, &mut c.borrow_mut(), (m, n, k), gelu)
            };
            let flops = 2.0 * (m * n * k) as f64;
            time_configs(dev, (pattern, &shape, dtype), flops, 20, tags, launch, check, rows);
        }
    }
    Ok(())
}

fn main() -> Result<()> {
    let dev = Device::cuda(0).inspect_err(|e| println!("matmul bench: no GPU ({e}); nothing to time"));
    let Ok(dev) = dev else { return Ok(()) };
    println!("device: {}", dev.description());
    let mut rows = Vec::new();
    let h16: Conv<f16> = (f16::from_f32, f16::to_f32);
    let hb16: Conv<bf16> = (bf16::from_f32, bf16::to_f32);
    bench::<f16>(&dev, "float16", h16, &mut rows)?;
    bench::<bf16>(&dev, "bfloat16", hb16, &mut rows)?;
    bench_int8(&dev, &mut rows)?;
    bench_ffn::<f16>(&dev, "float16", h16, &mut rows)?;
    bench_ffn::<bf16>(&dev, "bfloat16", hb16, &mut rows)?;
    bench_attention::<f16>(&dev, "float16", h16, &mut rows)?;
    bench_attention::<bf16>(&dev, "bfloat16", hb16, &mut rows)?;
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
    match WRONG.load(std::sync::atomic::Ordering::Relaxed) {
        0 => Ok(()),
        wrong => Err(fuse::Error::InvalidLaunch(format!(
            "{wrong} configuration(s) computed a wrong result (the WRONG lines above); they are not in the table"
        ))),
    }
}
