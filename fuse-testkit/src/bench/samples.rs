//! `FUSE_BENCH_SAMPLES=1`: where a median comes from. For each timed case, every per-call time of
//! three schedules, in the order they ran: do_bench's (25 ms of back-to-back warm-up calls, then
//! 100 ms worth of flushed calls queued at once), the same with the host waiting for the device
//! every 100 calls, and a fixed schedule (one warm-up call, 100 flushed
//! calls). Printed as the median, the 10th and 90th percentiles, and the median of each tenth
//! of the run in time order.

use fuse::cudarc::driver::sys::CUevent_flags;
use fuse::{Device, Error, Result};

fn cuda(e: impl std::fmt::Debug) -> Error {
    Error::Cuda(format!("{e:?}"))
}

/// Per-call milliseconds of `reps` flushed calls, after `warmups` unflushed ones; the host waits
/// for the device after every `chunk` calls.
fn per_call_ms(
    dev: &Device,
    warmups: usize,
    reps: usize,
    chunk: usize,
    flush: &mut dyn FnMut() -> Result<()>,
    f: &mut dyn FnMut() -> Result<()>,
) -> Result<Vec<f64>> {
    let (Some(ctx), Some(stream)) = (dev.cudarc_context(), dev.cudarc_stream()) else {
        return Err(Error::InvalidArgument("per-call samples need a CUDA device".into()));
    };
    for _ in 0..warmups {
        f()?;
    }
    let mut times = Vec::with_capacity(reps);
    let mut left = reps;
    while left > 0 {
        let n = left.min(chunk);
        let event = || ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(cuda);
        // Made before the first launch, as do_bench and `Device::median_ms` make theirs.
        let pairs = (0..n).map(|_| Ok((event()?, event()?))).collect::<Result<Vec<_>>>()?;
        for (start, end) in &pairs {
            flush()?;
            start.record(stream).map_err(cuda)?;
            f()?;
            end.record(stream).map_err(cuda)?;
        }
        dev.synchronize()?;
        for (s, e) in &pairs {
            times.push(f64::from(s.elapsed_ms(e).map_err(cuda)?));
        }
        left -= n;
    }
    Ok(times)
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn summary(times: &[f64]) -> String {
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    let tenth = times.len().div_ceil(10);
    let tenths: Vec<String> = times
        .chunks(tenth)
        .map(|c| {
            let mut c = c.to_vec();
            c.sort_by(f64::total_cmp);
            format!("{:.4}", quantile(&c, 0.5))
        })
        .collect();
    format!(
        "n {} median {:.4} p10 {:.4} p90 {:.4} | by tenth {}",
        times.len(),
        quantile(&sorted, 0.5),
        quantile(&sorted, 0.1),
        quantile(&sorted, 0.9),
        tenths.join(" ")
    )
}

/// Prints the three schedules' samples of `f` for the row `label` (`warmup_ms`, `rep_ms`: the
/// do_bench budgets).
pub fn report(
    dev: &Device,
    label: &str,
    (warmup_ms, rep_ms): (f64, f64),
    flush: &mut dyn FnMut() -> Result<()>,
    f: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    let estimate = dev.time_ms(5, || {
        flush()?;
        f()
    })?;
    let (warmups, reps) = fuse::do_bench_counts(estimate, warmup_ms, rep_ms);
    let schedules = [
        ("do_bench", warmups, reps, usize::MAX),
        ("chunks of 100", warmups, reps, 100),
        ("fixed 100", 1, 100, 100),
    ];
    for (name, w, r, chunk) in schedules {
        let times = per_call_ms(dev, w, r, chunk, flush, f)?;
        println!("samples {label} [{name}]: {}", summary(&times));
    }
    Ok(())
}
