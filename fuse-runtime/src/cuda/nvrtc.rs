//! NVRTC: CUDA C → cubin for an exact `sm_XX`, with no GPU needed.

use super::libs::{self, Lib};
use crate::error::{Error, Result};
use cudarc::nvrtc::{result, sys};
use std::ffi::{c_char, CString};
use std::sync::OnceLock;

/// The options every kernel is compiled with (besides `--gpu-architecture`). Part of the cache keys.
pub(crate) const BASE_OPTIONS: &[&str] = &["-default-device", "--std=c++17", "--fmad=true"];

/// All options for `arch`, in the order passed to NVRTC.
pub(crate) fn options(arch: &str) -> Vec<String> {
    let mut o = vec![format!("--gpu-architecture={arch}")];
    o.extend(BASE_OPTIONS.iter().map(|s| s.to_string()));
    o
}

/// Checks an arch string: `sm_` + digits, optionally `a`/`f` (`sm_90`, `sm_90a`, `sm_100f`).
pub(crate) fn validate_arch(arch: &str) -> Result<()> {
    let ok = arch.strip_prefix("sm_").is_some_and(|rest| {
        let digits = rest.trim_end_matches(['a', 'f']);
        digits.len() >= 2
            && digits.len() <= 3
            && digits.bytes().all(|b| b.is_ascii_digit())
            && rest.len() - digits.len() <= 1
    });
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "arch must look like \"sm_90\" (sm_ and the compute capability), got {arch:?}"
        )))
    }
}

/// NVRTC's version, `(major, minor)`; also the check that NVRTC can be loaded.
pub fn version() -> Result<(i32, i32)> {
    static V: OnceLock<Result<(i32, i32)>> = OnceLock::new();
    V.get_or_init(|| {
        libs::ensure(Lib::Nvrtc)?;
        guard("nvrtcVersion", || {
            let (mut major, mut minor) = (0, 0);
            // SAFETY: plain out-parameters.
            let r = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
            r.result().map_err(|e| Error::Cuda(format!("nvrtcVersion failed: {e}")))?;
            Ok((major, minor))
        })
    })
    .clone()
}

/// Runs `f`, turning a panic inside cudarc (a missing symbol in an old library, say) into an error.
pub(crate) fn guard<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::Cuda(format!("{what}: the CUDA binding panicked: {msg}")))
        }
    }
}

fn c_chars_to_string(v: &[c_char]) -> String {
    let bytes: Vec<u8> = v.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Compiles `source` (defining `extern "C" __global__ void <kernel>`) to a cubin for `arch`.
pub(crate) fn compile_cubin(kernel: &str, source: &str, arch: &str) -> Result<Vec<u8>> {
    validate_arch(arch)?;
    libs::ensure(Lib::Nvrtc)?;
    let src = CString::new(source)
        .map_err(|_| Error::InvalidKernel(format!("the CUDA source of `{kernel}` contains a NUL byte")))?;
    let name = CString::new(format!("{kernel}.cu")).unwrap_or_else(|_| CString::from(c"kernel.cu"));
    let opts = options(arch);
    guard("NVRTC", || {
        let prog = result::create_program(&src, Some(&name))
            .map_err(|e| Error::Cuda(format!("nvrtcCreateProgram failed for `{kernel}`: {e}")))?;
        // SAFETY: `prog` is live until destroy_program below; `src`/`name` outlive it.
        let out = unsafe {
            let compiled = result::compile_program(prog, &opts);
            let log = result::get_program_log(prog).map(|l| c_chars_to_string(&l)).unwrap_or_default();
            match compiled {
                Err(e) => Err(Error::Compile {
                    kernel: kernel.to_string(),
                    log: if log.trim().is_empty() {
                        format!("{e} (options: {})", opts.join(" "))
                    } else {
                        log
                    },
                    source: source.to_string(),
                }),
                Ok(()) => {
                    if !log.trim().is_empty() {
                        log::debug!("NVRTC log for `{kernel}`:\n{log}");
                    }
                    let mut size = 0usize;
                    sys::nvrtcGetCUBINSize(prog, &mut size)
                        .result()
                        .map_err(|e| Error::Cuda(format!("nvrtcGetCUBINSize failed for `{kernel}`: {e}")))?;
                    let mut cubin = vec![0u8; size];
                    sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast::<c_char>())
                        .result()
                        .map_err(|e| Error::Cuda(format!("nvrtcGetCUBIN failed for `{kernel}`: {e}")))?;
                    if cubin.is_empty() {
                        return Err(Error::Cuda(format!(
                            "NVRTC produced no cubin for `{kernel}` (arch {arch}): is {arch} a real architecture?"
                        )));
                    }
                    Ok(cubin)
                }
            }
        };
        // SAFETY: created above, destroyed once.
        let _ = unsafe { result::destroy_program(prog) };
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_strings() {
        for ok in ["sm_80", "sm_90", "sm_90a", "sm_100", "sm_120f"] {
            validate_arch(ok).unwrap();
        }
        for bad in ["90", "sm90", "sm_", "sm_9", "compute_90", "sm_90ab", "sm_x0"] {
            assert!(validate_arch(bad).is_err(), "{bad}");
        }
    }
}
