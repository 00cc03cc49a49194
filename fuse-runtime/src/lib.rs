//! fuse-runtime: runs `#[fused_kernel]` kernels on a CUDA GPU (NVRTC + cudarc) or on the CPU.
//!
//! * [`Device`]: the CPU interpreter or one CUDA GPU; [`Buffer`]: typed memory on a device.
//! * [`KernelSpec`]: what the macro generates per kernel; [`launch`]: validate, compile (cached in
//!   memory and on disk), launch.
//! * [`Error`]: every failure, with messages that say what was expected and what was got.
//!
//! Environment: `FUSE_DEVICE=cpu` makes [`Device::best`] pick the CPU; `FUSE_NVRTC_PATH` /
//! `FUSE_LIBCUDA_PATH` name the library file or folder to use instead of searching (see
//! [`Error::LibraryNotFound`]); `FUSE_CACHE=0` / `FUSE_CACHE_DIR` control the on-disk cubin cache
//! (and the autotuning records beside it); `FUSE_AUTOTUNE=0` makes autotuned kernels take their
//! first candidate without timing.
#![warn(missing_docs)]
pub use fuse_ir;
pub use half;

// The modules, bottom layer first; each imports only modules of the layers before it (its `//!`
// says which).
//
// Bottom: the error and element types, helpers, and analyses that are pure functions of the IR.
mod bounds;
mod config;
/// What a launch costs, counted from the IR (bytes, FLOPs, arithmetic intensity).
pub mod cost;
/// The on-disk cubin cache.
pub mod disk_cache;
mod element;
mod error;
mod launch_memo;
mod util;
mod warps;
// The spec: what the macro generates per kernel, and what the runtime derives from it once.
mod spec;
// The back ends.
/// The CPU back end: an interpreter of the checked IR with the GPU's semantics (docs/DESIGN.md).
pub mod cpu;
mod cuda;
// Devices and their memory, the launch arguments and their checks.
mod args;
mod device;
mod memory;
mod validate;
// What a launch's arguments decide, the launch, compiling without a launch, autotuning, graphs.
mod aot;
/// Autotuning: the runtime half of `#[fused_kernel(autotune(..))]`.
pub mod autotune;
mod graph;
mod launch;
mod specialize;
mod tensor_maps;

pub use args::{BufferArg, BufferArgMut, KernelArg};
pub use config::{Grid, LaunchConfig, DEFAULT_NUM_STAGES, MAX_NUM_STAGES, MAX_TILE_LEN};
pub use cost::{BufferTraffic, Cost, CostArg};
pub use cuda::nvrtc::PtxasReport;
pub use cuda::{dot_path, tma_loads, DotPath};
/// cudarc, the CUDA binding fuse runs on (the version whose memory and streams fuse accepts).
pub use cudarc;
pub use device::{do_bench_counts, Buffer, Device};
pub use element::{Element, Float, Half};
pub use error::{Error, Result};
pub use graph::Graph;
pub use launch::launch;
pub use memory::{BufferView, BufferViewMut, DeviceRead, DeviceWrite};
pub use spec::KernelSpec;
pub use warps::default_num_warps;

/// NVRTC's version `(major, minor)`, loading it if needed: also the check that kernels can be
/// compiled on this machine (no GPU needed).
pub fn nvrtc_version() -> Result<(i32, i32)> {
    cuda::nvrtc::version()
}
