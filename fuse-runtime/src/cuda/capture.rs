//! CUDA graph capture on a device: the capturing thread's launches go to a private stream in
//! thread-local capture mode, and the fuse allocations they use are kept for the graph.

use super::{drv, lock, CudaDevice};
use crate::error::{Error, Result};
use cudarc::driver::result::{graph, stream as raw_stream};
use cudarc::driver::sys::{self, CUstreamCaptureMode};
use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
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

/// What a capture in progress has recorded.
struct Active {
    thread: ThreadId,
    keep: Vec<Arc<dyn Any + Send + Sync>>,
    kernels: usize,
}

/// A device's capture state: at most one capture at a time.
#[derive(Default)]
pub(crate) struct CaptureSlot {
    /// Fast check for the launch path: whether any capture is in progress.
    active: AtomicBool,
    state: Mutex<Option<Active>>,
    stream: OnceLock<RawStream>,
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
    /// The capture stream (valid while a capture is in progress).
    pub(crate) fn stream(&self) -> sys::CUstream {
        self.stream.get().map_or(std::ptr::null_mut(), |s| s.0)
    }

    fn on_this_thread(&self) -> bool {
        self.active.load(Ordering::Acquire)
            && lock(&self.state).as_ref().is_some_and(|a| a.thread == std::thread::current().id())
    }

    /// An error if this thread is capturing: `what` would block on, or run outside, the graph.
    pub(crate) fn refuse_on_this_thread(&self, what: &str) -> Result<()> {
        if self.on_this_thread() {
            return Err(Error::InvalidLaunch(format!(
                "cannot {what} while this thread captures a graph on the device: a capture only records \
                 kernel launches (finish the capture, then launch the graph)"
            )));
        }
        Ok(())
    }
}

impl CudaDevice {
    /// Whether launches from this thread are being captured.
    pub(crate) fn is_capturing_on_this_thread(&self) -> bool {
        self.capture.on_this_thread()
    }

    /// Records allocations the graph in progress must keep alive, and counts one kernel.
    pub(crate) fn keep_for_capture(&self, keep: impl Iterator<Item = Arc<dyn Any + Send + Sync>>) {
        if let Some(a) = lock(&self.capture.state).as_mut() {
            a.keep.extend(keep);
            a.kernels += 1;
        }
    }

    /// Starts capturing this thread's launches on this device.
    pub(crate) fn begin_capture(&self) -> Result<()> {
        let mut state = lock(&self.capture.state);
        if state.is_some() {
            return Err(Error::InvalidLaunch(format!(
                "a graph capture is already in progress on {} (captures do not nest)",
                self.description()
            )));
        }
        self.ctx.bind_to_thread().map_err(|e| Error::Cuda(format!("binding the context: {}", drv(e))))?;
        let stream = match self.capture.stream.get() {
            Some(s) => s.0,
            None => {
                let s = raw_stream::create(raw_stream::StreamKind::NonBlocking)
                    .map_err(|e| Error::Cuda(format!("creating the capture stream: {}", drv(e))))?;
                self.capture.stream.get_or_init(|| RawStream(s)).0
            }
        };
        // Thread-local mode: this thread's calls that could touch the device outside the graph
        // (synchronising, allocating) fail instead of silently running.
        // SAFETY: `stream` is a live stream of this context.
        unsafe {
            raw_stream::begin_capture(stream, CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        }
        .map_err(|e| Error::Cuda(format!("beginning a graph capture: {}", drv(e))))?;
        *state = Some(Active { thread: std::thread::current().id(), keep: Vec::new(), kernels: 0 });
        self.capture.active.store(true, Ordering::Release);
        Ok(())
    }

    /// Ends the capture this thread began and instantiates the graph. Called exactly once per
    /// successful `begin_capture`, also when the capture closure failed (then the graph is
    /// discarded by the caller).
    pub(crate) fn end_capture(&self) -> Result<Captured> {
        let active = lock(&self.capture.state).take();
        self.capture.active.store(false, Ordering::Release);
        let Some(active) = active else {
            return Err(Error::InvalidLaunch("no graph capture is in progress".into()));
        };
        self.ctx.bind_to_thread().map_err(|e| Error::Cuda(format!("binding the context: {}", drv(e))))?;
        // SAFETY: the capture stream is capturing (begun by `begin_capture` on this thread).
        let g = unsafe { raw_stream::end_capture(self.capture.stream()) }
            .map_err(|e| Error::Cuda(format!("ending the graph capture: {}", drv(e))))?;
        if g.is_null() {
            return Err(Error::Cuda("ending the graph capture gave no graph".into()));
        }
        // SAFETY: `g` is the graph just captured.
        match unsafe { graph::instantiate(g, sys::CUgraphInstantiate_flags(0)) } {
            Ok(exec) => Ok(Captured { graph: g, exec, keep: active.keep, kernels: active.kernels }),
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
