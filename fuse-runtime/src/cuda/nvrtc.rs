//! NVRTC: CUDA C → cubin for an exact `sm_XX`, with no GPU needed.
//!
//! Imports `error` and `cuda/libs.rs`.

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

/// ptxas's note when it serialises a kernel's wgmma instructions (each then waits for the one
/// before): C7514/C7515 and their kin, "Potential Performance Loss: wgmma.mma_async instructions
/// are serialized due to ...".
const WGMMA_SERIALIZED: &str = "wgmma.mma_async instructions are serialized";

/// Compiles `source` (defining `extern "C" __global__ void <kernel>`) to a cubin for `arch`.
/// A ptxas note that the kernel's wgmma instructions were serialised is logged as a warning
/// (the kernel is correct, and several times slower on its tensor cores).
pub(crate) fn compile_cubin(kernel: &str, source: &str, arch: &str) -> Result<Vec<u8>> {
    let (cubin, log) = compile_capped(kernel, source, arch, &[])?;
    if log.contains(WGMMA_SERIALIZED) {
        log::warn!("fuse: ptxas serialised the wgmma instructions of `{kernel}` for {arch}:\n{log}");
    }
    Ok(cubin)
}

/// The emitter's one-warp register cap (`FUSE_LAUNCH_BOUNDS`, emit_cuda/lower/finish.rs) is on unless the
/// source defines this macro to 1.
const NO_WARP_CAP: &str = "FUSE_NO_WARP_CAP";

/// [`compile_with_log`] under the one-warp register cap's rule: a one-warp variant (the source
/// defines `FUSE_NUM_WARPS 1`) is compiled with ptxas's report, and if it spills it is compiled
/// again with the cap off (`FUSE_NO_WARP_CAP`): the cap is there to keep 32 blocks a
/// multiprocessor where ptxas would take a few registers past 64, never to trade registers for
/// local memory (a one-warp `dot` or several full-width tiles a thread need more than 64).
pub(crate) fn compile_capped(
    kernel: &str,
    source: &str,
    arch: &str,
    extra: &[&str],
) -> Result<(Vec<u8>, String)> {
    let one_warp = source.lines().any(|l| l.trim_end() == "#define FUSE_NUM_WARPS 1");
    if !one_warp || !source.contains(NO_WARP_CAP) {
        return compile_with_log(kernel, source, arch, extra);
    }
    let verbose = "--ptxas-options=-v";
    let mut with_report: Vec<&str> = extra.to_vec();
    if !with_report.contains(&verbose) {
        with_report.push(verbose);
    }
    let (cubin, log) = compile_with_log(kernel, source, arch, &with_report)?;
    if PtxasReport::parse(&log).spill_store_bytes == 0 {
        return Ok((cubin, log));
    }
    let uncapped = format!("#define {NO_WARP_CAP} 1\n{source}");
    compile_with_log(kernel, &uncapped, arch, extra)
}

/// What ptxas reported for one kernel compiled with `--ptxas-options=-v` (see
/// [`KernelSpec::ptxas_report`](crate::KernelSpec::ptxas_report)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtxasReport {
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of registers spilled to local memory (stores; loads are at least as many).
    pub spill_store_bytes: u32,
    /// Bytes of spilled registers read back.
    pub spill_load_bytes: u32,
    /// The stack frame, in bytes.
    pub stack_bytes: u32,
    /// Whether ptxas serialised the kernel's wgmma instructions (its "Potential Performance
    /// Loss" note): every MMA then waits for the one before it.
    pub wgmma_serialized: bool,
    /// NVRTC's whole log.
    pub log: String,
}

impl PtxasReport {
    /// Reads ptxas's `-v` lines out of an NVRTC log.
    pub(crate) fn parse(log: &str) -> PtxasReport {
        // The number just before `suffix` on the line that holds it ("Used 255 registers",
        // "8 bytes spill stores", "8 bytes stack frame").
        let number_before = |suffix: &str| -> u32 {
            log.lines()
                .find_map(|line| {
                    let head = &line[..line.find(suffix)?];
                    head.split(|c: char| !c.is_ascii_digit()).rfind(|w| !w.is_empty())?.parse().ok()
                })
                .unwrap_or(0)
        };
        PtxasReport {
            // Not " registers" alone: the serialisation note speaks of "accumulator registers".
            registers: log
                .lines()
                .find_map(|line| {
                    let rest = &line[line.find("Used ")? + 5..];
                    rest.split(' ').next()?.parse().ok()
                })
                .unwrap_or(0),
            spill_store_bytes: number_before(" bytes spill stores"),
            spill_load_bytes: number_before(" bytes spill loads"),
            stack_bytes: number_before(" bytes stack frame"),
            wgmma_serialized: log.contains(WGMMA_SERIALIZED),
            log: log.to_string(),
        }
    }
}

/// Compiles `source` to a cubin for `arch` with `extra` options after the usual ones; returns the
/// cubin and NVRTC's log (ptxas's notes included).
pub(crate) fn compile_with_log(
    kernel: &str,
    source: &str,
    arch: &str,
    extra: &[&str],
) -> Result<(Vec<u8>, String)> {
    validate_arch(arch)?;
    libs::ensure(Lib::Nvrtc)?;
    let src = CString::new(source)
        .map_err(|_| Error::InvalidKernel(format!("the CUDA source of `{kernel}` contains a NUL byte")))?;
    let name = CString::new(format!("{kernel}.cu")).unwrap_or_else(|_| CString::from(c"kernel.cu"));
    let mut opts = options(arch);
    opts.extend(extra.iter().map(|o| o.to_string()));
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
                    Ok((cubin, log))
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
    fn ptxas_reports() {
        let log = "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline stage in the function 'matmul_f16' in line 0
ptxas info    : 73 bytes gmem
ptxas info    : Compiling entry function 'matmul_f16' for 'sm_90a'
ptxas info    : Function properties for matmul_f16
ptxas         .     8 bytes stack frame, 16 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 8 bytes cumulative stack size
";
        let r = PtxasReport::parse(log);
        assert_eq!(
            (r.registers, r.spill_store_bytes, r.spill_load_bytes, r.stack_bytes, r.wgmma_serialized),
            (255, 16, 12, 8, true)
        );
        let clean = PtxasReport::parse("ptxas info    : Used 90 registers, used 1 barriers\n");
        assert_eq!((clean.registers, clean.spill_store_bytes, clean.wgmma_serialized), (90, 0, false));
    }

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
