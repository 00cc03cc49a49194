//! Load scheduling: every load through a read-only (`*const`) pointer moves as early as its
//! operands allow, within its own statement list, together with the pure integer/bool
//! computations its offset, mask and `other` need.
//!
//! Why: a load written after a block reduction (layernorm's `w`/`b`) would otherwise issue after
//! that reduction's `__syncthreads`, and NVRTC does not move global loads across barriers, so
//! the load latency is exposed once per row. Issued early, it overlaps the reductions.
//!
//! Why it is sound: nothing stores through a `*const` parameter, and the launch API takes inputs
//! as `&Buffer` and outputs as `&mut Buffer`, so the borrow rules guarantee a `*const` parameter
//! never aliases a `*mut` one: a read-only load commutes with every store. Statements only move
//! within one list, so they run under the same conditions and the same number of times; a
//! statement never moves above one that writes a var it reads or reads/writes a var it writes.
//! (The one observable difference: when several accesses are out of bounds, which one the error
//! word records first may change.)
use fuse_ir::{DType, Expr, Kernel, ParamKind, Stmt, VarId};
use std::collections::HashSet;

/// The kernel with its loads scheduled early (see the module docs).
#[allow(dead_code)] // not applied yet: see docs/PERF.md
pub fn schedule(kernel: &Kernel) -> Kernel {
    let mut k = kernel.clone();
    let mut body = std::mem::take(&mut k.body);
    schedule_list(&k, &mut body);
    k.body = body;
    k
}

fn schedule_list(k: &Kernel, list: &mut Vec<Stmt>) {
    for s in list.iter_mut() {
        match s {
            Stmt::If { then_body, else_body, .. } => {
                schedule_list(k, then_body);
                schedule_list(k, else_body);
            }
            Stmt::For { body, .. } => schedule_list(k, body),
            _ => {}
        }
    }
    for i in 0..list.len() {
        if is_readonly_load(k, &list[i]) {
            hoist(k, list, i);
        }
    }
}

/// A load through a `*const` parameter.
fn is_readonly_load(k: &Kernel, s: &Stmt) -> bool {
    match s {
        Stmt::Assign { expr: Expr::Load { param, .. }, .. } => {
            matches!(k.params[*param as usize].kind, ParamKind::Ptr { mutable: false, .. })
        }
        _ => false,
    }
}

/// A cheap pure integer/bool computation (worth moving along with a load that needs it).
fn is_pure_index(k: &Kernel, s: &Stmt) -> bool {
    let Stmt::Assign { dst, expr } = s else { return false };
    let d = k.ty(*dst).dtype;
    if !(d.is_int() || d == DType::Bool) {
        return false;
    }
    matches!(
        expr,
        Expr::Copy(_)
            | Expr::Lit(_)
            | Expr::Param(_)
            | Expr::ConstGeneric(_)
            | Expr::ProgramId(_)
            | Expr::NumPrograms(_)
            | Expr::Arange { .. }
            | Expr::Splat(_)
            | Expr::Unary(..)
            | Expr::Binary(..)
            | Expr::Cast(_)
            | Expr::Where(..)
    )
}

/// Moves `list[i]` up as far as dependences allow, first moving up the pure index computations
/// it is waiting on. Returns its new index.
fn hoist(k: &Kernel, list: &mut [Stmt], i: usize) -> usize {
    let mut j = i;
    // Each blocker is moved at most once: two independent blockers would otherwise swap forever.
    let mut tried: HashSet<VarId> = HashSet::new();
    loop {
        let (r, w) = effects(&list[j]);
        while j > 0 && !conflicts(&effects(&list[j - 1]), &(r.clone(), w.clone())) {
            list.swap(j - 1, j);
            j -= 1;
        }
        if j == 0 {
            return j;
        }
        // Blocked by `list[j - 1]`: if it is an index computation this one reads, move it first.
        let q = j - 1;
        let feeds = match &list[q] {
            Stmt::Assign { dst, .. } => r.contains(dst) && tried.insert(*dst),
            _ => false,
        };
        if !(feeds && is_pure_index(k, &list[q])) || hoist(k, list, q) == q {
            return j;
        }
        // `list[q]` moved up: everything between shifted down by one, so ours is at `j` again
        // (it was at j, the removal above it at q < j and the insertion above it cancel out).
    }
}

type Effects = (HashSet<VarId>, HashSet<VarId>);

fn conflicts(earlier: &Effects, later: &Effects) -> bool {
    let (er, ew) = earlier;
    let (lr, lw) = later;
    ew.iter().any(|v| lr.contains(v) || lw.contains(v)) || er.iter().any(|v| lw.contains(v))
}

/// The vars a statement (with everything nested in it) reads and writes.
fn effects(s: &Stmt) -> Effects {
    let mut e = (HashSet::new(), HashSet::new());
    collect(s, &mut e);
    e
}

