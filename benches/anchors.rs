//! The anchor benchmark: for every pattern, shape and dtype of the Triton anchors
//! (`scripts/device/peers/triton_anchor.py`), times the fused fuse kernel, the same computation as
//! a chain of separate (unfused) fuse kernels, and a device-to-device copy of the same bytes; then
//! the host launch overhead. The inference-stack patterns follow: softmax and LayerNorm of narrow rows (several rows per program, the one-row kernel
//! beside), QK-norm + RoPE (NeoX and GPT-J), cross-entropy over torch_peers.py's vocabularies, and
//! residual add + GELU / SiLU. Timing is `triton.testing.do_bench`'s (`Device::do_bench_ms`): 25 ms
//! of warm-up calls, then the median of 100 ms of per-call CUDA-event times, L2 flushed before each
//! call; a call under 30 us is timed by five such runs, the least of their medians (`SHORT_MS`).
//! Prints a table; writes JSON rows `{pattern, shape, dtype, impl, ms, gbs, tflops, runs_ms}` (every
//! run's median) to `$FUSE_BENCH_JSON`.
//!
//! `cargo bench --bench anchors` (needs a GPU; prints why it skips otherwise).
#![allow(dead_code)] // the kernel files also hold float64 references the bench does not use

use fuse_kernels::add_activation;
use fuse_kernels::add_mul;
use fuse_kernels::bias_gelu_dropout;
use fuse_kernels::cross_entropy;
use fuse_kernels::layernorm;
use fuse_kernels::qk_norm_rope;
use fuse_kernels::softmax;
use fuse_testkit::bench::host_time;
use fuse_testkit::bench::roofline;
use fuse_testkit::bench::samples;

use fuse::half::{bf16, f16};
use fuse::{fused_kernel, Buffer, Device, Element, LaunchConfig, Result};

/// `FUSE_BENCH_WARPS=n` launches the fused kernels with `n` warps instead of the runtime's default
/// and skips the unfused chains and copies (a quick sweep for tuning the default).
fn warps_override() -> Option<u32> {
    static W: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *W.get_or_init(|| std::env::var("FUSE_BENCH_WARPS").ok().and_then(|v| v.parse().ok()))
}

/// `FUSE_BENCH_ONLY=pattern/shape/dtype` (substrings separated by commas, e.g.
/// `layernorm/8192x8192/float16`) times only the fused kernel of the matching cases: for
/// profiling one kernel under Nsight Compute, or a quick tuning sweep.
fn only() -> Option<&'static str> {
    static O: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    O.get_or_init(|| std::env::var("FUSE_BENCH_ONLY").ok()).as_deref()
}

/// `FUSE_BENCH_EW_BLOCK=n`: the block (tile) size of the fused element-wise kernels (add_mul,
/// bias+GELU+dropout) instead of 1024, for tuning sweeps.
fn ew_block() -> usize {
    static B: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *B.get_or_init(|| std::env::var("FUSE_BENCH_EW_BLOCK").ok().and_then(|v| v.parse().ok()).unwrap_or(1024))
}

/// `FUSE_BENCH_FIXED_REPS=n`: a fixed schedule instead of do_bench's, one warm-up call and the
/// median of `n` flushed calls (one run, whatever the call's length).
fn fixed_reps() -> Option<usize> {
    static R: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *R.get_or_init(|| std::env::var("FUSE_BENCH_FIXED_REPS").ok().and_then(|v| v.parse().ok()))
}

/// `FUSE_BENCH_SAMPLES=1`: print every per-call time of each timed case under three schedules
/// (`fuse_testkit::bench::samples`) before its row is timed.
fn samples_wanted() -> bool {
    static S: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *S.get_or_init(|| std::env::var("FUSE_BENCH_SAMPLES").is_ok_and(|v| v == "1"))
}

/// Whether `FUSE_BENCH_ONLY` (if set) selects the case `pattern/shape/dtype`.
fn selected(case: &str) -> bool {
    only().is_none_or(|o| o.split(',').any(|part| case.contains(part)))
}

/// `FUSE_BENCH_PTRS=1`: print where each selected case's input and output start within a 2 MiB
/// page (0 since fuse-runtime starts buffers of 1 MiB or more on page boundaries; with
/// `FUSE_PAGE_ALIGN=0` where the stream-ordered pool puts them; a diagnostic for the short rows).
fn print_placement<T: Element>(case: &str, bufs: &[(&str, &Buffer<T>)]) {
    if std::env::var("FUSE_BENCH_PTRS").is_ok_and(|v| v == "1") && selected(case) {
        let at: Vec<String> = bufs
            .iter()
            .filter_map(|(n, b)| b.cuda_device_ptr().map(|p| format!("{n} {}", p % (2 << 20))))
            .collect();
        println!("placement {case}: {}", at.join(", "));
    }
}

/// `FUSE_BENCH_WITH_COPY=1`: with `FUSE_BENCH_ONLY`, also time the matching cases' same-bytes
/// copies (for a quick fused-against-copy look at a few rows).
fn with_copy() -> bool {
    std::env::var("FUSE_BENCH_WITH_COPY").is_ok_and(|v| v == "1")
}

