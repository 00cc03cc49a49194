//! The one error type of the runtime. Every message says what was expected and what was found.
//!
//! Bottom layer: imports nothing of the crate (also the text of a CUDA driver error, [`drv`],
//! which every layer that calls the driver quotes).

use cudarc::driver::result::DriverError;
use std::fmt::Write as _;

/// Everything that can go wrong between `launch` and a read-back. Never a panic.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// A CUDA library (`libnvrtc` or the driver's `libcuda`) could not be found or loaded.
    LibraryNotFound {
        /// The library, in words (which one, and what it is).
        library: String,
        /// Every file or folder tried, each with why it was not used.
        searched: Vec<String>,
        /// How to install the library or point fuse at it.
        hint: String,
    },

    /// The driver loaded but there is no (such) CUDA device.
    NoDevice(String),

    /// A CUDA driver call failed while setting up a device (cudarc's message).
    DriverError(String),

    /// NVRTC rejected the kernel's source; `log` is NVRTC's log, `source` the exact source compiled
    /// (the runtime's `#define`s first). Display shows both, the source with line numbers.
    Compile {
        /// The kernel's name.
        kernel: String,
        /// NVRTC's log.
        log: String,
        /// The source NVRTC compiled.
        source: String,
    },

    /// A kernel accessed a buffer outside `[0, len)` under a true mask. On the CPU it is reported at
    /// once with the program id and the length; on a GPU at the next `synchronize`/read-back, where
    /// the length and program are not recorded (`None`).
    OutOfBounds {
        /// The kernel's name (on a GPU, the runtime's best knowledge of it).
        kernel: String,
        /// The pointer parameter's name (on a GPU, its position if the name is not known).
        param: String,
        /// The element index the lane addressed.
        index: i64,
        /// The buffer's length in elements (CPU only).
        len: Option<usize>,
        /// The program's id, `[x, y, z]` (CPU only).
        program: Option<[u32; 3]>,
    },

    /// A launch argument or a buffer operation does not fit (count, dtype, mutability, length).
    InvalidArgument(String),

    /// The launch configuration does not fit (grid, num_warps, const generics).
    InvalidLaunch(String),

    /// A buffer lives on another device than the one launching or copying.
    WrongDevice(String),

    /// The kernel itself is malformed or does not fit a back end: its IR could not be read (a
    /// `KernelSpec` whose JSON is not a `fuse_ir::Kernel`), the CPU interpreter's re-check refused it
    /// (broken IR rules; const generics, arguments or a grid too large for it), or its CUDA
    /// module is malformed (a NUL in the source, a shared-memory symbol of the wrong size).
    InvalidKernel(String),

    /// A CUDA call failed after setup (allocation, copy, module load, launch, synchronize).
    Cuda(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::LibraryNotFound { library, searched, hint } => {
                write!(f, "{library} was not found.\nsearched:\n{}\nhint: {hint}", bullet_list(searched))
            }
            Error::NoDevice(m) => write!(f, "no usable CUDA device: {m}"),
            Error::DriverError(m) => write!(f, "CUDA driver error: {m}"),
            Error::Compile { kernel, log, source } => f.write_str(&compile_message(kernel, log, source)),
            Error::OutOfBounds { kernel, param, index, len, program } => {
                f.write_str(&oob_message(kernel, param, *index, *len, *program))
            }
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::InvalidLaunch(m) => write!(f, "invalid launch: {m}"),
            Error::WrongDevice(m) => write!(f, "wrong device: {m}"),
            Error::InvalidKernel(m) => write!(f, "invalid kernel: {m}"),
            Error::Cuda(m) => write!(f, "CUDA error: {m}"),
        }
    }
}

// Not derived with thiserror: it would take the `source` field of `Compile` for an error source.
impl std::error::Error for Error {}

/// `std::result::Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// `CUDA_ERROR_NAME: description` for a driver error (what the messages of [`Error::Cuda`] and
/// [`Error::DriverError`] quote).
pub(crate) fn drv(e: DriverError) -> String {
    let name =
        e.error_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    match e.error_string() {
        Ok(s) => format!("{name}: {}", s.to_string_lossy()),
        Err(_) => name,
    }
}

fn bullet_list(items: &[String]) -> String {
    if items.is_empty() {
        return "  (nothing)".to_string();
    }
    let mut s = String::new();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        let _ = write!(s, "  - {item}");
    }
    s
}

fn compile_message(kernel: &str, log: &str, source: &str) -> String {
    let mut s = format!("NVRTC failed to compile kernel `{kernel}`:\n");
    let log = log.trim_end_matches(['\0', '\n', ' ']);
    if log.is_empty() {
        s.push_str("  (NVRTC gave no log)\n");
    } else {
        for line in log.lines() {
            let _ = writeln!(s, "  {line}");
        }
    }
    s.push_str("source (line numbers as in the log):\n");
    let lines: Vec<&str> = source.lines().collect();
    let width = lines.len().max(1).to_string().len();
    for (i, line) in lines.iter().enumerate() {
        let _ = writeln!(s, "{:>width$} | {line}", i + 1);
    }
    s.pop();
    s
}

fn oob_message(
    kernel: &str,
    param: &str,
    index: i64,
    len: Option<usize>,
    program: Option<[u32; 3]>,
) -> String {
    let mut s = format!("kernel `{kernel}` accessed `{param}` out of bounds at index {index}");
    match len {
        Some(len) => {
            let _ = write!(s, " (valid: 0..{len})");
        }
        None => s.push_str(" (outside 0..len of the buffer passed)"),
    }
    if let Some([x, y, z]) = program {
        let _ = write!(s, " in program ({x}, {y}, {z})");
    }
    s.push_str("; the access was skipped (a load gave `other`/0, a store was dropped)");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compile_error_shows_log_and_numbered_source() {
        let e = Error::Compile {
            kernel: "k".into(),
            log: "k.cu(2): error: identifier \"y\" is undefined\n".into(),
            source: "#define BLOCK 4\nint x = y;".into(),
        };
        let s = e.to_string();
        assert!(s.contains("kernel `k`"), "{s}");
        assert!(s.contains("identifier \"y\" is undefined"), "{s}");
        assert!(s.contains("1 | #define BLOCK 4"), "{s}");
        assert!(s.contains("2 | int x = y;"), "{s}");
    }

    #[test]
    fn library_not_found_lists_places() {
        let e = Error::LibraryNotFound {
            library: "libnvrtc".into(),
            searched: vec!["/a/libnvrtc.so.13 (not there)".into(), "/b".into()],
            hint: "pip install nvidia-cuda-nvrtc".into(),
        };
        let s = e.to_string();
        assert!(s.contains("  - /a/libnvrtc.so.13 (not there)\n  - /b"), "{s}");
        assert!(s.contains("hint: pip install nvidia-cuda-nvrtc"), "{s}");
    }

    #[test]
    fn oob_message_names_everything() {
        let e = Error::OutOfBounds {
            kernel: "k".into(),
            param: "x".into(),
            index: 17,
            len: Some(16),
            program: Some([1, 0, 0]),
        };
        let s = e.to_string();
        assert!(
            s.contains("`x`") && s.contains("index 17") && s.contains("0..16") && s.contains("(1, 0, 0)"),
            "{s}"
        );
    }
}