fn collect(s: &Stmt, e: &mut Effects) {
    match s {
        Stmt::Assign { dst, expr } => {
            e.1.insert(*dst);
            e.0.extend(expr_reads(expr));
        }
        Stmt::Store { offset, value, mask, .. } => {
            e.0.insert(*offset);
            e.0.insert(*value);
            e.0.extend(*mask);
        }
        Stmt::If { cond, then_body, else_body } => {
            e.0.insert(*cond);
            for s in then_body.iter().chain(else_body) {
                collect(s, e);
            }
        }
        Stmt::For { var, start, end, step, body } => {
            e.1.insert(*var);
            e.0.extend([*var, *start, *end, *step]);
            for s in body {
                collect(s, e);
            }
        }
    }
}

fn expr_reads(x: &Expr) -> Vec<VarId> {
    match x {
        Expr::Copy(a) | Expr::Splat(a) | Expr::Unary(_, a) | Expr::Cast(a) | Expr::Reduce(_, a) => vec![*a],
        Expr::Binary(_, a, b) => vec![*a, *b],
        Expr::Where(c, a, b) => vec![*c, *a, *b],
        Expr::Load { offset, mask, other, .. } => [Some(*offset), *mask, *other].into_iter().flatten().collect(),
        Expr::Rand { seed, offset } => vec![*seed, *offset],
        Expr::Lit(_)
        | Expr::Param(_)
        | Expr::ConstGeneric(_)
        | Expr::ProgramId(_)
        | Expr::NumPrograms(_)
        | Expr::Arange { .. } => vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emit_cuda::tests::kernels::{layernorm_f16, layernorm_wide, softmax};

    /// The statement index of the assignment to the var named `name`.
    fn pos(k: &Kernel, name: &str) -> usize {
        k.body
            .iter()
            .position(|s| matches!(s, Stmt::Assign { dst, .. } if k.vars[dst.0 as usize].name == name))
            .unwrap_or_else(|| panic!("no assignment to {name}"))
    }

    fn first_reduce(k: &Kernel) -> usize {
        k.body.iter().position(|s| matches!(s, Stmt::Assign { expr: Expr::Reduce(..), .. })).unwrap()
    }

    #[test]
    fn schedule_moves_weight_loads_above_the_reductions() {
        let k = layernorm_f16();
        let s = schedule(&k);
        assert!(pos(&k, "t15") > first_reduce(&k), "in the source, w is loaded after the reductions");
        // w and b (t15, t18) only need cols and mask: now before the first reduction.
        assert!(pos(&s, "t15") < first_reduce(&s));
        assert!(pos(&s, "t18") < first_reduce(&s));
        assert!(pos(&s, "t15") > pos(&s, "mask"), "still after its mask");
        // Same statements, each var still assigned before it is read.
        assert_eq!(s.body.len(), k.body.len());
        def_before_use(&s);
    }

    #[test]
    fn schedule_hoists_index_math_with_the_load() {
        // softmax: the load of x needs t3 = row * in_stride + cols; nothing moves above a def.
        let k = softmax();
        let s = schedule(&k);
        def_before_use(&s);
        assert!(pos(&s, "x") < first_reduce(&s));
    }

    #[test]
    fn schedule_keeps_loop_bodies_valid() {
        let k = layernorm_wide();
        let s = schedule(&k);
        def_before_use(&s);
        assert_eq!(format!("{:?}", s.params), format!("{:?}", k.params));
    }

    /// Every var read in a list is written earlier in it, in an enclosing list, or is a loop var.
    fn def_before_use(k: &Kernel) {
        fn walk(list: &[Stmt], defined: &mut HashSet<VarId>) {
            for s in list {
                let (r, _) = effects(s);
                match s {
                    Stmt::For { var, body, start, end, step } => {
                        for v in [start, end, step] {
                            assert!(defined.contains(v));
                        }
                        defined.insert(*var);
                        let mut inner = defined.clone();
                        walk(body, &mut inner);
                        // Loop-carried vars (`acc += ...`) are assigned before the loop.
                        for v in inner {
                            defined.insert(v);
                        }
                    }
                    Stmt::If { then_body, else_body, cond } => {
                        assert!(defined.contains(cond));
                        walk(then_body, &mut defined.clone());
                        walk(else_body, &mut defined.clone());
                    }
                    Stmt::Assign { dst, .. } => {
                        for v in &r {
                            assert!(defined.contains(v), "var {} read before written", v.0);
                        }
                        defined.insert(*dst);
                    }
                    Stmt::Store { .. } => {
                        for v in &r {
                            assert!(defined.contains(v));
                        }
                    }
                }
            }
        }
        walk(&k.body, &mut HashSet::new());
    }
}
