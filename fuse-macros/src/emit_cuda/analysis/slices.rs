//! Which tiles live in a row or column layout ([`super::layout::RowLayout`]) instead of their
//! length's.
//!
//! An axis-1 reduction of a `[R, C]` tile (`C > 1`) yields its rows in a row layout, in
//! registers. A tile broadcast to `[R, C]` along the columns (`[R, 1]` source) or down the rows
//! (`[C]` / `[1, C]` source) takes the row or column layout of that `[R, C]` where nothing else
//! decided its layout, so the broadcast moves nothing (the row and column indices built from
//! `arange`, their masks, a weight vector's load). A layout spreads through element-wise
//! operations, casts, `where_`, `reshape` (which keeps lane indices), loads and stores: all their
//! tiles share one layout. Where two layouts meet, or an operation needs each lane held once (a
//! full reduction, `trans`, `rand`, `dot`, any other broadcast; `arange`'s own lanes are fine anywhere),
//! the tiles involved are demoted to their length's layout, which moves values through shared
//! memory where a derived value meets it (a full reduction of a row or column layout tile is
//! not such an operation: it folds each row or column from one of its holders). Layouts only
//! fall (undecided → row/column → length's) and the pass runs to a fixed point over every
//! assignment (a var assigned in a loop has one layout for all of them), so it ends.
use super::layout::{broadcast_kind, BroadcastKind, Layout};
use fuse_ir::{Expr, Kernel, Len, Stmt, VarId};

/// A var's layout while the pass runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Placement {
    /// Nothing decided it yet (`arange`, a splat, a literal fit any layout).
    Free,
    /// A row or column layout (its index).
    Derived(usize),
    /// Its length's layout.
    Len,
    /// An MMA layout (its index): a tensor-core `dot`'s result and what meets it.
    Mma(usize),
    /// Two MMA layouts met: its length's layout, for good (the dot converts).
    Clash,
}

impl Placement {
    /// The lattice `Free < Derived < Len < Mma < Clash`: layouts only rise, so the pass ends.
    /// An MMA layout wins over a length's: every generic path (element-wise code, loads and
    /// stores, broadcasts and conversions through the scratch, full reductions) works on it, and
    /// keeping a `dot` accumulator in registers is what makes it fast.
    fn meet(self, o: Placement) -> Placement {
        match (self, o) {
            (Placement::Free, x) | (x, Placement::Free) => x,
            (Placement::Derived(a), Placement::Derived(b)) if a == b => Placement::Derived(a),
            (Placement::Clash, _) | (_, Placement::Clash) => Placement::Clash,
            (Placement::Mma(a), Placement::Mma(b)) => {
                if a == b {
                    Placement::Mma(a)
                } else {
                    Placement::Clash
                }
            }
            (Placement::Mma(a), _) | (_, Placement::Mma(a)) => Placement::Mma(a),
            _ => Placement::Len,
        }
    }
}

/// The layout index of every tile var (`None` for scalars), making the row and column layouts.
pub fn assign(k: &Kernel, layout: &mut Layout) -> Vec<Option<usize>> {
    let mut placement = vec![Placement::Free; k.vars.len()];
    let transparent = super::remat::index_computable(k, &k.assignment_counts());
    // Two rounds to a fixed point: in the first, a broadcast or axis reduction whose other side
    // is still undecided waits (an accumulator's layout comes from its `dot` through
    // element-wise code, possibly later in the program), in the second it takes its length's.
    for settle in [false, true] {
        loop {
            let before = placement.clone();
            k.visit_stmts(&mut |s| visit(k, layout, &transparent, settle, &mut placement, s));
            if placement == before {
                break;
            }
        }
    }
    (0..k.vars.len())
        .map(|i| {
            let len = k.vars[i].ty.shape.len()?;
            Some(match placement[i] {
                Placement::Derived(r) | Placement::Mma(r) => r,
                Placement::Free | Placement::Len | Placement::Clash => layout.index(&len),
            })
        })
        .collect()
}

