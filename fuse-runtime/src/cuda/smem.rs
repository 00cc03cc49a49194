//! The dynamic shared memory contract (docs/DESIGN.md, "Runtime conventions"): a module that
//! defines the global `fuse_dynamic_smem_bytes` launches its kernel with that many bytes of
//! dynamic shared memory, opting in past the default per-block limit (48 KiB) where the device
//! allows it. A module without the symbol launches with none.
//!
//! Imports only `error`.

use crate::error::{drv, Error, Result};
use cudarc::driver::result::DriverError;
use cudarc::driver::sys::{CUfunction_attribute, CUresult};
use cudarc::driver::{CudaFunction, CudaModule, CudaStream};
use std::sync::Arc;

/// The global a module defines to ask for dynamic shared memory: `extern "C" __device__ const
/// unsigned int` (or `__constant__`), a compile-time expression of the kernel's defines.
pub(crate) const SYMBOL: &str = "fuse_dynamic_smem_bytes";

/// A device's shared memory per block: without and with the opt-in attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SmemLimits {
    /// `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK` (48 KiB on every GPU so far).
    pub(crate) default: u32,
    /// `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN` (227 KiB on an H100).
    pub(crate) opt_in: u32,
}

/// How a loaded kernel launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SmemPlan {
    /// Bytes of dynamic shared memory per block.
    pub(crate) dynamic: u32,
    /// Whether the function needs `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` raised: its
    /// static and dynamic shared memory together exceed the default limit.
    pub(crate) opt_in: bool,
}

impl SmemPlan {
    /// A kernel without the symbol.
    pub(crate) const NONE: SmemPlan = SmemPlan { dynamic: 0, opt_in: false };
}

/// A kernel that asks for more shared memory than the device gives a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TooLarge {
    pub(crate) dynamic: u32,
    pub(crate) static_bytes: u32,
    pub(crate) limit: u32,
}

impl TooLarge {
    /// The launch error: the kernel, its configuration (`BLOCK = 128, num_warps = 4,
    /// num_stages = 3`), the bytes, the device's limit and what to lower.
    pub(crate) fn error(&self, kernel: &str, config: &str, device: &str) -> Error {
        let needed = u64::from(self.dynamic) + u64::from(self.static_bytes);
        let parts = if self.static_bytes == 0 {
            format!("{} bytes of dynamic shared memory", self.dynamic)
        } else {
            format!(
                "{needed} bytes of shared memory ({} dynamic, {} static)",
                self.dynamic, self.static_bytes
            )
        };
        Error::InvalidLaunch(format!(
            "kernel `{kernel}` with {config} needs {parts} per program (its `{SYMBOL}`), but {device} allows a \
             block at most {} bytes: lower num_stages or the block sizes (const generics) that size its \
             shared buffers",
            self.limit
        ))
    }
}

/// What a kernel asking for `dynamic` bytes (beside `static_bytes` of static shared memory)
/// launches with on a device of `limits`.
pub(crate) fn plan(
    dynamic: u32,
    static_bytes: u32,
    limits: SmemLimits,
) -> std::result::Result<SmemPlan, TooLarge> {
    if dynamic == 0 {
        return Ok(SmemPlan::NONE);
    }
    let total = u64::from(dynamic) + u64::from(static_bytes);
    if total > u64::from(limits.opt_in) {
        return Err(TooLarge { dynamic, static_bytes, limit: limits.opt_in });
    }
    Ok(SmemPlan { dynamic, opt_in: total > u64::from(limits.default) })
}

/// The module's request: `None` without the symbol.
fn requested(module: &Arc<CudaModule>, stream: &Arc<CudaStream>, kernel: &str) -> Result<Option<u32>> {
    global_u32(module, stream, kernel, SYMBOL)
}

/// The value of the module's `extern "C" __device__ const unsigned int` global `symbol`, `None`
/// where the module has none.
pub(crate) fn global_u32(
    module: &Arc<CudaModule>,
    stream: &Arc<CudaStream>,
    kernel: &str,
    symbol: &str,
) -> Result<Option<u32>> {
    let view = match module.get_global(symbol, stream) {
        Ok(v) => v,
        Err(DriverError(CUresult::CUDA_ERROR_NOT_FOUND)) => return Ok(None),
        Err(e) => {
            return Err(Error::Cuda(format!("looking up `{symbol}` in `{kernel}`'s module: {}", drv(e))))
        }
    };
    if view.len() != 4 {
        return Err(Error::InvalidKernel(format!(
            "kernel `{kernel}`: `{symbol}` must be a 4-byte unsigned int, but the module's is {} bytes",
            view.len()
        )));
    }
    let mut bytes = [0u8; 4];
    stream
        .memcpy_dtoh(&view, &mut bytes)
        .and_then(|()| stream.synchronize())
        .map_err(|e| Error::Cuda(format!("reading `{symbol}` of `{kernel}`: {}", drv(e))))?;
    Ok(Some(u32::from_le_bytes(bytes)))
}

