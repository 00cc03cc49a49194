//! CUDA graph capture on a device: each capturing thread's launches go to a private stream in
//! thread-local capture mode, and the fuse allocations they use are kept for that graph.
//!
//! Owns the device's [`CaptureSlot`] (the captures in progress) and the [`Captured`] graphs; the
//! device (`cuda/mod.rs`) holds the slot and hands it its context. Imports only the bottom layer
//! (`error`, `util`) and cudarc.

use crate::error::{drv, Error, Result};
use crate::util::lock;
use cudarc::driver::result::{graph, stream as raw_stream};
use cudarc::driver::sys::{self, CUstreamCaptureMode};
use cudarc::driver::CudaContext;
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

    /// Records allocations this thread's capture must keep alive, and counts one kernel.
    pub(crate) fn keep(&self, keep: impl Iterator<Item = Arc<dyn Any + Send + Sync>>) {
        let me = std::thread::current().id();
        if let Some(a) = lock(&self.captures).iter_mut().find(|a| a.thread == me) {
            a.keep.extend(keep);
            a.kernels += 1;
        }
    }

    /// Starts capturing this thread's launches on the device of context `ctx` (`device`: its
    /// description, for the error).
    pub(crate) fn begin(&self, ctx: &CudaContext, device: impl FnOnce() -> String) -> Result<()> {
        let me = std::thread::current().id();
        if lock(&self.captures).iter().any(|a| a.thread == me) {
            return Err(Error::InvalidLaunch(format!(
                "this thread is already capturing a graph on {} (captures do not nest)",
                device()
            )));
        }
        ctx.bind_to_thread().map_err(|e| Error::Cuda(format!("binding the context: {}", drv(e))))?;
        let stream = match lock(&self.idle).pop() {
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
            lock(&self.idle).push(stream);
            return Err(Error::Cuda(format!("beginning a graph capture: {}", drv(e))));
        }
        lock(&self.captures).push(Active { thread: me, stream, keep: Vec::new(), kernels: 0 });
        self.active.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Ends the capture this thread began and instantiates the graph. Called exactly once per
    /// successful [`CaptureSlot::begin`], on the same thread, with the same context, also when
    /// the capture closure failed (then the graph is discarded by the caller).
    pub(crate) fn end(&self, ctx: &CudaContext) -> Result<Captured> {
        let me = std::thread::current().id();
        let active = {
            let mut captures = lock(&self.captures);
            let Some(i) = captures.iter().position(|a| a.thread == me) else {
                return Err(Error::InvalidLaunch("this thread has no graph capture in progress".into()));
            };
            self.active.fetch_sub(1, Ordering::AcqRel);
            captures.swap_remove(i)
        };
        let Active { stream, keep, kernels, .. } = active;
        let ended = ctx
            .bind_to_thread()
            .map_err(|e| Error::Cuda(format!("binding the context: {}", drv(e))))
            // SAFETY: `stream` is capturing (begun by `begin` on this thread).
            .and_then(|()| {
                unsafe { raw_stream::end_capture(stream.0) }
                    .map_err(|e| Error::Cuda(format!("ending the graph capture: {}", drv(e))))
            });
        // The stream is out of capture mode once `end_capture` returned (even with an error,
        // which invalidates the capture); a stream whose capture could not be ended is dropped.
        if ended.is_ok() {
            lock(&self.idle).push(stream);
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
}
