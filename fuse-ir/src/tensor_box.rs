//! Loads that read a 2-D box of a strided matrix (what Hopper's TMA copies): the shape analysis
//! both back ends share. The emitter compiles such a load (when it feeds a pipelined `dot`) with a
//! TMA path as well as its `cp.async` one; the runtime encodes the tensor map at launch and turns
//! the path on where the launch's values allow ([`crate::Specialization::TensorBox`]).
//!
//! A load qualifies when, for its `[H, W]` tile,
//! * its offset is `base + rows[:, None] * stride + cols[None, :]` (the terms in any order, the
//!   product either way round, each part broadcast, or reshaped from 1-D as `expand_dims` does),
//!   with `stride` an integer scalar and `base`, if any, an integer scalar that is a product of
//!   factors the host can compute (the [`TensorBox::base_pitch`]) and at most one it cannot (the
//!   [`TensorBox::base_index`], attention's head: a third dimension of the tensor map);
//! * `rows` (`[H]`) and `cols` (`[W]`) are `start + arange(a, a + len)` or a plain `arange`, with
//!   `start` an integer scalar;
//! * its mask is `rows[:, None] < row_end & cols[None, :] < col_end` over the same `rows` and
//!   `cols` vars (either order, each part reshaped or broadcast, either part or the whole mask
//!   absent), with `row_end` and `col_end` integer scalars; masked-off lanes read zero (which
//!   TMA's out-of-bounds fill gives). An absent bound is the tile's largest value plus one, which
//!   the runtime computes at launch.
//!
//! The element `(r, c)` then sits at `r * stride + c`, and a lane reads it exactly when
//! `r < row_end` and `c < col_end`: a tensor map of `col_end` columns and `row_end` rows at
//! `stride` elements per row reads the same elements (and zeros elsewhere) as long as `r` and `c`
//! are not negative, which the runtime proves at launch along with the values of `stride`,
//! `row_end` and `col_end`.
use crate::kernel::{Access, Expr, Kernel, Literal, Stmt, VarId};
use crate::ops::BinaryOp;
use crate::types::{Len, Shape};
use crate::uniform::HostDefs;

/// Where a box starts along one axis: `var + offset` (`var` an integer scalar) or `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoxStart {
    /// The scalar part, if any.
    pub var: Option<VarId>,
    /// The `arange`'s first value.
    pub offset: i64,
}

/// A load of a 2-D box (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorBox {
    /// The pointer parameter read.
    pub param: u32,
    /// The `[H]` tile of row indices.
    pub rows: VarId,
    /// The `[W]` tile of column indices.
    pub cols: VarId,
    /// Where the box starts along the rows: `rows[0]`.
    pub row_start: BoxStart,
    /// Where it starts along the columns: `cols[0]`.
    pub col_start: BoxStart,
    /// Elements per row (an integer scalar).
    pub stride: VarId,
    /// The mask's bound on the rows (an integer scalar), if it has one.
    pub row_end: Option<VarId>,
    /// The mask's bound on the columns (an integer scalar), if it has one.
    pub col_end: Option<VarId>,
    /// The offset's scalar term's factor the host cannot compute (an integer scalar): the box's
    /// index along a third dimension whose pitch is [`TensorBox::base_pitch`].
    pub base_index: Option<VarId>,
    /// The offset's scalar term's factors the host computes (integer scalars): the pitch of the
    /// third dimension, or (without a [`TensorBox::base_index`]) the term itself. Empty: no term.
    pub base_pitch: Vec<VarId>,
    /// The box's rows, `H` (the load's tile is `[H, W]`).
    pub height: Len,
    /// The box's columns, `W`.
    pub width: Len,
}

impl Kernel {
    /// `Some` if `v`'s one assignment is (a copy, splat or cast of) the literal +0: a masked
    /// load's `other` that zero-filling copies (`cp.async`, TMA) give.
    pub fn is_positive_zero(&self, v: VarId) -> Option<()> {
        Defs::of(self).positive_zero(v, 8)
    }

