//! The CPU back end: an interpreter of the checked IR ([`fuse_ir::Kernel`]) with the GPU's
//! semantics.
//!
//! * Programs of the grid run in parallel (rayon over the flattened grid; each worker reuses one
//!   set of per-var buffers for all its programs).
//! * Evaluation is tile-at-a-time: every var holds a typed vector (scalars are one lane), every
//!   expression is one dtype dispatch followed by one tight loop over the tile.
//! * Writable buffers are shared between programs on different threads as slices of atomics of
//!   the element's width, accessed with `Relaxed` loads and stores: no locks, and a racy user
//!   kernel is merely racy (last writer wins), never undefined behaviour.
//! * A lane whose mask is true and whose offset is outside the buffer stops the launch with
//!   [`CpuError::OutOfBounds`](crate::cpu::CpuError::OutOfBounds); masked-off lanes are never
//!   read or written.
//!
//! Bit-identical to the GPU: integer arithmetic, `+ - * /` and `sqrt`, `fmod`, `floor`/`ceil`,
//! comparisons, `where_`, loads/stores, all casts (f16/bf16 round to nearest even; NaN → the
//! canonical `0x7fff`), `rand` (Philox4x32-10), `dot` against the CUDA C fallback (the IR's
//! order of accumulation). Transcendentals (`exp`, `log`, `erf`, ...) come
//! from `libm` and may differ from CUDA's by a few ulp; float sums are reduced in a different
//! order (8 accumulators, then a tree).
//!
//! Back-end layer: `cpu/` imports nothing of the rest of the crate (a launch hands it
//! [`CpuArg`](crate::cpu::CpuArg)s). Inside it, `error.rs` and `elem.rs` are at the bottom, `check.rs` and `dot.rs`
//! above them, `interp.rs` above those, this file on top.

mod check;
mod dot;
mod elem;
mod error;
mod interp;
#[cfg(test)]
mod tests;

pub use error::CpuError;

use elem::{view_ro, view_rw, Mem};
use fuse_ir::{DType, Kernel, ParamKind};
use interp::{CpuLaunch, Prog, ScalarArg};
use rayon::prelude::*;

/// One launch argument per kernel parameter, in order.
#[derive(Debug)]
pub enum CpuArg<'a> {
    /// A read-only buffer's element storage as native bytes, aligned for its dtype.
    Read(&'a [u8]),
    /// A writable buffer's element storage as native bytes, aligned for its dtype.
    Write(&'a mut [u8]),
    /// The value of an `i32` scalar parameter.
    I32(i32),
    /// The value of an `i64` scalar parameter.
    I64(i64),
    /// The value of a `u32` scalar parameter.
    U32(u32),
    /// The value of a `u64` scalar parameter.
    U64(u64),
    /// The value of an `f32` scalar parameter.
    F32(f32),
}

fn bad(msg: impl Into<String>) -> CpuError {
    CpuError::InvalidKernel(msg.into())
}

fn ro_mem<'b>(elem: DType, b: &'b [u8]) -> Option<Mem<'b>> {
    Some(match elem.size_bytes() {
        1 => Mem::R8(view_ro::<u8>(b)?),
        2 => Mem::R16(view_ro::<u16>(b)?),
        4 => Mem::R32(view_ro::<u32>(b)?),
        8 => Mem::R64(view_ro::<u64>(b)?),
        _ => return None,
    })
}

fn rw_mem<'b>(elem: DType, b: &'b mut [u8]) -> Option<Mem<'b>> {
    Some(match elem.size_bytes() {
        1 => Mem::W8(view_rw::<u8>(b)?),
        2 => Mem::W16(view_rw::<u16>(b)?),
        4 => Mem::W32(view_rw::<u32>(b)?),
        8 => Mem::W64(view_rw::<u64>(b)?),
        _ => return None,
    })
}

