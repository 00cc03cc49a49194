//! The kernel as the user wrote it, reduced to the tile language: what `parse` produces and
//! `check` consumes. Every node keeps its source range ([`Sp`]) for diagnostics. Nothing here is
//! typed yet; names are not resolved.

use crate::diag::Sp;
use fuse_ir::{BinaryOp, DType};
use proc_macro2::Ident;

pub struct KernelFn {
    /// Outer attributes forwarded to the generated module (docs, cfg, lints).
    pub attrs: Vec<syn::Attribute>,
    pub vis: syn::Visibility,
    pub name: Ident,
    /// The `<...>` of the signature as written, for the launcher stub when something is wrong.
    pub generics: syn::Generics,
    pub consts: Vec<Ident>,
    pub params: Vec<ParamDecl>,
    pub body: Block,
}

/// A type parameter of a generic kernel, `T: Float`: the kernel is instantiated once for each
/// element type of its bound (each combination, for several).
pub struct TypeParam {
    pub name: Ident,
    /// `None` if the declaration was rejected (already reported): uses of the name are then not
    /// reported again, and the kernel is not instantiated over it.
    pub bound: Option<TypeBound>,
}

/// The bounds a kernel's type parameter may have: a named set of element types.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TypeBound {
    /// `f32`, `f16`, `bf16` (`fuse::Float`).
    Float,
    /// `f16`, `bf16` (`fuse::Half`).
    Half,
}

impl TypeBound {
    pub const ALL: [TypeBound; 2] = [TypeBound::Float, TypeBound::Half];

    /// The trait's name, as written in a bound and as `fuse` exports it.
    pub fn name(self) -> &'static str {
        match self {
            TypeBound::Float => "Float",
            TypeBound::Half => "Half",
        }
    }

    /// The element types, in the order of the trait's `select` arguments.
    pub fn dtypes(self) -> &'static [DType] {
        match self {
            TypeBound::Float => &[DType::F32, DType::F16, DType::BF16],
            TypeBound::Half => &[DType::F16, DType::BF16],
        }
    }
}

pub struct ParamDecl {
    pub name: Ident,
    pub ty: ParamTy,
    /// The type parameter a pointer's element type was written as (`x: *const T`), whose
    /// instantiation `ty` holds.
    pub elem_param: Option<Ident>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ParamTy {
    Ptr {
        elem: DType,
        mutable: bool,
    },
    Scalar(DType),
    /// Rejected by the parser (already reported).
    Invalid,
}

pub struct Block {
    pub stmts: Vec<Stmt>,
}

pub enum Stmt {
    Let {
        name: Ident,
        mutable: bool,
        init: Expr,
    },
    /// `let (a, b) = split(x);`: the two halves of a split, each name with its `mut`.
    LetPair {
        names: [(Ident, bool); 2],
        init: Expr,
    },
    /// `target = value` (`op` is `None`) or `target op= value`.
    Assign {
        target: Ident,
        op: Option<(BinaryOp, Sp)>,
        value: Expr,
        sp: Sp,
    },
    /// An expression statement; `semi` is false for a block's tail expression.
    Expr {
        expr: Expr,
        semi: bool,
    },
    If(If),
    For {
        var: Ident,
        start: Expr,
        end: Expr,
        step: Option<Expr>,
        body: Block,
        sp: Sp,
    },
}

pub struct If {
    pub cond: Expr,
    pub then_body: Block,
    pub else_branch: Option<Else>,
}

pub enum Else {
    If(Box<If>),
    Block(Block),
}

pub struct Expr {
    pub kind: ExprKind,
    pub sp: Sp,
}

pub enum ExprKind {
    /// An integer literal; a suffix (`4u64`) makes it strongly typed.
    Int {
        value: u64,
        suffix: Option<DType>,
    },
    Float {
        value: f64,
        suffix: Option<DType>,
    },
    Bool(bool),
    /// A name: local, parameter or const generic.
    Name(Ident),
    /// `f(args)`, and method sugar `a.f(b)` as `f(a, b)` (`method` is true).
    Call {
        func: Ident,
        args: Vec<Expr>,
        method: bool,
    },
    /// `x as T` and `x.to(T)`.
    Cast {
        expr: Box<Expr>,
        to: DType,
    },
    Unary {
        op: UnaryKind,
        expr: Box<Expr>,
    },
    Binary {
        op: BinaryKind,
        op_sp: Sp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `[a, b]`: a tile shape (the shape argument of `zeros`, `full`, `reshape`, `broadcast_to`).
    Shape(Vec<Expr>),
    /// Something the parser rejected (already reported): checks on it are skipped.
    Error,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum UnaryKind {
    Neg,
    Not,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BinaryKind {
    Op(BinaryOp),
    /// `&&` / `||`: like `&` / `|` but only on bools.
    LogicalAnd,
    LogicalOr,
}
