//! The harness of the test targets that need a GPU or NVRTC (`harness = false`, libtest-mimic), so
//! that where one is missing their tests are reported as *ignored*, with the reason, not as passed.
//! Used by fuse-runtime's `gpu` and `nvrtc` targets and (through `#[path]`) by the root crate's
//! `gpu_examples` and `emitted_cuda`. Filters, `--list`, `--exact`, `--include-ignored` and
//! `--test-threads` work as with the built-in harness; a panic in a test is a failure. Unlike the
//! built-in harness, libtest-mimic does not capture a test's output.
#![allow(dead_code)]

use fuse_runtime::{Device, Error};
use libtest_mimic::{Arguments, Trial};

/// The kind shown before the name of a test that needs a GPU: `test [needs an NVIDIA GPU] name`.
pub const NEEDS_GPU: &str = "needs an NVIDIA GPU";
/// The kind shown before the name of a test that needs NVRTC when NVRTC is missing.
pub const NEEDS_NVRTC: &str = "needs NVRTC";

/// Whether this is CI (`CI=true` or `CI=1`): there a missing NVRTC fails its tests.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// An error in one line (a missing library without its list of searched paths).
fn short(e: Error) -> String {
    match e {
        Error::LibraryNotFound { library, searched, hint } => {
            format!("{library} was not found ({} places searched). {hint}", searched.len())
        }
        other => other.to_string(),
    }
}

/// GPU 0 if it is usable (it opens and NVRTC loads to compile for it), else why not.
pub fn usable_gpu() -> Result<Device, String> {
    let d = Device::cuda(0).map_err(short)?;
    fuse_runtime::nvrtc_version().map_err(|e| format!("{} but no NVRTC: {}", d.description(), short(e)))?;
    Ok(d)
}

/// A device of its own on GPU 0 (its own stream, hence its own error words): a test that provokes
/// an out-of-bounds error runs there, so that the error is not reported to another test's
/// `synchronize` (errors are reported per device by whichever thread synchronises first, and the
/// tests run in parallel threads).
pub fn isolated_gpu() -> Device {
    let ctx = fuse_runtime::cudarc::driver::CudaContext::new(0).expect("GPU 0 opened before");
    let stream = ctx.new_stream().expect("a stream on GPU 0");
    Device::from_cudarc(ctx, stream).expect("a device over GPU 0's primary context")
}

/// On SIGSEGV, print a backtrace before dying (not async-signal-safe, but it is a dying process's
/// best effort to say where: a crash must be diagnosable from a device run's log).
pub fn backtrace_on_segfault() {
    extern "C" fn on_segv(_: i32) {
        eprintln!("SIGSEGV; backtrace:\n{}", std::backtrace::Backtrace::force_capture());
        std::process::abort();
    }
    extern "C" {
        fn signal(signum: i32, handler: extern "C" fn(i32)) -> usize;
    }
    // SAFETY: installs a handler for SIGSEGV (11 on Linux); the handler never returns.
    unsafe {
        signal(11, on_segv);
    }
}

/// A test that needs nothing special.
pub fn trial(name: &'static str, test: fn()) -> Trial {
    Trial::test(name, move || {
        test();
        Ok(())
    })
}

/// A GPU test: its name and its body, given the device.
pub type GpuTest = (&'static str, fn(&Device));

/// One trial per test, each given GPU 0. With no usable GPU (decided once, the reason printed once
/// to stderr) every one is ignored with the kind "needs an NVIDIA GPU"; run anyway with
/// `--include-ignored`, each fails with the reason.
pub fn gpu_trials(tests: Vec<GpuTest>) -> Vec<Trial> {
    backtrace_on_segfault();
    let gpu = usable_gpu();
    if let Err(e) = &gpu {
        eprintln!("no usable GPU: {e}");
    }
    let trials = tests.into_iter().map(|(name, test)| match &gpu {
        Ok(d) => {
            let d = d.clone();
            Trial::test(name, move || {
                test(&d);
                Ok(())
            })
        }
        Err(e) => {
            let msg = format!("no usable GPU: {e}");
            Trial::test(name, move || Err(msg.into())).with_ignored_flag(true).with_kind(NEEDS_GPU)
        }
    });
    trials.collect()
}

/// One trial per test that needs NVRTC (no GPU). With NVRTC missing (decided once, the reason
/// printed once to stderr) every one is ignored with the kind "needs NVRTC", except under `CI=true`
/// where every one fails.
pub fn nvrtc_trials(tests: Vec<(&'static str, fn())>) -> Vec<Trial> {
    let missing = fuse_runtime::nvrtc_version().err().map(short);
    if let Some(e) = &missing {
        if in_ci() {
            eprintln!("no NVRTC, and CI=true: the tests that need it fail: {e}");
        } else {
            eprintln!("no NVRTC, so the tests that need it are ignored (CI=true makes them fail): {e}");
        }
    }
    let trials = tests.into_iter().map(|(name, test)| match &missing {
        None => trial(name, test),
        Some(e) => {
            let ci = if in_ci() { " under CI=true" } else { "" };
            let msg = format!("NVRTC is required{ci}: {e}");
            Trial::test(name, move || Err(msg.into())).with_ignored_flag(!in_ci()).with_kind(NEEDS_NVRTC)
        }
    });
    trials.collect()
}

/// Runs the trials with the command line's arguments and exits with the result.
pub fn run(trials: Vec<Trial>) -> ! {
    libtest_mimic::run(&Arguments::from_args(), trials).exit()
}