/// Reads the module's request once, when it is loaded, and raises the function's dynamic shared
/// memory limit where the plan needs it. The inner `Err` is a kernel this device cannot launch
/// (reported at each launch, with the launch's configuration).
pub(crate) fn prepare(
    module: &Arc<CudaModule>,
    func: &CudaFunction,
    stream: &Arc<CudaStream>,
    limits: SmemLimits,
    kernel: &str,
) -> Result<std::result::Result<SmemPlan, TooLarge>> {
    let Some(dynamic) = requested(module, stream, kernel)? else { return Ok(Ok(SmemPlan::NONE)) };
    let static_bytes = func
        .get_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
        .map_err(|e| Error::Cuda(format!("reading the static shared memory of `{kernel}`: {}", drv(e))))?;
    let plan = plan(dynamic, static_bytes.max(0) as u32, limits);
    if let Ok(p) = plan {
        if p.opt_in {
            // Checked against the opt-in limit above, so it fits an i32.
            func.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                p.dynamic as i32,
            )
            .map_err(|e| {
                Error::Cuda(format!(
                    "allowing `{kernel}` {} bytes of dynamic shared memory: {}",
                    p.dynamic,
                    drv(e)
                ))
            })?;
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: SmemLimits = SmemLimits { default: 48 * 1024, opt_in: 227 * 1024 };

    #[test]
    fn no_request_launches_with_none() {
        assert_eq!(plan(0, 0, H100), Ok(SmemPlan::NONE));
        assert_eq!(plan(0, 40_000, H100), Ok(SmemPlan::NONE));
    }

    #[test]
    fn within_the_default_limit_needs_no_opt_in() {
        assert_eq!(plan(16 * 1024, 0, H100), Ok(SmemPlan { dynamic: 16 * 1024, opt_in: false }));
        assert_eq!(plan(48 * 1024, 0, H100), Ok(SmemPlan { dynamic: 48 * 1024, opt_in: false }));
    }

    #[test]
    fn past_the_default_limit_opts_in_static_bytes_included() {
        assert_eq!(plan(100 * 1024, 0, H100), Ok(SmemPlan { dynamic: 100 * 1024, opt_in: true }));
        // 40 KiB dynamic + 16 KiB static is past 48 KiB together.
        assert_eq!(plan(40 * 1024, 16 * 1024, H100), Ok(SmemPlan { dynamic: 40 * 1024, opt_in: true }));
        assert_eq!(plan(227 * 1024, 0, H100), Ok(SmemPlan { dynamic: 227 * 1024, opt_in: true }));
    }

    #[test]
    fn past_the_opt_in_limit_is_refused() {
        let t = TooLarge { dynamic: 227 * 1024 + 1, static_bytes: 0, limit: 227 * 1024 };
        assert_eq!(plan(227 * 1024 + 1, 0, H100), Err(t));
        let t = TooLarge { dynamic: 220 * 1024, static_bytes: 8 * 1024, limit: 227 * 1024 };
        assert_eq!(plan(220 * 1024, 8 * 1024, H100), Err(t));
        // No overflow at the extremes.
        assert!(plan(u32::MAX, u32::MAX, H100).is_err());
    }

    #[test]
    fn the_error_names_the_kernel_the_bytes_the_limit_and_what_to_lower() {
        let e = TooLarge { dynamic: 1 << 20, static_bytes: 0, limit: 232_448 }.error(
            "mm",
            "BLOCK_M = 128, num_warps = 8, num_stages = 4",
            "NVIDIA H100 80GB HBM3, sm_90",
        );
        let s = e.to_string();
        assert!(matches!(e, Error::InvalidLaunch(_)), "{s}");
        for part in [
            "kernel `mm`",
            "BLOCK_M = 128, num_warps = 8, num_stages = 4",
            "1048576 bytes of dynamic shared memory",
            "NVIDIA H100 80GB HBM3, sm_90 allows a block at most 232448 bytes",
            "lower num_stages or the block sizes",
        ] {
            assert!(s.contains(part), "{part:?} missing from: {s}");
        }
        let s = TooLarge { dynamic: 200_000, static_bytes: 40_000, limit: 232_448 }
            .error("k", "c", "d")
            .to_string();
        assert!(s.contains("240000 bytes of shared memory (200000 dynamic, 40000 static)"), "{s}");
    }
}
