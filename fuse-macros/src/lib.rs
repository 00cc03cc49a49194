//! `#[fused_kernel]`: compiles a Rust tile kernel to CUDA C and a typed launcher at compile time.
//!
//! The work happens in ordinary functions over `proc_macro2` token streams so that it can be
//! unit-tested: [`parse`] (syn → [`ast`]), [`check`] (ast → `fuse_ir::Kernel`), [`emit_cuda`]
//! (IR → CUDA C) and [`expand`] (the generated Rust module).

mod ast;
mod check;
mod diag;
// Explicit while the placeholder `emit_cuda.rs` still sits beside `emit_cuda/`; plain `mod` once it is gone.
#[path = "emit_cuda/mod.rs"]
mod emit_cuda;
mod expand;
mod parse;

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;

/// See the crate documentation and DESIGN.md for the kernel language.
#[proc_macro_attribute]
pub fn fused_kernel(attr: proc_macro::TokenStream, item: proc_macro::TokenStream) -> proc_macro::TokenStream {
    expand::fused_kernel(attr.into(), item.into()).into()
}
