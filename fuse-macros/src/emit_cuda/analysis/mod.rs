//! Facts about a kernel's IR that the lowering reads.
pub(super) mod affine;
pub(super) mod layout;
pub(super) mod pipeline;
pub(super) mod remat;
pub(super) mod schedule;
pub(super) mod slices;