    /// `access` (one of [`Kernel::accesses`]) as a [`TensorBox`], if it is a load that qualifies.
    pub fn tensor_box(&self, access: &Access) -> Option<TensorBox> {
        let defs = Defs::of(self);
        let (param, other) = defs.load_of(access)?;
        let Shape::Tile2(height, width) = self.ty(access.offset).shape.clone() else { return None };
        if let Some(o) = other {
            defs.positive_zero(o, 8)?;
        }
        let (rows, cols, stride, base) = defs.offset_terms(access.offset)?;
        let (mut row_end, mut col_end) = (None, None);
        if let Some(m) = access.mask {
            let mut parts = Vec::new();
            defs.conjuncts(m, &mut parts, 8)?;
            for (axis, tile, end) in parts {
                let (want, slot) = if axis == 0 { (rows, &mut row_end) } else { (cols, &mut col_end) };
                if tile != want || slot.replace(end).is_some() {
                    return None;
                }
            }
        }
        let (base_index, base_pitch) = match base {
            Some(b) => defs.base_factors(b)?,
            None => (None, Vec::new()),
        };
        let (row_start, col_start) = (defs.start(rows)?, defs.start(cols)?);
        (self.ty(rows).shape == Shape::Tile(height.clone())
            && self.ty(cols).shape == Shape::Tile(width.clone()))
        .then_some(TensorBox {
            param,
            rows,
            cols,
            row_start,
            col_start,
            stride,
            row_end,
            col_end,
            base_index,
            base_pitch,
            height,
            width,
        })
    }
}

/// The one assignment of each var assigned once (`for` counters count as assignments), and the
/// host programs made from them.
struct Defs<'k> {
    k: &'k Kernel,
    host: HostDefs<'k>,
}

impl<'k> Defs<'k> {
    fn of(k: &'k Kernel) -> Defs<'k> {
        Defs { k, host: k.host_defs() }
    }

    /// Assigned by one statement (or a `for` counter): the emitted copy reads the var where it
    /// is issued, which is then the value the box was computed from.
    fn once(&self, v: VarId) -> bool {
        self.host.assigned_once(v)
    }

    fn get(&self, v: VarId) -> Option<&'k Expr> {
        self.host.def(v)
    }

    fn is_int_scalar(&self, v: VarId) -> bool {
        let t = self.k.ty(v);
        t.shape.is_scalar() && t.dtype.is_int()
    }

