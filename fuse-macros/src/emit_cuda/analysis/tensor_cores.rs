//! Which `dot`s take the tensor cores and in which forms: the facts the layouts and the `dot`
//! lowering (`lower/mma.rs`, `lower/wgmma.rs`, `lower/tf32.rs`) share.
use fuse_ir::{DType, Len, VarId};

/// A `[rows, cols]` tile held as tensor-core accumulators (`lower/mma.rs` describes the layout).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MmaLayout {
    pub rows: Len,
    pub cols: Len,
    /// Warps along M only (chained dots, see [`super::layout::Layout::rows_first`]).
    pub rows_first: bool,
    /// The kernel has a tensor-core `dot` that `wgmma` may run (not f32, [`may_take_wgmma`]): on
    /// sm_90a the layout may take the warpgroup grid of `wgmma` (decided by the preprocessor,
    /// `FUSE_WG<k>`); otherwise `FUSE_WG<k>` is 0 and the grid is mma.sync's.
    pub warpgroups: bool,
}

/// Whether `dot` of these input dtypes has a tensor-core lowering here for a `[K, N]` B.
pub fn has_mma(input: DType) -> bool {
    matches!(input, DType::F16 | DType::BF16 | DType::F32)
}

/// Whether a tensor-core `dot` of these inputs may run on `wgmma` (sm_90a): not f32, whose
/// TF32 `wgmma` wants both operands K-major (`lower/tf32.rs`).
pub fn may_take_wgmma(input: DType) -> bool {
    WgInput::of(input).is_some()
}

/// Whether `dot(a, b)` takes the tensor cores: f16, bf16 and f32 (as TF32) always; i8 (`m16n8k32`, whose B
/// fragment has no `ldmatrix.trans` for bytes) when `b` is `trans(w)` of a K-major `w` read by
/// this dot alone.
pub fn takes_mma(k: &fuse_ir::Kernel, a: VarId, b: VarId) -> bool {
    let input = k.ty(a).dtype;
    if has_mma(input) {
        return true;
    }
    if input != DType::I8 {
        return false;
    }
    let (mut trans, mut assigned, mut reads) = (false, 0, 0);
    k.visit_stmts(&mut |s| match s {
        fuse_ir::Stmt::Assign { dst, expr } => {
            if *dst == b {
                assigned += 1;
                trans = matches!(expr, fuse_ir::Expr::Trans(_));
            }
            reads += expr.operands().iter().filter(|&&v| v == b).count();
        }
        fuse_ir::Stmt::Store { offset, value, mask, .. } => {
            reads += [*offset, *value].iter().chain(mask.iter()).filter(|&&v| v == b).count();
        }
        _ => {}
    });
    trans && assigned == 1 && reads == 1
}

/// The `b` operands of tensor-core `dot`s that are `trans(w)` of a 2-D `w` and read by that `dot`
/// alone, with their `w`: the lowering stages `w` as B's K-major form and `trans` is not emitted.
pub(in crate::emit_cuda) fn kmajor_operands(
    k: &fuse_ir::Kernel,
    assignments: &[u32],
    uses: &[u32],
) -> std::collections::HashMap<VarId, VarId> {
    let mut trans = std::collections::HashMap::new();
    k.visit_stmts(&mut |s| {
        if let fuse_ir::Stmt::Assign { dst, expr: fuse_ir::Expr::Trans(w) } = s {
            trans.insert(*dst, *w);
        }
    });
    let mut out = std::collections::HashMap::new();
    k.visit_stmts(&mut |s| {
        if let fuse_ir::Stmt::Assign { expr: fuse_ir::Expr::Dot { a, b, .. }, .. } = s {
            if let Some(&w) = trans.get(b) {
                let once = assignments[b.0 as usize] == 1 && uses[b.0 as usize] == 1 && a != b;
                if once && takes_mma(k, *a, *b) && k.ty(w).shape.dims().len() == 2 {
                    out.insert(*b, w);
                }
            }
        }
    });
    out
}

/// The input types `wgmma` takes here: f16 and bf16 (f32 accumulators, K 16 a step), i8 (i32
/// accumulators, K 32 a step: the same 32 bytes of a row, so the same descriptors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WgInput {
    F16,
    Bf16,
    I8,
}

impl WgInput {
    pub fn of(d: DType) -> Option<WgInput> {
        match d {
            DType::F16 => Some(WgInput::F16),
            DType::BF16 => Some(WgInput::Bf16),
            DType::I8 => Some(WgInput::I8),
            _ => None,
        }
    }
}

/// One `wgmma` form a kernel uses: input type, MN-major B, A from registers.
pub type WgForm = (WgInput, bool, bool);