/// `FUSE_BENCH_ROWS_SWEEP=1`: also time the narrow-row softmax with other rows per program.
fn rows_sweep() -> bool {
    std::env::var("FUSE_BENCH_ROWS_SWEEP").is_ok_and(|v| v == "1")
}

/// One program per `rows` of `n_rows`, the warps of `FUSE_BENCH_WARPS` if set.
fn tune_grid(n_rows: u32, rows: u32) -> LaunchConfig {
    cfg(n_rows.div_ceil(rows))
}

fn cfg(grid: u32) -> LaunchConfig {
    let c = LaunchConfig::new(grid);
    match warps_override() {
        Some(w) => c.num_warps(w),
        None => c,
    }
}

/// The unfused chains: one kernel per step, intermediates through memory (what eager frameworks do).
mod unfused {
    use super::*;

    #[fused_kernel]
    pub fn add<T: Float, const B: usize>(x: *const T, y: *const T, out: *mut T, n: i32) {
        let o = program_id(0) * B + arange(0, B);
        store(out + o, load(x + o, o < n) + load(y + o, o < n), o < n);
    }
    #[fused_kernel]
    pub fn mul<T: Float, const B: usize>(x: *const T, y: *const T, out: *mut T, n: i32) {
        let o = program_id(0) * B + arange(0, B);
        store(out + o, load(x + o, o < n) * load(y + o, o < n), o < n);
    }
    #[fused_kernel]
    pub fn row_max<T: Float, const B: usize>(x: *const T, out: *mut T, cols: i32) {
        let c = arange(0, B);
        store(out + program_id(0), max(load(x + program_id(0) * cols + c, c < cols, f32::NEG_INFINITY)));
    }
    #[fused_kernel]
    pub fn row_sum<T: Float, const B: usize>(x: *const T, out: *mut T, cols: i32) {
        let c = arange(0, B);
        store(out + program_id(0), sum(load(x + program_id(0) * cols + c, c < cols)));
    }
    #[fused_kernel]
    pub fn sub_exp<T: Float, const B: usize>(x: *const T, m: *const T, out: *mut T, cols: i32) {
        let c = arange(0, B);
        let at = program_id(0) * cols + c;
        store(
            out + at,
            exp2((load(x + at, c < cols) - load(m + program_id(0))) * 1.4426950408889634),
            c < cols,
        );
    }
    #[fused_kernel]
    pub fn div_row<T: Float, const B: usize>(x: *const T, s: *const T, out: *mut T, cols: i32) {
        let c = arange(0, B);
        let at = program_id(0) * cols + c;
        store(out + at, load(x + at, c < cols) / load(s + program_id(0)), c < cols);
    }
    #[fused_kernel]
    pub fn row_mean<T: Float, const B: usize>(x: *const T, out: *mut T, cols: i32) {
        let c = arange(0, B);
        store(out + program_id(0), sum(load(x + program_id(0) * cols + c, c < cols)) / cols as f32);
    }
    #[fused_kernel]
    pub fn row_rstd<T: Float, const B: usize>(x: *const T, mean: *const T, out: *mut T, cols: i32, eps: f32) {
        let c = arange(0, B);
        let d =
            where_(c < cols, load(x + program_id(0) * cols + c, c < cols) - load(mean + program_id(0)), 0.0);
        store(out + program_id(0), rsqrt(sum(d * d) / cols as f32 + eps));
    }
    #[fused_kernel]
    pub fn normalize<T: Float, const B: usize>(
        x: *const T,
        mean: *const T,
        rstd: *const T,
        w: *const T,
        b: *const T,
        out: *mut T,
        cols: i32,
    ) {
        let c = arange(0, B);
        let at = program_id(0) * cols + c;
        let v = (load(x + at, c < cols) - load(mean + program_id(0))) * load(rstd + program_id(0));
        store(out + at, v * load(w + c, c < cols) + load(b + c, c < cols), c < cols);
    }
    #[fused_kernel]
    pub fn add_bias<T: Float, const B: usize>(x: *const T, bias: *const T, out: *mut T, n: i32, h: i32) {
        let o = program_id(0) * B + arange(0, B);
        store(out + o, load(x + o, o < n) + load(bias + o % h, o < n), o < n);
    }
    #[fused_kernel]
    pub fn gelu<T: Float, const B: usize>(x: *const T, out: *mut T, n: i32) {
        let o = program_id(0) * B + arange(0, B);
        let v = load(x + o, o < n);
        store(out + o, 0.5 * v * (1.0 + erf(v * 0.7071067811865476)), o < n);
    }
    #[fused_kernel]
    pub fn dropout<T: Float, const B: usize>(x: *const T, out: *mut T, seed: u64, p: f32, n: i32) {
        let o = program_id(0) * B + arange(0, B);
        store(out + o, where_(rand(seed, o) > p, load(x + o, o < n) / (1.0 - p), 0.0), o < n);
    }
    #[fused_kernel]
    pub fn add_into<T: Float, const B: usize>(x: *const T, acc: *mut T, n: i32) {
        let o = program_id(0) * B + arange(0, B);
        store(acc + o, load(acc + o, o < n) + load(x + o, o < n), o < n);
    }
    #[fused_kernel]
    pub fn silu<T: Float, const B: usize>(x: *const T, out: *mut T, n: i32) {
        let o = program_id(0) * B + arange(0, B);
        let v = load(x + o, o < n);
        store(out + o, v * sigmoid(v), o < n);
    }
    #[fused_kernel]
    pub fn fill<T: Float, const B: usize>(out: *mut T, n: i32) {
        let o = program_id(0) * B + arange(0, B);
        store(out + o, zeros(B), o < n);
    }
}

