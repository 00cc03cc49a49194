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

use serde::{Deserialize, Serialize};
use std::fmt;

/// Element types: of pointers, scalars and tile elements.
///
/// ```
/// use fuse_ir::DType;
///
/// assert_eq!(DType::from_name("bf16"), Some(DType::BF16));
/// assert_eq!(DType::BF16.size_bytes(), 2);
/// assert!(!DType::BF16.is_compute());
/// assert_eq!(DType::BF16.compute(), DType::F32);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    /// `bool`: a compute type (comparisons and masks); one byte in memory; never a parameter.
    Bool,
    /// `i8`: storage only, widened to `i32` for arithmetic.
    I8,
    /// `u8`: storage only, widened to `i32` for arithmetic.
    U8,
    /// `i32`: a compute type; `program_id`, `num_programs` and `arange` give it.
    I32,
    /// `u32`: a compute type.
    U32,
    /// `i64`: a compute type.
    I64,
    /// `u64`: a compute type.
    U64,
    /// `f16` (IEEE binary16): storage only, widened to `f32` for arithmetic.
    F16,
    /// `bf16` (bfloat16): storage only, widened to `f32` for arithmetic.
    BF16,
    /// `f32`: the one float compute type.
    F32,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 10] = [
        DType::Bool,
        DType::I8,
        DType::U8,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
    ];

    /// The name users write in kernels and in `.to(..)` casts.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::U64 => "u64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
        }
    }

    /// The dtype [`DType::name`] spells `name`, or `None` for any other string.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Bytes per element in memory (`bool` is stored as one byte).
    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 => 8,
        }
    }

    /// `f16`, `bf16` or `f32`.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32)
    }

    /// A signed or unsigned integer type of any width (not `bool`).
    pub fn is_int(self) -> bool {
        matches!(self, DType::I8 | DType::U8 | DType::I32 | DType::U32 | DType::I64 | DType::U64)
    }

    /// `i8`, `i32` or `i64`.
    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I32 | DType::I64)
    }

    /// Types arithmetic is done in. Everything else is widened first (see [`DType::compute`]).
    pub fn is_compute(self) -> bool {
        matches!(self, DType::Bool | DType::I32 | DType::U32 | DType::I64 | DType::U64 | DType::F32)
    }

    /// The compute type a storage type widens to: `f16`/`bf16` → `f32`, `i8`/`u8` → `i32`.
    pub fn compute(self) -> DType {
        match self {
            DType::F16 | DType::BF16 => DType::F32,
            DType::I8 | DType::U8 => DType::I32,
            other => other,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A tile length: `2^log2 * product(const generics)`. Every factor is a power of two, so every
/// length is one. `consts` holds indices into [`Kernel::consts`], sorted, repeated for powers.
///
/// A length is symbolic until launch, when the const generics get their values ([`Len::eval`]).
///
/// ```
/// use fuse_ir::Len;
///
/// // `2 * BLOCK`, where `BLOCK` is the kernel's first const generic.
/// let len = Len::of_const(0).mul(&Len::literal_log2(1));
/// let names = ["BLOCK".to_string()];
/// assert_eq!(len.eval(&[256]), Some(512));
/// assert_eq!(len.c_expr(&names), "(BLOCK * 2)");
/// assert_eq!(len.display(&names), "2 * BLOCK");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Len {
    /// The exponent of the literal power-of-two factor; negative for a division (`BLOCK / 2` has
    /// `log2 == -1`).
    pub log2: i32,
    /// The const generic factors, as indices into [`Kernel::consts`] (sorted; an index appears
    /// once per power).
    pub consts: Vec<u32>,
}

impl Len {
    /// The literal length `2^log2` (no const generic factor).
    pub fn literal_log2(log2: i32) -> Len {
        Len { log2, consts: Vec::new() }
    }

    /// The length of the const generic with index `index` in [`Kernel::consts`].
    pub fn of_const(index: u32) -> Len {
        Len { log2: 0, consts: vec![index] }
    }

    /// The product of two lengths (used for `2 * BLOCK` and the like).
    pub fn mul(&self, other: &Len) -> Len {
        let mut consts = self.consts.clone();
        consts.extend_from_slice(&other.consts);
        consts.sort_unstable();
        Len { log2: self.log2 + other.log2, consts }
    }

    /// The value for concrete const-generic values (`const_values[i]` for [`Kernel::consts`]`[i]`);
    /// `None` if a value is missing or not a power of two, or the result is not a whole number or
    /// not below `2^63`.
    pub fn eval(&self, const_values: &[u64]) -> Option<u64> {
        let mut log2 = i64::from(self.log2);
        for &c in &self.consts {
            let v = *const_values.get(c as usize)?;
            if !v.is_power_of_two() {
                return None;
            }
            log2 += i64::from(v.trailing_zeros());
        }
        if !(0..63).contains(&log2) {
            return None;
        }
        Some(1u64 << log2)
    }

    /// A C expression for this length, naming const generics by their (`#define`d) names
    /// (`const_names[i]` for index `i`, normally [`Kernel::consts`]).
    ///
    /// # Panics
    /// If an index in [`Len::consts`] is out of range of `const_names`.
    pub fn c_expr(&self, const_names: &[String]) -> String {
        let factors: Vec<String> = self.consts.iter().map(|&c| const_names[c as usize].clone()).collect();
        let mut expr = if factors.is_empty() { "1".to_string() } else { factors.join(" * ") };
        match self.log2.cmp(&0) {
            std::cmp::Ordering::Greater if self.consts.is_empty() => expr = format!("{}", 1u64 << self.log2),
            std::cmp::Ordering::Greater => expr = format!("({expr} * {})", 1u64 << self.log2),
            std::cmp::Ordering::Less => expr = format!("({expr} / {})", 1u64 << (-self.log2)),
            std::cmp::Ordering::Equal if self.consts.len() > 1 => expr = format!("({expr})"),
            std::cmp::Ordering::Equal => {}
        }
        expr
    }

    /// How users would write it (`2 * BLOCK`, `BLOCK / 4`), for diagnostics; const generics named
    /// as in [`Len::c_expr`].
    ///
    /// # Panics
    /// If an index in [`Len::consts`] is out of range of `const_names`.
    pub fn display(&self, const_names: &[String]) -> String {
        let mut parts: Vec<String> = Vec::new();
        if (self.log2 > 0 || self.consts.is_empty()) && self.log2 >= 0 {
            parts.push(format!("{}", 1u64 << self.log2.min(62)));
        }
        parts.extend(self.consts.iter().map(|&c| const_names[c as usize].clone()));
        let mut s = parts.join(" * ");
        if self.log2 < 0 {
            s = format!("{s} / {}", 1u64 << (-self.log2).min(62));
        }
        s
    }
}

/// Scalar (uniform across the program), a 1-D tile, or a 2-D tile.
///
/// A 2-D tile `[rows, cols]` is stored row-major: element `(r, c)` is lane `r * cols + c`, so a
/// tile's lanes are numbered the same way whatever its rank, and [`Expr::Reshape`] keeps them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Shape {
    /// One value, the same in every thread of a program.
    Scalar,
    /// A 1-D tile of this many elements, spread over the threads of a program.
    Tile(Len),
    /// A 2-D tile `[rows, cols]` (row-major), spread over the threads of a program.
    Tile2(Len, Len),
}

