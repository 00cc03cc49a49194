//! [`CpuError`]: why a run of the interpreter stopped.
//!
//! The bottom of the CPU back end: every other file of `cpu/` may import it; it imports nothing
//! of the crate.

/// Why [`run`](super::run) stopped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CpuError {
    /// A lane with a true mask addressed `param[index]` outside `[0, len)` in program `program`.
    #[error("out-of-bounds access to `{param}` at index {index} (length {len}) in program {program:?}")]
    OutOfBounds {
        /// The pointer parameter's name.
        param: String,
        /// The element index the lane addressed.
        index: i64,
        /// The buffer's length in elements.
        len: usize,
        /// The program's id, `[x, y, z]`.
        program: [u32; 3],
    },
    /// The kernel, its const generic values or the arguments do not fit together.
    #[error("invalid kernel for the CPU back end: {0}")]
    InvalidKernel(String),
}
