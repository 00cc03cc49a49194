//! IR → self-contained CUDA C (see docs/DESIGN.md, "Runtime conventions").
//!
//! One thread block runs one program with `FUSE_THREADS = 32 * FUSE_NUM_WARPS` threads. Tiles
//! are spread over the threads as `analysis/layout.rs` describes; scalars are per-thread copies of
//! a uniform value. Two groups of modules, the lowering reading the analyses and never the other
//! way:
//! * [`analysis`]: facts about the IR, no C text: [`analysis::layout`] (how tiles are spread over
//!   the threads), [`analysis::slices`] (which tiles take a row, column or MMA layout),
//!   [`analysis::affine`] (which offsets are contiguous and aligned: vector access, Philox x4),
//!   [`analysis::remat`] (which index tiles can be recomputed at any lane),
//!   [`analysis::tensor_cores`] (which `dot`s take the tensor cores), [`analysis::pipeline`]
//!   (which `dot` K loops are software-pipelined), [`analysis::schedule`] (the order of the
//!   top-level statements);
//! * [`lower`]: the C text: [`lower::names`] (C identifiers), [`lower::ctype`] (C types, literals,
//!   conversions), [`lower::body`] (statements and element-wise expressions), [`lower::memory`]
//!   (loads and stores with bounds checks), [`lower::coalesce`] (stores of tensor-core results
//!   through the scratch), [`lower::reduce`] (block reductions), [`lower::random`] (`rand`),
//!   [`lower::shape`] (operations that move lanes between threads), [`lower::remat`] (broadcasts
//!   by recomputation), [`lower::dot`] (`dot` on tensor cores, [`lower::mma`], [`lower::tf32`],
//!   [`lower::wgmma`], or the general fallback), [`lower::pipeline`] and [`lower::tma`] (pipelined
//!   loops), [`lower::layout`] and [`lower::divisibility`] (the layouts and the divisibility
//!   facts as preprocessor constants and conditions), [`lower::prelude`] (the device helpers
//!   the body used), [`lower::writer`] (indented output) and [`lower::finish`] (the file around
//!   the body).
//!
//! Launch-time facts the source specialises on (`FUSE_ALIGN16_<p>`, `FUSE_DIV16_<p>`) are listed
//! in [`CudaSource::specializations`]; the source tests them with `#if` and carries a plain
//! fallback for when they are 0.
use fuse_ir::{Kernel, Specialization};

mod analysis;
mod lower;
#[cfg(test)]
mod tests;

/// The emitted translation unit and the launch-time facts it specialises on.
pub struct CudaSource {
    pub source: String,
    pub specializations: Vec<Specialization>,
}

/// The CUDA C of `kernel`.
pub fn emit_cuda(kernel: &Kernel) -> CudaSource {
    lower::emit(kernel)
}