impl Shape {
    /// Whether this is [`Shape::Scalar`].
    pub fn is_scalar(&self) -> bool {
        matches!(self, Shape::Scalar)
    }
    /// The number of lanes of a tile (the product of its dims); `None` for a scalar.
    pub fn len(&self) -> Option<Len> {
        match self {
            Shape::Scalar => None,
            Shape::Tile(l) => Some(l.clone()),
            Shape::Tile2(r, c) => Some(r.mul(c)),
        }
    }
    /// The dims: none for a scalar, `[len]` for a 1-D tile, `[rows, cols]` for a 2-D tile.
    pub fn dims(&self) -> Vec<Len> {
        match self {
            Shape::Scalar => Vec::new(),
            Shape::Tile(l) => vec![l.clone()],
            Shape::Tile2(r, c) => vec![r.clone(), c.clone()],
        }
    }
    /// 0, 1 or 2.
    pub fn rank(&self) -> usize {
        match self {
            Shape::Scalar => 0,
            Shape::Tile(_) => 1,
            Shape::Tile2(..) => 2,
        }
    }
    /// The shape with these dims (`None` for more than two).
    pub fn from_dims(dims: &[Len]) -> Option<Shape> {
        match dims {
            [] => Some(Shape::Scalar),
            [l] => Some(Shape::Tile(l.clone())),
            [r, c] => Some(Shape::Tile2(r.clone(), c.clone())),
            _ => None,
        }
    }
}

/// For [`Expr::Broadcast`]: the lane of a source of dims `src` that lane `lane` of a destination
/// of dims `dst` reads, under NumPy's rules (dims aligned at the right; a missing or unit source
/// dim repeats). Dims are concrete sizes here (launch-time values of [`Len`]s).
///
/// ```
/// use fuse_ir::broadcast_source_lane;
/// // [2, 1] -> [2, 3]: lane (1, 2) = 5 reads row 1.
/// assert_eq!(broadcast_source_lane(&[2, 1], &[2, 3], 5), 1);
/// // [3] (as [1, 3]) -> [2, 3]: lane 5 reads column 2.
/// assert_eq!(broadcast_source_lane(&[3], &[2, 3], 5), 2);
/// ```
pub fn broadcast_source_lane(src: &[u64], dst: &[u64], lane: u64) -> u64 {
    let mut rest = lane;
    let mut src_lane = 0;
    let mut src_stride = 1;
    for (i, &d) in dst.iter().enumerate().rev() {
        let coord = rest % d.max(1);
        rest /= d.max(1);
        let back = dst.len() - 1 - i;
        if back < src.len() {
            let s = src[src.len() - 1 - back];
            if s != 1 {
                src_lane += coord * src_stride;
            }
            src_stride *= s;
        }
    }
    src_lane
}

/// The type of a value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Ty {
    /// The element type.
    pub dtype: DType,
    /// Scalar or tile, and the tile's length.
    pub shape: Shape,
}

impl Ty {
    /// A scalar of `dtype`.
    pub fn scalar(dtype: DType) -> Ty {
        Ty { dtype, shape: Shape::Scalar }
    }
    /// A tile of `len` elements of `dtype`.
    pub fn tile(dtype: DType, len: Len) -> Ty {
        Ty { dtype, shape: Shape::Tile(len) }
    }
    /// A 2-D tile `[rows, cols]` of `dtype`.
    pub fn tile2(dtype: DType, rows: Len, cols: Len) -> Ty {
        Ty { dtype, shape: Shape::Tile2(rows, cols) }
    }
}

/// A kernel parameter, in the order of the user's `fn` (and of the launch arguments).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    /// The user's name; also the C parameter name.
    pub name: String,
    /// Pointer or scalar, and its type.
    pub kind: ParamKind,
}

/// What a [`Param`] is: a pointer (a buffer at launch) or a scalar passed by value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ParamKind {
    /// `*const T` (read-only) or `*mut T` (writable): a buffer argument at launch.
    Ptr {
        /// The pointee's dtype `T` (any dtype but `bool`).
        elem: DType,
        /// `true` for `*mut T`: only such a parameter may be stored to.
        mutable: bool,
    },
    /// A scalar passed by value: i32, i64, u32, u64 or f32.
    Scalar(DType),
}

/// Index of a [`Var`] in [`Kernel::vars`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VarId(pub u32);

/// A storage location for values. `name` is unique in the kernel and a valid C identifier that
/// keeps the user's name where there is one (`x`, `x_1` for a shadowing `let x`, `t3` for
/// temporaries).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Var {
    /// The C identifier (unique in the kernel).
    pub name: String,
    /// The type every value assigned to it has.
    pub ty: Ty,
}

