//! # fuse
//!
//! Fused GPU kernels written in a Rust tile language (Triton's model), checked at compile time,
//! compiled to CUDA C by the `#[fused_kernel]` macro, run through NVRTC on NVIDIA GPUs or by an
//! interpreter on the CPU. The language reference is
//! [docs/LANGUAGE.md](https://github.com/fuse-rs/fuse/blob/main/docs/LANGUAGE.md); ready-made
//! kernels are in the `fuse-kernels` crate.
#![warn(missing_docs)]
pub use fuse_macros::fused_kernel;
pub use fuse_runtime::*;

/// The names a kernel author and a caller need.
pub mod prelude {
    pub use fuse_macros::fused_kernel;
    pub use fuse_runtime::half::{bf16, f16};
    pub use fuse_runtime::{Buffer, Device, Error, Float, Grid, Half, LaunchConfig};
}

/// Calls `$body` with `$name` bound as a `const usize` equal to `$value`, which must be a power of
/// two in `1..=65536`: the bridge from a run-time size to a kernel's const-generic block size.
/// Evaluates to `$body` (a `fuse::Result<_>`), or to `Err(Error::InvalidLaunch)` for other values.
///
/// ```ignore
/// let block = n_cols.next_power_of_two();
/// fuse::with_block!(block, B => softmax::launch::<B>(&dev, rows, &mut out, &x, stride, stride, n))?;
/// ```
#[macro_export]
macro_rules! with_block {
    ($value:expr, $name:ident => $body:expr) => {{
        let value: usize = $value;
        $crate::with_block!(@arms value, $name, $body,
            1 2 4 8 16 32 64 128 256 512 1024 2048 4096 8192 16384 32768 65536)
    }};
    (@arms $v:ident, $name:ident, $body:expr, $($n:literal)*) => {
        match $v {
            $( $n => { const $name: usize = $n; $body } )*
            other => ::core::result::Result::Err($crate::Error::InvalidLaunch(::std::format!(
                "block size {other} is not a power of two in 1..=65536"))),
        }
    };
}
