//! ast → [`fuse_ir::Kernel`]: name resolution, type and shape inference, and lowering.
//!
//! Values are tracked as [`Val`]s while an expression is checked:
//! * literals and const generics stay *weak* ([`Weak`]) until they meet a typed operand, so
//!   `x + 1` works for every integer `x` and `arange(0, 2 * BLOCK)` can read its length;
//! * pointers are not IR values: `ptr + offs` is a [`Val::Ptr`] whose offset is folded into the
//!   `Load`/`Store` that finally uses it;
//! * everything else is an IR var ([`Val::Var`]); a *fresh* var is an unnamed temporary that a
//!   `let` may simply rename.
//!
//! Errors never stop the walk: the offending value becomes [`Val::Err`], which every later check
//! accepts silently, so one mistake is reported once.

use crate::ast::{self, BinaryKind, ExprKind, UnaryKind};
use crate::diag::{closest, Diags, Sp};
use crate::emit_cuda::names::C_RESERVED;
use fuse_ir::{
    ArgOp, BinaryOp, DType, Expr, Kernel, Len, Literal, Param, ParamKind, ReduceOp, Shape, Stmt, Ty, UnaryOp,
    Var, VarId,
};
use proc_macro2::Ident;
use std::collections::{HashMap, HashSet};

/// Checks a parsed kernel. The returned kernel is only meaningful when no error was reported.
pub fn check_kernel(f: &ast::KernelFn, diags: &mut Diags) -> Kernel {
    check_instance(f, &f.name.to_string(), diags)
}

/// Checks one instantiation of a kernel (a generic kernel's, parsed with its type parameters
/// bound), whose CUDA entry point is `entry` (`layernorm_f16`): the IR kernel's name.
pub fn check_instance(f: &ast::KernelFn, entry: &str, diags: &mut Diags) -> Kernel {
    let mut c = Checker::new(f, diags);
    c.used_names.insert(entry.to_string());
    c.block_in_scope(&f.body);
    Kernel { name: entry.to_string(), consts: c.consts, params: c.params, vars: c.vars, body: c.out }
}

/// An integer constant over literals and const generics, kept symbolic.
#[derive(Clone, Debug)]
enum ConstExpr {
    Lit(i128),
    Generic(u32),
    Neg(Box<ConstExpr>),
    Bin(BinaryOp, Box<ConstExpr>, Box<ConstExpr>),
}

/// A weakly typed value: it takes the type of whatever it meets.
#[derive(Clone, Debug)]
enum Weak {
    Int(ConstExpr),
    Float(f64),
}

#[derive(Clone, Debug)]
enum Val {
    /// Already reported; accepted everywhere.
    Err,
    /// What `store` returns.
    Unit,
    Var {
        id: VarId,
        fresh: bool,
    },
    Weak(Weak),
    /// `param + offset` (no offset: the start of the buffer). The offset is an integer `Var` or `Weak`.
    Ptr {
        param: u32,
        offset: Option<Box<Val>>,
    },
    /// `[M, N]`: the dims of a tile shape (the shape argument of `zeros`, `full`, `reshape`,
    /// `broadcast_to`).
    Shape(Vec<Len>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    Local,
    Param,
    Const,
    LoopVar,
}

#[derive(Clone)]
enum Bound {
    Var(VarId),
    /// A mutable pointer's offset is always `Some(Val::Var)`: its own var.
    Ptr {
        param: u32,
        offset: Option<Val>,
    },
    Weak(Weak),
    ScalarParam(u32),
    Err,
}

#[derive(Clone)]
struct Binding {
    bound: Bound,
    mutable: bool,
    origin: Origin,
}

/// The tile-language functions: name, fewest and most arguments, argument names.
const BUILTINS: &[(&str, usize, usize, &str)] = &[
    ("program_id", 1, 1, "axis"),
    ("num_programs", 1, 1, "axis"),
    ("arange", 2, 2, "start, end"),
    ("zeros", 1, 1, "shape"),
    ("full", 2, 2, "shape, value"),
    ("load", 1, 3, "ptr, mask, other"),
    ("store", 2, 3, "ptr, value, mask"),
    ("where_", 3, 3, "cond, a, b"),
    ("maximum", 2, 2, "a, b"),
    ("minimum", 2, 2, "a, b"),
    ("sum", 1, 2, "tile, axis"),
    ("max", 1, 2, "tile, axis"),
    ("min", 1, 2, "tile, axis"),
    ("argmax", 1, 2, "tile, axis"),
    ("argmin", 1, 2, "tile, axis"),
    ("expand_dims", 2, 2, "x, axis"),
    ("broadcast_to", 2, 2, "x, shape"),
    ("reshape", 2, 2, "x, shape"),
    ("trans", 1, 1, "x"),
    ("cdiv", 2, 2, "a, b"),
    ("rand", 2, 2, "seed, offsets"),
    ("abs", 1, 1, "x"),
    ("exp", 1, 1, "x"),
    ("exp2", 1, 1, "x"),
    ("log", 1, 1, "x"),
    ("log2", 1, 1, "x"),
    ("sqrt", 1, 1, "x"),
    ("rsqrt", 1, 1, "x"),
    ("erf", 1, 1, "x"),
    ("tanh", 1, 1, "x"),
    ("sigmoid", 1, 1, "x"),
    ("floor", 1, 1, "x"),
    ("ceil", 1, 1, "x"),
    ("sin", 1, 1, "x"),
    ("cos", 1, 1, "x"),
];

/// Functions whose first argument is not a value to call them on: no method sugar.
const METHODLESS: &[&str] = &["program_id", "num_programs", "arange", "zeros", "full"];

/// Names the generated Rust module defines; parameters and const generics may not take them.
const RUST_RESERVED: &[&str] = &["device", "config", "NAME", "SOURCE", "SPEC", "IR_JSON"];

struct Checker<'d> {
    diags: &'d mut Diags,
    consts: Vec<String>,
    params: Vec<Param>,
    vars: Vec<Var>,
    /// The statement list being written (nested bodies swap it out).
    out: Vec<Stmt>,
    scopes: Vec<HashMap<String, Binding>>,
    used_names: HashSet<String>,
    next_temp: u32,
}

fn is_builtin(name: &str) -> bool {
    BUILTINS.iter().any(|b| b.0 == name)
}