/// A statement. Control flow is structured, and uniform across the threads of a program.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Stmt {
    /// `dst = expr`. The expression's result has `dst`'s type.
    Assign {
        /// The var assigned.
        dst: VarId,
        /// The value, of `dst`'s type.
        expr: Expr,
    },
    /// `param[offset] = value` for every lane whose mask is true (all lanes if `None`).
    /// `value` has the pointee's dtype; `offset` is an integer scalar or tile; a scalar `value`
    /// or mask broadcasts over a tile offset.
    Store {
        /// Index in [`Kernel::params`] of a `*mut` pointer parameter.
        param: u32,
        /// Element offsets from the pointer (not bytes).
        offset: VarId,
        /// The value(s) written.
        value: VarId,
        /// A bool scalar or tile; lanes where it is false are not written.
        mask: Option<VarId>,
    },
    /// `if cond { then_body } else { else_body }`.
    If {
        /// A scalar bool.
        cond: VarId,
        /// Runs when `cond` is true.
        then_body: Vec<Stmt>,
        /// Runs when `cond` is false (empty without an `else`).
        else_body: Vec<Stmt>,
    },
    /// `for var in (start..end).step_by(step)`: integer scalars of one dtype, `step > 0` (a
    /// non-positive step runs no iteration). `var` is assigned before each iteration; the body
    /// may not assign it.
    For {
        /// The loop counter.
        var: VarId,
        /// The first value of the counter.
        start: VarId,
        /// The bound, exclusive.
        end: VarId,
        /// The increment.
        step: VarId,
        /// The loop body.
        body: Vec<Stmt>,
    },
}

/// The right-hand side of a [`Stmt::Assign`]. Its result has the destination var's type; the
/// variant docs say what the operands must be.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Expr {
    /// The value of another var (same type).
    Copy(VarId),
    /// A literal of the destination's dtype (scalar destination).
    Lit(Literal),
    /// A scalar parameter's value, by index in [`Kernel::params`] (its dtype is the destination's).
    Param(u32),
    /// A const generic's value, by index in [`Kernel::consts`], in the destination's integer dtype.
    ConstGeneric(u32),
    /// `program_id(axis)`, i32, axis 0..=2.
    ProgramId(u8),
    /// `num_programs(axis)`, i32, axis 0..=2.
    NumPrograms(u8),
    /// `arange(start, start + len)` where len is the destination tile's length; i32.
    Arange {
        /// The value of lane 0.
        start: i64,
    },
    /// A scalar broadcast to the destination tile.
    Splat(VarId),
    /// Element-wise; see [`UnaryOp`] for operand types.
    Unary(UnaryOp, VarId),
    /// Element-wise; operands share a dtype; see [`BinaryOp`].
    Binary(BinaryOp, VarId, VarId),
    /// Conversion to the destination dtype. Float→int truncates toward zero and saturates (NaN
    /// → 0), int→int wraps, float narrowing rounds to nearest even, any→bool is `!= 0`.
    Cast(VarId),
    /// `cond ? a : b` per lane; `cond` bool; `a`, `b` of the destination dtype; scalars broadcast.
    Where(VarId, VarId, VarId),
    /// `param[offset]` for lanes whose mask is true, else `other` (else zero). `other` is a
    /// scalar or tile of the pointee dtype. Result dtype: the pointee's.
    Load {
        /// Index in [`Kernel::params`] of a pointer parameter.
        param: u32,
        /// Element offsets from the pointer (not bytes): an integer scalar or tile.
        offset: VarId,
        /// A bool scalar or tile; lanes where it is false are not read.
        mask: Option<VarId>,
        /// The value of masked-off lanes (zero if `None`).
        other: Option<VarId>,
    },
    /// A tile reduced to a scalar of the same dtype. Float sums accumulate in f32 in an
    /// unspecified order; max/min ignore NaN unless every lane is NaN (IEEE maxNum/minNum).
    Reduce(ReduceOp, VarId),
    /// A 2-D tile reduced along `axis`, keeping the other: `[R, C]` → `[C]` (axis 0) or `[R]`
    /// (axis 1). Same rules per output lane as [`Expr::Reduce`].
    ReduceAxis {
        /// How lanes combine.
        op: ReduceOp,
        /// 0 (down the columns) or 1 (along the rows).
        axis: u8,
        /// The 2-D tile reduced.
        src: VarId,
    },
    /// The index (i32) of the largest (`ArgOp::Max`) or smallest lane: of a whole tile
    /// (`axis` `None`; the destination is a scalar, lanes numbered row-major), or along `axis` of
    /// a 2-D tile (the destination is the tile that [`Expr::ReduceAxis`] gives, holding indices
    /// along that axis). Ties give the first index; a NaN lane counts as beyond every number
    /// (the first NaN wins), as NumPy's and torch's `argmax`/`argmin` do.
    ArgReduce {
        /// Largest or smallest.
        op: ArgOp,
        /// `None`: all lanes; `Some(0 | 1)`: along that axis of a 2-D tile.
        axis: Option<u8>,
        /// The tile searched.
        src: VarId,
    },
    /// A tile repeated to the destination's shape by NumPy's broadcasting rules (see
    /// [`broadcast_source_lane`]): dims aligned at the right, each source dim 1 or equal to the
    /// destination's; a 1-D `[N]` reads as `[1, N]`. Same dtype. (A scalar uses [`Expr::Splat`].)
    Broadcast(VarId),
    /// The same lanes, in the same row-major order, under the destination's shape (same number
    /// of lanes, same dtype): `reshape`, `expand_dims`.
    Reshape(VarId),
    /// The transpose of a 2-D tile: `[R, C]` → `[C, R]`, same dtype.
    Trans(VarId),
    /// Every other lane along the last dim (`split`, Triton's `tl.split` of a trailing pair):
    /// `[.., 2N]` → `[.., N]`, destination lane `f` is source lane `2 f + half` (`half` 0: the
    /// even columns, 1: the odd ones). Same dtype.
    Split {
        /// The tile split, its last dim even.
        src: VarId,
        /// 0 or 1.
        half: u8,
    },
    /// Two tiles interleaved along the last dim (`join`, Triton's `tl.interleave`): `[.., N]` and
    /// `[.., N]` → `[.., 2N]`, destination lane `2 f` is `even`'s lane `f` and `2 f + 1` is
    /// `odd`'s. Same shape and dtype on both sides.
    Join(VarId, VarId),
    /// Uniform f32 in [0, 1): see [`philox`]. `seed` an integer scalar, `offset` an integer
    /// scalar or tile; the result has the offset's shape. `width` says how many bits of the
    /// Philox block one lane takes: [`RandWidth::W32`] (`rand`, four lanes per block) or
    /// [`RandWidth::W16`] (`rand16`, eight lanes per block).
    Rand {
        /// The Philox key.
        seed: VarId,
        /// Per lane, the index of the random number in the seed's stream.
        offset: VarId,
        /// Bits of the Philox block per lane; absent in the JSON of a plain `rand`.
        #[serde(default, skip_serializing_if = "RandWidth::is_w32")]
        width: RandWidth,
    },
    /// `dot(a, b)`, `dot(a, b, acc)`: the matrix product of `a` (`[M, K]`) and `b` (`[K, N]`),
    /// plus `acc`; the destination is `[M, N]` of the accumulator dtype.
    ///
    /// * `a` and `b` are 2-D tiles of one *storage* element type (as loaded or cast, not widened),
    ///   which fixes the accumulator dtype: `F16` or `BF16` accumulate in `F32`; `F32` is taken as
    ///   TF32 (each input first rounded by [`tf32::round`]) and accumulates in `F32`; `I8`
    ///   accumulates in `I32`. No other element type.
    /// * M, N and K are at least 16 (and powers of two, like every dim).
    /// * `acc`, if any, is `[M, N]` of the accumulator dtype.
    /// * Output element `(m, n)` starts from `acc[m, n]` (else 0) and adds `a[m, k] * b[k, n]` for
    ///   `k = 0, 1, .., K - 1` in that order. Floats: both inputs widened to f32 (exactly), the
    ///   product and the sum each rounded to f32 (round to nearest even); the product is exact
    ///   for f16 and TF32 inputs (11-bit significands) and for bf16 ones unless it leaves the f32
    ///   range, so the order alone fixes the result. I8: wrapping i32 multiply-add.
    ///
    /// The CPU interpreter and the CUDA C fallback lowering follow this order and agree bit for
    /// bit; a tensor-core lowering may sum in another order (within f32 rounding of this one).
    Dot {
        /// `[M, K]`.
        a: VarId,
        /// `[K, N]`, of `a`'s dtype.
        b: VarId,
        /// `[M, N]` of the accumulator dtype; `None` starts from zeros.
        acc: Option<VarId>,
    },
}

