//! Autotuning (Triton's `@autotune`): what `#[fused_kernel(autotune(..))]`'s generated
//! `launch_autotuned` calls.
//!
//! A kernel lists candidate configurations (its const generics, `num_warps`, `num_stages`) and
//! key parameters. The first launch for a new key on a GPU times every candidate (`bench.rs`: a
//! warm-up, then the median of CUDA-event-timed launches) and launches the fastest; the winner is
//! kept per device in memory and on disk beside the cubin cache (`record.rs`), so later launches
//! and later processes take it at once. A candidate that fails to compile or launch (or reports
//! an out-of-bounds access) is left out, with its reason logged; if every one fails the launch is
//! an error naming each reason.
//!
//! * On the CPU device, and with `FUSE_AUTOTUNE=0`, the first candidate is taken without timing.
//! * Timing runs the kernel many times over the launch's own arguments: buffers the kernel
//!   writes in place must be listed in `restore = [..]` (saved before and put back before every
//!   timed run and before the real launch, [`Saved`](crate::autotune::Saved)); any other output
//!   is simply written again.
//! * The choice is logged through the `log` crate (target `fuse_runtime::autotune`): `info` for
//!   each tuning and its timings, `debug` for a winner taken from disk.
//!
//! Top layer: `autotune/` imports `device`, `spec`, `args` and `validate` (the saved buffers),
//! `cuda` (the device's winners and the disk cache) and the bottom layer. Inside it, `saved.rs`
//! is at the bottom, `tuning.rs` above it, `bench.rs` and `record.rs` above those, this file on
//! top.

mod bench;
mod record;
mod saved;
mod tuning;

pub use saved::Saved;
pub use tuning::{no_such_config, Candidate, KeyValue, Step, Tuning};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::spec::KernelSpec;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// Whether `FUSE_AUTOTUNE` turns tuning off (`0`, `false`, `off`), read once per process.
fn disabled() -> bool {
    static OFF: OnceLock<bool> = OnceLock::new();
    *OFF.get_or_init(|| {
        std::env::var("FUSE_AUTOTUNE").is_ok_and(|v| {
            let v = v.trim();
            v == "0" || v.eq_ignore_ascii_case("false") || v.eq_ignore_ascii_case("off")
        })
    })
}

/// Logs (once per process, not per launch) that autotuned kernels take their first candidate.
fn log_first_once(spec: &KernelSpec, why: &'static str) {
    static ON_CPU: AtomicBool = AtomicBool::new(false);
    static OFF: AtomicBool = AtomicBool::new(false);
    let logged = if why.contains("CPU") { &ON_CPU } else { &OFF };
    if !logged.swap(true, Ordering::Relaxed) {
        log::info!(
            "fuse autotune: `{}` (and every autotuned kernel) takes its first config {why}",
            spec.name()
        );
    }
}

/// How a GPU's winners ([`crate::cuda::tunings::Tunings`]) know a kernel: its spec's address
/// (specs are statics).
fn spec_address(spec: &KernelSpec) -> usize {
    spec as *const KernelSpec as usize
}

/// `m = 1024, n = 512` (the key as the logs and errors name it).
fn describe_key(tuning: &Tuning, key: &[u64]) -> String {
    if key.is_empty() {
        return "no key".into();
    }
    let names = tuning.key_names.iter().copied().chain(std::iter::repeat("?"));
    key.iter().zip(names).map(|(v, n)| format!("{n} = {}", *v as i64)).collect::<Vec<_>>().join(", ")
}

