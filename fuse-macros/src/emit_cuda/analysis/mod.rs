//! Facts about a kernel's IR that the lowering (`super::lower`) reads: plain data, computed from
//! the IR alone, with no C text.
pub(super) mod affine;
pub(super) mod layout;
pub(super) mod pipeline;
pub(super) mod remat;
pub(super) mod schedule;
pub(super) mod slices;
pub(super) mod tensor_cores;