impl Expr {
    /// The vars this expression reads.
    pub fn operands(&self) -> Vec<VarId> {
        match *self {
            Expr::Lit(_)
            | Expr::Param(_)
            | Expr::ConstGeneric(_)
            | Expr::ProgramId(_)
            | Expr::NumPrograms(_)
            | Expr::Arange { .. } => Vec::new(),
            Expr::Copy(v)
            | Expr::Splat(v)
            | Expr::Unary(_, v)
            | Expr::Cast(v)
            | Expr::Reduce(_, v)
            | Expr::ReduceAxis { src: v, .. }
            | Expr::ArgReduce { src: v, .. }
            | Expr::Broadcast(v)
            | Expr::Reshape(v)
            | Expr::Trans(v)
            | Expr::Split { src: v, .. } => vec![v],
            Expr::Binary(_, a, b) | Expr::Rand { seed: a, offset: b, .. } | Expr::Join(a, b) => vec![a, b],
            Expr::Where(c, a, b) => vec![c, a, b],
            Expr::Load { offset, mask, other, .. } => {
                std::iter::once(offset).chain(mask).chain(other).collect()
            }
            Expr::Dot { a, b, acc } => [a, b].into_iter().chain(acc).collect(),
        }
    }
}

/// The accumulator dtype of [`Expr::Dot`] for operands of `input` (their storage type): `F32` for
/// `F16`, `BF16` and `F32` (as TF32), `I32` for `I8`; `None` for any other type, which `dot`
/// does not take.
///
/// ```
/// use fuse_ir::{dot_accumulator, DType};
///
/// assert_eq!(dot_accumulator(DType::BF16), Some(DType::F32));
/// assert_eq!(dot_accumulator(DType::I8), Some(DType::I32));
/// assert_eq!(dot_accumulator(DType::U8), None);
/// ```
pub fn dot_accumulator(input: DType) -> Option<DType> {
    match input {
        DType::F16 | DType::BF16 | DType::F32 => Some(DType::F32),
        DType::I8 => Some(DType::I32),
        _ => None,
    }
}

/// The smallest M, N and K of [`Expr::Dot`].
pub const DOT_MIN_DIM: u64 = 16;

/// TF32, the input format of [`Expr::Dot`] on f32 tiles (Triton's default for f32 `tl.dot`, what
/// tensor cores multiply): f32's sign and 8-bit exponent with a 10-bit mantissa.
pub mod tf32 {
    /// f32 → TF32 as PTX's `cvt.rna.tf32.f32`: the top 10 mantissa bits kept, rounded to nearest
    /// with ties **away from zero**; the result is an f32 whose low 13 bits are 0.
    ///
    /// * Subnormals round the same way (a carry may make the smallest normal).
    /// * A finite value at or past the midpoint above the largest TF32 (`0x7f7f_e000`, about
    ///   3.4028e38) rounds to the infinity of its sign; infinities stay.
    /// * NaN stays NaN (the canonical quiet NaN here; back ends may keep another payload).
    ///
    /// ```
    /// use fuse_ir::tf32;
    ///
    /// // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties go away from zero.
    /// assert_eq!(tf32::round(1.0 + 2f32.powi(-11)), 1.0 + 2f32.powi(-10));
    /// assert_eq!(tf32::round(-(1.0 + 2f32.powi(-11))), -(1.0 + 2f32.powi(-10)));
    /// // Below the midpoint: down.
    /// assert_eq!(tf32::round(1.0 + 2f32.powi(-12)), 1.0);
    /// assert_eq!(tf32::round(f32::MAX), f32::INFINITY);
    /// assert!(tf32::round(f32::NAN).is_nan());
    /// ```
    pub fn round(x: f32) -> f32 {
        if x.is_nan() {
            return f32::NAN;
        }
        // Adding half of the dropped field to the magnitude rounds ties away from zero; a carry
        // moves into the exponent (up to the infinity's bit pattern for the largest values).
        let bits = x.to_bits();
        let sign = bits & 0x8000_0000;
        let magnitude = ((bits & 0x7fff_ffff) + 0x1000) & !0x1fff;
        f32::from_bits(sign | magnitude)
    }
}