/// Picks the candidate for this launch (tuning it on a GPU the first time the key is seen there,
/// or taking the winner from memory or disk), launches it through `step`, and returns its index.
///
/// # Errors
/// What the winning launch returns; [`Error::InvalidLaunch`] when every candidate fails (each
/// reason listed), when `tuning` has no candidate, or when the first launch of a key is inside a
/// graph capture (which cannot time anything); what saving or restoring the `restore` buffers
/// returns.
pub fn run(
    tuning: &Tuning,
    spec: &'static KernelSpec,
    device: &Device,
    key: &[u64],
    step: &mut dyn FnMut(Step<'_>) -> Result<()>,
) -> Result<usize> {
    if tuning.candidates.is_empty() {
        return Err(Error::InvalidLaunch(format!("kernel `{}`: autotune has no candidate", spec.name())));
    }
    let Some(cuda) = device.cuda_inner() else {
        // The interpreter's speed says nothing about a GPU's: the first candidate, always.
        log_first_once(spec, "on the CPU");
        step(Step::Launch(0))?;
        return Ok(0);
    };
    if disabled() {
        log_first_once(spec, "with FUSE_AUTOTUNE=0");
        step(Step::Launch(0))?;
        return Ok(0);
    }
    if let Some(w) = cuda.tunings.get(spec_address(spec), key) {
        step(Step::Launch(w))?;
        return Ok(w);
    }
    if cuda.capture_stream_of_this_thread().is_some() {
        return Err(Error::InvalidLaunch(format!(
            "kernel `{}` has not been autotuned for {} on {}: a graph capture cannot time candidates; call \
             launch_autotuned once with the same key before capturing",
            spec.name(),
            describe_key(tuning, key),
            cuda.description()
        )));
    }
    if TUNING_HERE.with(Cell::get) {
        // The grid closure of a launch being tuned launched another kernel that needs tuning:
        // waiting for the device's tuning lock would wait for ourselves.
        return Err(Error::InvalidLaunch(format!(
            "kernel `{}` would be autotuned while this thread autotunes another kernel on {}: launch it once \
             outside the other's `grid` closure first",
            spec.name(),
            cuda.description()
        )));
    }
    let winner = {
        let _one_at_a_time = cuda.tunings.one_at_a_time();
        TUNING_HERE.with(|t| t.set(true));
        let _reset = ResetOnDrop;
        winner_for(tuning, spec, device, cuda, key, step)?
    };
    step(Step::Launch(winner))?;
    Ok(winner)
}

thread_local! {
    /// Whether this thread is inside [`winner_for`] (holding its device's tuning lock).
    static TUNING_HERE: Cell<bool> = const { Cell::new(false) };
}

struct ResetOnDrop;
impl Drop for ResetOnDrop {
    fn drop(&mut self) {
        TUNING_HERE.with(|t| t.set(false));
    }
}

/// The winner for `key` once this thread holds the device's tuning lock: from memory (another
/// thread may have tuned it meanwhile), from disk, or by tuning (then recorded in both).
fn winner_for(
    tuning: &Tuning,
    spec: &'static KernelSpec,
    device: &Device,
    cuda: &crate::cuda::CudaDevice,
    key: &[u64],
    step: &mut dyn FnMut(Step<'_>) -> Result<()>,
) -> Result<usize> {
    let winner = match cuda.tunings.get(spec_address(spec), key) {
        Some(w) => w,
        None => {
            let record = record::Record::new(tuning, spec, &cuda.name, &cuda.target, key);
            let w = match record.as_ref().and_then(|r| r.load()) {
                Some(w) => {
                    log::debug!(
                        "fuse autotune: `{}` on {} for {}: config {w} from the disk cache",
                        spec.name(),
                        cuda.description(),
                        describe_key(tuning, key)
                    );
                    w
                }
                None => {
                    let (w, ms) = tune(tuning, spec, device, key, step)?;
                    if let Some(r) = &record {
                        r.store(w, ms);
                    }
                    w
                }
            };
            cuda.tunings.insert(spec_address(spec), key, w);
            w
        }
    };
    Ok(winner)
}

/// Why a candidate was left out, in a line or a few (a compile error's log, not its source).
fn reason(e: &Error) -> String {
    match e {
        Error::Compile { log, .. } => {
            let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).take(3).collect();
            format!("NVRTC failed: {}", lines.join(" / "))
        }
        other => other.to_string(),
    }
}

/// Times every candidate and returns the fastest with its median milliseconds; the `restore`
/// buffers are back as they were when it returns.
fn tune(
    tuning: &Tuning,
    spec: &'static KernelSpec,
    device: &Device,
    key: &[u64],
    step: &mut dyn FnMut(Step<'_>) -> Result<()>,
) -> Result<(usize, f64)> {
    let const_names = spec.kernel()?.consts.clone();
    let mut saved = Saved::new(spec.name());
    if tuning.restores {
        step(Step::Save(&mut saved))?;
    }
    let results: Vec<Result<f64>> = (0..tuning.candidates.len())
        .map(|i| bench::median_ms(device, i, tuning.restores, &saved, step))
        .collect();
    if tuning.restores {
        step(Step::Restore(&saved))?;
    }
    let report: Vec<String> = results
        .iter()
        .zip(tuning.candidates)
        .enumerate()
        .map(|(i, (r, c))| match r {
            Ok(ms) => format!("  config {i} ({}): {ms:.4} ms", c.describe(&const_names)),
            Err(e) => format!("  config {i} ({}): left out: {}", c.describe(&const_names), reason(e)),
        })
        .collect();
    let best = results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.as_ref().ok().map(|ms| (i, *ms)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    let what = format!("`{}` on {} for {}", spec.name(), device.description(), describe_key(tuning, key));
    match best {
        Some((w, ms)) => {
            log::info!(
                "fuse autotune: {what}: config {w} ({}) at {ms:.4} ms\n{}",
                tuning.candidates[w].describe(&const_names),
                report.join("\n")
            );
            Ok((w, ms))
        }
        None => Err(Error::InvalidLaunch(format!(
            "autotuning {what}: every candidate failed:\n{}",
            report.join("\n")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_words_and_descriptions() {
        assert_eq!((-1i32).key_word(), u64::MAX);
        assert_eq!(7u32.key_word(), 7);
        assert_eq!((-2i64).key_word(), u64::MAX - 1);
        assert_eq!(1.5f32.key_word(), u64::from(1.5f32.to_bits()));
        static C: [Candidate; 1] = [Candidate::new(&[1024, 8], Some(4), None)];
        let t = Tuning::new(&C, &["m", "n"], false);
        assert_eq!(describe_key(&t, &[(-3i32).key_word(), 5]), "m = -3, n = 5");
        assert_eq!(describe_key(&t, &[]), "no key");
        let names = vec!["BLOCK".to_string(), "ROWS".to_string()];
        assert_eq!(C[0].describe(&names), "BLOCK = 1024, ROWS = 8, num_warps = 4, num_stages = default");
    }

    #[test]
    fn a_compile_error_is_reported_by_its_log_alone() {
        let e = Error::Compile {
            kernel: "k".into(),
            log: "k.cu(3): error: bad\n\nmore\n".into(),
            source: "SECRET".into(),
        };
        let r = reason(&e);
        assert!(r.contains("k.cu(3): error: bad / more") && !r.contains("SECRET"), "{r}");
    }

    #[test]
    fn the_cpu_takes_the_first_candidate_without_timing() {
        use crate::fuse_ir::{DType, Kernel, Param, ParamKind};
        let k = Kernel {
            name: "k".into(),
            consts: vec![],
            params: vec![Param { name: "n".into(), kind: ParamKind::Scalar(DType::I32) }],
            vars: vec![],
            body: vec![],
        };
        let json: &'static str = Box::leak(k.to_json().into_boxed_str());
        let spec: &'static KernelSpec = Box::leak(Box::new(KernelSpec::new("k", "", json, &[])));
        static C: [Candidate; 2] = [Candidate::new(&[], Some(1), None), Candidate::new(&[], Some(2), None)];
        let t = Tuning::new(&C, &["n"], true);
        let mut steps = Vec::new();
        let w = run(&t, spec, &Device::cpu(), &[3], &mut |s| {
            steps.push(match s {
                Step::Launch(i) => format!("launch {i}"),
                Step::Save(_) => "save".into(),
                Step::Restore(_) => "restore".into(),
            });
            Ok(())
        })
        .unwrap();
        assert_eq!((w, steps), (0, vec!["launch 0".to_string()]));
        // The launch's error is the caller's.
        let e = run(&t, spec, &Device::cpu(), &[3], &mut |_| Err(Error::InvalidLaunch("boom".into())))
            .unwrap_err();
        assert!(e.to_string().contains("boom"));
        let empty = Tuning::new(&[], &[], false);
        let e = run(&empty, spec, &Device::cpu(), &[], &mut |_| Ok(())).unwrap_err();
        assert!(e.to_string().contains("no candidate"), "{e}");
    }
}
