//! IR → CUDA C. (Placeholder signature; the real emitter replaces this file.)
use fuse_ir::{Kernel, Specialization};

/// The emitted translation unit and the launch-time facts it specialises on.
pub struct CudaSource {
    pub source: String,
    pub specializations: Vec<Specialization>,
}

pub fn emit_cuda(kernel: &Kernel) -> CudaSource {
    CudaSource { source: format!("// TODO emitter for {}\n", kernel.name), specializations: Vec::new() }
}
