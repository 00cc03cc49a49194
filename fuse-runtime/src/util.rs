//! Small helpers that depend on nothing else in the crate: a lock that survives poisoning, a
//! per-launch buffer kept on the stack, and the median of timings.
//!
//! Bottom layer: imports no other module of the crate.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`; a lock poisoned by a panic on another thread is taken as it is, not passed on as
/// a second panic.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The first `n` elements of `stack` when they fit, else of `heap` grown to `n` with `fill`: the
/// per-launch words and pointers of a kernel's parameters, on the stack for all but huge
/// parameter lists.
pub(crate) fn stack_or_heap<'b, T: Copy, const N: usize>(
    n: usize,
    stack: &'b mut [T; N],
    heap: &'b mut Vec<T>,
    fill: T,
) -> &'b mut [T] {
    if n <= N {
        &mut stack[..n]
    } else {
        heap.resize(n, fill);
        heap
    }
}

/// The median of `times` (reordered): the middle one, or the mean of the two middle ones for an
/// even count, as Python's `statistics.median` (do_bench's `return_mode="median"`).
pub(crate) fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    let n = times.len();
    if n % 2 == 1 {
        times[n / 2]
    } else {
        (times[n / 2 - 1] + times[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_is_pythons() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut [7.0]), 7.0);
    }
}
