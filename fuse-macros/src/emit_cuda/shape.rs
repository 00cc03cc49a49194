//! Operations that move lanes between threads: [`fuse_ir::Expr::Broadcast`], [`fuse_ir::Expr::Trans`],
//! [`fuse_ir::Expr::ReduceAxis`] and [`fuse_ir::Expr::ArgReduce`] (and the lane-preserving [`fuse_ir::Expr::Reshape`]).
//!
//! Every tile, whatever its rank, is spread over the threads by its number of lanes alone
//! ([`super::layout`]): lane `r * cols + c` of a 2-D tile sits where lane `r * cols + c` of a 1-D
//! tile of the same length does. So element-wise operations and `reshape` need no data movement,
//! and an operation whose output lane reads another lane goes through the shared scratch buffer
//! `fuse_xs`: every thread writes its source slots at their lane index, a barrier, every thread
//! reads what its destination slots need, a barrier before the buffer is reused. A broadcast
//! unit axis is read from shared memory, never from global memory again.
//!
//! A reduction along axis 1 of a `[R, C]` tile with `C > 1` (whose chunks never straddle rows,
//! see [`super::layout`]) folds each chunk in its thread and combines the `C / VEC` threads of a
//! row by butterfly shuffles (plus one exchange through shared memory when a row spans several
//! warps); the rows stay in registers in a row layout ([`super::slices`]), from which a broadcast
//! back over the columns is free. Other axis reductions and arg-reductions fold their row or
//! column serially per output lane (in lane order, deterministic) through the scratch.
use super::ctype::{self, c_type};
use super::reduce::{accumulate, combine, identity};
use super::slices;
use super::Ctx;
use fuse_ir::{ArgOp, DType, Len, ReduceOp, VarId};