impl<'d> Checker<'d> {
    fn new(f: &ast::KernelFn, diags: &'d mut Diags) -> Checker<'d> {
        let mut c = Checker {
            diags,
            consts: Vec::new(),
            params: Vec::new(),
            vars: Vec::new(),
            out: Vec::new(),
            scopes: vec![HashMap::new()],
            used_names: C_RESERVED.iter().map(|s| s.to_string()).collect(),
            next_temp: 0,
        };
        c.used_names.insert("fuse_err".into());
        c.used_names.insert(f.name.to_string());
        c.declare_signature(f);
        c
    }

    /// Binds const generics and parameters, and rejects names that would clash in the generated
    /// C or Rust.
    fn declare_signature(&mut self, f: &ast::KernelFn) {
        let kernel_name = f.name.to_string();
        if C_RESERVED.contains(&kernel_name.as_str()) || kernel_name.starts_with("fuse_") {
            self.diags.error_help(
                Sp::single(f.name.span()),
                format!("`{kernel_name}` cannot name a kernel: it is reserved in the generated CUDA C"),
                "rename the kernel",
            );
        }
        let mut seen: HashSet<String> = HashSet::new();
        for (index, name) in f.consts.iter().enumerate() {
            let s = name.to_string();
            let sp = Sp::single(name.span());
            self.check_signature_name(&s, sp, "const generic", &mut seen);
            if C_RESERVED.contains(&s.as_str()) {
                self.diags.error_help(
                    sp,
                    format!("`{s}` cannot name a const generic: it is `#define`d in the generated CUDA C, where it is reserved"),
                    "rename it, e.g. in capitals like `BLOCK`",
                );
            }
            if s.starts_with("FUSE_") {
                self.diags.error_help(
                    sp,
                    format!("`{s}` cannot name a const generic: `FUSE_` names are reserved"),
                    "rename it",
                );
            }
            self.used_names.insert(s.clone());
            self.consts.push(s.clone());
            self.bind(
                s,
                Binding {
                    bound: Bound::Weak(Weak::Int(ConstExpr::Generic(index as u32))),
                    mutable: false,
                    origin: Origin::Const,
                },
            );
        }
        for p in &f.params {
            let s = p.name.to_string();
            let sp = Sp::single(p.name.span());
            self.check_signature_name(&s, sp, "parameter", &mut seen);
            self.used_names.insert(s.clone());
            self.used_names.insert(format!("{s}_len"));
            let index = self.params.len() as u32;
            let (kind, bound) = match p.ty {
                ast::ParamTy::Ptr { elem, mutable } => {
                    (Some(ParamKind::Ptr { elem, mutable }), Bound::Ptr { param: index, offset: None })
                }
                ast::ParamTy::Scalar(d) => (Some(ParamKind::Scalar(d)), Bound::ScalarParam(index)),
                ast::ParamTy::Invalid => (None, Bound::Err),
            };
            if let Some(kind) = kind {
                self.params.push(Param { name: s.clone(), kind });
            }
            self.bind(s, Binding { bound, mutable: false, origin: Origin::Param });
        }
    }

    fn check_signature_name(&mut self, s: &str, sp: Sp, what: &str, seen: &mut HashSet<String>) {
        if !seen.insert(s.to_string()) {
            self.diags
                .error(sp, format!("the name `{s}` is declared more than once in the kernel signature"));
        } else if RUST_RESERVED.contains(&s) {
            self.diags.error_help(
                sp,
                format!("`{s}` cannot name a {what}: the generated module uses that name"),
                "rename it",
            );
        }
    }

    // ---- scopes and names ------------------------------------------------------------------

    fn bind(&mut self, name: String, b: Binding) {
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name, b);
        }
    }

    fn lookup(&self, name: &str) -> Option<&Binding> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    fn visible_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.scopes.iter().flat_map(|s| s.keys().cloned()).collect();
        names.sort();
        names.dedup();
        names
    }

    fn undefined(&mut self, id: &Ident) {
        let name = id.to_string();
        let sp = Sp::single(id.span());
        if is_builtin(&name) {
            self.diags.error_help(
                sp,
                format!("`{name}` is a function, not a value"),
                format!("call it: `{name}(..)`"),
            );
            return;
        }
        if DType::from_name(&name).is_some() {
            self.diags.error_help(
                sp,
                format!("`{name}` is a type, not a value"),
                format!("convert with `x.to({name})`"),
            );
            return;
        }
        let names = self.visible_names();
        match closest(&name, names.iter().map(String::as_str)) {
            Some(close) => self.diags.error_help(
                sp,
                format!("undefined variable `{name}`"),
                format!("did you mean `{close}`?"),
            ),
            None => self.diags.error(sp, format!("undefined variable `{name}`")),
        }
    }

    /// A unique C identifier that keeps the user's name where it can.
    fn unique_name(&mut self, base: &str) -> String {
        let base = c_safe(base);
        if self.used_names.insert(base.clone()) {
            return base;
        }
        let mut n = 1u32;
        loop {
            let candidate = format!("{base}_{n}");
            if self.used_names.insert(candidate.clone()) {
                return candidate;
            }
            n += 1;
        }
    }

    fn temp_name(&mut self) -> String {
        loop {
            let candidate = format!("t{}", self.next_temp);
            self.next_temp += 1;
            if self.used_names.insert(candidate.clone()) {
                return candidate;
            }
        }
    }

    // ---- IR building -----------------------------------------------------------------------

    fn ty(&self, id: VarId) -> Ty {
        self.vars.get(id.0 as usize).map_or(Ty::scalar(DType::I32), |v| v.ty.clone())
    }

    fn new_named(&mut self, base: &str, ty: Ty) -> VarId {
        let name = self.unique_name(base);
        self.vars.push(Var { name, ty });
        VarId(self.vars.len() as u32 - 1)
    }

    /// `tN = expr` with a fresh temporary.
    fn emit(&mut self, ty: Ty, expr: Expr) -> VarId {
        let name = self.temp_name();
        self.vars.push(Var { name, ty });
        let dst = VarId(self.vars.len() as u32 - 1);
        self.out.push(Stmt::Assign { dst, expr });
        dst
    }

    fn fresh(&mut self, ty: Ty, expr: Expr) -> Val {
        Val::Var { id: self.emit(ty, expr), fresh: true }
    }

    /// Gives a fresh temporary the user's name (its `tN` name is free again).
    fn rename(&mut self, id: VarId, base: &str) {
        if let Some(v) = self.vars.get(id.0 as usize) {
            self.used_names.remove(&v.name);
        }
        let name = self.unique_name(base);
        if let Some(v) = self.vars.get_mut(id.0 as usize) {
            v.name = name;
        }
    }

    /// `dst = value`, reusing the statement that computed `value` when it is a fresh temporary.
    fn assign_into(&mut self, dst: VarId, value: VarId, fresh: bool) {
        if fresh && self.ty(dst) == self.ty(value) {
            if let Some(Stmt::Assign { dst: last, .. }) = self.out.last_mut() {
                if *last == value {
                    *last = dst;
                    return;
                }
            }
        }
        self.out.push(Stmt::Assign { dst, expr: Expr::Copy(value) });
    }

    /// Widens a storage-typed var (f16/bf16 → f32, i8/u8 → i32) before arithmetic.
    fn widen(&mut self, id: VarId) -> VarId {
        let ty = self.ty(id);
        if ty.dtype.is_compute() {
            return id;
        }
        self.emit(Ty { dtype: ty.dtype.compute(), shape: ty.shape }, Expr::Cast(id))
    }

    fn cast_to(&mut self, id: VarId, dtype: DType) -> VarId {
        let ty = self.ty(id);
        if ty.dtype == dtype {
            return id;
        }
        self.emit(Ty { dtype, shape: ty.shape }, Expr::Cast(id))
    }

    // ---- descriptions for messages -----------------------------------------------------------

    fn describe_ty(&self, ty: &Ty) -> String {
        match &ty.shape {
            Shape::Scalar => format!("{} scalar", ty.dtype),
            Shape::Tile(len) => format!("{} tile of length {}", ty.dtype, self.len_text(len)),
            Shape::Tile2(..) => format!("{} tile of shape {}", ty.dtype, self.shape_text(&ty.shape)),
        }
    }

    /// `[BLOCK]`, `[ROWS, 64]`; `scalar` for a scalar.
    fn shape_text(&self, shape: &Shape) -> String {
        match shape {
            Shape::Scalar => "scalar".into(),
            _ => self.dims_text(&shape.dims()),
        }
    }

    fn dims_text(&self, dims: &[Len]) -> String {
        format!("[{}]", dims.iter().map(|d| self.len_text(d)).collect::<Vec<_>>().join(", "))
    }

    fn len_text(&self, len: &Len) -> String {
        if len.consts.iter().any(|&c| c as usize >= self.consts.len()) {
            return "?".into();
        }
        len.display(&self.consts)
    }

    fn describe(&self, v: &Val) -> String {
        match v {
            Val::Err => "an invalid value".into(),
            Val::Unit => "`()` (store returns nothing)".into(),
            Val::Var { id, .. } => self.describe_ty(&self.ty(*id)),
            Val::Weak(Weak::Int(ConstExpr::Generic(i))) => {
                format!("the const generic `{}`", self.consts.get(*i as usize).map_or("?", String::as_str))
            }
            Val::Weak(Weak::Int(_)) => "an integer constant".into(),
            Val::Weak(Weak::Float(_)) => "a float literal".into(),
            Val::Ptr { param, .. } => format!("a pointer into `{}`", self.param_name(*param)),
            Val::Shape(dims) => format!("the shape {}", self.dims_text(dims)),
        }
    }

    fn param_name(&self, index: u32) -> String {
        self.params.get(index as usize).map_or_else(|| "?".into(), |p| p.name.clone())
    }

    fn param_elem(&self, index: u32) -> (DType, bool) {
        match self.params.get(index as usize).map(|p| p.kind) {
            Some(ParamKind::Ptr { elem, mutable }) => (elem, mutable),
            _ => (DType::F32, true),
        }
    }

    // ---- weak values ------------------------------------------------------------------------

    /// A weak value as a scalar of `dtype` (storage dtypes: computed in their compute type, then cast).
    fn materialize(&mut self, w: &Weak, dtype: DType, sp: Sp) -> Option<VarId> {
        if !dtype.is_compute() {
            let wide = self.materialize(w, dtype.compute(), sp)?;
            return Some(self.cast_to(wide, dtype));
        }
        match w {
            Weak::Float(f) if dtype == DType::F32 => Some(self.float_lit(*f)),
            Weak::Float(_) => {
                self.diags.error_help(
                    sp,
                    format!("mismatched types: expected {dtype}, found a float literal"),
                    format!("write an {dtype} value, or convert the other operand with `.to(f32)`"),
                );
                None
            }
            Weak::Int(_) if dtype == DType::Bool => {
                self.diags.error_help(
                    sp,
                    "mismatched types: expected bool, found an integer constant",
                    "write `true`/`false` or a comparison",
                );
                None
            }
            Weak::Int(ce) => self.const_into(ce, dtype, sp),
        }
    }

    /// An f32 literal (infinities and NaN included: the IR serialises floats by bit pattern).
    fn float_lit(&mut self, f: f64) -> VarId {
        self.emit(Ty::scalar(DType::F32), Expr::Lit(Literal::Float(f)))
    }

    fn const_into(&mut self, ce: &ConstExpr, dtype: DType, sp: Sp) -> Option<VarId> {
        if dtype == DType::F32 {
            if let ConstExpr::Lit(v) = ce {
                return Some(self.float_lit(*v as f64));
            }
            let as_int = self.const_into(ce, DType::I32, sp)?;
            return Some(self.cast_to(as_int, DType::F32));
        }
        let ty = Ty::scalar(dtype);
        match ce {
            ConstExpr::Lit(v) => {
                let lit = int_literal(*v, dtype).or_else(|| {
                    self.diags.error_help(
                        sp,
                        format!("the literal {v} does not fit in {dtype}"),
                        "use a wider type: `.to(i64)` on the other operand",
                    );
                    None
                })?;
                Some(self.emit(ty, Expr::Lit(lit)))
            }
            ConstExpr::Generic(i) => Some(self.emit(ty, Expr::ConstGeneric(*i))),
            ConstExpr::Neg(x) => {
                let x = self.const_into(x, dtype, sp)?;
                Some(self.emit(ty, Expr::Unary(UnaryOp::Neg, x)))
            }
            ConstExpr::Bin(op, a, b) => {
                let a = self.const_into(a, dtype, sp)?;
                let b = self.const_into(b, dtype, sp)?;
                let ty = if op.is_comparison() { Ty::scalar(DType::Bool) } else { ty };
                Some(self.emit(ty, Expr::Binary(*op, a, b)))
            }
        }
    }

    fn default_dtype(w: &Weak) -> DType {
        match w {
            Weak::Int(_) => DType::I32,
            Weak::Float(_) => DType::F32,
        }
    }

    /// A strong var for any value (weak values take their default type: i32 / f32).
    fn strong(&mut self, v: Val, sp: Sp, context: &str) -> Option<VarId> {
        match v {
            Val::Err => None,
            Val::Var { id, .. } => Some(id),
            Val::Weak(w) => {
                let d = Self::default_dtype(&w);
                self.materialize(&w, d, sp)
            }
            Val::Unit => {
                self.diags.error(sp, format!("{context}: `store(..)` returns nothing"));
                None
            }
            Val::Ptr { param, .. } => {
                self.diags.error_help(
                    sp,
                    format!("{context}: expected a value, found a pointer into `{}`", self.param_name(param)),
                    format!("read through it with `load({} + offs, mask)`", self.param_name(param)),
                );
                None
            }
            Val::Shape(dims) => {
                self.diags.error_help(
                    sp,
                    format!("{context}: expected a value, found the shape {}", self.dims_text(&dims)),
                    "a shape `[M, N]` is the first argument of `zeros` and `full` and the second of `reshape` and `broadcast_to`",
                );
                None
            }
        }
    }

    /// A tile length from a constant expression: a product of power-of-two literals and const generics.
    fn const_len(&mut self, v: &Val, sp: Sp, what: &str) -> Option<Len> {
        match v {
            Val::Err => None,
            Val::Weak(Weak::Int(ce)) => match len_of(ce) {
                Ok(len) => Some(len),
                Err(msg) => {
                    self.diags.error_help(sp, format!("{what}: {msg}"), "tile lengths are powers of two built from literals and const generics, like `BLOCK` or `2 * BLOCK`");
                    None
                }
            },
            other => {
                let d = self.describe(other);
                self.diags.error_help(
                    sp,
                    format!("{what} must be a compile-time constant, found {d}"),
                    "use a literal or a const generic, like `BLOCK`",
                );
                None
            }
        }
    }

    /// The dims of a tile shape argument: `[M, N]`, `[L]`, or a bare length `L` (1-D).
    fn const_shape(&mut self, v: &Val, sp: Sp, what: &str) -> Option<Vec<Len>> {
        match v {
            Val::Shape(dims) => Some(dims.clone()),
            other => self.const_len(other, sp, what).map(|l| vec![l]),
        }
    }

    /// `[a, b]` as written: each dim a constant power of two; rank 1 or 2.
    fn shape_literal(&mut self, elems: &[ast::Expr], sp: Sp) -> Val {
        if elems.is_empty() || elems.len() > 2 {
            self.diags.error_help(
                sp,
                format!("a tile shape has one or two dims, found {}", elems.len()),
                "write `[LEN]` or `[ROWS, COLS]`",
            );
            return Val::Err;
        }
        let mut dims = Vec::new();
        for e in elems {
            let v = self.expr(e);
            dims.push(self.const_len(&v, e.sp, "a dim of a tile shape"));
        }
        dims.into_iter().collect::<Option<Vec<Len>>>().map_or(Val::Err, Val::Shape)
    }

    // ---- broadcasting ---------------------------------------------------------------------------

    /// The shape two operands broadcast to (NumPy's rule: dims aligned at the right, each pair
    /// equal or one of them the literal 1); `None` where they do not.
    fn broadcast_shape(a: &Shape, b: &Shape) -> Option<Shape> {
        let (da, db) = (a.dims(), b.dims());
        let rank = da.len().max(db.len());
        let unit = Len::literal_log2(0);
        let mut dims = Vec::with_capacity(rank);
        for i in 0..rank {
            let x = (i + da.len()).checked_sub(rank).map(|j| &da[j]);
            let y = (i + db.len()).checked_sub(rank).map(|j| &db[j]);
            dims.push(match (x, y) {
                (Some(x), Some(y)) if x == y => x.clone(),
                (Some(x), Some(y)) if *x == unit => y.clone(),
                (Some(x), Some(y)) if *y == unit => x.clone(),
                (Some(_), Some(_)) => return None,
                (Some(d), None) | (None, Some(d)) => d.clone(),
                (None, None) => unreachable!("i < rank"),
            });
        }
        Shape::from_dims(&dims)
    }

    fn report_broadcast(&mut self, a: &Shape, b: &Shape, sp: Sp) {
        if let (Shape::Tile(x), Shape::Tile(y)) = (a, b) {
            let (x, y) = (self.len_text(x), self.len_text(y));
            self.diags.error_help(
                sp,
                format!("tile lengths differ: {x} and {y}"),
                "tiles in one operation must have the same length (scalars broadcast)",
            );
        } else {
            let (x, y) = (self.shape_text(a), self.shape_text(b));
            self.diags.error_help(
                sp,
                format!("cannot broadcast shapes {x} and {y}"),
                "dims aligned at the right must be equal or 1; add a unit axis with `expand_dims(x, axis)`",
            );
        }
    }

    /// Broadcasts operands to their common shape (scalars stay scalars: every back end repeats
    /// them), inserting [`Expr::Broadcast`] for tiles of another shape. `None` after reporting.
    fn broadcast_operands(&mut self, ids: &mut [VarId], sp: Sp) -> Option<Shape> {
        let mut shape = Shape::Scalar;
        for &id in ids.iter() {
            let s = self.ty(id).shape;
            match Self::broadcast_shape(&shape, &s) {
                Some(joined) => shape = joined,
                None => {
                    self.report_broadcast(&shape, &s, sp);
                    return None;
                }
            }
        }
        for id in ids.iter_mut() {
            *id = self.broadcast_var(*id, &shape);
        }
        Some(shape)
    }

    /// `id` as a value of `shape` (which it must broadcast to): itself if it is a scalar or
    /// already has that shape, else a [`Expr::Broadcast`].
    fn broadcast_var(&mut self, id: VarId, shape: &Shape) -> VarId {
        let ty = self.ty(id);
        if ty.shape.is_scalar() || ty.shape == *shape {
            id
        } else {
            self.emit(Ty { dtype: ty.dtype, shape: shape.clone() }, Expr::Broadcast(id))
        }
    }

    // ---- statements -------------------------------------------------------------------------

    fn block_in_scope(&mut self, b: &ast::Block) {
        self.scopes.push(HashMap::new());
        for s in &b.stmts {
            self.stmt(s);
        }
        self.scopes.pop();
    }

    /// Checks `b` in a new scope and returns its statements.
    fn nested_body(&mut self, b: &ast::Block) -> Vec<Stmt> {
        let saved = std::mem::take(&mut self.out);
        self.block_in_scope(b);
        std::mem::replace(&mut self.out, saved)
    }

    fn stmt(&mut self, s: &ast::Stmt) {
        match s {
            ast::Stmt::Let { name, mutable, init, .. } => {
                let v = self.expr(init);
                self.let_binding(name, *mutable, v, init.sp);
            }
            ast::Stmt::Assign { target, op, value, sp } => self.assign(target, *op, value, *sp),
            ast::Stmt::Expr { expr, semi } => {
                let v = self.expr(expr);
                if !semi && !matches!(v, Val::Unit | Val::Err) {
                    self.diags.error_help(
                        expr.sp,
                        "a kernel returns nothing, but this block ends in a value",
                        "add `;` or bind it with `let`",
                    );
                }
            }
            ast::Stmt::If(i) => {
                let stmt = self.if_stmt(i);
                if let Some(stmt) = stmt {
                    self.out.push(stmt);
                }
            }
            ast::Stmt::For { var, start, end, step, body, sp } => {
                self.for_loop(var, start, end, step.as_ref(), body, *sp)
            }
        }
    }

    fn let_binding(&mut self, name: &Ident, mutable: bool, v: Val, sp: Sp) {
        let s = name.to_string();
        let bound = match v {
            Val::Err => Bound::Err,
            Val::Unit => {
                self.diags.error(sp, format!("`{s}` would bind nothing: `store(..)` returns no value"));
                Bound::Err
            }
            Val::Shape(dims) => {
                self.diags.error_help(
                    sp,
                    format!("`{s}` cannot hold the shape {}: shapes are not values", self.dims_text(&dims)),
                    "write the shape where it is used, e.g. `zeros([ROWS, BLOCK])`",
                );
                Bound::Err
            }
            Val::Weak(w) if !mutable => Bound::Weak(w),
            Val::Weak(w) => {
                let d = Self::default_dtype(&w);
                match self.materialize(&w, d, sp) {
                    Some(id) => {
                        self.rename(id, &s);
                        Bound::Var(id)
                    }
                    None => Bound::Err,
                }
            }
            Val::Var { id, fresh: true } => {
                self.rename(id, &s);
                Bound::Var(id)
            }
            Val::Var { id, fresh: false } => {
                let ty = self.ty(id);
                let dst = self.new_named(&s, ty);
                self.out.push(Stmt::Assign { dst, expr: Expr::Copy(id) });
                Bound::Var(dst)
            }
            Val::Ptr { param, offset } => {
                let base = format!("{s}_off");
                let offset = match offset.map(|b| *b) {
                    None if !mutable => None,
                    Some(Val::Weak(w)) if !mutable => Some(Val::Weak(w)),
                    None => {
                        let id = self.new_named(&base, Ty::scalar(DType::I32));
                        self.out.push(Stmt::Assign { dst: id, expr: Expr::Lit(Literal::Int(0)) });
                        Some(Val::Var { id, fresh: false })
                    }
                    Some(Val::Weak(w)) => {
                        let id = self.materialize(&w, DType::I32, sp);
                        id.map(|id| {
                            self.rename(id, &base);
                            Val::Var { id, fresh: false }
                        })
                    }
                    Some(Val::Var { id, fresh: true }) => {
                        self.rename(id, &base);
                        Some(Val::Var { id, fresh: false })
                    }
                    Some(Val::Var { id, fresh: false }) => {
                        let ty = self.ty(id);
                        let dst = self.new_named(&base, ty);
                        self.out.push(Stmt::Assign { dst, expr: Expr::Copy(id) });
                        Some(Val::Var { id: dst, fresh: false })
                    }
                    Some(_) => None,
                };
                Bound::Ptr { param, offset }
            }
        };
        self.bind(s, Binding { bound, mutable, origin: Origin::Local });
    }

    fn assign(&mut self, target: &Ident, op: Option<(BinaryOp, Sp)>, value: &ast::Expr, sp: Sp) {
        let name = target.to_string();
        let tsp = Sp::single(target.span());
        let rhs = self.expr(value);
        let Some(binding) = self.lookup(&name).cloned() else {
            self.undefined(target);
            return;
        };
        if matches!(binding.bound, Bound::Err) {
            return;
        }
        if !binding.mutable {
            match binding.origin {
                Origin::Param => self.diags.error_help(
                    tsp,
                    format!("cannot assign to the parameter `{name}`"),
                    format!("shadow it with a mutable copy: `let mut {name} = {name};`"),
                ),
                Origin::Const => {
                    self.diags.error(tsp, format!("cannot assign to the const generic `{name}`"))
                }
                Origin::LoopVar => self.diags.error_help(
                    tsp,
                    format!("cannot assign to the loop variable `{name}`"),
                    format!("copy it first: `let mut {name} = {name};`"),
                ),
                Origin::Local => self.diags.error_help(
                    tsp,
                    format!("cannot assign twice to the immutable variable `{name}`"),
                    format!("declare it mutable: `let mut {name} = ...;`"),
                ),
            }
            return;
        }
        let new = match op {
            None => rhs,
            Some((op, op_sp)) => {
                let cur = self.read(&binding);
                let sym = format!("{}=", op_symbol(BinaryKind::Op(op)));
                self.binary_as(BinaryKind::Op(op), &sym, cur, rhs, op_sp, tsp, value.sp)
            }
        };
        match binding.bound {
            Bound::Var(dst) => self.store_into_var(dst, &name, new, value.sp.to(sp)),
            Bound::Ptr { param, offset } => match new {
                Val::Err => {}
                Val::Ptr { param: new_param, offset: new_offset } if new_param == param => {
                    if let Some(Val::Var { id: dst, .. }) = offset {
                        let off = match new_offset {
                            None => Val::Weak(Weak::Int(ConstExpr::Lit(0))),
                            Some(o) => *o,
                        };
                        self.store_into_var(dst, &name, off, value.sp);
                    }
                }
                Val::Ptr { param: new_param, .. } => self.diags.error_help(
                    value.sp,
                    format!(
                        "`{name}` points into `{}`; it cannot be made to point into `{}`",
                        self.param_name(param),
                        self.param_name(new_param)
                    ),
                    "use a separate variable for each buffer",
                ),
                other => {
                    let d = self.describe(&other);
                    self.diags.error(value.sp, format!("`{name}` is a pointer; cannot assign {d} to it"));
                }
            },
            Bound::Weak(_) | Bound::ScalarParam(_) | Bound::Err => {}
        }
    }

    /// Assignment to an existing var: the value must have its type (weak values adapt, scalars
    /// broadcast into a tile var).
    fn store_into_var(&mut self, dst: VarId, name: &str, v: Val, sp: Sp) {
        let ty = self.ty(dst);
        let (id, fresh) = match v {
            Val::Err => return,
            Val::Weak(w) => match self.materialize(&w, ty.dtype, sp) {
                Some(id) => (id, true),
                None => return,
            },
            Val::Var { id, fresh } => (id, fresh),
            other => {
                let d = self.describe(&other);
                self.diags.error(sp, format!("cannot assign {d} to `{name}`"));
                return;
            }
        };
        let vty = self.ty(id);
        let (id, fresh) = if vty.dtype != ty.dtype && vty.dtype.compute() == ty.dtype {
            (self.widen(id), true)
        } else {
            (id, fresh)
        };
        let vty = self.ty(id);
        if vty.dtype != ty.dtype {
            self.diags.error_help(
                sp,
                format!(
                    "mismatched types: `{name}` is {}, the value is {}",
                    self.describe_ty(&ty),
                    self.describe_ty(&vty)
                ),
                format!("convert the value: `(..).to({})`", ty.dtype),
            );
            return;
        }
        match (&ty.shape, &vty.shape) {
            (Shape::Tile(_) | Shape::Tile2(..), Shape::Scalar) => {
                self.out.push(Stmt::Assign { dst, expr: Expr::Splat(id) });
            }
            (Shape::Scalar, Shape::Tile(_) | Shape::Tile2(..)) => self.diags.error_help(
                sp,
                format!(
                    "cannot assign {} to `{name}`, which is {}",
                    self.describe_ty(&vty),
                    self.describe_ty(&ty)
                ),
                "reduce the tile first, e.g. `sum(..)`, or declare the variable as a tile (`zeros(BLOCK)`)",
            ),
            (Shape::Tile(a), Shape::Tile(b)) if a != b => self.diags.error(
                sp,
                format!(
                    "tile lengths differ: `{name}` has length {}, the value {}",
                    self.len_text(a),
                    self.len_text(b)
                ),
            ),
            (a, b) if a != b => {
                if Self::broadcast_shape(a, b).as_ref() == Some(a) {
                    self.out.push(Stmt::Assign { dst, expr: Expr::Broadcast(id) });
                } else {
                    let (x, y) = (self.shape_text(a), self.shape_text(b));
                    self.diags.error_help(
                        sp,
                        format!("shapes differ: `{name}` has shape {x}, the value {y}"),
                        "a value assigned to a tile variable must have its shape or broadcast to it",
                    );
                }
            }
            _ => self.assign_into(dst, id, fresh),
        }
    }

    fn if_stmt(&mut self, i: &ast::If) -> Option<Stmt> {
        let c = self.expr(&i.cond);
        let cond = self.scalar_bool(c, i.cond.sp, "an `if` condition");
        let then_body = self.nested_body(&i.then_body);
        let else_body = match &i.else_branch {
            None => Vec::new(),
            Some(ast::Else::Block(b)) => self.nested_body(b),
            Some(ast::Else::If(inner)) => {
                let saved = std::mem::take(&mut self.out);
                let nested = self.if_stmt(inner);
                let mut body = std::mem::replace(&mut self.out, saved);
                body.extend(nested);
                body
            }
        };
        Some(Stmt::If { cond: cond?, then_body, else_body })
    }

    fn scalar_bool(&mut self, v: Val, sp: Sp, what: &str) -> Option<VarId> {
        let id = self.strong(v, sp, what)?;
        let ty = self.ty(id);
        match (ty.dtype, &ty.shape) {
            (DType::Bool, Shape::Scalar) => Some(id),
            (DType::Bool, Shape::Tile(_)) => {
                self.diags.error_help(
                    sp,
                    format!("{what} must be a scalar bool, found {}", self.describe_ty(&ty)),
                    "control flow is uniform per program; select per lane with `where_(cond, a, b)` or use the tile as a mask",
                );
                None
            }
            _ => {
                self.diags.error_help(
                    sp,
                    format!("{what} must be a bool, found {}", self.describe_ty(&ty)),
                    "compare it: `x != 0`",
                );
                None
            }
        }
    }

    fn for_loop(
        &mut self,
        var: &Ident,
        start: &ast::Expr,
        end: &ast::Expr,
        step: Option<&ast::Expr>,
        body: &ast::Block,
        sp: Sp,
    ) {
        let s = self.expr(start);
        let e = self.expr(end);
        let (st, st_sp) = match step {
            Some(x) => (self.expr(x), x.sp),
            None => (Val::Weak(Weak::Int(ConstExpr::Lit(1))), sp),
        };
        if let Val::Weak(Weak::Int(ConstExpr::Lit(v))) = &st {
            if *v <= 0 {
                self.diags.error(st_sp, format!("`step_by` needs a positive step, found {v}"));
            }
        }
        // The bounds share one integer type: the first strongly typed one, else i32.
        let parts =
            [(&s, start.sp, "the loop start"), (&e, end.sp, "the loop end"), (&st, st_sp, "the loop step")];
        let mut dtype = None;
        let mut ok = true;
        for (v, vsp, what) in parts {
            match v {
                Val::Var { id, .. } => {
                    let ty = self.ty(*id);
                    let d = ty.dtype.compute();
                    if !ty.shape.is_scalar() || !d.is_int() {
                        self.diags.error_help(
                            vsp,
                            format!("{what} must be an integer scalar, found {}", self.describe_ty(&ty)),
                            "loop bounds are integer scalars: `for i in (0..n).step_by(BLOCK)`",
                        );
                        ok = false;
                    } else if dtype.is_none() {
                        dtype = Some(d);
                    }
                }
                Val::Weak(Weak::Int(_)) | Val::Err => {}
                other => {
                    let d = self.describe(other);
                    self.diags.error(vsp, format!("{what} must be an integer scalar, found {d}"));
                    ok = false;
                }
            }
        }
        let dtype = dtype.unwrap_or(DType::I32);
        let mut ids = Vec::new();
        for (v, vsp, what) in
            [(s, start.sp, "the loop start"), (e, end.sp, "the loop end"), (st, st_sp, "the loop step")]
        {
            if !ok {
                break;
            }
            let id = match v {
                Val::Var { id, .. } => {
                    let id = self.widen(id);
                    if self.ty(id).dtype != dtype {
                        self.diags.error_help(
                            vsp,
                            format!("{what} is {}, but the loop counts in {dtype}", self.ty(id).dtype),
                            format!("convert it: `(..).to({dtype})`"),
                        );
                        None
                    } else {
                        Some(id)
                    }
                }
                Val::Weak(w) => self.materialize(&w, dtype, vsp),
                _ => None,
            };
            ids.push(id);
        }
        let loop_var = self.new_named(&var.to_string(), Ty::scalar(dtype));
        self.scopes.push(HashMap::new());
        self.bind(
            var.to_string(),
            Binding { bound: Bound::Var(loop_var), mutable: false, origin: Origin::LoopVar },
        );
        let saved = std::mem::take(&mut self.out);
        for s in &body.stmts {
            self.stmt(s);
        }
        let body = std::mem::replace(&mut self.out, saved);
        self.scopes.pop();
        if let [Some(start), Some(end), Some(step)] = ids.as_slice() {
            self.out.push(Stmt::For { var: loop_var, start: *start, end: *end, step: *step, body });
        }
    }

    // ---- expressions ------------------------------------------------------------------------

    fn read(&mut self, b: &Binding) -> Val {
        match &b.bound {
            Bound::Var(id) => Val::Var { id: *id, fresh: false },
            Bound::Ptr { param, offset } => Val::Ptr { param: *param, offset: offset.clone().map(Box::new) },
            Bound::Weak(w) => Val::Weak(w.clone()),
            Bound::ScalarParam(i) => {
                let dtype = match self.params.get(*i as usize).map(|p| p.kind) {
                    Some(ParamKind::Scalar(d)) => d,
                    _ => DType::I32,
                };
                self.fresh(Ty::scalar(dtype), Expr::Param(*i))
            }
            Bound::Err => Val::Err,
        }
    }

    fn expr(&mut self, e: &ast::Expr) -> Val {
        match &e.kind {
            ExprKind::Error => Val::Err,
            ExprKind::Int { value, suffix: None } => Val::Weak(Weak::Int(ConstExpr::Lit(i128::from(*value)))),
            ExprKind::Int { value, suffix: Some(d) } => self
                .materialize(&Weak::Int(ConstExpr::Lit(i128::from(*value))), *d, e.sp)
                .map_or(Val::Err, |id| Val::Var { id, fresh: true }),
            ExprKind::Float { value, suffix: None } => Val::Weak(Weak::Float(*value)),
            ExprKind::Float { value, suffix: Some(d) } => self
                .materialize(&Weak::Float(*value), *d, e.sp)
                .map_or(Val::Err, |id| Val::Var { id, fresh: true }),
            ExprKind::Bool(b) => self.fresh(Ty::scalar(DType::Bool), Expr::Lit(Literal::Bool(*b))),
            ExprKind::Name(id) => match self.lookup(&id.to_string()).cloned() {
                Some(b) => self.read(&b),
                None => {
                    self.undefined(id);
                    Val::Err
                }
            },
            ExprKind::Cast { expr, to } => {
                let v = self.expr(expr);
                self.cast(v, *to, expr.sp)
            }
            ExprKind::Unary { op, expr } => {
                let v = self.expr(expr);
                self.unary(*op, v, e.sp)
            }
            ExprKind::Binary { op, op_sp, lhs, rhs } => {
                let a = self.expr(lhs);
                let b = self.expr(rhs);
                self.binary(*op, a, b, *op_sp, lhs.sp, rhs.sp)
            }
            ExprKind::Call { func, args, method } => self.call(func, args, *method, e.sp),
            ExprKind::Shape(elems) => self.shape_literal(elems, e.sp),
        }
    }

    fn cast(&mut self, v: Val, to: DType, sp: Sp) -> Val {
        match v {
            Val::Err => Val::Err,
            Val::Weak(Weak::Int(ce)) if to.is_int() || to.is_float() => {
                self.materialize(&Weak::Int(ce), to, sp).map_or(Val::Err, |id| Val::Var { id, fresh: true })
            }
            Val::Weak(w @ Weak::Float(_)) if to.is_float() => {
                self.materialize(&w, to, sp).map_or(Val::Err, |id| Val::Var { id, fresh: true })
            }
            Val::Weak(w) => {
                let d = Self::default_dtype(&w);
                match self.materialize(&w, d, sp) {
                    Some(id) => Val::Var { id: self.cast_to(id, to), fresh: true },
                    None => Val::Err,
                }
            }
            Val::Var { id, fresh } => {
                if self.ty(id).dtype == to {
                    Val::Var { id, fresh }
                } else {
                    Val::Var { id: self.cast_to(id, to), fresh: true }
                }
            }
            other => {
                let d = self.describe(&other);
                self.diags.error(sp, format!("cannot convert {d} to {to}"));
                Val::Err
            }
        }
    }

    fn unary(&mut self, op: UnaryKind, v: Val, sp: Sp) -> Val {
        match (op, v) {
            (_, Val::Err) => Val::Err,
            (UnaryKind::Neg, Val::Weak(Weak::Float(f))) => Val::Weak(Weak::Float(-f)),
            (UnaryKind::Neg, Val::Weak(Weak::Int(ConstExpr::Lit(v)))) => {
                Val::Weak(Weak::Int(ConstExpr::Lit(-v)))
            }
            (UnaryKind::Neg, Val::Weak(Weak::Int(ce))) => Val::Weak(Weak::Int(ConstExpr::Neg(Box::new(ce)))),
            (op, v) => {
                let what = if op == UnaryKind::Neg { "`-`" } else { "`!`" };
                let Some(id) = self.strong(v, sp, &format!("the operand of {what}")) else { return Val::Err };
                let id = self.widen(id);
                let ty = self.ty(id);
                let ok = match op {
                    UnaryKind::Neg => ty.dtype != DType::Bool,
                    UnaryKind::Not => !ty.dtype.is_float(),
                };
                if !ok {
                    let help = if op == UnaryKind::Neg {
                        "negate numbers; for bools use `!`"
                    } else {
                        "`!` is logical not on bools and bitwise not on integers"
                    };
                    self.diags.error_help(
                        sp,
                        format!("{what} cannot be applied to {}", self.describe_ty(&ty)),
                        help,
                    );
                    return Val::Err;
                }
                let uop = if op == UnaryKind::Neg { UnaryOp::Neg } else { UnaryOp::Not };
                self.fresh(ty, Expr::Unary(uop, id))
            }
        }
    }

    /// Brings two operands to one compute dtype: weak values adapt, storage types widen.
    /// Returns the vars and their common dtype.
    fn unify(&mut self, a: Val, b: Val, op_sp: Sp, asp: Sp, bsp: Sp, what: &str) -> Option<(VarId, VarId)> {
        let (a, b) = match (a, b) {
            (Val::Err, _) | (_, Val::Err) => return None,
            (Val::Weak(wa), Val::Weak(wb)) => {
                let d = if matches!(wa, Weak::Float(_)) || matches!(wb, Weak::Float(_)) {
                    DType::F32
                } else {
                    DType::I32
                };
                (self.materialize(&wa, d, asp)?, self.materialize(&wb, d, bsp)?)
            }
            (Val::Weak(wa), b) => {
                let b = self.strong(b, bsp, what)?;
                let b = self.widen(b);
                let d = self.ty(b).dtype;
                (self.weak_operand(&wa, d, asp, b, what)?, b)
            }
            (a, Val::Weak(wb)) => {
                let a = self.strong(a, asp, what)?;
                let a = self.widen(a);
                let d = self.ty(a).dtype;
                (a, self.weak_operand(&wb, d, bsp, a, what)?)
            }
            (a, b) => {
                let a = self.strong(a, asp, what);
                let b = self.strong(b, bsp, what);
                let (a, b) = (a?, b?);
                (self.widen(a), self.widen(b))
            }
        };
        let (ta, tb) = (self.ty(a), self.ty(b));
        if ta.dtype != tb.dtype {
            let target = if tb.dtype.is_float() { tb.dtype } else { ta.dtype };
            self.diags.error_help(
                op_sp,
                format!(
                    "mismatched types in {what}: {} and {}",
                    self.describe_ty(&ta),
                    self.describe_ty(&tb)
                ),
                format!("convert one operand explicitly, e.g. `(..).to({target})`"),
            );
            return None;
        }
        Some((a, b))
    }

    /// A weak operand next to a typed one of dtype `d`.
    fn weak_operand(&mut self, w: &Weak, d: DType, sp: Sp, other: VarId, what: &str) -> Option<VarId> {
        if matches!(w, Weak::Float(_)) && !d.is_float() {
            let t = self.describe_ty(&self.ty(other));
            self.diags.error_help(
                sp,
                format!("mismatched types in {what}: a float literal next to {t}"),
                format!("convert the {d} operand: `(..).to(f32)`"),
            );
            return None;
        }
        if d == DType::Bool {
            self.diags.error(sp, format!("mismatched types in {what}: a number next to a bool"));
            return None;
        }
        self.materialize(w, d, sp)
    }

    fn binary(&mut self, op: BinaryKind, a: Val, b: Val, op_sp: Sp, asp: Sp, bsp: Sp) -> Val {
        self.binary_as(op, op_symbol(op), a, b, op_sp, asp, bsp)
    }

    /// `binary`, with the operator spelled `sym` in messages (`+=` for a compound assignment).
    #[allow(clippy::too_many_arguments)]
    fn binary_as(&mut self, op: BinaryKind, sym: &str, a: Val, b: Val, op_sp: Sp, asp: Sp, bsp: Sp) -> Val {
        let bop = match op {
            BinaryKind::Op(o) => o,
            BinaryKind::LogicalAnd => BinaryOp::And,
            BinaryKind::LogicalOr => BinaryOp::Or,
        };
        if matches!(a, Val::Err) || matches!(b, Val::Err) {
            return Val::Err;
        }
        if matches!(a, Val::Ptr { .. }) || matches!(b, Val::Ptr { .. }) {
            return self.pointer_arith(bop, sym, a, b, op_sp, asp, bsp);
        }
        // Constants fold and stay weak where the result can still adapt.
        if let (Val::Weak(wa), Val::Weak(wb)) = (&a, &b) {
            if op == BinaryKind::Op(bop) {
                if let Some(folded) = self.fold(bop, wa, wb, op_sp) {
                    return folded;
                }
            }
        }
        let what = format!("`{sym}`");
        let Some((x, y)) = self.unify(a, b, op_sp, asp, bsp, &what) else { return Val::Err };
        let dtype = self.ty(x).dtype;
        let logical = matches!(op, BinaryKind::LogicalAnd | BinaryKind::LogicalOr);
        let problem = if logical && dtype != DType::Bool {
            Some(("`&&` and `||` take bools", "compare first, or use `&`/`|` on integers"))
        } else if bop.is_bitwise() && dtype.is_float() {
            Some(("bitwise operators take bools or integers", "compare first, e.g. `x > 0.0`"))
        } else if !bop.is_bitwise() && !matches!(bop, BinaryOp::Eq | BinaryOp::Ne) && dtype == DType::Bool {
            Some((
                "arithmetic and ordering are not defined on bools",
                "use `&`, `|`, `^`, `!` for logic, or `.to(i32)`",
            ))
        } else {
            None
        };
        if let Some((msg, help)) = problem {
            self.diags.error_help(
                op_sp,
                format!("`{sym}` cannot be applied to {}: {msg}", self.describe_ty(&self.ty(x))),
                help,
            );
            return Val::Err;
        }
        let mut ops = [x, y];
        let Some(shape) = self.broadcast_operands(&mut ops, op_sp) else { return Val::Err };
        let [x, y] = ops;
        let rdtype = if bop.is_comparison() { DType::Bool } else { dtype };
        self.fresh(Ty { dtype: rdtype, shape }, Expr::Binary(bop, x, y))
    }

    /// Folds an operation on two weak values; `None` to compute it at run time instead.
    fn fold(&mut self, op: BinaryOp, a: &Weak, b: &Weak, sp: Sp) -> Option<Val> {
        match (a, b) {
            (Weak::Int(ConstExpr::Lit(x)), Weak::Int(ConstExpr::Lit(y))) => {
                let (x, y) = (*x, *y);
                let r = match op {
                    BinaryOp::Add => x.checked_add(y),
                    BinaryOp::Sub => x.checked_sub(y),
                    BinaryOp::Mul => x.checked_mul(y),
                    BinaryOp::Div | BinaryOp::Rem if y == 0 => {
                        self.diags.error(sp, "division by zero in a constant expression");
                        return Some(Val::Err);
                    }
                    BinaryOp::Div => x.checked_div(y),
                    BinaryOp::Rem => x.checked_rem(y),
                    BinaryOp::Max => Some(x.max(y)),
                    BinaryOp::Min => Some(x.min(y)),
                    BinaryOp::And => Some(x & y),
                    BinaryOp::Or => Some(x | y),
                    BinaryOp::Xor => Some(x ^ y),
                    _ => return None,
                };
                match r {
                    Some(v) if v.unsigned_abs() <= u128::from(u64::MAX) => {
                        Some(Val::Weak(Weak::Int(ConstExpr::Lit(v))))
                    }
                    _ => {
                        self.diags.error(sp, "overflow in a constant expression");
                        Some(Val::Err)
                    }
                }
            }
            (Weak::Int(x), Weak::Int(y))
                if matches!(
                    op,
                    BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem
                ) =>
            {
                Some(Val::Weak(Weak::Int(ConstExpr::Bin(op, Box::new(x.clone()), Box::new(y.clone())))))
            }
            (Weak::Int(_), Weak::Int(_)) => None,
            _ => {
                let as_f = |w: &Weak| match w {
                    Weak::Float(f) => Some(*f),
                    Weak::Int(ConstExpr::Lit(v)) => Some(*v as f64),
                    Weak::Int(_) => None,
                };
                let (x, y) = (as_f(a)?, as_f(b)?);
                let r = match op {
                    BinaryOp::Add => x + y,
                    BinaryOp::Sub => x - y,
                    BinaryOp::Mul => x * y,
                    BinaryOp::Div => x / y,
                    BinaryOp::Rem => x % y,
                    BinaryOp::Max => x.max(y),
                    BinaryOp::Min => x.min(y),
                    _ => return None,
                };
                Some(Val::Weak(Weak::Float(r)))
            }
        }
    }

    /// `ptr + offset`, `offset + ptr`, `ptr - offset`: the offset accumulates; nothing is emitted
    /// until a load or store uses the pointer. `sym` spells the operator in messages (`+=`).
    #[allow(clippy::too_many_arguments)]
    fn pointer_arith(&mut self, op: BinaryOp, sym: &str, a: Val, b: Val, op_sp: Sp, asp: Sp, bsp: Sp) -> Val {
        let (param, offset, delta, dsp, negate) = match (op, a, b) {
            (BinaryOp::Add, Val::Ptr { param, offset }, d) => (param, offset, d, bsp, false),
            (BinaryOp::Add, d, Val::Ptr { param, offset }) if !matches!(d, Val::Ptr { .. }) => {
                (param, offset, d, asp, false)
            }
            (BinaryOp::Sub, Val::Ptr { param, offset }, d) if !matches!(d, Val::Ptr { .. }) => {
                (param, offset, d, bsp, true)
            }
            (op, a, b) => {
                let both = matches!(a, Val::Ptr { .. }) && matches!(b, Val::Ptr { .. });
                let (msg, help) = if both {
                    (
                        "two pointers cannot be combined".to_string(),
                        "add an integer offset to one pointer: `x + offs`".to_string(),
                    )
                } else {
                    (
                        format!("`{}` is not defined on pointers", op_symbol(BinaryKind::Op(op))),
                        "pointers support `ptr + offset` and `ptr - offset`; read values with `load(ptr, mask)`".to_string(),
                    )
                };
                self.diags.error_help(op_sp, msg, help);
                return Val::Err;
            }
        };
        // The offset must be an integer.
        match &delta {
            Val::Err => return Val::Err,
            Val::Weak(Weak::Int(_)) => {}
            Val::Var { id, .. } if self.ty(*id).dtype.compute().is_int() => {}
            other => {
                let d = self.describe(other);
                self.diags.error_help(
                    dsp,
                    format!("pointer offsets must be integers, found {d}"),
                    "offsets count elements; convert with `.to(i32)`",
                );
                return Val::Err;
            }
        }
        // Offsets are carried in their compute type (an i8/u8 load widens to i32), so a pointer
        // variable's offsets take any integer advance of that type.
        let delta = match delta {
            Val::Var { id, fresh } if !self.ty(id).dtype.is_compute() => {
                let wide = self.widen(id);
                Val::Var { id: wide, fresh: fresh || wide != id }
            }
            other => other,
        };
        let new_offset = match offset {
            None if negate => self.unary(UnaryKind::Neg, delta, dsp),
            None => delta,
            Some(o) => {
                let kind = BinaryKind::Op(if negate { BinaryOp::Sub } else { BinaryOp::Add });
                self.binary_as(kind, sym, *o, delta, op_sp, asp, dsp)
            }
        };
        if matches!(new_offset, Val::Err) {
            return Val::Err;
        }
        Val::Ptr { param, offset: Some(Box::new(new_offset)) }
    }

    // ---- calls --------------------------------------------------------------------------------

    fn call(&mut self, func: &Ident, args: &[ast::Expr], method: bool, sp: Sp) -> Val {
        let name = func.to_string();
        let fsp = Sp::single(func.span());
        let vals: Vec<Val> = args.iter().map(|a| self.expr(a)).collect();
        if method && METHODLESS.contains(&name.as_str()) {
            // `0.program_id()`, `8.arange(16)`: these take no value to call a method on.
            self.diags.error_help(
                fsp,
                format!("`{name}` is not a method"),
                format!("call it as a function: `{name}(..)`"),
            );
            return Val::Err;
        }
        let Some(&(_, lo, hi, sig)) = BUILTINS.iter().find(|b| b.0 == name) else {
            if method {
                // Any function whose first argument is a value can be written as a method, plus `.to(T)`.
                let methods = BUILTINS.iter().filter(|b| !METHODLESS.contains(&b.0)).map(|b| b.0);
                let help = match closest(&name, methods.clone().chain(["to"])) {
                    Some(c) => format!("did you mean `.{c}()`?"),
                    None => format!(
                        "the methods are `.to(T)` and the tile language's functions on their first argument: {}",
                        methods.map(|m| format!(".{m}()")).collect::<Vec<_>>().join(" ")
                    ),
                };
                self.diags.error_help(fsp, format!("unknown method `.{name}()`"), help);
                return Val::Err;
            }
            let help = match closest(&name, BUILTINS.iter().map(|b| b.0)) {
                Some(c) => format!("did you mean `{c}`?"),
                None if name == "where" => "the select function is `where_(cond, a, b)`".into(),
                None => format!(
                    "the tile language's functions are {}",
                    BUILTINS.iter().map(|b| b.0).collect::<Vec<_>>().join(", ")
                ),
            };
            self.diags.error_help(fsp, format!("unknown function `{name}`"), help);
            return Val::Err;
        };
        if vals.len() < lo || vals.len() > hi {
            // Method sugar counts the receiver as the first argument; say so in its own terms.
            let (shown, lo, hi, found) = if method {
                let rest = sig.split_once(", ").map_or("", |(_, r)| r);
                (rest, lo.saturating_sub(1), hi.saturating_sub(1), vals.len().saturating_sub(1))
            } else {
                (sig, lo, hi, vals.len())
            };
            let count = if lo == hi { format!("{lo}") } else { format!("{lo} to {hi}") };
            let plural = if hi == 1 { "argument" } else { "arguments" };
            let msg = if method {
                let first = sig.split(", ").next().unwrap_or("x");
                if hi == 0 {
                    format!("`.{name}()` takes no arguments besides its receiver, found {found}")
                } else {
                    format!("`.{name}(..)` takes {count} {plural} ({shown}) besides its receiver ({first}), found {found}")
                }
            } else {
                format!("`{name}` takes {count} {plural} ({shown}), found {found}")
            };
            match name.as_str() {
                "max" | "min" if vals.len() == 2 => {
                    let help = if method {
                        format!("`.{name}()` reduces one tile; for the element-wise {name} of two values use `a.{name}imum(b)`")
                    } else {
                        format!("`{name}` reduces one tile; for the element-wise {name} of two values use `{name}imum(a, b)`")
                    };
                    self.diags.error_help(fsp, msg, help)
                }
                _ => self.diags.error(fsp, msg),
            }
            return Val::Err;
        }
        let sps: Vec<Sp> = args.iter().map(|a| a.sp).collect();
        let mut vals = vals.into_iter();
        let mut arg = move || vals.next().unwrap_or(Val::Err);
        let asp = |i: usize| sps.get(i).copied().unwrap_or(fsp);
        match name.as_str() {
            "program_id" | "num_programs" => {
                let axis = match arg() {
                    Val::Err => return Val::Err,
                    Val::Weak(Weak::Int(ConstExpr::Lit(a))) if (0..=2).contains(&a) => a as u8,
                    _ => {
                        self.diags.error_help(
                            asp(0),
                            format!("the axis of `{name}` must be the literal 0, 1 or 2"),
                            "grids have up to three axes",
                        );
                        return Val::Err;
                    }
                };
                let expr = if name == "program_id" { Expr::ProgramId(axis) } else { Expr::NumPrograms(axis) };
                self.fresh(Ty::scalar(DType::I32), expr)
            }
            "arange" => self.arange(arg(), arg(), asp(0), asp(1), sp),
            "zeros" => {
                let Some(dims) = self.const_shape(&arg(), asp(0), "the length of `zeros`") else {
                    return Val::Err;
                };
                let Some(shape) = Shape::from_dims(&dims) else { return Val::Err };
                let zero = self.emit(Ty::scalar(DType::F32), Expr::Lit(Literal::Float(0.0)));
                self.fresh(Ty { dtype: DType::F32, shape }, Expr::Splat(zero))
            }
            "full" => {
                let dims = self.const_shape(&arg(), asp(0), "the length of `full`");
                let v = self.strong(arg(), asp(1), "the value of `full`");
                let (Some(dims), Some(v)) = (dims, v) else { return Val::Err };
                let Some(shape) = Shape::from_dims(&dims) else { return Val::Err };
                let v = self.widen(v);
                let ty = self.ty(v);
                if !ty.shape.is_scalar() {
                    self.diags.error(
                        asp(1),
                        format!("the value of `full` must be a scalar, found {}", self.describe_ty(&ty)),
                    );
                    return Val::Err;
                }
                self.fresh(Ty { dtype: ty.dtype, shape }, Expr::Splat(v))
            }
            "load" => {
                let ptr = arg();
                let mask = if args.len() > 1 { Some((arg(), asp(1))) } else { None };
                let other = if args.len() > 2 { Some((arg(), asp(2))) } else { None };
                self.load(ptr, asp(0), mask, other)
            }
            "store" => {
                let ptr = arg();
                let value = arg();
                let mask = if args.len() > 2 { Some((arg(), asp(2))) } else { None };
                self.store(ptr, asp(0), value, asp(1), mask)
            }
            "where_" => {
                let c = arg();
                let cond = self.strong(c, asp(0), "the condition of `where_`");
                let (a, b) = (arg(), arg());
                let ab = self.unify(a, b, asp(1).to(asp(2)), asp(1), asp(2), "the branches of `where_`");
                let (Some(cond), Some((a, b))) = (cond, ab) else { return Val::Err };
                let cty = self.ty(cond);
                if cty.dtype != DType::Bool {
                    self.diags.error_help(
                        asp(0),
                        format!("the condition of `where_` must be bool, found {}", self.describe_ty(&cty)),
                        "compare it: `x > 0`",
                    );
                    return Val::Err;
                }
                let mut ops = [cond, a, b];
                let Some(shape) = self.broadcast_operands(&mut ops, sp) else { return Val::Err };
                let [cond, a, b] = ops;
                let dtype = self.ty(a).dtype;
                self.fresh(Ty { dtype, shape }, Expr::Where(cond, a, b))
            }
            "maximum" | "minimum" => {
                let op = if name == "maximum" { BinaryOp::Max } else { BinaryOp::Min };
                let (a, b) = (arg(), arg());
                if let (Val::Weak(wa), Val::Weak(wb)) = (&a, &b) {
                    if let Some(v) = self.fold(op, wa, wb, fsp) {
                        return v;
                    }
                }
                let Some((x, y)) = self.unify(a, b, fsp, asp(0), asp(1), &format!("`{name}`")) else {
                    return Val::Err;
                };
                let dtype = self.ty(x).dtype;
                if dtype == DType::Bool {
                    self.diags.error(fsp, format!("`{name}` takes numbers, found bools"));
                    return Val::Err;
                }
                let mut ops = [x, y];
                let Some(shape) = self.broadcast_operands(&mut ops, fsp) else { return Val::Err };
                let [x, y] = ops;
                self.fresh(Ty { dtype, shape }, Expr::Binary(op, x, y))
            }
            "sum" | "max" | "min" | "argmax" | "argmin" => {
                let op = match name.as_str() {
                    "sum" => Reduction::Reduce(ReduceOp::Sum),
                    "max" => Reduction::Reduce(ReduceOp::Max),
                    "min" => Reduction::Reduce(ReduceOp::Min),
                    "argmax" => Reduction::Arg(ArgOp::Max),
                    _ => Reduction::Arg(ArgOp::Min),
                };
                let tile = arg();
                let axis = if args.len() > 1 { Some((arg(), asp(1))) } else { None };
                self.reduce(op, &name, tile, asp(0), axis, method)
            }
            "expand_dims" => {
                let x = arg();
                self.expand_dims(x, asp(0), arg(), asp(1))
            }
            "broadcast_to" | "reshape" => {
                let x = arg();
                let dims = self.const_shape(&arg(), asp(1), &format!("the shape of `{name}`"));
                self.reshape_or_broadcast(&name, x, asp(0), dims, sp)
            }
            "trans" => self.trans(arg(), asp(0)),
            "cdiv" => {
                let (a, b) = (arg(), arg());
                for (v, i) in [(&a, 0), (&b, 1)] {
                    let is_int = match v {
                        Val::Weak(Weak::Int(_)) | Val::Err => true,
                        Val::Var { id, .. } => self.ty(*id).dtype.compute().is_int(),
                        _ => false,
                    };
                    if !is_int {
                        let d = self.describe(v);
                        self.diags.error_help(
                            asp(i),
                            format!("`cdiv` takes integers, found {d}"),
                            "for floats use `ceil(a / b)`",
                        );
                        return Val::Err;
                    }
                }
                // cdiv(a, b) = (a + b - 1) / b
                let sum = self.binary(BinaryKind::Op(BinaryOp::Add), a, b.clone(), fsp, asp(0), asp(1));
                let one = Val::Weak(Weak::Int(ConstExpr::Lit(1)));
                let minus = self.binary(BinaryKind::Op(BinaryOp::Sub), sum, one, fsp, asp(0), asp(1));
                self.binary(BinaryKind::Op(BinaryOp::Div), minus, b, fsp, asp(0), asp(1))
            }
            "rand" => self.rand(arg(), asp(0), arg(), asp(1)),
            _ => {
                let op = match UnaryOp::MATH.iter().find(|o| o.name() == name) {
                    Some(op) => *op,
                    None => UnaryOp::Abs,
                };
                self.math(op, &name, arg(), asp(0))
            }
        }
    }

    fn arange(&mut self, start: Val, end: Val, ssp: Sp, esp: Sp, sp: Sp) -> Val {
        let s = match start {
            Val::Err => return Val::Err,
            Val::Weak(Weak::Int(ConstExpr::Lit(s))) => s,
            other => {
                let d = self.describe(&other);
                self.diags.error_help(
                    ssp,
                    format!("the start of `arange` must be an integer literal, found {d}"),
                    "shift the tile instead: `start + arange(0, BLOCK)`",
                );
                return Val::Err;
            }
        };
        let len = match &end {
            Val::Err => return Val::Err,
            Val::Weak(Weak::Int(ConstExpr::Lit(e))) => {
                let n = e - s;
                if n <= 0 {
                    self.diags.error(
                        sp,
                        format!("`arange({s}, {e})` is empty: the end must be greater than the start"),
                    );
                    return Val::Err;
                }
                if !(n as u128).is_power_of_two() || n > 1 << 30 {
                    // Point at the end when it alone sets the length.
                    let at = if s == 0 { esp } else { sp };
                    let up = (n as u128).checked_next_power_of_two().filter(|p| *p <= 1 << 30);
                    let help = match up {
                        Some(p) => format!(
                            "tile lengths are powers of two: use `arange({s}, {})` and mask the extra lanes, e.g. `offs < n`",
                            s + p as i128
                        ),
                        None => "tile lengths are powers of two up to 2^30".to_string(),
                    };
                    self.diags.error_help(
                        at,
                        format!("the length of `arange({s}, {e})` is {n}, which is not a power of two"),
                        help,
                    );
                    return Val::Err;
                }
                self.const_len(&Val::Weak(Weak::Int(ConstExpr::Lit(n))), sp, "the length of `arange`")
            }
            Val::Weak(Weak::Int(_)) if s == 0 => self.const_len(&end, esp, "the end of `arange`"),
            Val::Weak(Weak::Int(_)) => {
                self.diags.error_help(
                    ssp,
                    "`arange` with a symbolic end needs the start 0",
                    "shift the tile instead: `start + arange(0, BLOCK)`",
                );
                None
            }
            other => {
                let d = self.describe(other);
                self.diags.error_help(
                    esp,
                    format!("the end of `arange` must be a compile-time constant, found {d}"),
                    "tile lengths are compile-time constants: use a const generic like `BLOCK` and mask with `offs < n`",
                );
                None
            }
        };
        let Some(len) = len else { return Val::Err };
        let in_i32 = |v: i128| i32::try_from(v).is_ok();
        let last_ok = len.consts.is_empty() && in_i32(s + (1i128 << len.log2.clamp(0, 62)) - 1);
        if !in_i32(s) || (len.consts.is_empty() && !last_ok) {
            self.diags.error(sp, "`arange` values must fit in i32");
            return Val::Err;
        }
        self.fresh(Ty::tile(DType::I32, len), Expr::Arange { start: s as i64 })
    }

    /// The pointer argument of `load`/`store` as `(param, offset var)`.
    fn pointer(&mut self, ptr: Val, sp: Sp, func: &str) -> Option<(u32, VarId)> {
        match ptr {
            Val::Err => None,
            Val::Ptr { param, offset } => {
                let off = match offset.map(|b| *b) {
                    None => self.emit(Ty::scalar(DType::I32), Expr::Lit(Literal::Int(0))),
                    Some(v) => {
                        let id = self.strong(v, sp, "a pointer offset")?;
                        self.widen(id)
                    }
                };
                Some((param, off))
            }
            other => {
                let d = self.describe(&other);
                self.diags.error_help(
                    sp,
                    format!("`{func}` expects a pointer, found {d}"),
                    "pass a pointer parameter plus offsets, like `x + offs`",
                );
                None
            }
        }
    }

    /// Checks that a mask is bool (reporting it otherwise), giving its var and span.
    fn bool_mask(&mut self, m: Option<(Val, Sp)>, func: &str) -> Result<Option<(VarId, Sp)>, ()> {
        let Some((v, sp)) = m else { return Ok(None) };
        let id = self.strong(v, sp, &format!("the mask of `{func}`")).ok_or(())?;
        let ty = self.ty(id);
        if ty.dtype != DType::Bool {
            self.diags.error_help(
                sp,
                format!("the mask of `{func}` must be bool, found {}", self.describe_ty(&ty)),
                "compare the offsets with the bound: `offs < n`",
            );
            return Err(());
        }
        Ok(Some((id, sp)))
    }

    /// A mask: bool, scalar or a tile of the offset's length.
    fn mask(
        &mut self,
        m: Option<(Val, Sp)>,
        param: u32,
        offset: VarId,
        func: &str,
    ) -> Result<Option<VarId>, ()> {
        let Some((id, sp)) = self.bool_mask(m, func)? else { return Ok(None) };
        self.fits_offset(id, param, offset, sp, &format!("the mask of `{func}`"))?;
        Ok(Some(id))
    }

    /// A mask whose shape is not compared with the offsets (they are already reported).
    fn mask_dtype_only(&mut self, m: Option<(Val, Sp)>, func: &str) -> Result<Option<VarId>, ()> {
        match self.bool_mask(m, func)? {
            None => Ok(None),
            Some(_) => Err(()),
        }
    }

    /// A mask/value/other must be a scalar or a tile that broadcasts with the offsets.
    fn fits_offset(&mut self, id: VarId, param: u32, offset: VarId, sp: Sp, what: &str) -> Result<(), ()> {
        let (ty, oty) = (self.ty(id), self.ty(offset));
        match (&ty.shape, &oty.shape) {
            (Shape::Scalar, _) => Ok(()),
            (_, Shape::Scalar) => {
                self.diags.error_help(
                    sp,
                    format!("{what} is {}, but the pointer offset is a scalar", self.describe_ty(&ty)),
                    format!("add a tile of offsets to the pointer: `{} + offs`", self.param_name(param)),
                );
                Err(())
            }
            // The same rule as element-wise operations: a `[1]` mask or offset tile broadcasts.
            (a, b) if Self::broadcast_shape(a, b).is_some() => Ok(()),
            (Shape::Tile(a), Shape::Tile(b)) => {
                self.diags.error(
                    sp,
                    format!(
                        "tile lengths differ: {what} has length {}, the offsets {}",
                        self.len_text(a),
                        self.len_text(b)
                    ),
                );
                Err(())
            }
            (a, b) => {
                let (x, y) = (self.shape_text(a), self.shape_text(b));
                self.diags.error_help(
                    sp,
                    format!("cannot broadcast {what} of shape {x} with the offsets' shape {y}"),
                    "dims aligned at the right must be equal or 1",
                );
                Err(())
            }
        }
    }

    /// A value written to (or substituted for) elements of type `elem`: its compute type must be
    /// `elem`'s; the narrowing cast is inserted here.
    fn element_value(&mut self, v: Val, elem: DType, sp: Sp, what: &str) -> Option<VarId> {
        let id = match v {
            Val::Weak(w) => self.materialize(&w, elem.compute(), sp)?,
            other => {
                let id = self.strong(other, sp, what)?;
                self.widen(id)
            }
        };
        let ty = self.ty(id);
        if ty.dtype != elem.compute() {
            self.diags.error_help(
                sp,
                format!("mismatched types: {what} must be {elem}, found {}", self.describe_ty(&ty)),
                format!("convert it: `(..).to({elem})`"),
            );
            return None;
        }
        Some(self.cast_to(id, elem))
    }

    fn load(&mut self, ptr: Val, psp: Sp, mask: Option<(Val, Sp)>, other: Option<(Val, Sp)>) -> Val {
        let target = self.pointer(ptr, psp, "load");
        let Some((param, offset)) = target else {
            return Val::Err;
        };
        let (elem, _) = self.param_elem(param);
        let mask = self.mask(mask, param, offset, "load");
        let other = match other {
            None => Ok(None),
            Some((v, sp)) => match self.element_value(v, elem, sp, "the `other` value of `load`") {
                Some(id) => {
                    self.fits_offset(id, param, offset, sp, "the `other` value of `load`").map(|()| Some(id))
                }
                None => Err(()),
            },
        };
        let (Ok(mask), Ok(other)) = (mask, other) else { return Val::Err };
        // Offsets, mask and `other` broadcast together (a `[1, N]` row of offsets under an
        // `[M, N]` mask loads `M` copies).
        let mut ids: Vec<VarId> = [Some(offset), mask, other].into_iter().flatten().collect();
        let Some(shape) = self.broadcast_operands(&mut ids, psp) else { return Val::Err };
        let mut ids = ids.into_iter();
        let offset = ids.next().unwrap_or(offset);
        let mask = mask.and_then(|_| ids.next());
        let other = other.and_then(|_| ids.next());
        self.fresh(Ty { dtype: elem, shape }, Expr::Load { param, offset, mask, other })
    }

    fn store(&mut self, ptr: Val, psp: Sp, value: Val, vsp: Sp, mask: Option<(Val, Sp)>) -> Val {
        let target = self.pointer(ptr, psp, "store");
        let Some((param, offset)) = target else {
            return Val::Unit;
        };
        let (elem, mutable) = self.param_elem(param);
        let name = self.param_name(param);
        if !mutable {
            self.diags.error_help(
                psp,
                format!("cannot store through `{name}`: it is a `*const {elem}` parameter"),
                format!("declare it writable: `{name}: *mut {elem}`"),
            );
        }
        let value = self.element_value(value, elem, vsp, &format!("the value stored into `{name}`"));
        let value_fits = value.map(|v| self.fits_offset(v, param, offset, vsp, "the stored value"));
        // A tile stored through a scalar pointer is one mistake: the mask's shape says nothing new.
        let mask = if value_fits == Some(Err(())) {
            self.mask_dtype_only(mask, "store")
        } else {
            self.mask(mask, param, offset, "store")
        };
        let value = value.filter(|_| value_fits == Some(Ok(())));
        if let (true, Some(value), Ok(mask)) = (mutable, value, mask) {
            let mut ids: Vec<VarId> = [Some(offset), Some(value), mask].into_iter().flatten().collect();
            if self.broadcast_operands(&mut ids, psp).is_some() {
                let (offset, value, mask) = (ids[0], ids[1], mask.map(|_| ids[2]));
                self.out.push(Stmt::Store { param, offset, value, mask });
            }
        }
        Val::Unit
    }

    /// `sum/max/min/argmax/argmin(x)` (every lane, to a scalar) or `(x, axis)`.
    /// `method`: written `t.max(..)` (for the hint's spelling).
    fn reduce(
        &mut self,
        op: Reduction,
        name: &str,
        v: Val,
        sp: Sp,
        axis: Option<(Val, Sp)>,
        method: bool,
    ) -> Val {
        // `max(a, b)` meant `maximum(a, b)`: say so before anything about `a`.
        if let Some((other, asp)) = &axis {
            if !matches!(other, Val::Err | Val::Weak(Weak::Int(ConstExpr::Lit(_)))) {
                let d = self.describe(other);
                let help = match op {
                    Reduction::Reduce(ReduceOp::Max | ReduceOp::Min) if method => format!(
                        "`.{name}()` reduces one tile; for the element-wise {name} of two values use `a.{name}imum(b)`"
                    ),
                    Reduction::Reduce(ReduceOp::Max | ReduceOp::Min) => format!(
                        "`{name}` reduces one tile; for the element-wise {name} of two values use `{name}imum(a, b)`"
                    ),
                    _ => "write the axis as a literal: `x.sum(1)` reduces each row".to_string(),
                };
                self.diags.error_help(
                    *asp,
                    format!("the axis of `{name}` must be the literal 0 or 1, found {d}"),
                    help,
                );
                return Val::Err;
            }
        }
        let id = match v {
            Val::Err => return Val::Err,
            Val::Var { id, .. } if !self.ty(id).shape.is_scalar() => id,
            other => {
                let d = self.describe(&other);
                let help = if axis.is_some() {
                    "a scalar has no axes to reduce along"
                } else {
                    "a scalar needs no reduction"
                };
                self.diags.error_help(sp, format!("`{name}` reduces a tile, found {d}"), help);
                return Val::Err;
            }
        };
        let rank = self.ty(id).shape.rank();
        let axis = match axis {
            None => None,
            Some((Val::Err, _)) => return Val::Err,
            Some((Val::Weak(Weak::Int(ConstExpr::Lit(a))), _)) if (0..rank as i128).contains(&a) => {
                Some(a as u8)
            }
            Some((Val::Weak(Weak::Int(ConstExpr::Lit(a))), asp)) => {
                let t = self.describe_ty(&self.ty(id));
                self.diags.error_help(
                    asp,
                    format!(
                        "axis {a} is out of range: `{name}` of {t} takes axis 0{}",
                        if rank == 2 { " or 1" } else { "" }
                    ),
                    "axis 0 runs down the rows (`[M, N]` → `[N]`), axis 1 along each row (`[M, N]` → `[M]`)",
                );
                return Val::Err;
            }
            Some(_) => return Val::Err,
        };
        let id = self.widen(id);
        let ty = self.ty(id);
        if ty.dtype == DType::Bool {
            self.diags.error_help(
                sp,
                format!("`{name}` cannot reduce a bool tile"),
                "convert it first: `(..).to(i32)`",
            );
            return Val::Err;
        }
        // Along the one axis of a 1-D tile: every lane, as without an axis.
        let axis = axis.filter(|_| rank == 2);
        let kept = match (&ty.shape, axis) {
            (Shape::Tile2(_, cols), Some(0)) => Shape::Tile(cols.clone()),
            (Shape::Tile2(rows, _), Some(_)) => Shape::Tile(rows.clone()),
            _ => Shape::Scalar,
        };
        match (op, axis) {
            (Reduction::Reduce(op), None) => self.fresh(Ty::scalar(ty.dtype), Expr::Reduce(op, id)),
            (Reduction::Reduce(op), Some(axis)) => {
                self.fresh(Ty { dtype: ty.dtype, shape: kept }, Expr::ReduceAxis { op, axis, src: id })
            }
            (Reduction::Arg(op), axis) => {
                self.fresh(Ty { dtype: DType::I32, shape: kept }, Expr::ArgReduce { op, axis, src: id })
            }
        }
    }

    /// A tile argument of a shape function (`expand_dims`, `reshape`, `trans`, ...).
    fn tile_arg(&mut self, v: Val, sp: Sp, name: &str) -> Option<VarId> {
        match v {
            Val::Err => None,
            Val::Var { id, .. } if !self.ty(id).shape.is_scalar() => Some(id),
            other => {
                let d = self.describe(&other);
                self.diags.error_help(
                    sp,
                    format!("`{name}` takes a tile, found {d}"),
                    "a scalar broadcasts by itself; make a tile with `full([M, N], x)`",
                );
                None
            }
        }
    }

    /// `expand_dims(x, axis)`: a unit dim inserted before dim `axis` (Triton's `x[None, :]` is
    /// axis 0, `x[:, None]` axis 1). Lanes keep their order: a [`Expr::Reshape`].
    fn expand_dims(&mut self, x: Val, xsp: Sp, axis: Val, asp: Sp) -> Val {
        let Some(id) = self.tile_arg(x, xsp, "expand_dims") else { return Val::Err };
        let ty = self.ty(id);
        let Shape::Tile(len) = &ty.shape else {
            self.diags.error_help(
                xsp,
                format!("`expand_dims` of {} would make a 3-D tile", self.describe_ty(&ty)),
                "tiles have one or two dims",
            );
            return Val::Err;
        };
        let unit = Len::literal_log2(0);
        let shape = match axis {
            Val::Err => return Val::Err,
            Val::Weak(Weak::Int(ConstExpr::Lit(0))) => Shape::Tile2(unit, len.clone()),
            Val::Weak(Weak::Int(ConstExpr::Lit(1))) => Shape::Tile2(len.clone(), unit),
            other => {
                let d = self.describe(&other);
                self.diags.error_help(
                    asp,
                    format!("the axis of `expand_dims` of a 1-D tile must be the literal 0 or 1, found {d}"),
                    "`expand_dims(x, 0)` is `[1, N]` (Triton's `x[None, :]`), `expand_dims(x, 1)` is `[N, 1]` (`x[:, None]`)",
                );
                return Val::Err;
            }
        };
        self.fresh(Ty { dtype: ty.dtype, shape }, Expr::Reshape(id))
    }

    /// `reshape(x, shape)` (same lane count, row-major order kept) or `broadcast_to(x, shape)`.
    fn reshape_or_broadcast(&mut self, name: &str, x: Val, xsp: Sp, dims: Option<Vec<Len>>, sp: Sp) -> Val {
        let id = match x {
            // `broadcast_to` of a scalar is `full`.
            v @ (Val::Weak(_) | Val::Var { .. }) if name == "broadcast_to" => {
                self.strong(v, xsp, "the value of `broadcast_to`")
            }
            other => self.tile_arg(other, xsp, name),
        };
        let (Some(id), Some(dims)) = (id, dims) else { return Val::Err };
        let Some(shape) = Shape::from_dims(&dims) else { return Val::Err };
        let ty = self.ty(id);
        if name == "reshape" {
            let (from, to) = (ty.shape.len(), shape.len());
            if from != to {
                let (a, b) = (self.shape_text(&ty.shape), self.shape_text(&shape));
                self.diags.error_help(
                    sp,
                    format!("`reshape` keeps the number of lanes: {a} cannot become {b}"),
                    "the product of the dims must stay the same",
                );
                return Val::Err;
            }
            return self.fresh(Ty { dtype: ty.dtype, shape }, Expr::Reshape(id));
        }
        if ty.shape.is_scalar() {
            return self.fresh(Ty { dtype: ty.dtype, shape }, Expr::Splat(id));
        }
        if Self::broadcast_shape(&ty.shape, &shape).as_ref() != Some(&shape) {
            let (a, b) = (self.shape_text(&ty.shape), self.shape_text(&shape));
            self.diags.error_help(
                sp,
                format!("cannot broadcast {} of shape {a} to {b}", ty.dtype),
                "dims aligned at the right must be equal, or 1 in the source",
            );
            return Val::Err;
        }
        let id = self.broadcast_var(id, &shape);
        Val::Var { id, fresh: true }
    }

    /// `trans(x)` of a 2-D tile.
    fn trans(&mut self, x: Val, xsp: Sp) -> Val {
        let Some(id) = self.tile_arg(x, xsp, "trans") else { return Val::Err };
        let ty = self.ty(id);
        let Shape::Tile2(r, c) = &ty.shape else {
            self.diags.error_help(
                xsp,
                format!("`trans` takes a 2-D tile, found {}", self.describe_ty(&ty)),
                "make it 2-D first: `expand_dims(x, 0)` is `[1, N]`",
            );
            return Val::Err;
        };
        self.fresh(Ty::tile2(ty.dtype, c.clone(), r.clone()), Expr::Trans(id))
    }

    fn math(&mut self, op: UnaryOp, name: &str, v: Val, sp: Sp) -> Val {
        let id = match v {
            Val::Weak(w) => match self.materialize(&w, DType::F32, sp) {
                Some(id) => id,
                None => return Val::Err,
            },
            other => match self.strong(other, sp, &format!("the argument of `{name}`")) {
                Some(id) => self.widen(id),
                None => return Val::Err,
            },
        };
        let ty = self.ty(id);
        let ok = ty.dtype == DType::F32 || (op == UnaryOp::Abs && ty.dtype.is_signed_int());
        if !ok {
            let takes = if op == UnaryOp::Abs { "f32 or a signed integer" } else { "f32" };
            let help = if ty.dtype.is_int() && op != UnaryOp::Abs {
                "convert it first: `x.to(f32)`"
            } else if op == UnaryOp::Abs && ty.dtype.is_int() {
                "an unsigned value is its own absolute value"
            } else {
                "convert it first: `x.to(f32)`"
            };
            self.diags.error_help(
                sp,
                format!("`{name}` takes {takes}, found {}", self.describe_ty(&ty)),
                help,
            );
            return Val::Err;
        }
        self.fresh(ty, Expr::Unary(op, id))
    }

    fn rand(&mut self, seed: Val, ssp: Sp, offsets: Val, osp: Sp) -> Val {
        let seed = match seed {
            Val::Err => None,
            // A literal seed is a u64 (as the Philox key is), or i64 if negative.
            Val::Weak(Weak::Int(ce)) => {
                let d = if matches!(ce, ConstExpr::Lit(v) if v < 0) { DType::I64 } else { DType::U64 };
                self.materialize(&Weak::Int(ce), d, ssp)
            }
            other => {
                let id = self.strong(other, ssp, "the seed of `rand`");
                id.and_then(|id| {
                    let id = self.widen(id);
                    let ty = self.ty(id);
                    if ty.dtype.is_int() && ty.shape.is_scalar() {
                        Some(id)
                    } else {
                        self.diags.error_help(
                            ssp,
                            format!(
                                "the seed of `rand` must be an integer scalar, found {}",
                                self.describe_ty(&ty)
                            ),
                            "pass the seed as an integer parameter, like `seed: u64`",
                        );
                        None
                    }
                })
            }
        };
        let offset = match offsets {
            Val::Err => None,
            other => self.strong(other, osp, "the offsets of `rand`").and_then(|id| {
                let id = self.widen(id);
                let ty = self.ty(id);
                if ty.dtype.is_int() {
                    Some(id)
                } else {
                    self.diags.error_help(
                        osp,
                        format!("the offsets of `rand` must be integers, found {}", self.describe_ty(&ty)),
                        "use element offsets like `offs`",
                    );
                    None
                }
            }),
        };
        let (Some(seed), Some(offset)) = (seed, offset) else { return Val::Err };
        let shape = self.ty(offset).shape;
        self.fresh(Ty { dtype: DType::F32, shape }, Expr::Rand { seed, offset })
    }
}

