//! `#[fused_kernel]`: compiles a Rust tile kernel to CUDA C and a typed launcher at compile time.
//!
//! Use it through the `fuse` crate (`fuse::fused_kernel`, also in `fuse::prelude`): the code it
//! generates names `::fuse::...` paths, so the crate that uses it must depend on `fuse`.
//!
//! The work happens in ordinary functions over `proc_macro2` token streams so that it can be
//! unit-tested, in private modules: `parse` (syn → `ast`), `check` (ast → [`fuse_ir::Kernel`]),
//! `generic` (a generic kernel's instantiations, each parsed and checked), `emit_cuda` (IR → CUDA C:
//! its `analysis` passes, then its `lower`ing) and `expand` (the generated Rust module); `c_names`
//! holds the C words that the checker and the emitter both keep the user's names off.
#![warn(missing_docs)]

mod ast;
mod autotune;
mod c_names;
mod check;
mod diag;
mod emit_cuda;
mod expand;
mod generic;
mod parse;

#[cfg(test)]
mod dot_tests;
#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod generic_tests;
#[cfg(test)]
mod tests;

/// Compiles a tile kernel, written as a Rust `fn`, to CUDA C at compile time and replaces the
/// `fn` with a module of the same name and visibility whose `launch` runs it on a
/// `fuse::Device` (a GPU, or the CPU interpreter).
///
/// The body is not compiled as Rust: it is a tile program in the Triton style (one *program* per
/// grid point, values that are scalars or 1-D and 2-D tiles whose dims are powers of two). The language (every
/// operation, the typing rules, masks and bounds) is documented in the language reference,
/// [docs/LANGUAGE.md](https://github.com/fuse-rs/fuse/blob/main/docs/LANGUAGE.md), and the
/// diagnostics in its section "Diagnostics".
///
/// # What it accepts
///
/// `#[fused_kernel]` takes no arguments but an optional `autotune(configs = [(NAME = value, ..,
/// num_warps = 4, num_stages = 3), ..], key = [param, ..], restore = [param, ..])`, which adds
/// `Config`, `CONFIGS` and `launch_autotuned` to the module
/// ([LANGUAGE.md, "Autotuning"](https://github.com/fuse-rs/fuse/blob/main/docs/LANGUAGE.md#autotuning)).
/// It applies to a free `fn` with:
/// * **const generics** `const NAME: usize` (no lifetime parameters, defaults or `where`
///   clause), typically the block size. Each must be a power of two; that is checked where
///   `launch::<N>` is instantiated.
/// * **type parameters** `T: Float` (f32, f16, bf16) or `T: Half` (f16, bf16), up to three: the
///   kernel is compiled once for each combination of their element types (see "Generic kernels"
///   below).
/// * **parameters** `x: *const T` (a read-only buffer), `y: *mut T` (a writable buffer: `store`
///   needs one), with `T` one of `f32 f16 bf16 i32 i64 u32 u64 u8 i8` or a type parameter, or
///   scalars by value of type `i32 i64 u32 u64 f32`.
/// * **no return value**: results are written through `*mut` parameters with `store`.
/// * **attributes**: doc comments, `cfg`, `cfg_attr` and lint attributes (`allow`, `warn`,
///   `deny`, `expect`), which go on the generated module. The `fn` may not be `const`, `async`,
///   `unsafe` or `extern`.
/// * **a body** of `let`/`let mut`, assignments (`=`, `+=`, ...), `if`/`else` on scalar
///   conditions and `for` over integer ranges, using `program_id`, `arange`, `load`, `store`,
///   arithmetic, comparisons, `where_`, reductions (`sum`, `max`, `min`), math functions (`exp`,
///   `erf`, `rsqrt`, ...), casts (`x.to(f16)`, `x as f16`), `rand`, 2-D tiles and their shape
///   functions, and `dot` (matrix products of f16, bf16, f32-as-TF32 or i8 tiles).
///
/// # What it generates
///
/// For `pub fn add_mul<const BLOCK: usize>(x: *const f32, y: *const f32, out: *mut f32, n: i32)`:
///
/// ```ignore
/// pub mod add_mul {
///     pub const NAME: &str = "add_mul"; // the kernel's name, also its CUDA entry point
///     pub const SOURCE: &str = "..."; // the emitted CUDA C
///     pub const IR_JSON: &str = "..."; // the checked `fuse_ir::Kernel`, as JSON
///     pub static SPEC: ::fuse::KernelSpec = ...; // the three above and the specializations
///     pub fn launch<const BLOCK: usize>(
///         device: &::fuse::Device,
///         config: impl Into<::fuse::LaunchConfig>, // a grid: u32, (u32, u32) or (u32, u32, u32)
///         x: &(impl ::fuse::DeviceRead<f32> + ?Sized), // a Buffer<f32>, a view, cudarc memory, ..
///         y: &(impl ::fuse::DeviceRead<f32> + ?Sized),
///         out: &mut (impl ::fuse::DeviceWrite<f32> + ?Sized),
///         n: i32,
///     ) -> Result<(), ::fuse::Error>;
/// }
/// ```
///
/// `f16`/`bf16` buffers are `Buffer<fuse::half::f16>`/`Buffer<fuse::half::bf16>`. `launch` hands
/// `SPEC` and the arguments to `fuse::launch`, which checks them against the kernel, compiles the
/// CUDA C with NVRTC on first use (cached in memory and on disk) and launches it, or runs the
/// kernel on the CPU; its errors are `fuse::Error`s. `SPEC` also compiles ahead of time
/// (`KernelSpec::compile`, `compile_for_arch`).
///
/// # Generic kernels
///
/// `pub fn add_mul<T: Float, const BLOCK: usize>(x: *const T, .., out: *mut T, n: i32)` is
/// instantiated for `T = f32`, `f16` and `bf16`, each an ordinary kernel with `T` replaced
/// (`.to(T)`, `x as T` and `T::MAX`-style constants included), checked and compiled to its own
/// CUDA C under the name `add_mul_f16`. The module holds one submodule per instantiation and one
/// generic launcher:
///
/// ```ignore
/// pub mod add_mul {
///     pub mod f16 { pub const NAME: &str = "add_mul_f16"; /* SOURCE, IR_JSON, SPEC */ }
///     // .. f32, bf16 (`f16_bf16`, .. for several type parameters)
///     pub fn spec<T: ::fuse::Float>() -> &'static ::fuse::KernelSpec; // the instantiation for T
///     pub fn launch<T: ::fuse::Float, const BLOCK: usize>(
///         device: &::fuse::Device,
///         config: impl Into<::fuse::LaunchConfig>,
///         x: &(impl ::fuse::DeviceRead<T> + ?Sized),
///         // ..
///     ) -> Result<(), ::fuse::Error>;
/// }
/// ```
///
/// Call it as `add_mul::launch::<f16, 1024>(..)`, or `add_mul::launch::<_, 1024>(..)` to take `T`
/// from the buffers; a type outside the bound is a Rust type error at the call.
///
/// # Compile errors
///
/// Every mistake in the kernel is a compile error at the token that is wrong, with a `help:` where
/// one helps; one build reports every independent mistake. After an error the module is still
/// generated, with a `launch` of the same signature, so call sites add no errors of their own.
///
/// # Example
///
/// ```ignore
/// use fuse::prelude::*;
///
/// #[fused_kernel]
/// pub fn add_mul<const BLOCK: usize>(x: *const f32, y: *const f32, z: *const f32, out: *mut f32, n: i32) {
///     let offs = program_id(0) * BLOCK + arange(0, BLOCK);
///     let mask = offs < n;
///     let x = load(x + offs, mask);
///     let y = load(y + offs, mask);
///     let z = load(z + offs, mask);
///     store(out + offs, (x + y) * z, mask);
/// }
///
/// fn main() -> Result<(), fuse::Error> {
///     let (device, _why_not_gpu) = Device::best(); // the first GPU, else the CPU
///     let n = 1 << 20;
///     let x = device.upload(&vec![1.0f32; n])?;
///     let mut out = device.zeros::<f32>(n)?;
///     add_mul::launch::<1024>(&device, n.div_ceil(1024) as u32, &x, &x, &x, &mut out, n as i32)?;
///     assert_eq!(out.to_vec()?[0], 2.0);
///     Ok(())
/// }
/// ```
#[proc_macro_attribute]
pub fn fused_kernel(attr: proc_macro::TokenStream, item: proc_macro::TokenStream) -> proc_macro::TokenStream {
    expand::fused_kernel(attr.into(), item.into()).into()
}