fn visit(
    k: &Kernel,
    layout: &mut Layout,
    transparent: &[bool],
    settle: bool,
    placement: &mut [Placement],
    s: &Stmt,
) {
    let is_tile = |v: &VarId| !k.ty(*v).shape.is_scalar();
    // Every tile of `vars` takes the meet of their layouts (all demoted on a conflict). Where the
    // others meet in a tensor-core layout (an accumulator, its rows), index tiles (`rm`, `rn < n`,
    // offsets) are left out: they are recomputed in that layout where it differs from theirs
    // (`Emitter::view`), so one `rm` can serve the accumulator's rows and a load's offsets.
    let unify = |layout: &Layout, placement: &mut [Placement], vars: &[VarId]| {
        let tiles: Vec<usize> = vars.iter().filter(|v| is_tile(v)).map(|v| v.0 as usize).collect();
        let data =
            tiles.iter().filter(|&&v| !transparent[v]).fold(Placement::Free, |m, &v| m.meet(placement[v]));
        let mma_family = match data {
            Placement::Mma(_) => true,
            Placement::Derived(d) => layout.mma_row(d).is_some(),
            _ => false,
        };
        let tiles: Vec<usize> = tiles.into_iter().filter(|&v| !(mma_family && transparent[v])).collect();
        let m = tiles.iter().fold(Placement::Free, |m, &v| m.meet(placement[v]));
        for v in tiles {
            placement[v] = m;
        }
    };
    // At least its length's layout (an MMA layout holds each lane once, so it stays).
    let demote = |placement: &mut [Placement], vars: &[VarId]| {
        for v in vars.iter().filter(|v| is_tile(v)) {
            placement[v.0 as usize] = placement[v.0 as usize].meet(Placement::Len);
        }
    };
    match s {
        Stmt::Store { offset, value, mask, .. } => {
            let mut vars = vec![*offset, *value];
            vars.extend(*mask);
            unify(layout, placement, &vars);
        }
        Stmt::Assign { dst, expr } if is_tile(dst) => {
            let d = dst.0 as usize;
            match expr {
                // Axis 0, and arg-reductions along either axis: the fold leaves every column's
                // (row's) result in each thread holding it, so any layout of the result is
                // cheap; it stays undecided, taking the column (row) layout where a broadcast
                // back wants it (free) and its length's otherwise (posted once per lane; a
                // column layout would repeat each value R times in every later load and store).
                Expr::ReduceAxis { src, axis: 0, .. } | Expr::ArgReduce { src, axis: Some(_), .. } => {
                    demote(placement, &[*src]);
                    // These folds read a length's layout: a dot result feeding one leaves the
                    // MMA layout (the dot converts its result through the scratch).
                    if matches!(placement[src.0 as usize], Placement::Mma(_)) {
                        placement[src.0 as usize] = Placement::Clash;
                    }
                }
                Expr::ReduceAxis { src, .. } if !settle && placement[src.0 as usize] == Placement::Free => {}
                Expr::ReduceAxis { src, axis, .. } => {
                    demote(placement, &[*src]);
                    let made = match (
                        k.ty(*src).shape.dims().as_slice(),
                        k.ty(*src).shape.len(),
                        placement[src.0 as usize],
                    ) {
                        // Rows of an accumulator fold in its threads into its row layout.
                        ([_, cols], _, Placement::Mma(p)) if *axis == 1 && *cols != unit() => {
                            Placement::Derived(layout.mma_row_index(p))
                        }
                        ([_, cols], Some(len), Placement::Len | Placement::Clash)
                            if *axis == 1 && *cols != unit() =>
                        {
                            Placement::Derived(layout.row_index(layout.index(&len), cols, false))
                        }
                        _ => Placement::Len,
                    };
                    placement[d] = placement[d].meet(made);
                }
                Expr::Broadcast(_) if !settle && placement[d] == Placement::Free => {}
                Expr::Broadcast(src) => {
                    let si = src.0 as usize;
                    placement[d] = placement[d].meet(Placement::Len);
                    if let Placement::Mma(p) = placement[d] {
                        // A row statistic back over the accumulator's columns (`m.expand_dims(1)`
                        // in attention) is free from the accumulator's rows; anything else goes
                        // through the scratch from the source's own layout.
                        let want = Placement::Derived(layout.mma_row_index(p));
                        let rows = matches!(broadcast_kind(k, *src, *dst), BroadcastKind::Rows(_));
                        if rows && !transparent[si] && placement[si].meet(want) == want {
                            placement[si] = want;
                        } else {
                            demote(placement, &[*src]);
                        }
                        return;
                    }
                    if placement[d] == Placement::Clash {
                        demote(placement, &[*src]);
                        return;
                    }
                    match wanted_by_broadcast(k, layout, *src, *dst) {
                        Some(want) if placement[si].meet(want) == want => placement[si] = want,
                        _ => demote(placement, &[*src]),
                    }
                }
                // A tensor-core dot makes its result, and its accumulator, an MMA layout; its
                // operands are staged through shared memory from any layout.
                Expr::Dot { a, b, acc } if super::tensor_cores::takes_mma(k, *a, *b) => {
                    demote(placement, &[*a, *b]);
                    let dims = k.ty(*dst).shape.dims();
                    let mma = Placement::Mma(layout.mma_index(&dims[0], &dims[1]));
                    placement[d] = placement[d].meet(mma);
                    if let Some(c) = acc {
                        unify(layout, placement, &[*c, *dst]);
                    }
                }
                // `rand` reads its offsets lane by lane: one layout holding each lane once (an
                // accumulator's, where its result meets one; index offsets are then recomputed
                // there).
                Expr::Rand { .. } => {
                    let mut vars = expr.operands();
                    vars.push(*dst);
                    demote(placement, &vars);
                    unify(layout, placement, &vars);
                }
                Expr::Reduce(..)
                | Expr::ArgReduce { .. }
                | Expr::Trans(_)
                | Expr::Split { .. }
                | Expr::Join(..)
                | Expr::Dot { .. } => {
                    demote(placement, &expr.operands());
                    placement[d] = placement[d].meet(Placement::Len);
                }
                // Element-wise, casts, `where_`, reshapes, loads, `arange`, splats: every tile
                // operand and the result share a layout.
                _ => {
                    let mut vars = expr.operands();
                    vars.push(*dst);
                    unify(layout, placement, &vars);
                }
            }
        }
        // A full reduction of a row or column layout folds each row (column) once, from the
        // first thread that holds it (`Emitter::reduce`), so the tile keeps its layout: a row
        // statistic carried through a loop and reduced at its end stays in registers. An
        // undecided tile waits for the statement that decides it (and one never decided ends in
        // its length's layout, which holds each lane once).
        Stmt::Assign { expr: Expr::Reduce(_, src), .. }
            if folds_in_place(layout, placement[src.0 as usize]) => {}
        // Any other scalar from tiles (argmax without an axis, a full reduction elsewhere) reads
        // each lane once.
        Stmt::Assign { expr, .. } => demote(placement, &expr.operands()),
        _ => {}
    }
}