/// What a reduction function computes.
#[derive(Clone, Copy)]
enum Reduction {
    Reduce(ReduceOp),
    Arg(ArgOp),
}

fn op_symbol(op: BinaryKind) -> &'static str {
    match op {
        BinaryKind::LogicalAnd => "&&",
        BinaryKind::LogicalOr => "||",
        BinaryKind::Op(op) => match op {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
            BinaryOp::Max => "maximum",
            BinaryOp::Min => "minimum",
            BinaryOp::And => "&",
            BinaryOp::Or => "|",
            BinaryOp::Xor => "^",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
        },
    }
}

/// An integer literal of `dtype`, if the value fits.
fn int_literal(v: i128, dtype: DType) -> Option<Literal> {
    let fits = match dtype {
        DType::I32 => i32::try_from(v).is_ok(),
        DType::U32 => u32::try_from(v).is_ok(),
        DType::I64 => i64::try_from(v).is_ok(),
        DType::U64 => u64::try_from(v).is_ok(),
        DType::I8 => i8::try_from(v).is_ok(),
        DType::U8 => u8::try_from(v).is_ok(),
        _ => false,
    };
    if !fits {
        return None;
    }
    match i64::try_from(v) {
        Ok(i) => Some(Literal::Int(i)),
        Err(_) => u64::try_from(v).ok().map(Literal::UInt),
    }
}

