//! The kernel itself: its parameters ([`Param`]), vars ([`Var`], [`VarId`]), statements
//! ([`Stmt`]) and expressions ([`Expr`], [`Literal`]), its JSON form, and the walks over its
//! body that every analysis builds on ([`visit_stmts`], [`Kernel::accesses`],
//! [`Kernel::masks`], [`Kernel::assignment_counts`]).
use crate::ops::{ArgOp, BinaryOp, RandWidth, ReduceOp, UnaryOp};
use crate::types::{DType, Len, Ty};
use serde::{Deserialize, Serialize};

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
    /// [`broadcast_source_lane`](crate::broadcast_source_lane)): dims aligned at the right, each
    /// source dim 1 or equal to the destination's; a 1-D `[N]` reads as `[1, N]`. Same dtype. (A
    /// scalar uses [`Expr::Splat`].)
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
    /// Uniform f32 in [0, 1): see [`philox`](crate::philox). `seed` an integer scalar, `offset` an
    /// integer scalar or tile; the result has the offset's shape. `width` says how many bits of the
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
    ///   TF32 (each input first rounded by [`tf32::round`](crate::tf32::round)) and accumulates in
    ///   `F32`; `I8` accumulates in `I32`. No other element type.
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

mod f64_bits {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(v.to_bits())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        u64::deserialize(d).map(f64::from_bits)
    }
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

    /// Every load and store, in program order (the order of [`Kernel::visit_stmts`]); the index in
    /// this list names the access in [`Specialization::InBounds`](crate::Specialization::InBounds).
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
    /// [`Specialization::AllTrue`](crate::Specialization::AllTrue).
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

#[cfg(test)]
mod tests {
    use super::*;

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
