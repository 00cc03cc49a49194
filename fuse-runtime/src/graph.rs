//! [`Graph`]: a sequence of kernel launches captured once ([`Device::capture`]) and replayed with
//! one driver call.
//!
//! Top layer: imports `cuda` (its capture slot and the graph's driver handles), `device` and
//! `error`.

use crate::cuda::capture::Captured;
use crate::cuda::CudaDevice;
use crate::device::Device;
use crate::error::{drv, Error, Result};
use cudarc::driver::result::graph;
use std::marker::PhantomData;
use std::sync::Arc;

/// A CUDA graph of kernel launches, captured by [`Device::capture`]; [`Graph::launch`] replays
/// them all, in order, on the device's stream, at the cost of one launch.
///
/// The launches' arguments are fixed at capture, as CUDA requires: the same buffers, scalars and
/// grids every replay (the buffers' contents may change between replays). The graph borrows
/// everything the capture closure borrowed for its whole life (the `'a`), so a buffer it uses
/// cannot be dropped, moved or passed to another launch as writable while the graph exists: a
/// replay over freed memory does not compile. Buffers the closure owned (moved in or created in
/// it) are kept alive by the graph itself.
///
/// `Send` but not `Sync`: CUDA graphs must not be launched from two threads at once.
pub struct Graph<'a> {
    device: Arc<CudaDevice>,
    captured: Captured,
    _borrows: PhantomData<&'a ()>,
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

// SAFETY: the graph handles are used by one thread at a time (`Graph` is not `Sync`, `launch`
// takes `&self` only through that one thread), which is what the driver requires.
unsafe impl Send for Graph<'_> {}

impl std::fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Graph({} kernel launches on {})", self.captured.kernels, self.device.description())
    }
}

impl Graph<'_> {
    pub(crate) fn new(device: Arc<CudaDevice>, captured: Captured) -> Self {
        Graph { device, captured, _borrows: PhantomData, _not_sync: PhantomData }
    }

    /// Queues every captured launch on the device's stream (asynchronous, as a launch is); an
    /// out-of-bounds access is reported by the next [`Device::synchronize`] as after any launch.
    ///
    /// # Errors
    /// [`Error::InvalidLaunch`] when called while this thread captures another graph on the same
    /// device; [`Error::Cuda`] when the driver refuses the launch.
    pub fn launch(&self) -> Result<()> {
        self.device.capture.refuse_on_this_thread("launch a graph")?;
        self.device
            .ctx
            .bind_to_thread()
            .map_err(|e| Error::Cuda(format!("binding the context: {}", drv(e))))?;
        // SAFETY: the executable graph is alive (owned by `self`), its kernels' buffers are kept
        // alive by `self` or borrowed for `'a`, and the stream is the device's.
        unsafe { graph::launch(self.captured.exec, self.device.stream.cu_stream()) }
            .map_err(|e| Error::Cuda(format!("launching a graph: {}", drv(e))))?;
        self.device.mark_launched();
        Ok(())
    }

    /// How many kernel launches the graph replays.
    pub fn kernels(&self) -> usize {
        self.captured.kernels
    }
}

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        let _ = self.device.ctx.bind_to_thread();
        // SAFETY: both handles are owned by this graph and destroyed once. An executable graph
        // still running is freed by the driver when it completes; the allocations in `keep` are
        // freed on the device's stream, after it.
        unsafe {
            let _ = graph::exec_destroy(self.captured.exec);
            let _ = graph::destroy(self.captured.graph);
        }
    }
}

impl Device {
    /// Captures the kernel launches `f` makes on this device (from this thread) into a [`Graph`],
    /// without running them; [`Graph::launch`] then replays them all with one driver call.
    /// Other threads may capture their own graphs on the same device at the same time, or launch
    /// directly: a capture records only its own thread's launches.
    ///
    /// While any capture is in progress, no thread may synchronise the whole CUDA context: CUDA
    /// refuses it (`CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`) and invalidates the capture (and
    /// `cuCtxSynchronize` can crash the process there, as with the 580 driver on an H100). fuse
    /// itself only synchronises streams; cudarc's `CudaContext::synchronize` and
    /// `CudaContext::new_stream` (which synchronises the context) are the calls to keep out of a
    /// capture's time span.
    ///
    /// Every kernel `f` launches must have run once before with the same configuration (a capture
    /// cannot compile or load a module), and its memory arguments must be fuse [`crate::Buffer`]s or
    /// their views (the graph keeps those alive; cudarc memory it could not). Inside `f`, this
    /// thread cannot synchronise or copy from the device: a capture only records launches.
    ///
    /// ```ignore
    /// add_mul::launch::<1024>(&dev, grid, &x, &y, &z, &mut out, n)?; // compiles it
    /// let graph = dev.capture(|| {
    ///     add_mul::launch::<1024>(&dev, grid, &x, &y, &z, &mut out, n)?;
    ///     scale::launch::<1024>(&dev, grid, &mut out, 2.0, n)
    /// })?;
    /// for _ in 0..100 { graph.launch()?; }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidLaunch`] on the CPU device, when this thread is already capturing on this
    /// device (captures do not nest), or when `f` launches a kernel that is not compiled yet; any error `f` returns
    /// (the capture is then discarded); [`Error::Cuda`] when the driver refuses the capture.
    pub fn capture<'a>(&self, f: impl FnOnce() -> Result<()> + 'a) -> Result<Graph<'a>> {
        let Some(cuda) = self.cuda_inner() else {
            return Err(Error::InvalidLaunch(format!(
                "graphs need a CUDA device; {} cannot capture (launch directly instead)",
                self.description()
            )));
        };
        cuda.begin_capture()?;
        // Ends the capture even if `f` panics, so the device stays usable.
        struct EndOnUnwind<'d>(&'d Arc<CudaDevice>, bool);
        impl Drop for EndOnUnwind<'_> {
            fn drop(&mut self) {
                if !self.1 {
                    if let Ok(c) = self.0.end_capture() {
                        drop(Graph::new(self.0.clone(), c));
                    }
                }
            }
        }
        let mut guard = EndOnUnwind(cuda, false);
        let body = f();
        guard.1 = true;
        let captured = cuda.end_capture();
        match (body, captured) {
            (Ok(()), Ok(c)) => Ok(Graph::new(cuda.clone(), c)),
            (Err(e), Ok(c)) => {
                drop(Graph::new(cuda.clone(), c));
                Err(e)
            }
            (Err(e), Err(_)) | (Ok(()), Err(e)) => Err(e),
        }
    }
}