/// A tile length from a constant: products (and divisions by powers of two) of power-of-two
/// literals and const generics.
fn len_of(ce: &ConstExpr) -> Result<Len, String> {
    match ce {
        ConstExpr::Lit(v) => {
            if *v >= 1 && (*v as u128).is_power_of_two() && *v <= 1 << 30 {
                Ok(Len::literal_log2((*v as u128).trailing_zeros() as i32))
            } else {
                Err(format!("{v} is not a power of two"))
            }
        }
        ConstExpr::Generic(i) => Ok(Len::of_const(*i)),
        ConstExpr::Bin(BinaryOp::Mul, a, b) => in_range(len_of(a)?.mul(&len_of(b)?)),
        ConstExpr::Bin(BinaryOp::Div, a, b) => {
            let (num, den) = (len_of(a)?, len_of(b)?);
            if !den.consts.is_empty() {
                return Err("only division by a power-of-two literal is supported in a tile length".into());
            }
            in_range(Len { log2: num.log2 - den.log2, consts: num.consts })
        }
        _ => Err("not a product of power-of-two literals and const generics".into()),
    }
}

/// The literal factor of a tile length must stay a 64-bit power of two (or its reciprocal):
/// the emitter prints it as `1 << log2`.
fn in_range(len: Len) -> Result<Len, String> {
    if (-62..=62).contains(&len.log2) {
        Ok(len)
    } else {
        Err("this tile length is out of range (its literal factor is beyond 2^62 or below 2^-62)".into())
    }
}

/// A valid C identifier close to `name`, never clashing with the emitter's `fuse_` names.
fn c_safe(name: &str) -> String {
    let name = name.strip_prefix("r#").unwrap_or(name);
    let mut out = String::new();
    for ch in name.chars() {
        if ch.is_ascii_alphanumeric() || ch == '_' {
            out.push(ch);
        } else {
            out.push_str(&format!("u{:x}", ch as u32));
        }
    }
    if out.is_empty() || out == "_" || out.starts_with("__") || out.starts_with(|c: char| c.is_ascii_digit())
    {
        out = format!("v{out}");
    }
    if out.starts_with("fuse_") || out.starts_with("FUSE_") {
        out = format!("v_{out}");
    }
    out
}