const EW: usize = 1024; // block of the element-wise kernels
/// do_bench's defaults in `triton_anchor.py`: `warmup=25, rep=100` (milliseconds).
const WARMUP_MS: f64 = 25.0;
const REP_MS: f64 = 100.0;
/// A call shorter than this is timed by `SHORT_RUNS` do_bench runs, its row the least of their
/// medians. A run of a short call mostly settles on one of two levels ~0.7 us apart (fuse's,
/// Triton's and the driver's copy alike: `FUSE_BENCH_SAMPLES=1` shows the per-call samples),
/// which level a coin toss per run: 7-13 % of a 5-10 us call. No row lies between 23 and
/// 37 us, so fuse and its peers (the peer scripts under `scripts/device/peers/` apply the same
/// rule) take the same rows as short.
const SHORT_MS: f64 = 0.03;
const SHORT_RUNS: usize = 5;

struct Row {
    pattern: &'static str,
    shape: String,
    dtype: &'static str,
    imp: &'static str,
    /// The least of `runs`, each one do_bench run's median (one run for calls over `SHORT_MS`).
    ms: f64,
    gbs: f64,
    runs: Vec<f64>,
    /// FLOPs of one call (`KernelSpec::cost` of each launch) and the `dot` part; 0 for copies.
    flops: u64,
    dot_flops: u64,
}

/// A fused kernel's row (on the roofline), not a copy or an unfused chain.
fn is_fused(imp: &str) -> bool {
    imp.starts_with("fuse") && !imp.contains("copy") && !imp.contains("unfused")
}

struct Bench {
    dev: Device,
    flush: Buffer<f32>,
    rows: Vec<Row>,
}

/// `x` as a JSON number; `null` where JSON has none (NaN, infinities).
fn json_number(x: f64) -> String {
    if x.is_finite() {
        x.to_string()
    } else {
        "null".into()
    }
}

fn least(xs: &[f64]) -> f64 {
    xs.iter().copied().fold(f64::INFINITY, f64::min)
}

fn grid(n: usize, b: usize) -> u32 {
    n.div_ceil(b) as u32
}

impl Bench {
    /// Times `f` like do_bench and records a row.
    fn time(
        &mut self,
        pattern: &'static str,
        shape: &str,
        dtype: &'static str,
        imp: &'static str,
        bytes: usize,
        mut f: impl FnMut() -> Result<()>,
    ) {
        let copy_too = with_copy() && warps_override().is_none() && imp == "fuse copy (d2d)";
        let swept = imp == "fuse" || imp == "fuse rand16" || imp.starts_with("fuse tune");
        if (warps_override().is_some() || only().is_some()) && !swept && !copy_too {
            return;
        }
        let case = format!("{pattern}/{shape}/{dtype}");
        if !selected(&case) {
            return;
        }
        let (flops, dot_flops) = if is_fused(imp) {
            match roofline::flops_of(&mut f) {
                Ok(x) => x,
                Err(e) => {
                    println!("{pattern} {shape} {dtype} {imp}: ERROR {e}");
                    return;
                }
            }
        } else {
            (0, 0)
        };
        let (dev, flush) = (&self.dev, &mut self.flush);
        let n = flush.len();
        let mut flush_l2 = || unfused::fill::launch::<f32, EW>(dev, grid(n, EW), flush, n as i32);
        if samples_wanted() {
            if let Err(e) =
                samples::report(dev, &format!("{case} {imp}"), (WARMUP_MS, REP_MS), &mut flush_l2, &mut f)
            {
                println!("{case} {imp}: samples: ERROR {e}");
            }
        }
        let mut do_bench = || match fixed_reps() {
            Some(reps) => dev.median_ms(reps, &mut flush_l2, &mut f),
            None => dev.do_bench_ms(WARMUP_MS, REP_MS, &mut flush_l2, &mut f),
        };
        let res = do_bench().and_then(|first| {
            let mut runs = vec![first];
            if first < SHORT_MS && fixed_reps().is_none() {
                for _ in 1..SHORT_RUNS {
                    runs.push(do_bench()?);
                }
            }
            Ok(runs)
        });
        match res {
            Ok(runs) => {
                let ms = least(&runs);
                self.rows.push(Row {
                    pattern,
                    shape: shape.into(),
                    dtype,
                    imp,
                    ms,
                    gbs: bytes as f64 / (ms * 1e-3) / 1e9,
                    runs,
                    flops,
                    dot_flops,
                })
            }
            Err(e) => println!("{pattern} {shape} {dtype} {imp}: ERROR {e}"),
        }
    }

