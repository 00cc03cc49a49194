//! How tiles are spread over a program's threads (a "blocked vector" layout).
//!
//! A tile of length L (a power of two) is cut into chunks of VEC consecutive elements; chunk `j`
//! of thread `tid` holds elements `(j * THREADS + tid) * VEC + v`, `v < VEC`, so a warp's chunk
//! `j` is one contiguous, coalesced run, and a thread's VEC elements are one vector access.
//! Per thread: NCH chunks, EPT = NCH * VEC elements in `T name[EPT]`. VEC is the kernel's
//! vector width (16 bytes of its narrowest pointee) but at most L / THREADS, so with a power of
//! two warp count every thread is busy; otherwise (or when L < THREADS) the chunks past L are
//! "not ok" and are left out of memory accesses and reductions.
//! Everything is a preprocessor constant, so `#if` can test it and loops fully unroll.
//!
//! A length that a `split` or `join` pairs with one twice as long takes at most half of that one's
//! VEC, so its chunks are half as wide and as many, and a thread holds both lanes of its pairs.
//!
//! 2-D tiles `[R, C]` are row-major: lane `r * C + c`. VEC of a length that some 2-D tile with
//! `C > 1` has is capped at `C`, so a chunk never straddles two rows: a row is `C / VEC` whole
//! chunks, held by consecutive threads (`FUSE_G`), and an axis-1 reduction is a fold over the
//! chunk plus a butterfly over those threads.
//!
//! **Warp slabs.** A row of more than 32 chunks (256 f32 columns) would span several warps that
//! way, and its reductions would need shared memory and two barriers. Where a length allows it
//! (`FUSE_SLAB`: a whole tile, some row wider than 32 chunks, each warp's share of
//! the tile whole rows, and a kernel with no operation that assumes the plain order), warp `w`
//! takes the contiguous slab of chunks `[w NCH 32, (w + 1) NCH 32)` instead, chunk `j` of lane
//! `l` being `w NCH 32 + j 32 + l` (Triton's blocked layout with its warps along the rows): a
//! warp's access is still one contiguous run per `j`, and a row is `G / 32` consecutive chunks
//! of each lane of one warp, so its reductions are a fold over those chunks and a warp
//! butterfly. `FUSE_CI(j)` is chunk `j`'s index either way, `FUSE_CSTEP` the chunk distance
//! between a thread's consecutive chunks (THREADS, or 32 in a slab).
//!
//! A **row layout** (Triton's slice layout) holds a `[R]` (or `[R, 1]`) tile the way its parent
//! `[R, C]` tile holds rows: one slot per parent chunk, slot `j` holding the row of chunk `j`, so
//! the `C / VEC` threads of a row each hold its value. An axis-1 reduction produces it in
//! registers, element-wise code runs on it unchanged (its macros describe it), and broadcasting it
//! back over the parent's columns reads slot `i / VEC` with no data movement (`slices.rs` decides
//! which tiles take it).
//!
//! An **MMA layout** holds a `dot` result as tensor-core accumulators (`lower/mma.rs`).
//! Row, column and MMA layouts are *derived* layouts, numbered after the lengths' in the order
//! they are made (never renumbered).
use super::tensor_cores::MmaLayout;
use fuse_ir::{Kernel, Len, ParamKind, VarId};

pub struct Layout {
    pub lens: Vec<Len>,
    /// Chained `dot`s (attention's `softmax(q k^T) v`): every MMA layout puts its warps along M
    /// only, so a row of an accumulator lives in one warp (row reductions are quad shuffles) and
    /// every MMA layout with the same M holds the same rows in the same threads.
    pub rows_first: bool,
    /// The kernel has a tensor-core `dot` that `wgmma` may run (not f32): its MMA layouts may
    /// take wgmma's warpgroup grid on sm_90a ([`MmaLayout::warpgroups`]).
    pub warpgroups: bool,
    /// The widest VEC any tile may use.
    pub veck: u32,
    /// Per length: the column counts of the 2-D tiles of that length with more than one column
    /// (VEC is capped at each).
    pub(in crate::emit_cuda) caps: Vec<Vec<Len>>,
    /// Per length: the lengths (indices) twice as long that a `split` or `join` pairs it with; its
    /// VEC is capped at half of each one's (at least 1), so its chunks are half as wide and as
    /// many, and the pairs of a chunk stay in one thread (`lower/shape.rs`, `Emitter::split`).
    pub(in crate::emit_cuda) pair_caps: Vec<Vec<usize>>,
    /// The derived layouts; layout index `lens.len() + i` is `derived[i]`.
    pub derived: Vec<Derived>,
    /// No operation of the kernel assumes the plain chunk order (axis-0 and arg reductions,
    /// `split`/`join`, `dot`), so its lengths may take warp slabs (see the module doc).
    pub(in crate::emit_cuda) slabs: bool,
}

