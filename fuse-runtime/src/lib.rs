//! fuse-runtime: runs `#[fused_kernel]` kernels on a CUDA GPU (NVRTC + cudarc) or on the CPU.
pub use fuse_ir;
pub use half;

/// The CPU back end: an interpreter of the checked IR (owned by the CPU work, see docs/DESIGN.md).
pub mod cpu;
