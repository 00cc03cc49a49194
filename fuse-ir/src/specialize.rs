//! Launch-time specialisation: the facts about one launch's arguments ([`Specialization`]) that
//! the CUDA source may test as `#define`d macros, and the names of those macros.
use crate::kernel::Param;
use serde::{Deserialize, Serialize};

/// A launch-time fact the CUDA source may specialise on (like Triton's 16-byte divisibility
/// specialisation). The emitter lists the ones its source reads; before compiling, the runtime
/// prepends `#define FUSE_ALIGN16_<param name> 0|1` (the buffer's device address is a multiple of
/// 16 bytes) or `#define FUSE_DIV16_<param name> 0|1` (the integer scalar is a multiple of 16), and
/// the values are part of the cache key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Specialization {
    /// Index of a pointer parameter.
    Align16(u32),
    /// Index of an integer scalar parameter.
    Div16(u32),
    /// Index of a memory access in [`Kernel::accesses`](crate::Kernel::accesses) order:
    /// `FUSE_INB_<k>` is 1 when the runtime proved, before the launch, that every lane of every
    /// program that this access touches (mask true) has its offset inside the buffer, so the source
    /// may skip the check.
    InBounds(u32),
    /// Index of a mask in [`Kernel::masks`](crate::Kernel::masks) order: `FUSE_TRUE_<k>` is 1 when
    /// the runtime proved, before the launch, that the mask is true on every lane of every program,
    /// so the source may treat it as the constant `true`.
    AllTrue(u32),
    /// Index in [`Kernel::uniform_branches`](crate::Kernel::uniform_branches): `FUSE_IFT_<k>` is 1
    /// when the runtime computed that branch's condition true for this launch, so the source may
    /// take the branch unevaluated.
    BranchTaken(u32),
    /// Index in [`Kernel::uniform_branches`](crate::Kernel::uniform_branches): `FUSE_IFF_<k>` is 1
    /// when the runtime computed that branch's condition false for this launch, so the source may
    /// drop the branch.
    BranchSkipped(u32),
    /// Index of a load in [`Kernel::accesses`](crate::Kernel::accesses) order that reads a
    /// [`TensorBox`](crate::TensorBox) into a pipelined `dot`'s shared-memory stage: `FUSE_TMA_<k>`
    /// is 1 when the runtime encoded a tensor map for it (an sm_90 device, the box's stride, bounds
    /// and buffer checked for this launch) and passes it as the kernel's extra parameter
    /// `fuse_tmap<k>`, so the source may copy the box with TMA instead of `cp.async`.
    TensorBox(u32),
}

impl Specialization {
    /// The macro name the CUDA source tests, e.g. `FUSE_ALIGN16_x`, given the kernel's
    /// [`Kernel::params`](crate::Kernel::params).
    ///
    /// ```
    /// use fuse_ir::Specialization;
    ///
    /// assert_eq!(Specialization::InBounds(3).macro_name(&[]), "FUSE_INB_3");
    /// ```
    ///
    /// # Panics
    /// If a [`Specialization::Align16`] or [`Specialization::Div16`] index is out of range of
    /// `kernel_params`.
    pub fn macro_name(self, kernel_params: &[Param]) -> String {
        match self {
            Specialization::Align16(p) => format!("FUSE_ALIGN16_{}", kernel_params[p as usize].name),
            Specialization::Div16(p) => format!("FUSE_DIV16_{}", kernel_params[p as usize].name),
            Specialization::InBounds(k) => format!("FUSE_INB_{k}"),
            Specialization::AllTrue(k) => format!("FUSE_TRUE_{k}"),
            Specialization::BranchTaken(k) => format!("FUSE_IFT_{k}"),
            Specialization::BranchSkipped(k) => format!("FUSE_IFF_{k}"),
            Specialization::TensorBox(k) => format!("FUSE_TMA_{k}"),
        }
    }
}