/// The constant of an [`Expr::Lit`]; the destination var's dtype is its type.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Literal {
    /// `true` or `false`.
    Bool(bool),
    /// An integer that fits in `i64`.
    Int(i64),
    /// Also used for `u64` literals above `i64::MAX`.
    UInt(u64),
    /// A float (`f32::INFINITY` and the like included). Serialised as its bit pattern: JSON has
    /// no infinities or NaN.
    Float(#[serde(with = "f64_bits")] f64),
}

mod tensor_box;
pub use tensor_box::{BoxStart, TensorBox};
mod host_scalars;
mod uniform;
pub use uniform::{HostDefs, HostProgram, HostScalar};

mod f64_bits {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(v.to_bits())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        u64::deserialize(d).map(f64::from_bits)
    }
}

/// An element-wise function of one operand ([`Expr::Unary`]); the result has the operand's dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryOp {
    /// Arithmetic negation (ints wrap).
    Neg,
    /// Logical not on bool, bitwise not on ints.
    Not,
    /// `abs` on floats and signed ints (ints wrap: `abs(i32::MIN) == i32::MIN`).
    Abs,
    // f32 only from here on.
    /// `e^x`.
    Exp,
    /// `2^x`.
    Exp2,
    /// Natural logarithm.
    Log,
    /// Base-2 logarithm.
    Log2,
    /// Square root.
    Sqrt,
    /// `1 / sqrt(x)`.
    Rsqrt,
    /// The error function.
    Erf,
    /// Hyperbolic tangent.
    Tanh,
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
    /// Round toward negative infinity.
    Floor,
    /// Round toward positive infinity.
    Ceil,
    /// Sine (radians).
    Sin,
    /// Cosine (radians).
    Cos,
}

impl UnaryOp {
    /// The lower-case name: how kernels spell the math functions (`exp`, `rsqrt`, ...; see
    /// [`UnaryOp::MATH`]), and `neg`, `not`, `abs` for the others. Used to look up the math
    /// functions by name and in error messages.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Not => "not",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Exp2 => "exp2",
            UnaryOp::Log => "log",
            UnaryOp::Log2 => "log2",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Erf => "erf",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
        }
    }

    /// The math functions, which take and return f32.
    pub const MATH: [UnaryOp; 13] = [
        UnaryOp::Exp,
        UnaryOp::Exp2,
        UnaryOp::Log,
        UnaryOp::Log2,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Erf,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Sin,
        UnaryOp::Cos,
    ];
}

/// An element-wise operation on two operands of one dtype ([`Expr::Binary`]). The result has
/// that dtype, except for comparisons, whose result is bool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinaryOp {
    /// `a + b`. Ints wrap on overflow.
    Add,
    /// `a - b`. Ints wrap on overflow.
    Sub,
    /// `a * b`. Ints wrap on overflow.
    Mul,
    /// Ints: truncating; division by zero gives 0 (on both back ends). Floats: IEEE.
    Div,
    /// Ints: sign of the dividend (C/Rust `%`); by zero gives 0. Floats: `fmodf`.
    Rem,
    /// `maximum(a, b)`: IEEE maxNum on floats (a NaN operand is ignored).
    Max,
    /// `minimum(a, b)`: IEEE minNum on floats (a NaN operand is ignored).
    Min,
    /// `a & b`: logical on bool, bitwise on ints.
    And,
    /// `a | b`: logical on bool, bitwise on ints.
    Or,
    /// `a ^ b`: logical on bool, bitwise on ints.
    Xor,
    // Comparisons: the result is bool.
    /// `a < b` (bool result).
    Lt,
    /// `a <= b` (bool result).
    Le,
    /// `a > b` (bool result).
    Gt,
    /// `a >= b` (bool result).
    Ge,
    /// `a == b` (bool result).
    Eq,
    /// `a != b` (bool result).
    Ne,
}

impl BinaryOp {
    /// `<`, `<=`, `>`, `>=`, `==` or `!=`: the result is bool.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge | BinaryOp::Eq | BinaryOp::Ne
        )
    }
    /// `&`, `|` or `^`.
    pub fn is_bitwise(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor)
    }
}

/// How [`Expr::Reduce`] combines the lanes of a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReduceOp {
    /// `sum(t)`.
    Sum,
    /// `max(t)`.
    Max,
    /// `min(t)`.
    Min,
}

/// What [`Expr::ArgReduce`] looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ArgOp {
    /// `argmax`.
    Max,
    /// `argmin`.
    Min,
}

/// One kernel, checked.
///
/// `#[fused_kernel]` builds it from the user's `fn`; the back ends read it. Built by hand:
///
/// ```
/// use fuse_ir::{DType, Expr, Kernel, Len, Literal, Param, ParamKind, Stmt, Ty, Var, VarId};
///
/// // fn fill<const BLOCK: usize>(out: *mut f32) { store(out + arange(0, BLOCK), 1.0) }
/// let kernel = Kernel {
///     name: "fill".into(),
///     consts: vec!["BLOCK".into()],
///     params: vec![Param { name: "out".into(), kind: ParamKind::Ptr { elem: DType::F32, mutable: true } }],
///     vars: vec![
///         Var { name: "offs".into(), ty: Ty::tile(DType::I32, Len::of_const(0)) },
///         Var { name: "one".into(), ty: Ty::scalar(DType::F32) },
///     ],
///     body: vec![
///         Stmt::Assign { dst: VarId(0), expr: Expr::Arange { start: 0 } },
///         Stmt::Assign { dst: VarId(1), expr: Expr::Lit(Literal::Float(1.0)) },
///         Stmt::Store { param: 0, offset: VarId(0), value: VarId(1), mask: None },
///     ],
/// };
/// assert_eq!(kernel.ty(VarId(0)), &Ty::tile(DType::I32, Len::of_const(0)));
/// assert_eq!(kernel.tile_lens(), vec![Len::of_const(0)]);
/// assert_eq!(kernel.accesses().len(), 1);
/// assert_eq!(Kernel::from_json(&kernel.to_json()).unwrap(), kernel);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    /// The `fn`'s name; also the CUDA entry point's name.
    pub name: String,
    /// Const generic names (all `usize`, all powers of two), in declaration order.
    pub consts: Vec<String>,
    /// The parameters, in the order of the user's `fn` and of the launch arguments.
    pub params: Vec<Param>,
    /// Every var, indexed by [`VarId`].
    pub vars: Vec<Var>,
    /// The statements of the `fn`'s body, in program order.
    pub body: Vec<Stmt>,
}