    fn copy<T: Element>(
        &mut self,
        pattern: &'static str,
        shape: &str,
        dtype: &'static str,
        src: &Buffer<T>,
        bytes: usize,
    ) -> Result<()> {
        if warps_override().is_some() || (only().is_some() && !with_copy()) {
            return Ok(());
        }
        let mut dst = self.dev.zeros::<T>(src.len())?;
        self.time(pattern, shape, dtype, "fuse copy (d2d)", bytes, || dst.copy_from(src));
        Ok(())
    }
}

/// What a row kernel's launch reads: `rows x cols` input `x`, the row vectors `w` and `b`
/// (LayerNorm's weight and bias; softmax ignores them), the tile `blk`, grid `gr` and `c = cols`.
struct RowArgs<'a, T: Element> {
    d: &'a Device,
    blk: usize,
    gr: u32,
    c: i32,
    x: &'a Buffer<T>,
    w: &'a Buffer<T>,
    b: &'a Buffer<T>,
}

impl Bench {
    /// One row pattern at one shape and dtype: the fused kernels (`fused`: each `(impl, launch)`,
    /// `launch(args, y)`; the first is "fuse"), its unfused chain (`chain(args, y, tmp, row_vec1,
    /// row_vec2)`) and a copy of the same bytes.
    #[allow(clippy::type_complexity)]
    fn row_case<T: Element>(
        &mut self,
        pattern: &'static str,
        (rows, cols): (usize, usize),
        dtype: &'static str,
        conv: fn(&[f32]) -> Vec<T>,
        fused: &mut [(&'static str, &mut dyn FnMut(&RowArgs<'_, T>, &mut Buffer<T>) -> Result<()>)],
        mut chain: impl FnMut(
            &RowArgs<'_, T>,
            &mut Buffer<T>,
            &mut Buffer<T>,
            &mut Buffer<T>,
            &mut Buffer<T>,
        ) -> Result<()>,
    ) -> Result<()> {
        let d = self.dev.clone();
        let x = d.upload(&conv(&randn(rows * cols, 3)))?;
        let w = d.upload(&conv(&randn(cols, 4)))?;
        let b = d.upload(&conv(&randn(cols, 5)))?;
        let (mut y, mut t) = (d.zeros::<T>(rows * cols)?, d.zeros::<T>(rows * cols)?);
        let (mut r1, mut r2) = (d.zeros::<T>(rows)?, d.zeros::<T>(rows)?);
        print_placement(&format!("{pattern}/{rows}x{cols}/{dtype}"), &[("x", &x), ("y", &y)]);
        let es = std::mem::size_of::<T>();
        let bytes =
            if pattern == "layernorm" { (2 * rows * cols + 2 * cols) * es } else { 2 * rows * cols * es };
        let shape = format!("{rows}x{cols}");
        let a = RowArgs {
            d: &d,
            blk: cols.next_power_of_two(),
            gr: rows as u32,
            c: cols as i32,
            x: &x,
            w: &w,
            b: &b,
        };
        for (imp, launch) in fused.iter_mut() {
            self.time(pattern, &shape, dtype, imp, bytes, || launch(&a, &mut y));
        }
        self.time(pattern, &shape, dtype, "fuse unfused chain", bytes, || {
            chain(&a, &mut y, &mut t, &mut r1, &mut r2)
        });
        self.copy(pattern, &shape, dtype, &x, 2 * rows * cols * es)
    }
}

