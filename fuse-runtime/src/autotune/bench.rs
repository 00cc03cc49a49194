//! Timing one candidate the way `triton.testing.do_bench` does: a warm-up launch (which also
//! compiles it), then the median of launches each timed by its own pair of CUDA events, the
//! `restore` buffers put back before each outside the timed region.
//!
//! Imports `device`, `error` and, in `autotune/`, `saved.rs` and `tuning.rs`.

use super::saved::Saved;
use super::tuning::Step;
use crate::device::Device;
use crate::error::Result;
use std::cell::RefCell;

/// Timed launches of the first estimate.
const ESTIMATE_REPS: usize = 5;
/// About how long the measured launches of one candidate take together.
const BUDGET_MS: f64 = 50.0;
/// Bounds on the measured launches: enough for a stable median, few enough for slow kernels.
const MIN_REPS: usize = 10;
const MAX_REPS: usize = 100;

/// Measured launches for a kernel estimated at `estimate_ms` a launch.
fn reps_for(estimate_ms: f64) -> usize {
    if estimate_ms.is_nan() || estimate_ms <= 0.0 {
        return MAX_REPS;
    }
    ((BUDGET_MS / estimate_ms).ceil() as usize).clamp(MIN_REPS, MAX_REPS)
}

/// Median milliseconds of candidate `i` over the launch's arguments. Any error (compiling,
/// launching, an out-of-bounds access reported when the timings are read) is the candidate's.
pub(super) fn median_ms(
    device: &Device,
    i: usize,
    restores: bool,
    saved: &Saved,
    step: &mut dyn FnMut(Step<'_>) -> Result<()>,
) -> Result<f64> {
    // `median_ms` takes the setup and the timed call as two closures; both drive `step`.
    let step = RefCell::new(step);
    let mut setup = || if restores { (step.borrow_mut())(Step::Restore(saved)) } else { Ok(()) };
    let mut launch = || (step.borrow_mut())(Step::Launch(i));
    let estimate = device.median_ms(ESTIMATE_REPS, &mut setup, &mut launch)?;
    device.median_ms(reps_for(estimate), &mut setup, &mut launch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reps_follow_the_estimate_within_bounds() {
        assert_eq!(reps_for(0.001), MAX_REPS);
        assert_eq!(reps_for(1.0), 50);
        assert_eq!(reps_for(2.0), 25);
        assert_eq!(reps_for(30.0), MIN_REPS);
        assert_eq!(reps_for(0.0), MAX_REPS);
        assert_eq!(reps_for(f64::NAN), MAX_REPS);
    }
}