/// Whether a full reduction leaves a tile of layout `l` there: undecided, or a row or column
/// layout (not an MMA accumulator's rows).
fn folds_in_place(layout: &Layout, l: Placement) -> bool {
    match l {
        Placement::Free => true,
        Placement::Derived(r) => layout.row(r).is_some(),
        _ => false,
    }
}

fn unit() -> Len {
    Len::literal_log2(0)
}

/// The row or column layout in which `src` makes `dst = broadcast(src)` free: a `[R, 1]` source
/// of a `[R, C]` destination takes the rows of `dst`'s layout, a `[C]` or `[1, C]` one its
/// columns (`C > 1`, `R > 1`).
fn wanted_by_broadcast(k: &Kernel, layout: &mut Layout, src: VarId, dst: VarId) -> Option<Placement> {
    let parent = layout.index(&k.ty(dst).shape.len()?);
    match broadcast_kind(k, src, dst) {
        BroadcastKind::Rows(cols) => Some(Placement::Derived(layout.row_index(parent, &cols, false))),
        BroadcastKind::Columns(cols) => Some(Placement::Derived(layout.row_index(parent, &cols, true))),
        _ => None,
    }
}

/// For the emitter: whether `dst = broadcast(src)` with `src` in layout `src_layout` reads the
/// source's slots directly, and how: `Some(false)` for rows (slot `i / VEC`), `Some(true)` for
/// columns (slot `i`).
pub fn free_broadcast(
    k: &Kernel,
    layout: &mut Layout,
    src_layout: usize,
    src: VarId,
    dst: VarId,
) -> Option<bool> {
    let row = layout.row(src_layout)?.clone();
    match wanted_by_broadcast(k, layout, src, dst)? {
        Placement::Derived(w) if w == src_layout => Some(row.columns),
        _ => None,
    }
}
