//! fuse: fused GPU kernels written in a Rust tile language.
pub use fuse_macros::fused_kernel;
pub use fuse_runtime::*;