impl Ctx<'_> {
    /// `dst = src` with the same lanes under another shape: the layout is the same, so a copy.
    pub(super) fn reshape(&mut self, dst: VarId, src: VarId) {
        let k = self.tile(dst).expect("reshape makes a tile");
        let (d, s) = (self.name(dst).to_string(), self.name(src).to_string());
        self.w.unrolled("fuse_i", &format!("FUSE_EPT{k}"), format!("{d}[fuse_i] = {s}[fuse_i];"));
    }

    /// `dst` reads lane `lane(f)` of `src` for each of its lanes `f` (a C expression in `fuse_f`).
    fn gather(&mut self, dst: VarId, src: VarId, lane: &str, what: &str) {
        let kd = self.tile(dst).expect("gathers make tiles");
        let t = c_type(self.dtype(src));
        self.scratch_in(src, what);
        let d = self.name(dst).to_string();
        self.w.open_unrolled("fuse_i", &format!("FUSE_EPT{kd}"));
        self.w.line(format!("const int fuse_f = FUSE_IDX{kd}(fuse_i);"));
        self.w
            .line(format!("if (FUSE_OK{kd}(fuse_i / FUSE_VEC{kd})) {d}[fuse_i] = (({t}*)fuse_xs)[{lane}];"));
        self.w.close();
        self.scratch_out();
    }

    /// NumPy broadcast of a tile to `dst`'s shape.
    pub(super) fn broadcast(&mut self, dst: VarId, src: VarId) {
        let (ks, kd) = (self.tile(src).expect("broadcasts read tiles"), self.tile(dst).expect("tile"));
        let free = if self.layout.is_mma(kd) {
            None // the MMA layout is not a parent of row and column layouts
        } else {
            slices::free_broadcast(self.k, &mut self.layout, ks, src, dst)
        };
        if let Some(columns) = free {
            // Slot j of a row layout is the row of dst's chunk j; slot i of a column layout the
            // column of dst's slot i.
            let (d, s) = (self.name(dst).to_string(), self.name(src).to_string());
            let at = if columns { "fuse_i".to_string() } else { format!("fuse_i / FUSE_VEC{kd}") };
            self.w.line(format!("// {d} = broadcast({s}): each thread holds what its slots need"));
            self.w.unrolled("fuse_i", &format!("FUSE_EPT{kd}"), format!("{d}[fuse_i] = {s}[{at}];"));
            return;
        }
        let (sd, dd) = (self.k.ty(src).shape.dims(), self.k.ty(dst).shape.dims());
        let lane = self.broadcast_lane(&sd, &dd);
        let what = format!("{} = broadcast({})", self.name(dst), self.name(src));
        self.gather(dst, src, &lane, &what);
    }

    /// The source lane of destination lane `fuse_f` (see `fuse_ir::broadcast_source_lane`).
    fn broadcast_lane(&self, src: &[Len], dst: &[Len]) -> String {
        let unit = Len::literal_log2(0);
        // The source's dims aligned at the right with the destination's (missing ones are 1).
        let (rows, cols) = match src {
            [r, c] => (r.clone(), c.clone()),
            [c] => (unit.clone(), c.clone()),
            _ => (unit.clone(), unit.clone()),
        };
        match dst {
            [_, dst_cols] if rows == unit && cols != unit => {
                format!("fuse_f % {}", dst_cols.c_expr(&self.k.consts))
            }
            [_, dst_cols] if cols == unit && rows != unit => {
                format!("fuse_f / {}", dst_cols.c_expr(&self.k.consts))
            }
            // A single lane repeated.
            _ => "0".into(),
        }
    }

    /// `dst = trans(src)`: `[R, C]` -> `[C, R]`.
    pub(super) fn trans(&mut self, dst: VarId, src: VarId) {
        let dims = self.k.ty(src).shape.dims();
        let (r, c) = (dims[0].c_expr(&self.k.consts), dims[1].c_expr(&self.k.consts));
        let lane = format!("(fuse_f % {r}) * {c} + fuse_f / {r}");
        let what = format!("{} = trans({})", self.name(dst), self.name(src));
        self.gather(dst, src, &lane, &what);
    }

    /// `dst = op(src, axis)` for a 2-D `src`.
    pub(super) fn reduce_axis(&mut self, dst: VarId, op: ReduceOp, axis: u8, src: VarId) {
        let dims = self.k.ty(src).shape.dims();
        let from_mma = self.tile(src).is_some_and(|k| self.layout.is_mma(k));
        if axis == 1 && dims[1] != Len::literal_log2(0) && !from_mma {
            return self.reduce_rows(dst, op, src, &dims[1]);
        }
        let acc = self.dtype(src).compute();
        let t = c_type(acc);
        let what = format!("{} = {}({}, {axis})", self.name(dst), reduce_name(op), self.name(src));
        self.scratch_in(src, &what);
        let (count, at) = self.axis_walk(src, axis);
        let kd = self.tile(dst).expect("axis reductions of 2-D tiles make tiles");
        let d = self.name(dst).to_string();
        let dd = self.dtype(dst);
        self.w.open_unrolled("fuse_i", &format!("FUSE_EPT{kd}"));
        self.w.open(format!("if (FUSE_OK{kd}(fuse_i / FUSE_VEC{kd}))"));
        self.w.line(format!("const int fuse_f = FUSE_IDX{kd}(fuse_i);"));
        self.w.line(format!("{t} fuse_r = (({t}*)fuse_xs)[{}];", at.replace("fuse_e", "0")));
        self.w.line(format!(
            "for (int fuse_e = 1; fuse_e < {count}; ++fuse_e) fuse_r = {};",
            combine(op, acc, "fuse_r", &format!("(({t}*)fuse_xs)[{at}]"))
        ));
        let r = ctype::convert("fuse_r", acc, dd, &mut self.needs);
        self.w.line(format!("{d}[fuse_i] = {r};"));
        self.w.close();
        self.w.close();
        self.scratch_out();
    }

    /// `dst = op(src, 1)` for a `[R, C]` `src`, `C > 1`: a fold per chunk, then a butterfly over
    /// the `FUSE_G` threads of each row (through shared memory between warps when a row spans
    /// several), leaving every row's value in each of its threads (the row layout).
    fn reduce_rows(&mut self, dst: VarId, op: ReduceOp, src: VarId, cols: &Len) {
        let p = self.tile(src).expect("reductions read tiles");
        let r = self.layout.row_index(p, cols, false);
        let (acc, op) = accumulate(self.dtype(src), op);
        let (t, id) = (c_type(acc), identity(op, acc));
        let (d, s) = (self.name(dst).to_string(), self.name(src).to_string());
        let fold = |a: &str, b: &str| combine(op, acc, a, b);
        self.w.line(format!("// {d} = {}({s}, 1): each row over FUSE_G{r} threads", reduce_name(op)));
        self.w.open("");
        self.w.line(format!("{t} fuse_rv[FUSE_NCH{p}];"));
        self.w.open_unrolled("fuse_j", &format!("FUSE_NCH{p}"));
        self.w.line(format!("{t} fuse_r = {id};"));
        let x = self.at_as(src, &format!("fuse_j * FUSE_VEC{p} + fuse_v"), acc);
        self.w.open(format!("if (FUSE_OK{p}(fuse_j))"));
        self.w.unrolled("fuse_v", &format!("FUSE_VEC{p}"), format!("fuse_r = {};", fold("fuse_r", &x)));
        self.w.close();
        self.w.line("fuse_rv[fuse_j] = fuse_r;");
        self.w.close();
        let shfl = |w: &mut super::writer::Writer, from: &str| {
            w.pp("#pragma unroll");
            w.open(format!("for (int fuse_s = {from}; fuse_s > 0; fuse_s >>= 1)"));
            w.unrolled(
                "fuse_j",
                &format!("FUSE_NCH{p}"),
                format!(
                    "fuse_rv[fuse_j] = {};",
                    fold("fuse_rv[fuse_j]", "__shfl_xor_sync(0xffffffffu, fuse_rv[fuse_j], fuse_s)")
                ),
            );
            w.close();
        };
        self.w.pp(format!("#if FUSE_G{r} <= 32"));
        shfl(&mut self.w, &format!("FUSE_G{r} / 2"));
        self.w.pp("#else");
        // A row spans FUSE_G / 32 whole warps: one value per (chunk, warp), then each thread folds
        // its row's in order.
        shfl(&mut self.w, "16");
        let xs = format!("(({t}*)fuse_xs)");
        self.scratch_bytes_for(format!("(FUSE_NCH{p} * FUSE_NUM_WARPS * {})", acc.size_bytes()));
        self.w.line("__syncthreads();");
        self.w.unrolled(
            "fuse_j",
            &format!("FUSE_NCH{p}"),
            format!(
                "if ((fuse_tid & 31) == 0 && FUSE_OK{p}(fuse_j)) {xs}[fuse_j * FUSE_NUM_WARPS + (fuse_tid >> 5)] = fuse_rv[fuse_j];"
            ),
        );
        self.w.line("__syncthreads();");
        self.w.open_unrolled("fuse_j", &format!("FUSE_NCH{p}"));
        self.w.open(format!("if (FUSE_OK{p}(fuse_j))"));
        self.w.line(format!("const int fuse_w0 = FUSE_IDX{r}(fuse_j) * (FUSE_G{r} / 32);"));
        self.w.line(format!("{t} fuse_r = {xs}[fuse_w0];"));
        self.w.line(format!(
            "for (int fuse_q = 1; fuse_q < FUSE_G{r} / 32; ++fuse_q) fuse_r = {};",
            fold("fuse_r", &format!("{xs}[fuse_w0 + fuse_q]"))
        ));
        self.w.line("fuse_rv[fuse_j] = fuse_r;");
        self.w.close();
        self.w.close();
        self.w.pp("#endif");
        let dd = self.dtype(dst);
        let out = ctype::convert("fuse_rv[fuse_j]", acc, dd, &mut self.needs);
        match self.tile(dst).expect("axis reductions of 2-D tiles make tiles") {
            kd if kd == r => {
                self.w.unrolled("fuse_j", &format!("FUSE_NCH{p}"), format!("{d}[fuse_j] = {out};"));
            }
            kd => {
                // dst is wanted in its length's layout: each row's first thread posts it.
                self.scratch_bytes_for(format!("(FUSE_L{kd} * {})", acc.size_bytes()));
                self.w.line("__syncthreads();");
                self.w.unrolled(
                    "fuse_j",
                    &format!("FUSE_NCH{p}"),
                    format!(
                        "if (FUSE_OK{p}(fuse_j) && (fuse_j * FUSE_THREADS + fuse_tid) % FUSE_G{r} == 0) {xs}[FUSE_IDX{r}(fuse_j)] = fuse_rv[fuse_j];"
                    ),
                );
                self.w.line("__syncthreads();");
                let got = ctype::convert(&format!("{xs}[FUSE_IDX{kd}(fuse_i)]"), acc, dd, &mut self.needs);
                self.w.unrolled(
                    "fuse_i",
                    &format!("FUSE_EPT{kd}"),
                    format!("if (FUSE_OK{kd}(fuse_i / FUSE_VEC{kd})) {d}[fuse_i] = {got};"),
                );
            }
        }
        self.w.close();
    }

    /// Makes the scratch `fuse_xs` at least `bytes` (a C expression) large.
    pub(super) fn scratch_bytes_for(&mut self, bytes: String) {
        if !self.scratch_bytes.contains(&bytes) {
            self.scratch_bytes.push(bytes);
        }
    }

    /// `dst = argmax/argmin(src[, axis])`: the first index of the extreme lane, NaN first.
    pub(super) fn arg_reduce(&mut self, dst: VarId, op: ArgOp, axis: Option<u8>, src: VarId) {
        let sd = self.dtype(src);
        let t = c_type(sd);
        let name = if op == ArgOp::Max { "argmax" } else { "argmin" };
        let what = format!("{} = {name}({})", self.name(dst), self.name(src));
        self.scratch_in(src, &what);
        let beats = |x: &str, best: &str| {
            let cmp = if op == ArgOp::Max { ">" } else { "<" };
            if sd == DType::F32 {
                // Strictly better, or the first NaN (NaN beats every number; later NaNs lose).
                format!("({x} {cmp} {best} || ({x} != {x} && {best} == {best}))")
            } else {
                format!("({x} {cmp} {best})")
            }
        };
        let d = self.name(dst).to_string();
        match (axis, self.tile(dst)) {
            (Some(axis), Some(kd)) => {
                let (count, at) = self.axis_walk(src, axis);
                self.w.open_unrolled("fuse_i", &format!("FUSE_EPT{kd}"));
                self.w.open(format!("if (FUSE_OK{kd}(fuse_i / FUSE_VEC{kd}))"));
                self.w.line(format!("const int fuse_f = FUSE_IDX{kd}(fuse_i);"));
                self.arg_loop(&t, &count, &at, &beats);
                self.w.line(format!("{d}[fuse_i] = fuse_bi;"));
                self.w.close();
                self.w.close();
            }
            _ => {
                let len = self.k.ty(src).shape.len().expect("argmax takes a tile");
                let count = len.c_expr(&self.k.consts);
                self.arg_loop(&t, &count, "fuse_e", &beats);
                self.w.line(format!("{d} = fuse_bi;"));
            }
        }
        self.scratch_out();
    }

    /// A serial search over `count` lanes `at(fuse_e)` of the scratch: `fuse_bi` is the winner.
    fn arg_loop(&mut self, t: &str, count: &str, at: &str, beats: &dyn Fn(&str, &str) -> String) {
        self.w.line(format!("{t} fuse_b = (({t}*)fuse_xs)[{}];", at.replace("fuse_e", "0")));
        self.w.line("int fuse_bi = 0;");
        self.w.open(format!("for (int fuse_e = 1; fuse_e < {count}; ++fuse_e)"));
        self.w.line(format!("const {t} fuse_x = (({t}*)fuse_xs)[{at}];"));
        self.w.line(format!("if ({}) {{ fuse_b = fuse_x; fuse_bi = fuse_e; }}", beats("fuse_x", "fuse_b")));
        self.w.close();
    }

    /// For output lane `fuse_f` of a reduction along `axis` of a 2-D `src`: how many lanes it
    /// folds, and the C expression of the `fuse_e`-th one's index in the scratch.
    fn axis_walk(&self, src: VarId, axis: u8) -> (String, String) {
        let dims = self.k.ty(src).shape.dims();
        let (r, c) = (dims[0].c_expr(&self.k.consts), dims[1].c_expr(&self.k.consts));
        if axis == 0 {
            (r, format!("fuse_e * {c} + fuse_f"))
        } else {
            (c.clone(), format!("fuse_f * {c} + fuse_e"))
        }
    }

    /// Writes every lane of `src` into the scratch at its lane index, between barriers.
    fn scratch_in(&mut self, src: VarId, what: &str) {
        let ks = self.tile(src).expect("scratch holds tiles");
        let t = c_type(self.dtype(src));
        self.scratch_bytes_for(format!("(FUSE_L{ks} * {})", self.dtype(src).size_bytes()));
        let s = self.name(src).to_string();
        self.w.line(format!("// {what}: through shared memory"));
        self.w.open("");
        self.w.line("__syncthreads();");
        self.w.unrolled(
            "fuse_i",
            &format!("FUSE_EPT{ks}"),
            format!("if (FUSE_OK{ks}(fuse_i / FUSE_VEC{ks})) (({t}*)fuse_xs)[FUSE_IDX{ks}(fuse_i)] = {s}[fuse_i];"),
        );
        self.w.line("__syncthreads();");
    }

    fn scratch_out(&mut self) {
        self.w.close();
    }
}

fn reduce_name(op: ReduceOp) -> &'static str {
    match op {
        ReduceOp::Sum => "sum",
        ReduceOp::Max => "max",
        ReduceOp::Min => "min",
    }
}
