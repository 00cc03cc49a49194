//! Calls of the tile language's functions: the table of builtins, arity and method sugar, and the
//! small builtins (`program_id`, `arange`, `zeros`, `full`, `where_`, `maximum`, `cdiv`, math,
//! `rand`).

use super::reduce::Reduction;
use super::{Checker, ConstExpr, Val, Weak};
use crate::ast::{self, BinaryKind};
use crate::diag::{closest, Sp};
use fuse_ir::{ArgOp, BinaryOp, DType, Expr, Literal, RandWidth, ReduceOp, Shape, Ty, UnaryOp};
use proc_macro2::Ident;

/// The tile-language functions: name, fewest and most arguments, argument names.
pub(super) const BUILTINS: &[(&str, usize, usize, &str)] = &[
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
    ("split", 1, 1, "x"),
    ("join", 2, 2, "even, odd"),
    ("dot", 2, 3, "a, b, acc"),
    ("cdiv", 2, 2, "a, b"),
    ("rand", 2, 2, "seed, offsets"),
    ("rand16", 2, 2, "seed, offsets"),
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
pub(super) const METHODLESS: &[&str] = &["program_id", "num_programs", "arange", "zeros", "full"];

pub(super) fn is_builtin(name: &str) -> bool {
    BUILTINS.iter().any(|b| b.0 == name)
}

impl Checker<'_> {
    /// A call of a tile-language function (`method`: written as `x.name(..)`, the receiver its
    /// first argument).
    pub(super) fn call(&mut self, func: &Ident, args: &[ast::Expr], method: bool, sp: Sp) -> Val {
        let name = func.to_string();
        let func_sp = Sp::single(func.span());
        let vals: Vec<Val> = args.iter().map(|a| self.expr(a)).collect();
        let Some((lo, hi, sig)) = self.builtin(&name, method, func_sp) else { return Val::Err };
        if vals.len() < lo || vals.len() > hi {
            self.wrong_arity(&name, method, (lo, hi, sig), vals.len(), func_sp);
            return Val::Err;
        }
        let arg_sps: Vec<Sp> = args.iter().map(|a| a.sp).collect();
        let mut vals = vals.into_iter();
        let mut arg = move || vals.next().unwrap_or(Val::Err);
        let arg_sp = |i: usize| arg_sps.get(i).copied().unwrap_or(func_sp);
        match name.as_str() {
            "program_id" | "num_programs" => self.program_id(&name, arg(), arg_sp(0)),
            "arange" => self.arange(arg(), arg(), arg_sp(0), arg_sp(1), sp),
            "zeros" => self.zeros(arg(), arg_sp(0)),
            "full" => {
                let shape = arg();
                self.full(shape, arg_sp(0), arg(), arg_sp(1))
            }
            "load" => {
                let ptr = arg();
                let mask = if args.len() > 1 { Some((arg(), arg_sp(1))) } else { None };
                let other = if args.len() > 2 { Some((arg(), arg_sp(2))) } else { None };
                self.load(ptr, arg_sp(0), mask, other)
            }
            "store" => {
                let ptr = arg();
                let value = arg();
                let mask = if args.len() > 2 { Some((arg(), arg_sp(2))) } else { None };
                self.store(ptr, arg_sp(0), value, arg_sp(1), mask)
            }
            "where_" => {
                let (c, a, b) = (arg(), arg(), arg());
                self.where_(c, a, b, [arg_sp(0), arg_sp(1), arg_sp(2)], sp)
            }
            "maximum" | "minimum" => {
                let (a, b) = (arg(), arg());
                self.maximum_or_minimum(&name, a, b, func_sp, [arg_sp(0), arg_sp(1)])
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
                let axis = if args.len() > 1 { Some((arg(), arg_sp(1))) } else { None };
                self.reduce(op, &name, tile, arg_sp(0), axis, method)
            }
            "expand_dims" => {
                let x = arg();
                self.expand_dims(x, arg_sp(0), arg(), arg_sp(1))
            }
            "broadcast_to" | "reshape" => {
                let x = arg();
                let dims = self.const_shape(&arg(), arg_sp(1), &format!("the shape of `{name}`"));
                self.reshape_or_broadcast(&name, x, arg_sp(0), dims, sp)
            }
            "trans" => self.trans(arg(), arg_sp(0)),
            "split" => {
                // Anywhere but `let (even, odd) = split(x);` (stmts.rs).
                self.diags.error_help(
                    sp,
                    "`split` gives two tiles",
                    "bind both: `let (even, odd) = split(x);`",
                );
                Val::Err
            }
            "join" => {
                let (a, b) = (arg(), arg());
                self.join(a, arg_sp(0), b, arg_sp(1), sp)
            }
            "dot" => {
                let (a, b) = (arg(), arg());
                let acc = if args.len() > 2 { Some((arg(), arg_sp(2))) } else { None };
                self.dot(a, arg_sp(0), b, arg_sp(1), acc, sp)
            }
            "cdiv" => {
                let (a, b) = (arg(), arg());
                self.cdiv(a, b, func_sp, [arg_sp(0), arg_sp(1)])
            }
            "rand" => self.rand(RandWidth::W32, arg(), arg_sp(0), arg(), arg_sp(1)),
            "rand16" => self.rand(RandWidth::W16, arg(), arg_sp(0), arg(), arg_sp(1)),
            _ => {
                let op = match UnaryOp::MATH.iter().find(|o| o.name() == name) {
                    Some(op) => *op,
                    None => UnaryOp::Abs,
                };
                self.math(op, &name, arg(), arg_sp(0))
            }
        }
    }

    /// The fewest and most arguments and the argument names of builtin `name`; `None` (reported)
    /// for an unknown function or method, or a method call of a function that takes no receiver.
    fn builtin(&mut self, name: &str, method: bool, func_sp: Sp) -> Option<(usize, usize, &'static str)> {
        if method && METHODLESS.contains(&name) {
            // `0.program_id()`, `8.arange(16)`: these take no value to call a method on.
            self.diags.error_help(
                func_sp,
                format!("`{name}` is not a method"),
                format!("call it as a function: `{name}(..)`"),
            );
            return None;
        }
        if let Some(&(_, lo, hi, sig)) = BUILTINS.iter().find(|b| b.0 == name) {
            return Some((lo, hi, sig));
        }
        if method {
            // Any function whose first argument is a value can be written as a method, plus `.to(T)`.
            let methods = BUILTINS.iter().filter(|b| !METHODLESS.contains(&b.0)).map(|b| b.0);
            let help = match closest(name, methods.clone().chain(["to"])) {
                Some(c) => format!("did you mean `.{c}()`?"),
                None => format!(
                    "the methods are `.to(T)` and the tile language's functions on their first argument: {}",
                    methods.map(|m| format!(".{m}()")).collect::<Vec<_>>().join(" ")
                ),
            };
            self.diags.error_help(func_sp, format!("unknown method `.{name}()`"), help);
            return None;
        }
        let help = match closest(name, BUILTINS.iter().map(|b| b.0)) {
            Some(c) => format!("did you mean `{c}`?"),
            None if name == "where" => "the select function is `where_(cond, a, b)`".into(),
            None => format!(
                "the tile language's functions are {}",
                BUILTINS.iter().map(|b| b.0).collect::<Vec<_>>().join(", ")
            ),
        };
        self.diags.error_help(func_sp, format!("unknown function `{name}`"), help);
        None
    }

    /// Reports a call of `name` with `given` arguments where it takes `lo` to `hi` (named by
    /// `sig`). Method sugar counts the receiver as the first argument; the message says so in its
    /// own terms.
    fn wrong_arity(
        &mut self,
        name: &str,
        method: bool,
        (lo, hi, sig): (usize, usize, &str),
        given: usize,
        func_sp: Sp,
    ) {
        let (shown, lo, hi, found) = if method {
            let rest = sig.split_once(", ").map_or("", |(_, r)| r);
            (rest, lo.saturating_sub(1), hi.saturating_sub(1), given.saturating_sub(1))
        } else {
            (sig, lo, hi, given)
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
        match name {
            "max" | "min" if given == 2 => {
                let help = if method {
                    format!("`.{name}()` reduces one tile; for the element-wise {name} of two values use `a.{name}imum(b)`")
                } else {
                    format!("`{name}` reduces one tile; for the element-wise {name} of two values use `{name}imum(a, b)`")
                };
                self.diags.error_help(func_sp, msg, help)
            }
            _ => self.diags.error(func_sp, msg),
        }
    }

    /// `program_id(axis)` or `num_programs(axis)`.
    fn program_id(&mut self, name: &str, axis: Val, axis_sp: Sp) -> Val {
        let axis = match axis {
            Val::Err => return Val::Err,
            Val::Weak(Weak::Int(ConstExpr::Lit(a))) if (0..=2).contains(&a) => a as u8,
            _ => {
                self.diags.error_help(
                    axis_sp,
                    format!("the axis of `{name}` must be the literal 0, 1 or 2"),
                    "grids have up to three axes",
                );
                return Val::Err;
            }
        };
        let expr = if name == "program_id" { Expr::ProgramId(axis) } else { Expr::NumPrograms(axis) };
        self.fresh(Ty::scalar(DType::I32), expr)
    }

    /// `zeros(shape)`: an f32 tile.
    fn zeros(&mut self, shape: Val, shape_sp: Sp) -> Val {
        let Some(dims) = self.const_shape(&shape, shape_sp, "the length of `zeros`") else {
            return Val::Err;
        };
        let Some(shape) = Shape::from_dims(&dims) else { return Val::Err };
        let zero = self.emit(Ty::scalar(DType::F32), Expr::Lit(Literal::Float(0.0)));
        self.fresh(Ty { dtype: DType::F32, shape }, Expr::Splat(zero))
    }

    /// `full(shape, value)`: a tile of the scalar `value`.
    fn full(&mut self, shape: Val, shape_sp: Sp, value: Val, value_sp: Sp) -> Val {
        let dims = self.const_shape(&shape, shape_sp, "the length of `full`");
        let v = self.strong(value, value_sp, "the value of `full`");
        let (Some(dims), Some(v)) = (dims, v) else { return Val::Err };
        let Some(shape) = Shape::from_dims(&dims) else { return Val::Err };
        let v = self.widen(v);
        let ty = self.ty(v);
        if !ty.shape.is_scalar() {
            self.diags.error(
                value_sp,
                format!("the value of `full` must be a scalar, found {}", self.describe_ty(&ty)),
            );
            return Val::Err;
        }
        self.fresh(Ty { dtype: ty.dtype, shape }, Expr::Splat(v))
    }

    /// `where_(c, a, b)`, given the arguments' spans in order.
    fn where_(&mut self, c: Val, a: Val, b: Val, [c_sp, a_sp, b_sp]: [Sp; 3], sp: Sp) -> Val {
        let cond = self.strong(c, c_sp, "the condition of `where_`");
        let ab = self.unify(a, b, a_sp.to(b_sp), a_sp, b_sp, "the branches of `where_`");
        let (Some(cond), Some((a, b))) = (cond, ab) else { return Val::Err };
        if !self.bool_or_report(cond, c_sp, "the condition of `where_`", "compare it: `x > 0`") {
            return Val::Err;
        }
        let mut ops = [cond, a, b];
        let Some(shape) = self.broadcast_operands(&mut ops, sp) else { return Val::Err };
        let [cond, a, b] = ops;
        let dtype = self.ty(a).dtype;
        self.fresh(Ty { dtype, shape }, Expr::Where(cond, a, b))
    }

    /// `maximum(a, b)` or `minimum(a, b)`, element-wise (folded when both are constants).
    fn maximum_or_minimum(&mut self, name: &str, a: Val, b: Val, func_sp: Sp, [a_sp, b_sp]: [Sp; 2]) -> Val {
        let op = if name == "maximum" { BinaryOp::Max } else { BinaryOp::Min };
        if let (Val::Weak(wa), Val::Weak(wb)) = (&a, &b) {
            if let Some(v) = self.fold(op, wa, wb, func_sp) {
                return v;
            }
        }
        let Some((x, y)) = self.unify(a, b, func_sp, a_sp, b_sp, &format!("`{name}`")) else {
            return Val::Err;
        };
        let dtype = self.ty(x).dtype;
        if dtype == DType::Bool {
            self.diags.error(func_sp, format!("`{name}` takes numbers, found bools"));
            return Val::Err;
        }
        let mut ops = [x, y];
        let Some(shape) = self.broadcast_operands(&mut ops, func_sp) else { return Val::Err };
        let [x, y] = ops;
        self.fresh(Ty { dtype, shape }, Expr::Binary(op, x, y))
    }

    /// `cdiv(a, b)` of integers, as `(a + b - 1) / b`.
    fn cdiv(&mut self, a: Val, b: Val, func_sp: Sp, [a_sp, b_sp]: [Sp; 2]) -> Val {
        for (v, v_sp) in [(&a, a_sp), (&b, b_sp)] {
            if !self.integer_or_report(v, v_sp, "`cdiv` takes integers", "for floats use `ceil(a / b)`") {
                return Val::Err;
            }
        }
        let sum = self.binary(BinaryKind::Op(BinaryOp::Add), a, b.clone(), func_sp, a_sp, b_sp);
        let one = Val::Weak(Weak::Int(ConstExpr::Lit(1)));
        let minus = self.binary(BinaryKind::Op(BinaryOp::Sub), sum, one, func_sp, a_sp, b_sp);
        self.binary(BinaryKind::Op(BinaryOp::Div), minus, b, func_sp, a_sp, b_sp)
    }

    pub(super) fn arange(&mut self, start: Val, end: Val, start_sp: Sp, end_sp: Sp, sp: Sp) -> Val {
        let s = match start {
            Val::Err => return Val::Err,
            Val::Weak(Weak::Int(ConstExpr::Lit(s))) => s,
            other => {
                let d = self.describe(&other);
                self.diags.error_help(
                    start_sp,
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
                    let at = if s == 0 { end_sp } else { sp };
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
            Val::Weak(Weak::Int(_)) if s == 0 => self.const_len(&end, end_sp, "the end of `arange`"),
            Val::Weak(Weak::Int(_)) => {
                self.diags.error_help(
                    start_sp,
                    "`arange` with a symbolic end needs the start 0",
                    "shift the tile instead: `start + arange(0, BLOCK)`",
                );
                None
            }
            other => {
                let d = self.describe(other);
                self.diags.error_help(
                    end_sp,
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

    pub(super) fn math(&mut self, op: UnaryOp, name: &str, v: Val, sp: Sp) -> Val {
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

    pub(super) fn rand(
        &mut self,
        width: RandWidth,
        seed: Val,
        seed_sp: Sp,
        offsets: Val,
        offsets_sp: Sp,
    ) -> Val {
        let f = width.name();
        let seed = match seed {
            Val::Err => None,
            // A literal seed is a u64 (as the Philox key is), or i64 if negative.
            Val::Weak(Weak::Int(ce)) => {
                let d = if matches!(ce, ConstExpr::Lit(v) if v < 0) { DType::I64 } else { DType::U64 };
                self.materialize(&Weak::Int(ce), d, seed_sp)
            }
            other => {
                let id = self.strong(other, seed_sp, &format!("the seed of `{f}`"));
                id.and_then(|id| {
                    let id = self.widen(id);
                    let ty = self.ty(id);
                    if ty.dtype.is_int() && ty.shape.is_scalar() {
                        Some(id)
                    } else {
                        self.diags.error_help(
                            seed_sp,
                            format!(
                                "the seed of `{f}` must be an integer scalar, found {}",
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
            other => self.strong(other, offsets_sp, &format!("the offsets of `{f}`")).and_then(|id| {
                let id = self.widen(id);
                let ty = self.ty(id);
                if ty.dtype.is_int() {
                    Some(id)
                } else {
                    self.diags.error_help(
                        offsets_sp,
                        format!("the offsets of `{f}` must be integers, found {}", self.describe_ty(&ty)),
                        "use element offsets like `offs`",
                    );
                    None
                }
            }),
        };
        let (Some(seed), Some(offset)) = (seed, offset) else { return Val::Err };
        let shape = self.ty(offset).shape;
        self.fresh(Ty { dtype: DType::F32, shape }, Expr::Rand { seed, offset, width })
    }
}
