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

/// The driver's own cost: `cuLaunchKernel` through cudarc on hand-written PTX (no fuse code on the
/// path), timed like fuse's launches.
pub struct RawLaunch {
    /// An empty kernel on the context's legacy default stream.
    pub empty: f64,
    /// A kernel with ten 8-byte parameters (like add_mul's), legacy default stream.
    pub ten: f64,
    /// The same with no `bind_to_thread` before each launch.
    pub ten_unbound: f64,
    /// The same on the per-thread default stream.
    pub ten_per_thread: f64,
    /// The same on a stream of its own (`CU_STREAM_NON_BLOCKING`).
    pub ten_own_stream: f64,
}

pub fn raw_launch_us() -> std::result::Result<RawLaunch, String> {
    use fuse::cudarc::driver::{result::launch_kernel, CudaContext, CudaStream};
    use std::sync::Arc;
    let ctx = CudaContext::new(0).map_err(|e| e.to_string())?;
    let params: Vec<String> = (0..10).map(|i| format!(".param .u64 p{i}")).collect();
    let ptx = format!(
        ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry fuse_raw0() {{ ret; }}\n.visible .entry fuse_raw10({}) {{ ret; }}\n",
        params.join(", ")
    );
    let module = ctx.load_module(fuse::cudarc::nvrtc::Ptx::from_src(ptx)).map_err(|e| e.to_string())?;
    let time = |name: &str,
                nparams: usize,
                stream: &Arc<CudaStream>,
                bind: bool|
     -> std::result::Result<f64, String> {
        let f = module.load_function(name).map_err(|e| e.to_string())?;
        let mut words = [0u64; 10];
        let mut ptrs: Vec<*mut std::ffi::c_void> =
            words.iter_mut().take(nparams).map(|w| (w as *mut u64).cast()).collect();
        ctx.bind_to_thread().map_err(|e| e.to_string())?;
        let mut launch = || {
            if bind {
                ctx.bind_to_thread()?;
            }
            // SAFETY: the kernels take `nparams` u64 parameters and touch no memory.
            unsafe {
                launch_kernel(f.cu_function(), (1, 1, 1), (128, 1, 1), 0, stream.cu_stream(), &mut ptrs)
            }
        };
        host_us_per_launch(50, 200, &mut launch, &mut || stream.synchronize()).map_err(|e| e.to_string())
    };
    let legacy = ctx.default_stream();
    let own = ctx.new_stream().map_err(|e| e.to_string())?;
    Ok(RawLaunch {
        empty: time("fuse_raw0", 0, &legacy, true)?,
        ten: time("fuse_raw10", 10, &legacy, true)?,
        ten_unbound: time("fuse_raw10", 10, &legacy, false)?,
        ten_per_thread: time("fuse_raw10", 10, &ctx.per_thread_stream(), false)?,
        ten_own_stream: time("fuse_raw10", 10, &own, false)?,
    })
}
