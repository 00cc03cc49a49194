//! CUDA graph capture on a device: each capturing thread's launches go to a private stream in
//! thread-local capture mode, and the fuse allocations they use are kept for that graph.

use super::{drv, lock, CudaDevice};
use crate::error::{Error, Result};
use cudarc::driver::result::{graph, stream as raw_stream};
use cudarc::driver::sys::{self, CUstreamCaptureMode};
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

/// A stream fuse owns (created raw, so the context's cudarc stream count, which switches cudarc
/// into event-tracking mode, is untouched).
struct RawStream(sys::CUstream);

// SAFETY: a CUstream handle may be used from any thread (the driver serialises per stream).
unsafe impl Send for RawStream {}
unsafe impl Sync for RawStream {}

impl Drop for RawStream {
    fn drop(&mut self) {
        // SAFETY: created by `raw_stream::create` and destroyed once, here.
        let _ = unsafe { raw_stream::destroy(self.0) };
    }
}

/// One thread's capture in progress: its private stream and what it has recorded.
struct Active {
    thread: ThreadId,
    stream: RawStream,
    keep: Vec<Arc<dyn Any + Send + Sync>>,
    kernels: usize,
}

/// A device's captures in progress: at most one per thread (captures do not nest), any number of
/// threads at once, each on its own stream (a capture in thread-local mode records only its own
/// thread's calls on its own stream, so captures on different threads never see each other).
#[derive(Default)]
pub(crate) struct CaptureSlot {
    /// Fast check for the launch path: how many captures are in progress on the device.
    active: AtomicUsize,
    captures: Mutex<Vec<Active>>,
    /// Streams of finished captures, reused by the next ones.
    idle: Mutex<Vec<RawStream>>,
}

/// A finished capture: the graph, instantiated, and what it must keep alive.
pub(crate) struct Captured {
    pub(crate) graph: sys::CUgraph,
    pub(crate) exec: sys::CUgraphExec,
    /// Held, never read: dropped after the graph is destroyed, which frees (on the device's
    /// stream) the allocations only the graph still used.
    #[allow(dead_code)]
    pub(crate) keep: Vec<Arc<dyn Any + Send + Sync>>,
    pub(crate) kernels: usize,
}

impl CaptureSlot {
    /// The stream this thread's capture records on, if this thread is capturing.
    pub(crate) fn stream_of_this_thread(&self) -> Option<sys::CUstream> {
        if self.active.load(Ordering::Acquire) == 0 {
            return None;
        }
        let me = std::thread::current().id();
        lock(&self.captures).iter().find(|a| a.thread == me).map(|a| a.stream.0)
    }

    /// An error if this thread is capturing: `what` would block on, or run outside, the graph.
    pub(crate) fn refuse_on_this_thread(&self, what: &str) -> Result<()> {
        if self.stream_of_this_thread().is_some() {
            return Err(Error::InvalidLaunch(format!(
                "cannot {what} while this thread captures a graph on the device: a capture only records \
                 kernel launches (finish the capture, then launch the graph)"
            )));
        }
        Ok(())
    }
}

impl CudaDevice {
    /// The stream this thread's launches are captured on, if this thread is capturing.
    pub(crate) fn capture_stream_of_this_thread(&self) -> Option<sys::CUstream> {
        self.capture.stream_of_this_thread()
    }

    /// Records allocations this thread's capture must keep alive, and counts one kernel.
    pub(crate) fn keep_for_capture(&self, keep: impl Iterator<Item = Arc<dyn Any + Send + Sync>>) {
        let me = std::thread::current().id();
        if let Some(a) = lock(&self.capture.captures).iter_mut().find(|a| a.thread == me) {
            a.keep.extend(keep);
            a.kernels += 1;
        }
    }

    /// Starts capturing this thread's launches on this device.
    pub(crate) fn begin_capture(&self) -> Result<()> {
        let me = std::thread::current().id();
        if lock(&self.capture.captures).iter().any(|a| a.thread == me) {
            return Err(Error::InvalidLaunch(format!(
                "this thread is already capturing a graph on {} (captures do not nest)",
                self.description()
            )));
        }
        self.ctx.bind_to_thread().map_err(|e| Error::Cuda(format!("binding the context: {}", drv(e))))?;
        let stream = match lock(&self.capture.idle).pop() {
            Some(s) => s,
            None => RawStream(
                raw_stream::create(raw_stream::StreamKind::NonBlocking)
                    .map_err(|e| Error::Cuda(format!("creating a capture stream: {}", drv(e))))?,
            ),
        };
        // Thread-local mode: this thread's calls that could touch the device outside the graph
        // (synchronising, allocating) fail instead of silently running, and other threads' calls
        // are not affected.
        // SAFETY: `stream` is a live stream of this context, used by no other capture.
        let begun = unsafe {
            raw_stream::begin_capture(stream.0, CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        };
        if let Err(e) = begun {
            lock(&self.capture.idle).push(stream);
            return Err(Error::Cuda(format!("beginning a graph capture: {}", drv(e))));
        }
        lock(&self.capture.captures).push(Active { thread: me, stream, keep: Vec::new(), kernels: 0 });
        self.capture.active.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Ends the capture this thread began and instantiates the graph. Called exactly once per
    /// successful `begin_capture`, on the same thread, also when the capture closure failed (then
    /// the graph is discarded by the caller).
    pub(crate) fn end_capture(&self) -> Result<Captured> {
        let me = std::thread::current().id();
        let active = {
            let mut captures = lock(&self.capture.captures);
            let Some(i) = captures.iter().position(|a| a.thread == me) else {
                return Err(Error::InvalidLaunch("this thread has no graph capture in progress".into()));
            };
            self.capture.active.fetch_sub(1, Ordering::AcqRel);
            captures.swap_remove(i)
        };
        let Active { stream, keep, kernels, .. } = active;
        let ended = self
            .ctx
            .bind_to_thread()
            .map_err(|e| Error::Cuda(format!("binding the context: {}", drv(e))))
            // SAFETY: `stream` is capturing (begun by `begin_capture` on this thread).
            .and_then(|()| {
                unsafe { raw_stream::end_capture(stream.0) }
                    .map_err(|e| Error::Cuda(format!("ending the graph capture: {}", drv(e))))
            });
        // The stream is out of capture mode once `end_capture` returned (even with an error,
        // which invalidates the capture); a stream whose capture could not be ended is dropped.
        if ended.is_ok() {
            lock(&self.capture.idle).push(stream);
        }
        let g = ended?;
        if g.is_null() {
            return Err(Error::Cuda("ending the graph capture gave no graph".into()));
        }
        // SAFETY: `g` is the graph just captured.
        match unsafe { graph::instantiate(g, sys::CUgraphInstantiate_flags(0)) } {
            Ok(exec) => Ok(Captured { graph: g, exec, keep, kernels }),
            Err(e) => {
                // SAFETY: `g` is ours and not used again.
                let _ = unsafe { graph::destroy(g) };
                Err(Error::Cuda(format!("instantiating the captured graph: {}", drv(e))))
            }
        }
    }

    /// Marks that kernels were queued (so the next `synchronize` reads the error words).
    pub(crate) fn mark_launched(&self) {
        self.launched.store(true, Ordering::Release);
    }
}