/// A layout that is not a length's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Derived {
    Row(RowLayout),
    Mma(MmaLayout),
    /// The rows (`[M]`, `[M, 1]`) of an MMA layout (its index): row `r` in every thread holding
    /// part of row `r` of the accumulator ([`MmaLayout::row_macros`]).
    MmaRow(usize),
}

/// A tile held as the rows (`[R]`, `[R, 1]`) or the columns (`[C]`, `[1, C]`) of its parent
/// `[R, C]` layout (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowLayout {
    /// The parent's layout index (a length's).
    pub parent: usize,
    /// The parent's column count.
    pub cols: Len,
    /// Columns rather than rows: slot `i` holds the column of the parent's slot `i`.
    pub columns: bool,
}

impl Layout {
    pub fn new(k: &Kernel) -> Layout {
        let narrowest = k
            .params
            .iter()
            .filter_map(|p| match p.kind {
                ParamKind::Ptr { elem, .. } => Some(elem.size_bytes() as u32),
                ParamKind::Scalar(_) => None,
            })
            .min()
            .unwrap_or(4);
        let lens = k.tile_lens();
        let mut caps: Vec<Vec<Len>> = vec![Vec::new(); lens.len()];
        for v in &k.vars {
            let dims = v.ty.shape.dims();
            if let ([_, cols], Some(len)) = (dims.as_slice(), v.ty.shape.len()) {
                let i = lens.iter().position(|l| *l == len).expect("every tile length is listed");
                if *cols != Len::literal_log2(0) && !caps[i].contains(cols) {
                    caps[i].push(cols.clone());
                }
            }
        }
        let (mut dots, mut warpgroups, mut slabs) = (0, false, true);
        let mut pairs = Vec::new();
        k.visit_stmts(&mut |s| match s {
            fuse_ir::Stmt::Assign { expr: fuse_ir::Expr::Dot { a, b, .. }, .. } => {
                let mma = super::tensor_cores::takes_mma(k, *a, *b);
                dots += usize::from(mma);
                warpgroups |= mma && super::tensor_cores::may_take_wgmma(k.ty(*a).dtype);
                slabs = false;
            }
            // (half, whole): the tiles a split or join pairs.
            fuse_ir::Stmt::Assign { dst, expr: fuse_ir::Expr::Split { src, .. } } => {
                pairs.push((*dst, *src));
                slabs = false;
            }
            fuse_ir::Stmt::Assign { dst, expr: fuse_ir::Expr::Join(even, _) } => {
                pairs.push((*even, *dst));
                slabs = false;
            }
            // Their lowerings count threads in the plain order (lower/shape.rs `fold_columns`, `arg_rows`).
            fuse_ir::Stmt::Assign {
                expr: fuse_ir::Expr::ReduceAxis { axis: 0, .. } | fuse_ir::Expr::ArgReduce { .. },
                ..
            } => slabs = false,
            _ => {}
        });
        let mut layout = Layout {
            pair_caps: vec![Vec::new(); lens.len()],
            lens,
            rows_first: dots >= 2,
            warpgroups,
            veck: 16 / narrowest,
            caps,
            derived: Vec::new(),
            slabs,
        };
        for (half, whole) in pairs {
            let len = |v: VarId| k.ty(v).shape.len().expect("split and join take tiles");
            let (h, w) = (layout.index(&len(half)), layout.index(&len(whole)));
            if !layout.pair_caps[h].contains(&w) {
                layout.pair_caps[h].push(w);
            }
        }
        layout
    }

    /// The index `k` of a tile length, naming its `FUSE_*k` macros.
    pub fn index(&self, len: &Len) -> usize {
        self.lens.iter().position(|l| l == len).expect("every tile length is in Kernel::tile_lens")
    }

    /// The index of the row (or, with `columns`, column) layout of `parent` with `cols`
    /// columns, made on first use.
    pub fn row_index(&mut self, parent: usize, cols: &Len, columns: bool) -> usize {
        self.derived_index(Derived::Row(RowLayout { parent, cols: cols.clone(), columns }))
    }

