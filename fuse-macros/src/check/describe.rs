//! How types, shapes, values and operators are spelled in diagnostics.

use super::{Checker, ConstExpr, Val, Weak};
use crate::ast::BinaryKind;
use fuse_ir::{BinaryOp, DType, Len, ParamKind, Shape, Ty};

impl Checker<'_> {
    pub(super) fn describe_ty(&self, ty: &Ty) -> String {
        match &ty.shape {
            Shape::Scalar => format!("{} scalar", ty.dtype),
            Shape::Tile(len) => format!("{} tile of length {}", ty.dtype, self.len_text(len)),
            Shape::Tile2(..) => format!("{} tile of shape {}", ty.dtype, self.shape_text(&ty.shape)),
        }
    }

    /// `[BLOCK]`, `[ROWS, 64]`; `scalar` for a scalar.
    pub(super) fn shape_text(&self, shape: &Shape) -> String {
        match shape {
            Shape::Scalar => "scalar".into(),
            _ => self.dims_text(&shape.dims()),
        }
    }

    pub(super) fn dims_text(&self, dims: &[Len]) -> String {
        format!("[{}]", dims.iter().map(|d| self.len_text(d)).collect::<Vec<_>>().join(", "))
    }

    pub(super) fn len_text(&self, len: &Len) -> String {
        if len.consts.iter().any(|&c| c as usize >= self.consts.len()) {
            return "?".into();
        }
        len.display(&self.consts)
    }

    pub(super) fn describe(&self, v: &Val) -> String {
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

    pub(super) fn param_name(&self, index: u32) -> String {
        self.params.get(index as usize).map_or_else(|| "?".into(), |p| p.name.clone())
    }

    pub(super) fn param_elem(&self, index: u32) -> (DType, bool) {
        match self.params.get(index as usize).map(|p| p.kind) {
            Some(ParamKind::Ptr { elem, mutable }) => (elem, mutable),
            _ => (DType::F32, true),
        }
    }
}

pub(super) fn op_symbol(op: BinaryKind) -> &'static str {
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