/// Runs `kernel` over `grid` with the const generic values `consts` (in the kernel's order) and
/// one argument per parameter. Returns when every program has run (none if a grid dimension is
/// 0), or at the first error.
///
/// This is the back end of a launch on [`Device::cpu`](crate::Device::cpu); most callers launch
/// through [`crate::launch`] instead, which passes buffers and scalars as [`CpuArg`]s.
///
/// # Errors
/// * [`CpuError::InvalidKernel`] if the kernel breaks a rule of the IR that the interpreter relies
///   on, `consts` does not fit it (count, tile lengths, memory needed), an argument does not fit
///   its parameter (count, kind, scalar dtype, a read-only slice for a `*mut` parameter, a buffer
///   misaligned or not a whole number of elements), the grid has more programs than `usize` can
///   count, or the worker threads could not be started.
/// * [`CpuError::OutOfBounds`] at an access outside its buffer on a lane whose mask is true.
///   Programs run in parallel, so others may have run, wholly or in part, and written their
///   outputs.
pub fn run(kernel: &Kernel, consts: &[u64], grid: [u32; 3], args: &mut [CpuArg<'_>]) -> Result<(), CpuError> {
    let layout = check::check(kernel, consts)?;
    if args.len() != kernel.params.len() {
        return Err(bad(format!(
            "kernel `{}` takes {} arguments, got {}",
            kernel.name,
            kernel.params.len(),
            args.len()
        )));
    }
    let mut mems = Vec::with_capacity(args.len());
    let mut scalars = Vec::with_capacity(args.len());
    for (p, a) in kernel.params.iter().zip(args.iter_mut()) {
        let misfit = |what: &str| bad(format!("parameter `{}` ({:?}): {what}", p.name, p.kind));
        let (mem, scalar) = match (p.kind, a) {
            (ParamKind::Ptr { mutable: true, .. }, CpuArg::Read(_)) => {
                return Err(misfit("a writable buffer was passed read-only"))
            }
            (ParamKind::Ptr { elem, .. }, CpuArg::Read(b)) => (
                Some(
                    ro_mem(elem, b)
                        .ok_or_else(|| misfit("buffer misaligned or not a whole number of elements"))?,
                ),
                None,
            ),
            (ParamKind::Ptr { elem, .. }, CpuArg::Write(b)) => (
                Some(
                    rw_mem(elem, b)
                        .ok_or_else(|| misfit("buffer misaligned or not a whole number of elements"))?,
                ),
                None,
            ),
            (ParamKind::Scalar(DType::I32), CpuArg::I32(x)) => (None, Some(ScalarArg::I32(*x))),
            (ParamKind::Scalar(DType::I64), CpuArg::I64(x)) => (None, Some(ScalarArg::I64(*x))),
            (ParamKind::Scalar(DType::U32), CpuArg::U32(x)) => (None, Some(ScalarArg::U32(*x))),
            (ParamKind::Scalar(DType::U64), CpuArg::U64(x)) => (None, Some(ScalarArg::U64(*x))),
            (ParamKind::Scalar(DType::F32), CpuArg::F32(x)) => (None, Some(ScalarArg::F32(*x))),
            (_, a) => return Err(misfit(&format!("got argument {a:?}"))),
        };
        mems.push(mem);
        scalars.push(scalar);
    }

    let [gx, gy, gz] = grid.map(u64::from);
    let total = gx
        .checked_mul(gy)
        .and_then(|t| t.checked_mul(gz))
        .and_then(|t| usize::try_from(t).ok())
        .ok_or_else(|| bad(format!("grid {grid:?} is too large")))?;
    if total == 0 {
        return Ok(());
    }
    // Each worker holds `layout.state` bytes (at most `check::MAX_STATE_BYTES`): fewer workers
    // for kernels with long tiles, so their total stays within a budget instead of aborting.
    let workers =
        (CPU_STATE_BUDGET / layout.state.max(1)).clamp(1, rayon::current_num_threads() as u64) as usize;
    let launch = CpuLaunch {
        kernel,
        consts,
        grid,
        lens: layout.lens,
        dims: layout.dims,
        dtypes: layout.dtypes,
        mems,
        scalars,
    };
    let pid_of = |f: usize| {
        let f = f as u64;
        [(f % gx) as u32, ((f / gx) % gy) as u32, (f / (gx * gy)) as u32]
    };
    if total == 1 || workers == 1 {
        let mut prog = Prog::new(&launch);
        return (0..total).try_for_each(|f| prog.run(pid_of(f)));
    }
    let run = || {
        // Enough pieces to balance uneven programs, few enough that the per-piece setup (one
        // allocation per var) is negligible.
        let min_len = (total / (workers * 16)).max(1);
        (0..total)
            .into_par_iter()
            .with_min_len(min_len)
            .try_for_each_init(|| Prog::new(&launch), |prog, f| prog.run(pid_of(f)))
    };
    if workers == rayon::current_num_threads() {
        return run();
    }
    match rayon::ThreadPoolBuilder::new().num_threads(workers).build() {
        Ok(pool) => pool.install(run),
        Err(e) => Err(bad(format!("could not start {workers} CPU workers: {e}"))),
    }
}

/// The tile state all CPU workers of one launch may hold together.
const CPU_STATE_BUDGET: u64 = 4 << 30;