fn randn(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

fn as_f16(v: &[f32]) -> Vec<f16> {
    v.iter().map(|&x| f16::from_f32(x)).collect()
}

fn as_bf16(v: &[f32]) -> Vec<bf16> {
    v.iter().map(|&x| bf16::from_f32(x)).collect()
}

/// One element-wise pattern in one dtype: the fused kernel, its unfused chain and a copy.
macro_rules! add_mul_case {
    ($b:ident, $n:expr, $T:ty, $dt:literal, $conv:expr) => {{
        let n: usize = $n;
        let d = $b.dev.clone();
        let host: Vec<$T> = $conv(&randn(n, 1));
        let (x, y, z) = (d.upload(&host)?, d.upload(&host)?, d.upload(&host)?);
        let (mut o, mut t) = (d.zeros::<$T>(n)?, d.zeros::<$T>(n)?);
        print_placement(&format!("add_mul/{n}/{}", $dt), &[("x", &x), ("o", &o)]);
        let bytes = 4 * n * std::mem::size_of::<$T>();
        let (g, len, shape) = (grid(n, EW), n as i32, n.to_string());
        let eb = ew_block();
        $b.time("add_mul", &shape, $dt, "fuse", bytes, || {
            fuse::with_block!(eb, B => add_mul::add_mul::launch::<$T, B>(&d, cfg(grid(n, B)), &x, &y, &z, &mut o, len))
        });
        $b.time("add_mul", &shape, $dt, "fuse unfused chain", bytes, || {
            unfused::add::launch::<$T, EW>(&d, g, &x, &y, &mut t, len)?;
            unfused::mul::launch::<$T, EW>(&d, g, &t, &z, &mut o, len)
        });
        $b.copy("add_mul", &shape, $dt, &x, 2 * n * std::mem::size_of::<$T>())?;
    }};
}

fn run() -> Result<()> {
    let dev = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            println!("anchors bench: skipped: needs a GPU ({e})");
            return Ok(());
        }
    };
    println!("device: {}", dev.description());
    let flush = dev.zeros::<f32>(64 << 20)?; // 256 MiB, like do_bench's L2 flush
    let mut b = Bench { dev: dev.clone(), flush, rows: Vec::new() };

    // Host launch overhead: a tiny kernel, cache hot. Two measures: batches of 200 launches on an
    // idle stream (the host's own cost; see `host_time`), and Triton's method, 5000 launches back
    // to back (bounded below by the GPU's rate for tiny kernels once the queue fills).
    if only().is_none() {
        let n = 1024;
        let x = dev.upload(&randn(n, 2))?;
        let mut o = dev.zeros::<f32>(n)?;
        let mut launch = || add_mul::add_mul::launch::<f32, 1024>(&dev, 1, &x, &x, &x, &mut o, n as i32);
        for _ in 0..200 {
            launch()?;
        }
        let batched = host_time::host_us_per_launch(50, 200, &mut launch, &mut || dev.synchronize())?;
        let k = 5000;
        let t = std::time::Instant::now();
        for _ in 0..k {
            launch()?;
        }
        let loop_us = t.elapsed().as_secs_f64() / k as f64 * 1e6;
        dev.synchronize()?;
        println!("fuse host launch overhead: {batched:.2} us/launch (tiny add_mul, median of 50 batches of 200 launches on an idle stream)");
        println!("fuse back-to-back launch loop: {loop_us:.2} us/launch ({k} launches, Triton's method)");
        match host_time::raw_launch_us() {
            Ok(r) => println!(
                "driver floor, same method: raw cuLaunchKernel {:.2} us (empty kernel), {:.2} us (ten 8-byte parameters, like add_mul's); ten parameters without binding the context {:.2} us, on the per-thread stream {:.2} us, on a stream of its own {:.2} us",
                r.empty, r.ten, r.ten_unbound, r.ten_per_thread, r.ten_own_stream
            ),
            Err(e) => println!("driver floor: not measured ({e})"),
        }
    }

    for n in [1usize << 20, 64 << 20] {
        add_mul_case!(b, n, f32, "float32", |v: &[f32]| v.to_vec());
        add_mul_case!(b, n, f16, "float16", as_f16);
    }

    // The row patterns in one dtype (the element type of the buffers `$conv` makes). The narrow
    // shapes (`rows`) time the multi-row kernels as "fuse" and the one-row kernel beside them.
    macro_rules! softmax_case {
        ($shape:expr, $dt:literal, $conv:expr) => {
            softmax_case!(@ $shape, $dt, $conv, &mut [("fuse", &mut |a, y| {
                fuse::with_block!(a.blk, B => softmax::softmax::launch::<_, B>(a.d, cfg(a.gr), y, a.x, a.c, a.c, a.c))
            })])
        };
        ($shape:expr, $dt:literal, $conv:expr, rows) => {
            softmax_case!(@ $shape, $dt, $conv, &mut [
                ("fuse", &mut |a, y| softmax::launch_rows(a.d, warps_override(), y, a.x, a.gr as usize, a.c as usize)),
                ("fuse 1 row/program", &mut |a, y| {
                    fuse::with_block!(a.blk, B => softmax::softmax::launch::<_, B>(a.d, cfg(a.gr), y, a.x, a.c, a.c, a.c))
                }),
            ])
        };
        // `FUSE_BENCH_ROWS_SWEEP=1`: 128-column rows with 4..64 rows per program (tuning).
        ($shape:expr, $dt:literal, $conv:expr, tune) => {
            softmax_case!(@ $shape, $dt, $conv, &mut [
                ("fuse tune rows=4", &mut |a, y| softmax::softmax_rows::launch::<_, 4, 128>(a.d, tune_grid(a.gr, 4), y, a.x, a.c, a.c, a.gr as i32, a.c)),
                ("fuse tune rows=8", &mut |a, y| softmax::softmax_rows::launch::<_, 8, 128>(a.d, tune_grid(a.gr, 8), y, a.x, a.c, a.c, a.gr as i32, a.c)),
                ("fuse tune rows=32", &mut |a, y| softmax::softmax_rows::launch::<_, 32, 128>(a.d, tune_grid(a.gr, 32), y, a.x, a.c, a.c, a.gr as i32, a.c)),
                ("fuse tune rows=64", &mut |a, y| softmax::softmax_rows::launch::<_, 64, 128>(a.d, tune_grid(a.gr, 64), y, a.x, a.c, a.c, a.gr as i32, a.c)),
            ])
        };
        (@ $shape:expr, $dt:literal, $conv:expr, $fused:expr) => {
            b.row_case("softmax", $shape, $dt, $conv, $fused, |a, y, t, m, s| {
                fuse::with_block!(a.blk, B => {
                    unfused::row_max::launch::<_, B>(a.d, a.gr, a.x, m, a.c)?;
                    unfused::sub_exp::launch::<_, B>(a.d, a.gr, a.x, m, t, a.c)?;
                    unfused::row_sum::launch::<_, B>(a.d, a.gr, t, s, a.c)?;
                    unfused::div_row::launch::<_, B>(a.d, a.gr, t, s, y, a.c)
                })
            })?
        };
    }
    macro_rules! layernorm_case {
        ($shape:expr, $dt:literal, $conv:expr) => {
            layernorm_case!(@ $shape, $dt, $conv, &mut [("fuse", &mut |a, y| {
                fuse::with_block!(a.blk, B => layernorm::layernorm::launch::<_, B>(a.d, cfg(a.gr), a.x, y, a.w, a.b, a.c, a.c, 1e-5))
            })])
        };
        ($shape:expr, $dt:literal, $conv:expr, rows) => {
            layernorm_case!(@ $shape, $dt, $conv, &mut [
                ("fuse", &mut |a, y| {
                    layernorm::launch_rows(a.d, warps_override(), a.x, y, a.w, a.b, a.gr as usize, a.c as usize, 1e-5)
                }),
                ("fuse 1 row/program", &mut |a, y| {
                    fuse::with_block!(a.blk, B => layernorm::layernorm::launch::<_, B>(a.d, cfg(a.gr), a.x, y, a.w, a.b, a.c, a.c, 1e-5))
                }),
            ])
        };
        (@ $shape:expr, $dt:literal, $conv:expr, $fused:expr) => {
            b.row_case("layernorm", $shape, $dt, $conv, $fused, |a, y, _t, m, r| {
                fuse::with_block!(a.blk, B => {
                    unfused::row_mean::launch::<_, B>(a.d, a.gr, a.x, m, a.c)?;
                    unfused::row_rstd::launch::<_, B>(a.d, a.gr, a.x, m, r, a.c, 1e-5)?;
                    unfused::normalize::launch::<_, B>(a.d, a.gr, a.x, m, r, a.w, a.b, y, a.c)
                })
            })?
        };
    }
    for shape in [(1024usize, 512usize), (4096, 4096), (32768, 1024), (8192, 8192)] {
        softmax_case!(shape, "float32", |v| v.to_vec());
        softmax_case!(shape, "float16", as_f16);
    }
    for shape in [(4096usize, 1024usize), (4096, 4096), (8192, 8192), (32768, 768)] {
        layernorm_case!(shape, "float32", |v| v.to_vec());
        layernorm_case!(shape, "float16", as_f16);
    }
    // Narrow rows: several rows per program.
    for shape in [(65536usize, 128usize), (16384, 256)] {
        softmax_case!(shape, "float32", |v| v.to_vec(), rows);
        softmax_case!(shape, "float16", as_f16, rows);
        if rows_sweep() && shape.1 == 128 {
            softmax_case!(shape, "float32", |v| v.to_vec(), tune);
            softmax_case!(shape, "float16", as_f16, tune);
        }
        layernorm_case!(shape, "float32", |v| v.to_vec(), rows);
        layernorm_case!(shape, "float16", as_f16, rows);
    }

    macro_rules! bgd_case {
        ($rows:expr, $h:expr, $T:ty, $dt:literal, $conv:expr) => {{
            let (rows, h): (usize, usize) = ($rows, $h);
            let n = rows * h;
            let d = b.dev.clone();
            let x = d.upload(&$conv(&randn(n, 6)))?;
            let bias = d.upload(&$conv(&randn(h, 7)))?;
            let (mut o, mut t, mut u) = (d.zeros::<$T>(n)?, d.zeros::<$T>(n)?, d.zeros::<$T>(n)?);
            let es = std::mem::size_of::<$T>();
            let bytes = (2 * n + h) * es;
            let shape = format!("{rows}x{h}");
            let (g, nn, hh) = (grid(n, EW), n as i32, h as i32);
            let eb = ew_block();
            b.time("bias_gelu_dropout", &shape, $dt, "fuse", bytes, || {
                fuse::with_block!(eb, B => bias_gelu_dropout::bias_gelu_dropout::launch::<$T, B>(&d, cfg(grid(n, B)), &x, &bias, &mut o, 1234, 0.1, nn, hh))
            });
            b.time("bias_gelu_dropout", &shape, $dt, "fuse unfused chain", bytes, || {
                unfused::add_bias::launch::<$T, EW>(&d, g, &x, &bias, &mut t, nn, hh)?;
                unfused::gelu::launch::<$T, EW>(&d, g, &t, &mut u, nn)?;
                unfused::dropout::launch::<$T, EW>(&d, g, &u, &mut o, 1234, 0.1, nn)
            });
            b.time("bias_gelu_dropout", &shape, $dt, "fuse rand16", bytes, || {
                fuse::with_block!(eb, B => bias_gelu_dropout::bias_gelu_dropout16::launch::<$T, B>(&d, cfg(grid(n, B)), &x, &bias, &mut o, 1234, 0.1, nn, hh))
            });
            b.copy("bias_gelu_dropout", &shape, $dt, &x, 2 * n * es)?;
        }};
    }
    for (rows, h) in [(8192usize, 4096usize), (16384, 8192)] {
        bgd_case!(rows, h, f32, "float32", |v: &[f32]| v.to_vec());
        bgd_case!(rows, h, f16, "float16", as_f16);
    }

    // QK-norm + RoPE in place on a packed qkv of 8192 tokens x (32 q + 8 k + 8 v) heads x 128, the
    // positions of one prefill (0..8192, so every cache row is read once). Compulsory bytes: q and k
    // read and written, a cache row and a position per token, both weight rows; v not counted.
    macro_rules! qk_case {
        ($T:ty, $dt:literal, $conv:expr) => {{
            let (tokens, h) = (8192usize, qk_norm_rope::Heads { q: 32, k: 8, v: 8, dim: 128 });
            let d = b.dev.clone();
            let mut qkv = d.upload(&$conv(&randn(tokens * (h.q + h.k + h.v) * h.dim, 8)))?;
            let cache: Vec<f32> =
                qk_norm_rope::cos_sin_cache(tokens, h.dim, 1e6).iter().map(|&v| v as f32).collect();
            let cos_sin = d.upload(&$conv(&cache))?;
            let positions = d.upload(&(0..tokens as i64).collect::<Vec<i64>>())?;
            let (q_w, k_w) = (d.upload(&$conv(&randn(h.dim, 12)))?, d.upload(&$conv(&randn(h.dim, 13)))?);
            let es = std::mem::size_of::<$T>();
            let bytes = (2 * tokens * (h.q + h.k) * h.dim + tokens * h.dim + 2 * h.dim) * es + tokens * 8;
            let shape = format!("{tokens}x{}x{}", h.q + h.k + h.v, h.dim);
            // FUSE_BENCH_QK_HEADS: heads per program (a power of two up to 64), for tuning sweeps.
            let per = std::env::var("FUSE_BENCH_QK_HEADS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| qk_norm_rope::heads_per_program(h));
            for (pattern, neox) in [("qk_norm_rope_neox", true), ("qk_norm_rope_gptj", false)] {
                b.time(pattern, &shape, $dt, "fuse", bytes, || {
                    qk_norm_rope::launch(
                        &d,
                        warps_override(),
                        tokens,
                        per,
                        &mut qkv,
                        &positions,
                        &cos_sin,
                        &q_w,
                        &k_w,
                        h,
                        1e-6,
                        neox,
                    )
                });
                let src = d.zeros::<$T>(bytes / (2 * es))?;
                b.copy(pattern, &shape, $dt, &src, 2 * src.len() * es)?;
            }
        }};
    }
    qk_case!(f16, "float16", as_f16);
    qk_case!(bf16, "bfloat16", as_bf16);

    // Cross-entropy per row (reduction none) over the vocabularies of torch_peers.py. Compulsory
    // bytes: the logits and labels read, the losses written (torch_peers.py counts the logits only:
    // 12 bytes a row apart).
    macro_rules! ce_case {
        ($rows:expr, $cols:expr, $T:ty, $dt:literal, $conv:expr) => {{
            let (rows, cols): (usize, usize) = ($rows, $cols);
            let d = b.dev.clone();
            let x = d.upload(&$conv(&randn(rows * cols, 9)))?;
            let labels: Vec<i64> =
                (0..rows as u64).map(|r| (r * 2_654_435_761 % cols as u64) as i64).collect();
            let labels = d.upload(&labels)?;
            let mut loss = d.zeros::<f32>(rows)?;
            let es = std::mem::size_of::<$T>();
            let bytes = rows * cols * es + rows * (8 + 4);
            let shape = format!("{rows}x{cols}");
            // FUSE_BENCH_CE_BLOCK: the column block instead of the launcher's, for tuning sweeps.
            let ce_block = std::env::var("FUSE_BENCH_CE_BLOCK").ok().and_then(|v| v.parse::<usize>().ok());
            b.time("cross_entropy", &shape, $dt, "fuse", bytes, || match ce_block {
                Some(cb) => fuse::with_block!(cb, B => cross_entropy::cross_entropy::launch::<$T, B>(
                    &d, cfg(rows as u32), &x, &labels, &mut loss, cols as i32, cols as i32, cross_entropy::IGNORE_INDEX)),
                None => cross_entropy::launch(&d, warps_override(), &x, &labels, &mut loss, rows, cols),
            });
            let src = d.zeros::<$T>(bytes / (2 * es))?;
            b.copy("cross_entropy", &shape, $dt, &src, 2 * src.len() * es)?;
        }};
    }
    for (rows, cols) in [(4096usize, 50257usize), (8192, 32000), (4096, 128256)] {
        ce_case!(rows, cols, f32, "float32", |v: &[f32]| v.to_vec());
        ce_case!(rows, cols, bf16, "bfloat16", as_bf16);
    }
    // FUSE_BENCH_CE_PROBE=1: GPT-2's vocabulary with twice the rows, and rounded to a multiple of
    // 8 columns (aligned rows): which of the two makes 4096x50257 bf16 slower per byte.
    if std::env::var("FUSE_BENCH_CE_PROBE").is_ok_and(|v| v == "1") {
        for (rows, cols) in [(8192usize, 50257usize), (4096, 50264)] {
            ce_case!(rows, cols, bf16, "bfloat16", as_bf16);
        }
    }

    // Residual add + GELU / SiLU, the sum written back into the residual. Compulsory bytes: x and
    // the residual read, the residual and the output written. The unfused chain: `residual += x`,
    // then the activation of the residual (torch eager's two ops).
    macro_rules! add_act_case {
        ($rows:expr, $cols:expr, $act:expr, $T:ty, $dt:literal, $conv:expr) => {{
            let (rows, cols): (usize, usize) = ($rows, $cols);
            let n = rows * cols;
            let d = b.dev.clone();
            let x = d.upload(&$conv(&randn(n, 10)))?;
            let mut res = d.upload(&$conv(&randn(n, 11)))?;
            let mut o = d.zeros::<$T>(n)?;
            let es = std::mem::size_of::<$T>();
            let bytes = 4 * n * es;
            let (shape, pattern, act) = (format!("{rows}x{cols}"), $act.name(), $act);
            let (g, nn, eb) = (grid(n, EW), n as i32, ew_block());
            b.time(pattern, &shape, $dt, "fuse", bytes, || {
                add_activation::launch(&d, act, eb, warps_override(), &x, &mut res, &mut o)
            });
            b.time(pattern, &shape, $dt, "fuse unfused chain", bytes, || {
                unfused::add_into::launch::<$T, EW>(&d, g, &x, &mut res, nn)?;
                match act {
                    add_activation::Act::Gelu => unfused::gelu::launch::<$T, EW>(&d, g, &res, &mut o, nn),
                    add_activation::Act::Silu => unfused::silu::launch::<$T, EW>(&d, g, &res, &mut o, nn),
                }
            });
            let src = d.zeros::<$T>(2 * n)?;
            b.copy(pattern, &shape, $dt, &src, 2 * src.len() * es)?;
        }};
    }
    for act in [add_activation::Act::Gelu, add_activation::Act::Silu] {
        add_act_case!(8192, 4096, act, f16, "float16", as_f16);
        add_act_case!(8192, 4096, act, bf16, "bfloat16", as_bf16);
    }

    println!("{:<18} {:<11} {:<8} {:<20} {:>9} {:>7}", "pattern", "shape", "dtype", "impl", "ms", "GB/s");
    for r in &b.rows {
        let spread = if r.runs.len() > 1 {
            let most = r.runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            format!("  ({} runs: {:.4}-{most:.4})", r.runs.len(), least(&r.runs))
        } else {
            String::new()
        };
        println!(
            "{:<18} {:<11} {:<8} {:<20} {:>9.4} {:>7.0}{spread}",
            r.pattern, r.shape, r.dtype, r.imp, r.ms, r.gbs
        );
    }
    if let Ok(path) = std::env::var("FUSE_BENCH_JSON") {
        let json: Vec<String> = b
            .rows
            .iter()
            .map(|r| {
                // add_mul shapes are numbers in triton_anchor.py's JSON; the others strings.
                let shape = if r.pattern == "add_mul" { r.shape.clone() } else { format!("\"{}\"", r.shape) };
                let runs: Vec<String> = r.runs.iter().map(|&x| json_number(x)).collect();
                format!(
                    "{{\"pattern\": \"{}\", \"shape\": {shape}, \"dtype\": \"{}\", \"impl\": \"{}\", \"ms\": {}, \"gbs\": {}, \"tflops\": {}, \"runs_ms\": [{}]}}",
                    r.pattern,
                    r.dtype,
                    r.imp,
                    json_number(r.ms),
                    json_number(r.gbs),
                    json_number(r.flops as f64 / (r.ms * 1e-3) / 1e12),
                    runs.join(", ")
                )
            })
            .collect();
        if let Err(e) = std::fs::write(&path, format!("[\n{}\n]\n", json.join(",\n"))) {
            println!("could not write {path}: {e}");
        }
    }
    if only().is_none() && warps_override().is_none() {
        let points: Vec<roofline::Point> = b
            .rows
            .iter()
            .filter(|r| is_fused(r.imp))
            .map(|r| roofline::Point {
                label: format!("{} {} {} {}", r.pattern, r.shape, r.dtype, r.imp),
                gbs: r.gbs,
                tflops: r.flops as f64 / (r.ms * 1e-3) / 1e12,
                tensor: 2 * r.dot_flops > r.flops,
            })
            .collect();
        roofline::report(&b.dev, &points);
    }
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        println!("anchors bench failed: {e}");
        std::process::exit(1);
    }
}