impl Kernel {
    /// The var `id` names.
    ///
    /// # Panics
    /// If `id` is not an index into [`Kernel::vars`].
    pub fn var(&self, id: VarId) -> &Var {
        &self.vars[id.0 as usize]
    }

    /// The type of the var `id` names.
    ///
    /// # Panics
    /// If `id` is not an index into [`Kernel::vars`].
    pub fn ty(&self, id: VarId) -> &Ty {
        &self.var(id).ty
    }

    /// The kernel as compact JSON (what the macro embeds; [`Kernel::from_json`] reads it back).
    ///
    /// # Panics
    /// Never in practice: the IR is plain data (no maps; floats are serialised as their bits), so
    /// `serde_json` cannot fail on it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("the IR is plain data and always serialises")
    }

    /// Reads a kernel written by [`Kernel::to_json`].
    ///
    /// Only the structure is checked, not the IR's rules (types, indices in range); the CPU back
    /// end re-checks those before it runs a kernel.
    ///
    /// # Errors
    /// The `serde_json` error if `json` is not the JSON of a [`Kernel`].
    pub fn from_json(json: &str) -> Result<Kernel, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// Every tile length (number of lanes, whatever the rank) that occurs in the kernel
    /// (deduplicated, in first-use order).
    pub fn tile_lens(&self) -> Vec<Len> {
        let mut out: Vec<Len> = Vec::new();
        for v in &self.vars {
            if let Some(l) = v.ty.shape.len() {
                if !out.contains(&l) {
                    out.push(l);
                }
            }
        }
        out
    }

    /// Every load and store, in program order (the order of [`Kernel::visit_stmts`]); the index
    /// in this list names the access in [`Specialization::InBounds`].
    pub fn accesses(&self) -> Vec<Access> {
        let mut out = Vec::new();
        self.visit_stmts(&mut |s| match s {
            Stmt::Assign { expr: Expr::Load { param, offset, mask, .. }, .. }
            | Stmt::Store { param, offset, mask, .. } => {
                out.push(Access { param: *param, offset: *offset, mask: *mask })
            }
            _ => {}
        });
        out
    }

    /// Every bool tile assigned by exactly one statement, an integer comparison or an `&`, in
    /// program order of that statement; the index in this list names it in
    /// [`Specialization::AllTrue`].
    pub fn masks(&self) -> Vec<VarId> {
        let count = self.assignment_counts();
        let mut out = Vec::new();
        self.visit_stmts(&mut |s| {
            let Stmt::Assign { dst, expr: Expr::Binary(op, a, _) } = s else { return };
            let ty = self.ty(*dst);
            let mask = ty.dtype == DType::Bool && !ty.shape.is_scalar() && count[dst.0 as usize] == 1;
            let integer_test = op.is_comparison() && self.ty(*a).dtype.is_int();
            if mask && (integer_test || *op == BinaryOp::And) {
                out.push(*dst);
            }
        });
        out
    }

    /// Per var: how many statements assign it (a `for` counter counts its loop).
    pub fn assignment_counts(&self) -> Vec<u32> {
        let mut count = vec![0u32; self.vars.len()];
        self.visit_stmts(&mut |s| match s {
            Stmt::Assign { dst: v, .. } | Stmt::For { var: v, .. } => count[v.0 as usize] += 1,
            _ => {}
        });
        count
    }

    /// Walks every statement, nested bodies included, in program order.
    pub fn visit_stmts<'a>(&'a self, f: &mut dyn FnMut(&'a Stmt)) {
        visit_stmts(&self.body, f)
    }
}

/// Walks `stmts` and every statement nested in them, in program order.
pub fn visit_stmts<'a>(stmts: &'a [Stmt], f: &mut dyn FnMut(&'a Stmt)) {
    for s in stmts {
        f(s);
        match s {
            Stmt::If { then_body, else_body, .. } => {
                visit_stmts(then_body, f);
                visit_stmts(else_body, f);
            }
            Stmt::For { body, .. } => visit_stmts(body, f),
            Stmt::Assign { .. } | Stmt::Store { .. } => {}
        }
    }
}

/// One load or store: `param[offset]` on the lanes where `mask` (if any) is true. Listed by
/// [`Kernel::accesses`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// Index in [`Kernel::params`] of the pointer parameter accessed.
    pub param: u32,
    /// The element offsets (an integer scalar or tile).
    pub offset: VarId,
    /// The mask, if the access has one.
    pub mask: Option<VarId>,
}

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
    /// Index of a memory access in [`Kernel::accesses`] order: `FUSE_INB_<k>` is 1 when the
    /// runtime proved, before the launch, that every lane of every program that this access
    /// touches (mask true) has its offset inside the buffer, so the source may skip the check.
    InBounds(u32),
    /// Index of a mask in [`Kernel::masks`] order: `FUSE_TRUE_<k>` is 1 when the runtime proved,
    /// before the launch, that the mask is true on every lane of every program, so the source
    /// may treat it as the constant `true`.
    AllTrue(u32),
    /// Index in [`Kernel::uniform_branches`]: `FUSE_IFT_<k>` is 1 when the runtime computed that
    /// branch's condition true for this launch, so the source may take the branch unevaluated.
    BranchTaken(u32),
    /// Index in [`Kernel::uniform_branches`]: `FUSE_IFF_<k>` is 1 when the runtime computed that
    /// branch's condition false for this launch, so the source may drop the branch.
    BranchSkipped(u32),
    /// Index of a load in [`Kernel::accesses`] order that reads a [`TensorBox`] into a pipelined
    /// `dot`'s shared-memory stage: `FUSE_TMA_<k>` is 1 when the runtime encoded a tensor map for
    /// it (an sm_90 device, the box's stride, bounds and buffer checked for this launch) and
    /// passes it as the kernel's extra parameter `fuse_tmap<k>`, so the source may copy the box
    /// with TMA instead of `cp.async`.
    TensorBox(u32),
}

impl Specialization {
    /// The macro name the CUDA source tests, e.g. `FUSE_ALIGN16_x`, given the kernel's
    /// [`Kernel::params`].
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

/// How many bits of a Philox4x32-10 block one lane of [`Expr::Rand`] takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RandWidth {
    /// `rand`: a 32-bit word per lane, four lanes per Philox call ([`philox::rand`]).
    #[default]
    W32,
    /// `rand16`: a 16-bit half-word per lane, eight lanes per Philox call ([`philox::rand16`]).
    W16,
}