    /// The load statement of `access` (its offset and mask must match): its param and `other`.
    /// (Loads of one param, offset and mask with different `other`s are not told apart: none is
    /// a box then.)
    fn load_of(&self, access: &Access) -> Option<(u32, Option<VarId>)> {
        let mut found = Vec::new();
        self.k.visit_stmts(&mut |s| {
            if let Stmt::Assign { expr: Expr::Load { param, offset, mask, other }, .. } = s {
                if *param == access.param && *offset == access.offset && *mask == access.mask {
                    found.push((*param, *other));
                }
            }
        });
        found.dedup();
        match found.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// `Some` if `v` is (a copy, splat or cast of) the literal +0.
    fn positive_zero(&self, v: VarId, depth: u32) -> Option<()> {
        match self.get(v)? {
            Expr::Lit(Literal::Int(0) | Literal::UInt(0)) => Some(()),
            Expr::Lit(Literal::Float(f)) if *f == 0.0 && f.is_sign_positive() => Some(()),
            Expr::Copy(s) | Expr::Splat(s) | Expr::Cast(s) if depth > 0 => self.positive_zero(*s, depth - 1),
            _ => None,
        }
    }

    /// The axis (0: rows, 1: columns) of a 2-D tile that the 1-D tile under `v`'s copies,
    /// reshapes and broadcasts indexes, and that 1-D tile; `v` itself may be 1-D (a row vector).
    fn along(&self, v: VarId, depth: u32) -> Option<(u8, VarId)> {
        if depth == 0 {
            return None;
        }
        match (&self.k.ty(v).shape, self.get(v)) {
            (Shape::Tile(_), _) => Some((1, v)),
            (Shape::Tile2(..), Some(Expr::Copy(x))) => self.along(*x, depth - 1),
            (Shape::Tile2(r, c), Some(e @ (Expr::Reshape(x) | Expr::Broadcast(x)))) => {
                match &self.k.ty(*x).shape {
                    // [L] -> [L, 1] (rows) or [1, L] / [H, L] (columns).
                    Shape::Tile(l) if c.log2 == 0 && c.consts.is_empty() && l == r => Some((0, *x)),
                    Shape::Tile(l) if l == c => Some((1, *x)),
                    // A broadcast keeps each axis; a reshape between 2-D shapes may move lanes to the
                    // other axis (`[1, L]` -> `[L, 1]`) unless it keeps the shape.
                    s @ Shape::Tile2(..) if matches!(e, Expr::Broadcast(_)) || *s == self.k.ty(v).shape => {
                        self.along(*x, depth - 1)
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// `base + rows[:, None] * stride + cols[None, :]`: `(rows, cols, stride, base)`.
    fn offset_terms(&self, offset: VarId) -> Option<(VarId, VarId, VarId, Option<VarId>)> {
        let mut terms = Vec::new();
        self.sum_terms(offset, &mut terms, 6)?;
        let (mut row, mut col, mut base) = (None, None, None);
        for t in terms {
            let taken = if self.is_int_scalar(t) {
                base.replace(t).is_some()
            } else if let Some(r) = self.scaled_rows(t) {
                row.replace(r).is_some()
            } else {
                let (1, cols) = self.along(t, 8)? else { return None };
                col.replace(self.plain_1d(cols)?).is_some()
            };
            if taken {
                return None;
            }
        }
        let ((stride, rows), cols) = (row?, col?);
        Some((rows, cols, stride, base))
    }

    /// The terms of the sum under `v` (through copies and broadcasts of 2-D tiles, which
    /// distribute over the sum; a scalar term is not split).
    fn sum_terms(&self, v: VarId, out: &mut Vec<VarId>, depth: u32) -> Option<()> {
        match self.get(v) {
            Some(Expr::Copy(x)) if depth > 0 => self.sum_terms(*x, out, depth - 1),
            Some(Expr::Broadcast(x)) if depth > 0 && self.k.ty(*x).shape.rank() == 2 => {
                self.sum_terms(*x, out, depth - 1)
            }
            Some(Expr::Binary(BinaryOp::Add, a, b)) if depth > 0 && !self.is_int_scalar(v) => {
                self.sum_terms(*a, out, depth - 1)?;
                self.sum_terms(*b, out, depth - 1)
            }
            _ => {
                out.push(v);
                Some(())
            }
        }
    }

    /// A scalar term as `index * pitch factors`: the factors of its product (through copies) that
    /// the host can compute, and at most one other.
    fn base_factors(&self, base: VarId) -> Option<(Option<VarId>, Vec<VarId>)> {
        let mut factors = Vec::new();
        let mut todo = vec![(base, 8u32)];
        while let Some((v, depth)) = todo.pop() {
            match self.get(v) {
                Some(Expr::Copy(x)) if depth > 0 => todo.push((*x, depth - 1)),
                Some(Expr::Binary(BinaryOp::Mul, a, b)) if depth > 0 && self.host.program(v).is_none() => {
                    todo.push((*a, depth - 1));
                    todo.push((*b, depth - 1));
                }
                _ => factors.push(v),
            }
        }
        let (host, index): (Vec<VarId>, Vec<VarId>) =
            factors.into_iter().partition(|&f| self.host.program(f).is_some());
        match index.as_slice() {
            [] => Some((None, host)),
            [i] if self.once(*i) => Some((Some(*i), host)),
            _ => None,
        }
    }

    /// `v` through its copies, then its defining expression.
    fn peel(&self, mut v: VarId) -> Option<&'k Expr> {
        for _ in 0..8 {
            match self.get(v)? {
                Expr::Copy(x) => v = *x,
                e => return Some(e),
            }
        }
        None
    }

    /// `rows[:, None] * stride` (the product before or after the reshape): `(stride, rows)`.
    fn scaled_rows(&self, v: VarId) -> Option<(VarId, VarId)> {
        let scaled = |m: &Expr| -> Option<(VarId, VarId)> {
            let Expr::Binary(BinaryOp::Mul, a, b) = m else { return None };
            let (s, t) = if self.is_int_scalar(*b) { (*b, *a) } else { (*a, *b) };
            self.is_int_scalar(s).then_some((s, t))
        };
        let mut v = v;
        for _ in 0..8 {
            // `(rows * stride)[:, None]`: the product of the 1-D tile, then the reshape.
            if let Some((0, x)) = self.along(v, 8).filter(|(_, x)| *x != v) {
                let (s, t) = scaled(self.peel(x)?)?;
                return Some((s, self.plain_1d(t)?)).filter(|_| self.k.ty(t).shape.rank() == 1);
            }
            match self.get(v)? {
                Expr::Copy(x) | Expr::Broadcast(x) if self.k.ty(*x).shape.rank() == 2 => v = *x,
                m => {
                    // `rows[:, None] * stride`.
                    let (s, t) = scaled(m)?;
                    let (0, rows) = self.along(t, 8)? else { return None };
                    return Some((s, self.plain_1d(rows)?));
                }
            }
        }
        None
    }

    /// A 1-D tile through its copies.
    fn plain_1d(&self, mut v: VarId) -> Option<VarId> {
        for _ in 0..8 {
            match self.get(v) {
                Some(Expr::Copy(x)) => v = *x,
                _ => return Some(v),
            }
        }
        None
    }

    /// The comparisons `tile < end` joined by `&` under `v`: `(axis, tile, end)` each.
    fn conjuncts(&self, v: VarId, out: &mut Vec<(u8, VarId, VarId)>, depth: u32) -> Option<()> {
        if depth == 0 {
            return None;
        }
        match self.get(v)? {
            Expr::Copy(x) => self.conjuncts(*x, out, depth - 1),
            Expr::Binary(BinaryOp::And, a, b) if !self.k.ty(v).shape.is_scalar() => {
                self.conjuncts(*a, out, depth - 1)?;
                self.conjuncts(*b, out, depth - 1)
            }
            _ => {
                let (axis, test) = self.along(v, 8)?;
                let (tile, end) = match self.get(test)? {
                    Expr::Binary(BinaryOp::Lt, t, e) => (*t, *e),
                    Expr::Binary(BinaryOp::Gt, e, t) => (*t, *e),
                    _ => return None,
                };
                if !self.is_int_scalar(end) || self.k.ty(tile).shape.rank() != 1 {
                    return None;
                }
                out.push((axis, self.plain_1d(tile)?, end));
                Some(())
            }
        }
    }

    /// `start + arange(a, ..)`, `arange(a, ..) + start` or `arange(a, ..)`.
    fn start(&self, tile: VarId) -> Option<BoxStart> {
        let arange = |v: VarId| match self.peel(v)? {
            Expr::Arange { start } => Some(*start),
            _ => None,
        };
        if let Some(offset) = arange(tile) {
            return Some(BoxStart { var: None, offset });
        }
        let Expr::Binary(BinaryOp::Add, x, y) = self.peel(tile)? else { return None };
        [(*x, *y), (*y, *x)].into_iter().find_map(|(s, t)| {
            (self.is_int_scalar(s) && self.once(s)).then_some(())?;
            Some(BoxStart { var: Some(s), offset: arange(t)? })
        })
    }
}
