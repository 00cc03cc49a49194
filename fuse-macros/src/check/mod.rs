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
//!
//! One `impl Checker` per concern, each in its own file: [`signature`] (parameters and const
//! generics), [`names`] (scopes and C names), [`ir`] (building vars and statements), [`describe`]
//! (how diagnostics spell things), [`constants`] (weak values, folding, constant lengths),
//! [`broadcast`] (NumPy broadcasting), [`stmts`] (statements), [`exprs`] (operators and typing),
//! [`memory`] (pointers, `load`, `store`), [`calls`] (the builtin functions and method sugar),
//! [`shapes`] (shape functions), [`reduce`] (reductions) and [`dot`] (matrix products).

mod broadcast;
mod calls;
mod constants;
mod describe;
mod dot;
mod exprs;
mod ir;
mod memory;
mod names;
mod reduce;
mod shapes;
mod signature;
mod stmts;

use crate::ast;
use crate::c_names::C_RESERVED;
use crate::diag::Diags;
use fuse_ir::{BinaryOp, Kernel, Len, Param, Stmt, Var, VarId};
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
}
