//! The checked kernel IR: the contract between `#[fused_kernel]` (which builds it at compile time)
//! and the back ends (the CUDA C emitter in the macro, the CPU interpreter in `fuse-runtime`).
//!
//! The IR is deliberately small and already fully typed, so that no back end has to re-derive
//! anything the checker knew:
//!
//! * Every value lives in a [`Var`] with one fixed [`Ty`] (element type + scalar/tile shape).
//!   A var may be assigned more than once (`let mut` and loop-carried values); it keeps its type.
//! * Pointers are not values: the checker folds `ptr + offsets` into the `param` + `offset` of
//!   [`Expr::Load`] and [`Stmt::Store`], so bounds checks and address arithmetic are local to them.
//! * Arithmetic happens only in the *compute types* `bool, i32, u32, i64, u64, f32`
//!   ([`DType::is_compute`]). Storage-only types (`f16, bf16, i8, u8`) appear as the result of a
//!   load, the operand/result of an [`Expr::Cast`] and the operands of an [`Expr::Dot`] (whose
//!   input types they are); the checker widens them before arithmetic and inserts the narrowing
//!   cast before a store, so a [`Stmt::Store`] value always has the pointee's type.
//! * Binary operands have the same dtype. Shapes: each operand is a scalar or a tile of the
//!   result's length; scalars broadcast.
//! * Control flow is structured and uniform: `if` conditions and loop bounds are scalars, so every
//!   thread of a program takes the same path (reductions inside them are safe on the GPU).
//!
//! The macro serialises a [`Kernel`] to JSON ([`Kernel::to_json`]); the runtime deserialises it
//! once per process ([`Kernel::from_json`]). [`Kernel`]'s documentation has a complete example.
//!
//! [`philox`] is the reference implementation of `rand`, which every back end reproduces bit for
//! bit; [`tf32`] the rounding of f32 inputs of [`Expr::Dot`].
#![warn(missing_docs)]

// Bottom up: each module imports only those above it.
// DType, Len, Shape, Ty.
mod types;
// The operators of expressions.
mod ops;
// Kernel, its statements and expressions, and the walks over them.
mod kernel;
// The launch-time facts the CUDA source may specialise on.
mod specialize;
// Scalars and branch conditions the host computes before a launch.
mod uniform;
// The scalars the runtime computes at launch and passes as hidden parameters.
mod host_scalars;
// Loads of a 2-D box of a strided matrix (TMA).
mod tensor_box;
// Reference arithmetic every back end reproduces bit for bit; they import nothing.
pub mod philox;
pub mod tf32;

pub use kernel::{visit_stmts, Access, Expr, Kernel, Literal, Param, ParamKind, Stmt, Var, VarId};
pub use ops::{dot_accumulator, ArgOp, BinaryOp, RandWidth, ReduceOp, UnaryOp, DOT_MIN_DIM};
pub use specialize::Specialization;
pub use tensor_box::{BoxStart, TensorBox};
pub use types::{broadcast_source_lane, DType, Len, Shape, Ty};
pub use uniform::{HostDefs, HostProgram, HostScalar};