impl RandWidth {
    /// `true` for [`RandWidth::W32`] (serde's `skip_serializing_if`).
    pub fn is_w32(&self) -> bool {
        *self == RandWidth::W32
    }
    /// Lanes that share one Philox call: 4 or 8.
    pub fn lanes_per_call(self) -> u64 {
        match self {
            RandWidth::W32 => 4,
            RandWidth::W16 => 8,
        }
    }
    /// The language's name for it.
    pub fn name(self) -> &'static str {
        match self {
            RandWidth::W32 => "rand",
            RandWidth::W16 => "rand16",
        }
    }
}

/// Philox4x32-10 as Random123 and Triton define it, and the uniform-float mapping every back end
/// must reproduce bit for bit.
///
/// `rand(seed, offset)`: with `o = offset as u64` (signed offsets sign-extend), the counter is
/// `((o >> 2) as u32, (o >> 34) as u32, 0, 0)`, the key `(seed as u32, (seed as u64 >> 32) as u32)`,
/// and the value is `uniform(philox(counter, key)[o & 3])`. So four consecutive offsets that start
/// at a multiple of 4 share one Philox call (the GPU exploits that).
///
/// ```
/// use fuse_ir::philox;
///
/// // Random123's known answer for a zero counter and key.
/// assert_eq!(philox::philox4x32_10([0; 4], [0; 2]), [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]);
/// let u = philox::rand(42, 7);
/// assert!((0.0..1.0).contains(&u));
/// ```
pub mod philox {
    /// Rounds per Philox call.
    pub const ROUNDS: usize = 10;
    /// The multiplier of counter word 0 (Random123's `PHILOX_M4x32_0`).
    pub const M0: u32 = 0xD251_1F53;
    /// The multiplier of counter word 2 (Random123's `PHILOX_M4x32_1`).
    pub const M1: u32 = 0xCD9E_8D57;
    /// Added to key word 0 after each round (Random123's `PHILOX_W32_0`, the golden ratio).
    pub const W0: u32 = 0x9E37_79B9;
    /// Added to key word 1 after each round (Random123's `PHILOX_W32_1`, `sqrt(3) - 1`).
    pub const W1: u32 = 0xBB67_AE85;

