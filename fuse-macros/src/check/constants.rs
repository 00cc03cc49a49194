//! Weak values (literals and const generics): materialising them in a type, folding them, and
//! reading constant tile lengths and shapes.

use super::{Checker, ConstExpr, Val, Weak};
use crate::ast;
use crate::diag::Sp;
use fuse_ir::{BinaryOp, DType, Expr, Len, Literal, Ty, UnaryOp, VarId};

impl Checker<'_> {
    /// A weak value as a scalar of `dtype` (storage dtypes: computed in their compute type, then cast).
    pub(super) fn materialize(&mut self, w: &Weak, dtype: DType, sp: Sp) -> Option<VarId> {
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
    pub(super) fn float_lit(&mut self, f: f64) -> VarId {
        self.emit(Ty::scalar(DType::F32), Expr::Lit(Literal::Float(f)))
    }

    pub(super) fn const_into(&mut self, ce: &ConstExpr, dtype: DType, sp: Sp) -> Option<VarId> {
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

    pub(super) fn default_dtype(w: &Weak) -> DType {
        match w {
            Weak::Int(_) => DType::I32,
            Weak::Float(_) => DType::F32,
        }
    }

    /// A strong var for any value (weak values take their default type: i32 / f32).
    pub(super) fn strong(&mut self, v: Val, sp: Sp, context: &str) -> Option<VarId> {
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
    pub(super) fn const_len(&mut self, v: &Val, sp: Sp, what: &str) -> Option<Len> {
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
    pub(super) fn const_shape(&mut self, v: &Val, sp: Sp, what: &str) -> Option<Vec<Len>> {
        match v {
            Val::Shape(dims) => Some(dims.clone()),
            other => self.const_len(other, sp, what).map(|l| vec![l]),
        }
    }

    /// `[a, b]` as written: each dim a constant power of two; rank 1 or 2.
    pub(super) fn shape_literal(&mut self, elems: &[ast::Expr], sp: Sp) -> Val {
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

    /// Folds an operation on two weak values; `None` to compute it at run time instead.
    pub(super) fn fold(&mut self, op: BinaryOp, a: &Weak, b: &Weak, sp: Sp) -> Option<Val> {
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
}

/// An integer literal of `dtype`, if the value fits.
pub(super) fn int_literal(v: i128, dtype: DType) -> Option<Literal> {
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
pub(super) fn len_of(ce: &ConstExpr) -> Result<Len, String> {
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
pub(super) fn in_range(len: Len) -> Result<Len, String> {
    if (-62..=62).contains(&len.log2) {
        Ok(len)
    } else {
        Err("this tile length is out of range (its literal factor is beyond 2^62 or below 2^-62)".into())
    }
}