    /// The index of the MMA layout of `[rows, cols]` dot results, made on first use.
    pub fn mma_index(&mut self, rows: &Len, cols: &Len) -> usize {
        let (rows_first, warpgroups) = (self.rows_first, self.warpgroups);
        self.derived_index(Derived::Mma(MmaLayout {
            rows: rows.clone(),
            cols: cols.clone(),
            rows_first,
            warpgroups,
        }))
    }

    /// The index of the row layout of MMA layout `mma`, made on first use. With a rows-first
    /// warp grid the rows of every MMA layout with the same M are the same, so they share one
    /// (that of the first such layout): a row statistic of `q k^T` broadcasts freely over `p v`.
    pub fn mma_row_index(&mut self, mma: usize) -> usize {
        let parent = self.canonical_mma(mma);
        self.derived_index(Derived::MmaRow(parent))
    }

    /// The row layout of MMA layout `mma`, if one was made.
    pub fn find_mma_row(&self, mma: usize) -> Option<usize> {
        let row = Derived::MmaRow(self.canonical_mma(mma));
        self.derived.iter().position(|r| *r == row).map(|i| self.lens.len() + i)
    }

    /// The MMA layout whose rows layout `k` holds, if it is an MMA row layout.
    pub fn mma_row(&self, k: usize) -> Option<usize> {
        match self.derived.get(k.checked_sub(self.lens.len())?)? {
            Derived::MmaRow(p) => Some(*p),
            _ => None,
        }
    }

    fn canonical_mma(&self, mma: usize) -> usize {
        let Some(Derived::Mma(m)) = self.derived.get(mma - self.lens.len()) else { return mma };
        if !m.rows_first {
            return mma;
        }
        self.derived
            .iter()
            .position(|d| matches!(d, Derived::Mma(o) if o.rows_first && o.rows == m.rows))
            .map_or(mma, |i| self.lens.len() + i)
    }

    fn derived_index(&mut self, d: Derived) -> usize {
        let i = match self.derived.iter().position(|x| *x == d) {
            Some(i) => i,
            None => {
                self.derived.push(d);
                self.derived.len() - 1
            }
        };
        self.lens.len() + i
    }

    /// Whether layout `k` is an MMA layout.
    pub fn is_mma(&self, k: usize) -> bool {
        matches!(k.checked_sub(self.lens.len()).map(|i| &self.derived[i]), Some(Derived::Mma(_)))
    }

    /// The index of the row (or, with `columns`, column) layout of `parent` with `cols` columns,
    /// if one was made (unlike [`Layout::row_index`], makes none: for the emitter, after the
    /// layout pass).
    pub fn find_row(&self, parent: usize, cols: &Len, columns: bool) -> Option<usize> {
        let row = Derived::Row(RowLayout { parent, cols: cols.clone(), columns });
        self.derived.iter().position(|r| *r == row).map(|i| self.lens.len() + i)
    }

    /// The row or column layout with layout index `k`, if `k` is one.
    pub fn row(&self, k: usize) -> Option<&RowLayout> {
        match &self.derived[k.checked_sub(self.lens.len())?] {
            Derived::Row(r) => Some(r),
            Derived::Mma(_) | Derived::MmaRow(_) => None,
        }
    }
}

/// How `dst = broadcast(src)` repeats lanes: the same lanes (`[N]` to `[1, N]`), one lane
/// everywhere (`[1]`, `[1, 1]`), a `[R, 1]` source along the `C` columns of `[R, C]`, a `[C]` or
/// `[1, C]` one down its rows, or otherwise. Shared by the affine facts and the row/column layouts.
pub enum BroadcastKind {
    Identity,
    Single,
    Rows(Len),
    Columns(Len),
    Other,
}

pub fn broadcast_kind(k: &Kernel, src: VarId, dst: VarId) -> BroadcastKind {
    let unit = Len::literal_log2(0);
    let (src_len, dst_len) = (k.ty(src).shape.len(), k.ty(dst).shape.len());
    if src_len == dst_len {
        return BroadcastKind::Identity;
    }
    if src_len.is_none() || src_len == Some(unit.clone()) {
        return BroadcastKind::Single;
    }
    let (src_dims, dst_dims) = (k.ty(src).shape.dims(), k.ty(dst).shape.dims());
    match (src_dims.as_slice(), dst_dims.as_slice()) {
        ([r, one], [r2, c]) if r == r2 && *one == unit && *c != unit => BroadcastKind::Rows(c.clone()),
        ([c], [r, c2]) | ([_, c], [r, c2])
            if c == c2 && *r != unit && (src_dims.len() == 1 || src_dims[0] == unit) =>
        {
            BroadcastKind::Columns(c.clone())
        }
        _ => BroadcastKind::Other,
    }
}