    /// Philox4x32 with 10 rounds: four random words for a 128-bit `counter` and 64-bit `key`.
    pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
        let [mut c0, mut c1, mut c2, mut c3] = counter;
        let [mut k0, mut k1] = key;
        for _ in 0..ROUNDS {
            let prod_b = u64::from(M1) * u64::from(c2);
            let prod_a = u64::from(M0) * u64::from(c0);
            let (hi_b, lo_b) = ((prod_b >> 32) as u32, prod_b as u32);
            let (hi_a, lo_a) = ((prod_a >> 32) as u32, prod_a as u32);
            c0 = hi_b ^ c1 ^ k0;
            c1 = lo_b;
            c2 = hi_a ^ c3 ^ k1;
            c3 = lo_a;
            k0 = k0.wrapping_add(W0);
            k1 = k1.wrapping_add(W1);
        }
        [c0, c1, c2, c3]
    }

    /// Triton's `uint_to_uniform_float`: `i = x as i32; if i < 0 { i = !i }; i as f32 * 4.6566127342e-10`,
    /// a float in `[0, 1)`.
    pub fn uniform(x: u32) -> f32 {
        let mut i = x as i32;
        if i < 0 {
            i = !i;
        }
        i as f32 * 4.656_612_7e-10_f32
    }

    /// `rand(seed, offset)` for one lane: a float in `[0, 1)` (see the [module docs](self) for
    /// how the offset picks the counter and the word).
    pub fn rand(seed: u64, offset: u64) -> f32 {
        let block = offset >> 2;
        let out =
            philox4x32_10([block as u32, (block >> 32) as u32, 0, 0], [seed as u32, (seed >> 32) as u32]);
        uniform(out[(offset & 3) as usize])
    }

    /// `rand16(seed, offset)` for one lane: with `o = offset as u64`, the counter is
    /// `((o >> 3) as u32, (o >> 35) as u32, 0, 0)`, the key as for [`rand`], and the lane takes
    /// 16-bit half-word `o & 7` of the block (word `(o & 7) / 2`, its low half for even `o`, its
    /// high half for odd), `h`, and gives [`uniform16`]`(h) = (h + 1/2) / 2^16`. Eight
    /// consecutive offsets that start at a multiple of 8 share one Philox call.
    pub fn rand16(seed: u64, offset: u64) -> f32 {
        let block = offset >> 3;
        let out =
            philox4x32_10([block as u32, (block >> 32) as u32, 0, 0], [seed as u32, (seed >> 32) as u32]);
        uniform16(half_word(out, offset))
    }

    /// Half-word `o & 7` of a Philox block: word `(o & 7) >> 1`, low half for even `o`.
    pub fn half_word(block: [u32; 4], o: u64) -> u16 {
        let w = block[((o & 7) >> 1) as usize];
        if o & 1 == 0 {
            w as u16
        } else {
            (w >> 16) as u16
        }
    }

    /// `(h + 1/2) / 2^16`: the midpoint of the `h`-th of 2^16 equal steps of [0, 1), exact in f32
    /// (17 significant bits). Never 0 or 1, so `rand16(..) > p` keeps a lane with probability
    /// `1 - m / 2^16`, `m = floor(p * 2^16 + 1/2)` clamped to [0, 2^16]: `p` rounded to the nearest
    /// multiple of 2^-16, exactly `p` for such multiples (0 keeps every lane, 1 none).
    pub fn uniform16(h: u16) -> f32 {
        (f32::from(h) + 0.5) * (1.0 / 65536.0)
    }

    /// How many half-words `h` have `uniform16(h) <= p` (so `uniform16(h) > p` iff `h >= m`): the
    /// integer form of the `rand16(..) > p` test the GPU uses. A NaN `p` gives 2^16 (the float test
    /// is false for every lane).
    pub fn rand16_gt_bound(p: f32) -> u32 {
        if p.is_nan() {
            return 65536;
        }
        // p * 2^16 is exact in f64, and so is adding 1/2 for every p that matters (|p| <= 1).
        let m = (f64::from(p) * 65536.0 + 0.5).floor();
        m.clamp(0.0, 65536.0) as u32
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn rand16_bound_matches_the_float_test() {
            let ps = [
                -1.0f32,
                -0.0,
                0.0,
                1e-30,
                2f32.powi(-18),
                2f32.powi(-17),
                2f32.powi(-16),
                0.1,
                0.25,
                0.5 - 2f32.powi(-25),
                0.5,
                0.5 + 2f32.powi(-17),
                0.9,
                1.0 - 2f32.powi(-17),
                1.0,
                1.5,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::NAN,
            ];
            let mut rng = 0x1234_5678_9abc_def0u64;
            let mut more = Vec::new();
            for _ in 0..2000 {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                more.push(((rng >> 40) as f32) / (1u64 << 24) as f32);
                // and values right at and beside the steps
                let k = (rng >> 48) as f32;
                more.push(k / 65536.0);
                more.push((k + 0.5) / 65536.0);
                more.push(f32::from_bits(((k + 0.5) / 65536.0).to_bits().wrapping_sub(1)));
            }
            for &p in ps.iter().chain(&more) {
                let m = rand16_gt_bound(p);
                for h in 0..=u16::MAX {
                    assert_eq!(uniform16(h) > p, u32::from(h) >= m, "p = {p:e}, h = {h}");
                }
            }
        }

        #[test]
        fn rand16_takes_half_words_in_order() {
            let seed = 0x0123_4567_89ab_cdefu64;
            for b in [0u64, 1, 5, 1 << 31, (1 << 32) + 3] {
                let w = philox4x32_10([b as u32, (b >> 32) as u32, 0, 0], [seed as u32, (seed >> 32) as u32]);
                for j in 0..8u64 {
                    let want = (w[(j / 2) as usize] >> (16 * (j % 2))) & 0xffff;
                    assert_eq!(rand16(seed, 8 * b + j), (want as f32 + 0.5) / 65536.0);
                }
            }
            assert_eq!(uniform16(0), 2f32.powi(-17));
            assert_eq!(uniform16(u16::MAX), 1.0 - 2f32.powi(-17));
        }

        #[test]
        fn known_answer_counter0_key0() {
            assert_eq!(philox4x32_10([0; 4], [0; 2]), [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]);
        }

        #[test]
        fn uniform_is_in_unit_interval() {
            for x in [0u32, 1, 0x7fff_ffff, 0x8000_0000, u32::MAX, 12345] {
                let u = uniform(x);
                assert!((0.0..1.0).contains(&u), "{x:#x} -> {u}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn len_eval_and_c_expr() {
        let names = vec!["BLOCK".to_string(), "N".to_string()];
        let l = Len::of_const(0).mul(&Len::literal_log2(1));
        assert_eq!(l.eval(&[256, 4]), Some(512));
        assert_eq!(l.c_expr(&names), "(BLOCK * 2)");
        assert_eq!(Len::literal_log2(10).c_expr(&names), "1024");
        assert_eq!(Len::of_const(0).eval(&[100]), None, "non power of two rejected");
        let half = Len { log2: -1, consts: vec![0] };
        assert_eq!(half.eval(&[1]), None);
        assert_eq!(half.eval(&[8]), Some(4));
    }

    /// `tf32::round` against the definition in f64: the multiple of the TF32 spacing at `x`'s
    /// exponent nearest to `x`, ties away from zero, over random and boundary bit patterns.
    #[test]
    fn tf32_round_is_nearest_ties_away() {
        let reference = |x: f32| -> f32 {
            let a = f64::from(x.abs());
            let exp = if x.abs() < f32::MIN_POSITIVE { -126 } else { a.log2().floor() as i32 };
            let spacing = 2f64.powi(exp - 10);
            let r = (a / spacing + 0.5).floor() * spacing;
            let r = if r > f64::from(f32::MAX) { f32::INFINITY } else { r as f32 };
            if x.is_sign_negative() {
                -r
            } else {
                r
            }
        };
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut bits: Vec<u32> = (0..200_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u32
            })
            .collect();
        // Exact ties and their neighbours, zero, subnormals, the top of the range.
        for base in [0u32, 0x0000_1000, 0x0080_0000, 0x3f80_0000, 0x7f7f_e000, 0x7f7f_f000, 0x007f_f000] {
            for d in [0u32, 1, 0x0fff, 0x1000, 0x1001, 0x1fff] {
                bits.push(base.wrapping_add(d));
                bits.push((base.wrapping_add(d)) | 0x8000_0000);
            }
        }
        for b in bits {
            let x = f32::from_bits(b);
            if !x.is_finite() {
                continue;
            }
            let (got, want) = (tf32::round(x), reference(x));
            assert_eq!(got.to_bits(), want.to_bits(), "{x:e} ({b:#010x}): got {got:e}, want {want:e}");
            assert_eq!(got.to_bits() & 0x1fff, 0, "{b:#010x}: low bits kept");
        }
        assert_eq!(tf32::round(f32::NEG_INFINITY), f32::NEG_INFINITY);
        assert!(tf32::round(f32::from_bits(0x7f80_0001)).is_nan(), "a NaN with a low payload stays NaN");
    }

    #[test]
    fn json_round_trip() {
        let k = Kernel {
            name: "k".into(),
            consts: vec!["BLOCK".into()],
            params: vec![Param {
                name: "x".into(),
                kind: ParamKind::Ptr { elem: DType::F16, mutable: false },
            }],
            vars: vec![Var { name: "offs".into(), ty: Ty::tile(DType::I32, Len::of_const(0)) }],
            body: vec![
                Stmt::Assign { dst: VarId(0), expr: Expr::Arange { start: 0 } },
                Stmt::Assign { dst: VarId(0), expr: Expr::Lit(Literal::Float(f64::NEG_INFINITY)) },
                Stmt::Assign { dst: VarId(0), expr: Expr::Lit(Literal::Float(f64::NAN)) },
            ],
        };
        let back = Kernel::from_json(&k.to_json()).unwrap();
        assert_eq!(back.to_json(), k.to_json(), "non-finite floats survive the round trip");
    }
}
