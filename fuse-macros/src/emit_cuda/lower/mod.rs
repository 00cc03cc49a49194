//! The lowering of a kernel's IR to CUDA C.
pub(super) mod body;
pub(super) mod coalesce;
pub(super) mod ctype;
pub(super) mod dot;
pub(super) mod memory;
pub(super) mod mma;
pub(super) mod names;
pub(super) mod prelude;
pub(super) mod random;
pub(super) mod reduce;
pub(super) mod shape;
pub(super) mod tf32;
pub(super) mod tma;
pub(super) mod wgmma;
pub(super) mod writer;
