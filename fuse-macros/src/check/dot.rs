//! `dot(a, b)` and `dot(a, b, acc)` (Triton's `tl.dot`): the product of a `[M, K]` and a `[K, N]`
//! tile, plus an `[M, N]` accumulator.
//!
//! The operands are typed by their *storage* element type, not their widening: a tile loaded from
//! `*const f16` (or cast with `.to(f16)`) is an f16 operand and accumulates in f32, while the same
//! values after arithmetic are f32 and multiply as TF32. So `dot` reads its operands' vars as
//! they are and widens only the accumulator, like any other arithmetic operand.
//!
//! Dims written with const generics are checked at the launch (`expand.rs` asserts each at least
//! 16 where `launch::<..>` is instantiated); literal ones here.

use super::{Checker, Val};
use crate::diag::Sp;
use fuse_ir::{dot_accumulator, DType, Expr, Len, Shape, Ty, VarId, DOT_MIN_DIM};

/// A checked operand: its var and its two dims.
struct Operand {
    id: VarId,
    rows: Len,
    cols: Len,
}

impl Checker<'_> {
    /// `dot(a, b[, acc])`; `sp` is the whole call.
    pub(super) fn dot(&mut self, a: Val, a_sp: Sp, b: Val, b_sp: Sp, acc: Option<(Val, Sp)>, sp: Sp) -> Val {
        let a = self.dot_operand(a, a_sp, "a");
        let b = self.dot_operand(b, b_sp, "b");
        let (Some(a), Some(b)) = (a, b) else {
            return Val::Err;
        };
        let acc_dtype = self.dot_element_types(&a, a_sp, &b, b_sp);
        let dims_ok = self.dot_dims(&a, a_sp, &b, b_sp, sp);
        let (m, n) = (a.rows.clone(), b.cols.clone());
        let acc = match acc {
            None => Some(None),
            Some((v, acc_sp)) => self.dot_accumulator(v, acc_sp, acc_dtype, &a, &b).map(Some),
        };
        match (acc_dtype, dims_ok, acc) {
            (Some(dtype), true, Some(acc)) => {
                self.fresh(Ty::tile2(dtype, m, n), Expr::Dot { a: a.id, b: b.id, acc })
            }
            _ => Val::Err,
        }
    }

    /// An operand must be a 2-D tile.
    fn dot_operand(&mut self, v: Val, sp: Sp, which: &str) -> Option<Operand> {
        let id = match v {
            Val::Err => return None,
            Val::Var { id, .. } => id,
            other => {
                let d = self.describe(&other);
                self.diags.error_help(
                    sp,
                    format!("`dot` multiplies 2-D tiles, but `{which}` is {d}"),
                    "`a` is a [M, K] tile and `b` a [K, N] one, each dim at least 16",
                );
                return None;
            }
        };
        let ty = self.ty(id);
        match ty.shape {
            Shape::Tile2(rows, cols) => Some(Operand { id, rows, cols }),
            _ => {
                self.diags.error_help(
                    sp,
                    format!("`dot` multiplies 2-D tiles, but `{which}` is {}", self.describe_ty(&self.ty(id))),
                    "`a` is a [M, K] tile and `b` a [K, N] one, each dim at least 16; `reshape(x, [M, K])` makes a 1-D tile 2-D",
                );
                None
            }
        }
    }

    /// Both operands of one supported storage type; gives the accumulator dtype.
    fn dot_element_types(&mut self, a: &Operand, a_sp: Sp, b: &Operand, b_sp: Sp) -> Option<DType> {
        let (ta, tb) = (self.ty(a.id), self.ty(b.id));
        let mut supported = true;
        for (t, sp, which) in [(&ta, a_sp, "a"), (&tb, b_sp, "b")] {
            if dot_accumulator(t.dtype).is_none() {
                self.diags.error_help(
                    sp,
                    format!(
                        "`dot` multiplies f16, bf16, f32 (as TF32) or i8 tiles, but `{which}` is {}",
                        self.describe_ty(t)
                    ),
                    unsupported_help(t.dtype),
                );
                supported = false;
            }
        }
        if !supported {
            return None;
        }
        if ta.dtype != tb.dtype {
            let help = if ta.dtype.is_float() && tb.dtype.is_float() {
                let (half, wide) = if ta.dtype == DType::F32 { (tb.dtype, "a") } else { (ta.dtype, "b") };
                if ta.dtype == DType::F32 || tb.dtype == DType::F32 {
                    format!(
                        "`dot` takes its operands' storage types: arithmetic on a {half} tile gives f32; convert `{wide}` back with `.to({half})`"
                    )
                } else {
                    format!(
                        "convert one operand to the other's type: `.to({})` on `b` or `.to({})` on `a`",
                        ta.dtype, tb.dtype
                    )
                }
            } else {
                "convert one operand so both are f16, bf16, f32 or i8".to_string()
            };
            self.diags.error_help(
                a_sp.to(b_sp),
                format!(
                    "mismatched element types in `dot`: `a` is {} and `b` is {}",
                    self.describe_ty(&ta),
                    self.describe_ty(&tb)
                ),
                help,
            );
            return None;
        }
        dot_accumulator(ta.dtype)
    }

    /// `a`'s columns are `b`'s rows, and M, N, K are at least 16 where they are literal (const
    /// generics are asserted at the launch). Reports and gives false otherwise.
    fn dot_dims(&mut self, a: &Operand, a_sp: Sp, b: &Operand, b_sp: Sp, sp: Sp) -> bool {
        let shapes = format!(
            "`a` is {} and `b` is {}",
            self.dims_text(&[a.rows.clone(), a.cols.clone()]),
            self.dims_text(&[b.rows.clone(), b.cols.clone()])
        );
        if a.cols != b.rows {
            self.diags.error_help(
                sp,
                format!("the inner dimensions of `dot` differ: {shapes}"),
                "`dot(a, b)` multiplies a [M, K] by a [K, N] tile: `a`'s columns must be `b`'s rows (`trans(b)` transposes)",
            );
            return false;
        }
        let small = |len: &Len| len.consts.is_empty() && len.log2 < DOT_MIN_DIM.trailing_zeros() as i32;
        let below: Vec<String> = [("M", &a.rows), ("K", &a.cols), ("N", &b.cols)]
            .into_iter()
            .filter(|(_, len)| small(len))
            .map(|(name, len)| format!("{name} = {}", self.len_text(len)))
            .collect();
        if below.is_empty() {
            return true;
        }
        // Point at the operand that holds the small dims, or at the call for K (both hold it).
        let at = match (small(&a.rows), small(&a.cols), small(&b.cols)) {
            (_, false, false) => a_sp,
            (false, false, true) => b_sp,
            _ => sp,
        };
        self.diags.error_help(
            at,
            format!("`dot` needs M, N and K of at least {DOT_MIN_DIM}: {shapes} ({})", below.join(", ")),
            "tensor cores multiply blocks of 16; take a tile of 16 and mask the rows or columns past the data (`load(.., mask, 0.0)`)",
        );
        false
    }

    /// The accumulator: a `[M, N]` tile of the accumulator dtype (a storage type widens to its
    /// compute type, as in any arithmetic). `acc_dtype` is `None` when the operands' types are
    /// already reported.
    fn dot_accumulator(
        &mut self,
        v: Val,
        sp: Sp,
        acc_dtype: Option<DType>,
        a: &Operand,
        b: &Operand,
    ) -> Option<VarId> {
        let mn = Shape::Tile2(a.rows.clone(), b.cols.clone());
        let id = match v {
            Val::Err => return None,
            Val::Var { id, .. } if !self.ty(id).shape.is_scalar() => id,
            other => {
                let d = self.describe(&other);
                let mn = self.shape_text(&mn);
                self.diags.error_help(
                    sp,
                    format!("the accumulator of `dot` must be a {mn} tile, found {d}"),
                    format!("start from `zeros({mn})` (f32) or `full({mn}, 0)` (i32)"),
                );
                return None;
            }
        };
        let id = self.widen(id);
        let ty = self.ty(id);
        let mut ok = true;
        if ty.shape != mn {
            let shapes = format!(
                "`a` {} times `b` {} is {}",
                self.dims_text(&[a.rows.clone(), a.cols.clone()]),
                self.dims_text(&[b.rows.clone(), b.cols.clone()]),
                self.shape_text(&mn)
            );
            self.diags.error_help(
                sp,
                format!("the accumulator of `dot` has shape {}, but {shapes}", self.shape_text(&ty.shape)),
                "the accumulator is the [M, N] result the product adds to",
            );
            ok = false;
        }
        if let Some(want) = acc_dtype {
            if ty.dtype != want {
                let input = self.ty(a.id).dtype;
                let help = if want == DType::I32 {
                    "an i32 accumulator: `full([M, N], 0)` or `zeros([M, N]).to(i32)`"
                } else {
                    "an f32 accumulator: `zeros([M, N])`"
                };
                self.diags.error_help(
                    sp,
                    format!(
                        "the accumulator of `dot` must be {want} ({input} operands accumulate in {want}), found {}",
                        self.describe_ty(&ty)
                    ),
                    help,
                );
                ok = false;
            }
        }
        ok.then_some(id)
    }
}

fn unsupported_help(d: DType) -> &'static str {
    match d {
        DType::U8 => "u8 is not a `dot` type: convert with `.to(i8)` where the values fit, or `.to(f16)`",
        DType::Bool => "convert the bools to numbers first, e.g. `.to(f16)`",
        _ => "convert it, e.g. `.to(f16)`, `.to(bf16)` or `.to(i8)` (f32 tiles multiply as TF32)",
    }
}
