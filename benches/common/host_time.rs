//! Host time per launch, measured so that the GPU's speed cannot leak into it.
//!
//! A long back-to-back launch loop fills the driver's queue (about a thousand launches); after that
//! each call waits for the GPU to retire a kernel, so the loop measures the GPU's rate for tiny
//! kernels, not the host's cost. Here each timed batch starts on an idle stream and is short enough
//! never to fill the queue; the synchronisation between batches is not timed.

/// Median over `batches` of the host µs per call of `launch`, timed in batches of `per_batch`
/// calls, with `sync` (untimed) before each batch.
pub fn host_us_per_launch<E>(
    batches: usize,
    per_batch: usize,
    launch: &mut dyn FnMut() -> Result<(), E>,
    sync: &mut dyn FnMut() -> Result<(), E>,
) -> Result<f64, E> {
    let mut per_launch = Vec::with_capacity(batches);
    for _ in 0..batches {
        sync()?;
        let t = std::time::Instant::now();
        for _ in 0..per_batch {
            launch()?;
        }
        per_launch.push(t.elapsed().as_secs_f64() * 1e6 / per_batch as f64);
    }
    sync()?;
    per_launch.sort_by(f64::total_cmp);
    Ok(per_launch[per_launch.len() / 2])
}
