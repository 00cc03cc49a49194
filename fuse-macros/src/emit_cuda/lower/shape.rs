//! Operations that move lanes between threads: [`fuse_ir::Expr::Broadcast`], [`fuse_ir::Expr::Trans`],
//! [`fuse_ir::Expr::Split`] and [`fuse_ir::Expr::Join`] (in registers where the layouts pair up),
//! [`fuse_ir::Expr::ReduceAxis`] and [`fuse_ir::Expr::ArgReduce`] (and the lane-preserving [`fuse_ir::Expr::Reshape`]).
//!
//! Every tile, whatever its rank, is spread over the threads by its number of lanes alone
//! ([`crate::emit_cuda::analysis::layout`]): lane `r * cols + c` of a 2-D tile sits where lane `r * cols + c` of a 1-D
//! tile of the same length does. So element-wise operations and `reshape` need no data movement,
//! and an operation whose output lane reads another lane goes through the shared scratch buffer
//! `fuse_xs`: every thread writes its source slots at their lane index, a barrier, every thread
//! reads what its destination slots need, a barrier before the buffer is reused. A broadcast
//! unit axis is read from shared memory, never from global memory again.
//!
//! A reduction along axis 1 of a `[R, C]` tile with `C > 1` (whose chunks never straddle rows,
//! see [`crate::emit_cuda::analysis::layout`]) folds each chunk in its thread and combines the `C / VEC` threads of a
//! row by butterfly shuffles (plus one exchange through shared memory when a row spans several
//! warps); the rows stay in registers in a row layout ([`crate::emit_cuda::analysis::slices`]), from which a broadcast
//! back over the columns is free (in a warp slab a row is one warp's: no shared memory at all).
//! Axis-0 reductions and arg-reductions (`reduce_down`, `fold_columns`, `arg_rows`) fold each
//! thread's chunks of the same columns in registers, then across threads by shuffles, and use
//! the scratch only between warps or to post a result in another layout.
use super::ctype::{self, c_type};
use super::reduce::{accumulate, combine, identity, Acc, Fold};
use super::Emitter;
use crate::emit_cuda::analysis::slices;
use fuse_ir::{ArgOp, DType, Len, ReduceOp, VarId};

impl Emitter<'_> {
    /// `dst = src` with the same lanes under another shape: the layout is the same, so a copy.
    pub(in crate::emit_cuda) fn reshape(&mut self, dst: VarId, src: VarId) {
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
    pub(in crate::emit_cuda) fn broadcast(&mut self, dst: VarId, src: VarId) {
        let (ks, kd) = (self.tile(src).expect("broadcasts read tiles"), self.tile(dst).expect("tile"));
        if self.layout.is_mma(kd) && self.layout.find_mma_row(kd) == Some(ks) {
            // Slot i of the accumulator is row g + 8 ((i / 2) % 2) of m-tile (i / 4) / NI, which
            // is slot 2 ((i / 4) / NI) + (i / 2) % 2 of its row layout.
            let (d, s) = (self.name(dst).to_string(), self.name(src).to_string());
            self.w.line(format!("// {d} = broadcast({s}): the accumulator's rows, in its threads"));
            self.w.unrolled(
                "fuse_i",
                &format!("FUSE_EPT{kd}"),
                format!("{d}[fuse_i] = {s}[((fuse_i >> 2) / FUSE_NI{kd}) * 2 + ((fuse_i >> 1) & 1)];"),
            );
            return;
        }
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
        let (src_dims, dst_dims) = (self.k.ty(src).shape.dims(), self.k.ty(dst).shape.dims());
        self.at_lanes_of(kd, |emitter| {
            let lane = emitter.source_lane(&src_dims, &dst_dims, "fuse_f");
            if !emitter.broadcast_by_remat(dst, src, &lane) {
                let what = format!("{} = broadcast({})", emitter.name(dst), emitter.name(src));
                emitter.gather(dst, src, &lane, &what);
            }
        });
    }

    /// `dst = trans(src)`: `[R, C]` -> `[C, R]`.
    pub(in crate::emit_cuda) fn trans(&mut self, dst: VarId, src: VarId) {
        let dims = self.k.ty(src).shape.dims();
        let (r, c) = (dims[0].c_expr(&self.k.consts), dims[1].c_expr(&self.k.consts));
        let lane = format!("(fuse_f % {r}) * {c} + fuse_f / {r}");
        let what = format!("{} = trans({})", self.name(dst), self.name(src));
        self.gather(dst, src, &lane, &what);
    }

    /// `dst = split(src, half)`: lane `f` is `src`'s lane `2 f + half`. When `dst`'s chunks are
    /// half as wide as `src`'s and as many (each thread then holds both halves of its chunks, as
    /// with 2 or more elements of `src` a thread and at most one vector of it), a register copy;
    /// otherwise through the scratch.
    pub(in crate::emit_cuda) fn split(&mut self, dst: VarId, src: VarId, half: u8) {
        let (ks, kd) = (self.tile(src).expect("split reads a tile"), self.tile(dst).expect("tile"));
        let (d, s) = (self.name(dst).to_string(), self.name(src).to_string());
        let what = format!("{d} = split({s}, {half})");
        let registers = self.paired_chunks(kd, ks);
        self.in_registers_or(registers, |me| {
            me.w.line(format!("// {what}: the {} lanes of each chunk, in its thread", ["even", "odd"][usize::from(half)]));
            me.w.unrolled(
                "fuse_i",
                &format!("FUSE_EPT{kd}"),
                format!("{d}[fuse_i] = {s}[(fuse_i / FUSE_VEC{kd}) * FUSE_VEC{ks} + 2 * (fuse_i % FUSE_VEC{kd}) + {half}];"),
            );
        }, |me| me.gather(dst, src, &format!("2 * fuse_f + {half}"), &what));
    }

    /// `dst = join(even, odd)`: lane `2 f` is `even`'s lane `f`, lane `2 f + 1` is `odd`'s. A
    /// register copy under [`Emitter::split`]'s condition, otherwise two passes through the scratch.
    pub(in crate::emit_cuda) fn join(&mut self, dst: VarId, even: VarId, odd: VarId) {
        let (kh, kd) = (self.tile(even).expect("join reads tiles"), self.tile(dst).expect("tile"));
        let (d, e, o) = (self.name(dst).to_string(), self.name(even).to_string(), self.name(odd).to_string());
        let what = format!("{d} = join({e}, {o})");
        let registers = if self.tile(odd) == Some(kh) { self.paired_chunks(kh, kd) } else { None };
        self.in_registers_or(registers, |me| {
            me.w.line(format!("// {what}: each chunk from the same chunk of both, in its thread"));
            let at = format!("(fuse_i / FUSE_VEC{kd}) * FUSE_VEC{kh} + (fuse_i % FUSE_VEC{kd}) / 2");
            me.w.unrolled(
                "fuse_i",
                &format!("FUSE_EPT{kd}"),
                format!("{d}[fuse_i] = (fuse_i % 2 == 0) ? {e}[{at}] : {o}[{at}];"),
            );
        }, |me| {
            let t = c_type(me.dtype(dst));
            for (h, src) in [(0, even), (1, odd)] {
                me.scratch_in(src, &format!("{what}, the {} lanes", ["even", "odd"][h]));
                me.w.open_unrolled("fuse_i", &format!("FUSE_EPT{kd}"));
                me.w.line(format!("const int fuse_f = FUSE_IDX{kd}(fuse_i);"));
                me.w.line(format!(
                    "if (FUSE_OK{kd}(fuse_i / FUSE_VEC{kd}) && fuse_f % 2 == {h}) {d}[fuse_i] = (({t}*)fuse_xs)[fuse_f / 2];"
                ));
                me.w.close();
                me.scratch_out();
            }
        });
    }

    /// `registers` under its preprocessor condition, if there is one, `else` `scratch`.
    fn in_registers_or(
        &mut self,
        cond: Option<String>,
        registers: impl FnOnce(&mut Self),
        scratch: impl FnOnce(&mut Self),
    ) {
        let Some(cond) = cond else { return scratch(self) };
        self.w.pp(format!("#if {cond}"));
        registers(self);
        self.w.pp("#else");
        scratch(self);
        self.w.pp("#endif");
    }

    /// The preprocessor condition under which the tile of layout `half` (half as many lanes)
    /// holds, in each thread's chunk `j`, exactly the lanes `l / 2` of the lanes `l` of chunk `j`
    /// of the tile of layout `whole`: both lengths' own layouts, `half`'s chunks half as wide and
    /// as many. `None` for derived layouts (their slots are not numbered by chunks of lanes).
    fn paired_chunks(&self, half: usize, whole: usize) -> Option<String> {
        let lens = self.layout.lens.len();
        (half < lens && whole < lens)
            .then(|| format!("FUSE_VEC{half} * 2 == FUSE_VEC{whole} && FUSE_NCH{half} == FUSE_NCH{whole}"))
    }

    /// `dst = op(src, axis)` for a 2-D `src`.
    pub(in crate::emit_cuda) fn reduce_axis(&mut self, dst: VarId, op: ReduceOp, axis: u8, src: VarId) {
        let dims = self.k.ty(src).shape.dims();
        let from_mma = self.tile(src).is_some_and(|k| self.layout.is_mma(k));
        if from_mma && axis == 1 && self.tile(dst).and_then(|k| self.layout.mma_row(k)).is_some() {
            return self.reduce_mma_rows(dst, op, src);
        }
        if axis == 1 && dims[1] != Len::literal_log2(0) && !from_mma {
            return self.reduce_rows(dst, op, src, &dims[1]);
        }
        if axis == 0 {
            return self.reduce_down(dst, Fold::plain(self.dtype(src), op), Some(op), src);
        }
        self.reduce_axis_serial(dst, op, axis, src);
    }

    /// `dst = op(src, axis)` folding each output lane's row or column serially, in lane order,
    /// through the scratch (any warp count).
    fn reduce_axis_serial(&mut self, dst: VarId, op: ReduceOp, axis: u8, src: VarId) {
        let acc = self.dtype(src).compute();
        let t = c_type(acc);
        let what = format!("{} = {}({}, {axis})", self.name(dst), reduce_name(op), self.name(src));
        self.scratch_in(src, &what);
        let (count, at) = self.axis_walk(src, axis);
        let kd = self.tile(dst).expect("axis reductions of 2-D tiles make tiles");
        let d = self.name(dst).to_string();
        let dst_dtype = self.dtype(dst);
        self.w.open_unrolled("fuse_i", &format!("FUSE_EPT{kd}"));
        self.w.open(format!("if (FUSE_OK{kd}(fuse_i / FUSE_VEC{kd}))"));
        self.w.line(format!("const int fuse_f = FUSE_IDX{kd}(fuse_i);"));
        self.w.line(format!("{t} fuse_r = (({t}*)fuse_xs)[{}];", at.replace("fuse_e", "0")));
        self.w.line(format!(
            "for (int fuse_e = 1; fuse_e < {count}; ++fuse_e) fuse_r = {};",
            combine(op, acc, "fuse_r", &format!("(({t}*)fuse_xs)[{at}]"))
        ));
        let r = ctype::convert("fuse_r", acc, dst_dtype, &mut self.needs);
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
        // An integer max/min names its operands twice (`a > b ? a : b`): the shuffle goes into a
        // temporary first, or it would run in the lanes of one arm only (a divergent
        // `__shfl_xor_sync` with the full mask). fmaxf/fminf and sums name it once.
        let step = if matches!(op, ReduceOp::Max | ReduceOp::Min) && acc != DType::F32 {
            format!(
                "{{ const {t} fuse_ov = __shfl_xor_sync(0xffffffffu, fuse_rv[fuse_j], fuse_s); fuse_rv[fuse_j] = {}; }}",
                fold("fuse_rv[fuse_j]", "fuse_ov")
            )
        } else {
            format!(
                "fuse_rv[fuse_j] = {};",
                fold("fuse_rv[fuse_j]", "__shfl_xor_sync(0xffffffffu, fuse_rv[fuse_j], fuse_s)")
            )
        };
        let shfl = |w: &mut super::writer::Writer, from: &str| {
            w.pp("#pragma unroll");
            w.open(format!("for (int fuse_s = {from}; fuse_s > 0; fuse_s >>= 1)"));
            w.unrolled("fuse_j", &format!("FUSE_NCH{p}"), &step);
            w.close();
        };
        self.w.pp(format!("#if FUSE_G{r} <= 32"));
        shfl(&mut self.w, &format!("FUSE_G{r} / 2"));
        self.w.pp(format!("#elif FUSE_SLAB{p}"));
        // A warp slab: a row is FUSE_G / 32 consecutive chunks of each lane of one warp.
        self.w.pp("#pragma unroll");
        self.w.open(format!("for (int fuse_j = 0; fuse_j < FUSE_NCH{p}; fuse_j += FUSE_G{r} / 32)"));
        self.w.line(format!("{t} fuse_r = fuse_rv[fuse_j];"));
        self.w.pp("#pragma unroll");
        self.w.line(format!(
            "for (int fuse_q = 1; fuse_q < FUSE_G{r} / 32; ++fuse_q) fuse_r = {};",
            fold("fuse_r", "fuse_rv[fuse_j + fuse_q]")
        ));
        self.w.unrolled_step(
            "fuse_s",
            "16",
            &format!(
                "{{ const {t} fuse_ov = __shfl_xor_sync(0xffffffffu, fuse_r, fuse_s); fuse_r = {}; }}",
                fold("fuse_r", "fuse_ov")
            ),
        );
        self.w.unrolled("fuse_q", &format!("FUSE_G{r} / 32"), "fuse_rv[fuse_j + fuse_q] = fuse_r;");
        self.w.close();
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
        let dst_dtype = self.dtype(dst);
        let out = ctype::convert("fuse_rv[fuse_j]", acc, dst_dtype, &mut self.needs);
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
                        "if (FUSE_OK{p}(fuse_j) && FUSE_CI{p}(fuse_j) % FUSE_G{r} == 0) {xs}[FUSE_IDX{r}(fuse_j)] = fuse_rv[fuse_j];"
                    ),
                );
                self.w.line("__syncthreads();");
                let got =
                    ctype::convert(&format!("{xs}[FUSE_IDX{kd}(fuse_i)]"), acc, dst_dtype, &mut self.needs);
                self.w.unrolled(
                    "fuse_i",
                    &format!("FUSE_EPT{kd}"),
                    format!("if (FUSE_OK{kd}(fuse_i / FUSE_VEC{kd})) {d}[fuse_i] = {got};"),
                );
            }
        }
        self.w.close();
    }

    /// `dst = op(src, 1)` of an accumulator in MMA layout `p` into its row layout: each thread
    /// folds its slots of each of its rows, the four lanes of a quad combine by two shuffles, and
    /// where the warp grid splits N (`FUSE_WN > 1`) the warps of a row once through the scratch.
    fn reduce_mma_rows(&mut self, dst: VarId, op: ReduceOp, src: VarId) {
        let p = self.tile(src).expect("reductions read tiles");
        let r = self.tile(dst).expect("axis reductions make tiles");
        let (acc, op) = accumulate(self.dtype(src), op);
        let (t, id) = (c_type(acc), identity(op, acc));
        let (d, s) = (self.name(dst).to_string(), self.name(src).to_string());
        let fold = |a: &str, b: &str| combine(op, acc, a, b);
        self.w.line(format!("// {d} = {}({s}, 1): the accumulator's rows, quad shuffles", reduce_name(op)));
        self.w.open("");
        self.w.line(format!("{t} fuse_rv[FUSE_EPT{r}];"));
        self.w.unrolled("fuse_j", &format!("FUSE_EPT{r}"), format!("fuse_rv[fuse_j] = {id};"));
        let x = self.at_as(src, "fuse_i", acc);
        self.w.unrolled(
            "fuse_i",
            &format!("FUSE_EPT{p}"),
            format!(
                "{{ const int fuse_j = ((fuse_i >> 2) / FUSE_NI{p}) * 2 + ((fuse_i >> 1) & 1); fuse_rv[fuse_j] = {}; }}",
                fold("fuse_rv[fuse_j]", &x)
            ),
        );
        // As in reduce_rows: an integer max/min shuffles into a temporary first.
        let step = format!(
            "{{ const {t} fuse_ov = __shfl_xor_sync(0xffffffffu, fuse_rv[fuse_j], fuse_s); fuse_rv[fuse_j] = {}; }}",
            fold("fuse_rv[fuse_j]", "fuse_ov")
        );
        self.w.pp("#pragma unroll");
        self.w.open("for (int fuse_s = 1; fuse_s < 4; fuse_s <<= 1)");
        self.w.unrolled("fuse_j", &format!("FUSE_EPT{r}"), &step);
        self.w.close();
        self.w.pp(format!("#if FUSE_WN{p} > 1"));
        let xs = format!("(({t}*)fuse_xs)");
        self.scratch_bytes_for(format!("(FUSE_WN{p} * FUSE_L{r} * {})", acc.size_bytes()));
        self.w.line("__syncthreads();");
        self.w.unrolled(
            "fuse_j",
            &format!("FUSE_EPT{r}"),
            format!(
                "if ((fuse_tid & 3) == 0 && FUSE_OK{p}(0)) {xs}[FUSE_WNI{p} * FUSE_L{r} + FUSE_IDX{r}(fuse_j)] = fuse_rv[fuse_j];"
            ),
        );
        self.w.line("__syncthreads();");
        self.w.open_unrolled("fuse_j", &format!("FUSE_EPT{r}"));
        self.w.open(format!("if (FUSE_OK{p}(0))"));
        self.w.line(format!("fuse_rv[fuse_j] = {xs}[FUSE_IDX{r}(fuse_j)];"));
        self.w.line(format!(
            "for (int fuse_q = 1; fuse_q < FUSE_WN{p}; ++fuse_q) fuse_rv[fuse_j] = {};",
            fold("fuse_rv[fuse_j]", &format!("{xs}[fuse_q * FUSE_L{r} + FUSE_IDX{r}(fuse_j)]"))
        ));
        self.w.close();
        self.w.close();
        self.w.pp("#endif");
        let out = ctype::convert("fuse_rv[fuse_j]", acc, self.dtype(dst), &mut self.needs);
        self.w.unrolled("fuse_j", &format!("FUSE_EPT{r}"), format!("{d}[fuse_j] = {out};"));
        self.w.close();
    }

    /// Makes the scratch `fuse_xs` at least `bytes` (a C expression) large.
    pub(in crate::emit_cuda) fn scratch_bytes_for(&mut self, bytes: String) {
        if self.in_pipeline && !self.loop_scratch.contains(&bytes) {
            self.loop_scratch.push(bytes.clone());
        }
        if !self.scratch_bytes.contains(&bytes) {
            self.scratch_bytes.push(bytes);
        }
    }

    /// As [`Emitter::scratch_bytes_for`] for the folds across threads, whose sizes all enter the
    /// scratch's as one term, their maximum as a balanced tree (the scratch's own maximum over its
    /// terms doubles its text with each term).
    fn fold_scratch_for(&mut self, bytes: String) {
        if self.in_pipeline && !self.loop_scratch.contains(&bytes) {
            self.loop_scratch.push(bytes.clone());
        }
        if self.fold_scratch.contains(&bytes) {
            return;
        }
        self.fold_scratch.push(bytes);
        let term = balanced_max(&self.fold_scratch);
        match self.fold_scratch_at {
            Some(i) => self.scratch_bytes[i] = term,
            None => {
                self.fold_scratch_at = Some(self.scratch_bytes.len());
                self.scratch_bytes.push(term);
            }
        }
    }

    /// `dst = argmax/argmin(src[, axis])`: the first index of the extreme lane, NaN first (see
    /// [`Fold`]: the pairs' order makes the result independent of the fold order).
    pub(in crate::emit_cuda) fn arg_reduce(&mut self, dst: VarId, op: ArgOp, axis: Option<u8>, src: VarId) {
        let fold = Fold::Arg { op, val: self.dtype(src).compute() };
        let dims = self.k.ty(src).shape.dims();
        let unit = Len::literal_log2(0);
        match axis {
            Some(0) => self.reduce_down(dst, fold, None, src),
            Some(_) if dims[1] == unit => {
                // [R, 1] along its rows: every index is 0.
                let kd = self.tile(dst).expect("axis reductions of 2-D tiles make tiles");
                let d = self.name(dst).to_string();
                self.w.line(format!("// {d} = {}({}, 1): one column", arg_name(op), self.name(src)));
                self.w.unrolled("fuse_i", &format!("FUSE_EPT{kd}"), format!("{d}[fuse_i] = 0;"));
            }
            Some(_) => self.arg_rows(dst, op, src, &dims[1]),
            None => {
                let p = self.tile(src).expect("argmax takes a tile");
                let d = self.name(dst).to_string();
                self.w.line(format!("// {d} = {}({}): over the block", arg_name(op), self.name(src)));
                self.w.open("");
                self.fold_columns(src, fold, None, &|i: &str| format!("FUSE_IDX{p}({i})"));
                self.w.line(format!("{d} = fuse_ci[0];"));
                self.w.close();
            }
        }
    }

    /// The serial form of [`Emitter::arg_reduce`]: each output lane searches its row or column (or
    /// the whole tile) in lane order through the scratch (any warp count).
    fn arg_reduce_serial(&mut self, dst: VarId, op: ArgOp, axis: Option<u8>, src: VarId) {
        let src_dtype = self.dtype(src);
        let t = c_type(src_dtype);
        let name = if op == ArgOp::Max { "argmax" } else { "argmin" };
        let what = format!("{} = {name}({})", self.name(dst), self.name(src));
        self.scratch_in(src, &what);
        let beats = |x: &str, best: &str| {
            let cmp = if op == ArgOp::Max { ">" } else { "<" };
            if src_dtype == DType::F32 {
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
                self.arg_loop(t, &count, &at, &beats);
                self.w.line(format!("{d}[fuse_i] = fuse_bi;"));
                self.w.close();
                self.w.close();
            }
            _ => {
                let len = self.k.ty(src).shape.len().expect("argmax takes a tile");
                let count = len.c_expr(&self.k.consts);
                self.arg_loop(t, &count, "fuse_e", &beats);
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

/// Reductions along axis 0 and arg-reductions by folds across threads (see [`Fold`]).
///
/// Down the columns of a `[R, C]` tile: a row is `G = C / VEC` chunks, so chunk `g` (chunk `j` of
/// thread `tid` is `g = j * THREADS + tid`) holds the columns of group `g % G`. When `G` divides
/// `THREADS` that is `tid % G` for every chunk of the thread: it folds its chunks in registers,
/// lanes `G, 2G, ..` apart in a warp (lane bits `>= log2 G`) combine by butterfly shuffles, and
/// the warps holding the same columns combine through shared memory, each holder reading them in
/// the same order, so every thread ends with its columns' totals, bit-identical across holders:
/// the column layout. When `THREADS` divides `G` (a row spans the block), chunks `G / THREADS`
/// apart of one thread hold the same columns and no other thread does: registers only.
impl Emitter<'_> {
    /// `dst = op(src, 0)` (or `argmax/argmin(src, 0)`) for a `[R, C]` `src` in its length's
    /// layout: the result in the column layout of `src`'s when `dst` has it (free), else posted
    /// by the first row's threads through the scratch into `dst`'s layout. `serial`: a plain
    /// reduction's op, for the serial form where the warp count allows neither case above.
    fn reduce_down(&mut self, dst: VarId, fold: Fold, serial: Option<ReduceOp>, src: VarId) {
        let dims = self.k.ty(src).shape.dims();
        let (rows, cols) = (&dims[0], &dims[1]);
        let unit = Len::literal_log2(0);
        let p = self.tile(src).expect("reductions read tiles");
        let kd = self.tile(dst).expect("axis reductions of 2-D tiles make tiles");
        let (d, s) = (self.name(dst).to_string(), self.name(src).to_string());
        let dst_dtype = self.dtype(dst);
        let what = match fold {
            Fold::Plain { op, .. } => format!("{d} = {}({s}, 0)", reduce_name(op)),
            Fold::Arg { op, .. } => format!("{d} = {}({s}, 0)", arg_name(op)),
        };
        if *cols == unit {
            // [R, 1]: one column (VEC is not capped at it), folded over the whole block.
            self.w.line(format!("// {what}: one column, folded over the block"));
            self.w.open("");
            self.fold_columns(src, fold, None, &|i: &str| format!("FUSE_IDX{p}({i})"));
            let r = self.fold_result(fold, "0", dst_dtype);
            self.w.unrolled("fuse_i", &format!("FUSE_EPT{kd}"), format!("{d}[fuse_i] = {r};"));
            self.w.close();
            return;
        }
        if *rows == unit && kd == p {
            // [1, C] to [C] in the same layout: each column is the lane itself.
            self.w.line(format!("// {what}: one row"));
            let e = match fold {
                Fold::Plain { acc, .. } => {
                    let x = self.at_as(src, "fuse_i", acc);
                    ctype::convert(&x, acc, dst_dtype, &mut self.needs)
                }
                Fold::Arg { .. } => "0".into(),
            };
            self.w.unrolled("fuse_i", &format!("FUSE_EPT{kd}"), format!("{d}[fuse_i] = {e};"));
            return;
        }
        let c = cols.c_expr(&self.k.consts);
        let g = format!("(({c}) / FUSE_VEC{p})");
        self.w.line(format!(
            "// {what}: down the columns, in registers, across lanes by shuffles, across warps through shared memory"
        ));
        // Every power-of-two warp count passes; otherwise the serial form below.
        let fast = format!("({g} <= FUSE_THREADS ? FUSE_THREADS % {g} == 0 : {g} % FUSE_THREADS == 0)");
        self.w.pp(format!("#if {fast}"));
        self.w.open("");
        self.fold_columns(src, fold, Some(cols), &|i: &str| format!("FUSE_IDX{p}({i}) / ({c})"));
        let slot = format!("((fuse_i / FUSE_VEC{p}) % fuse_na) * FUSE_VEC{p} + fuse_i % FUSE_VEC{p}");
        if self.layout.find_row(p, cols, true) == Some(kd) {
            // Slot i of the column layout holds the column of src's slot i: the thread's own.
            let r = self.fold_result(fold, &slot, dst_dtype);
            self.w.unrolled("fuse_i", &format!("FUSE_EPT{p}"), format!("{d}[fuse_i] = {r};"));
        } else {
            // The first row's chunks (g < G) post their columns, each once.
            let (t, post) = match fold {
                Fold::Plain { acc, .. } => (acc, "fuse_cv"),
                Fold::Arg { .. } => (DType::I32, "fuse_ci"),
            };
            let xs = format!("(({}*)fuse_xs)", c_type(t));
            self.fold_scratch_for(format!("(FUSE_L{kd} * {})", t.size_bytes()));
            self.w.line("__syncthreads();");
            self.w.open_unrolled("fuse_j", &format!("FUSE_NCH{p}"));
            self.w.line("const int fuse_g0 = fuse_j * FUSE_THREADS + fuse_tid;");
            self.w.unrolled(
                "fuse_v",
                &format!("FUSE_VEC{p}"),
                format!(
                    "if (FUSE_OK{p}(fuse_j) && fuse_g0 < fuse_g) {xs}[fuse_g0 * FUSE_VEC{p} + fuse_v] = {post}[(fuse_j % fuse_na) * FUSE_VEC{p} + fuse_v];"
                ),
            );
            self.w.close();
            self.w.line("__syncthreads();");
            let got = ctype::convert(&format!("{xs}[FUSE_IDX{kd}(fuse_i)]"), t, dst_dtype, &mut self.needs);
            self.w.unrolled(
                "fuse_i",
                &format!("FUSE_EPT{kd}"),
                format!("if (FUSE_OK{kd}(fuse_i / FUSE_VEC{kd})) {d}[fuse_i] = {got};"),
            );
        }
        self.w.close();
        self.w.pp("#else");
        let terms = self.scratch_bytes.len();
        match (fold, serial) {
            (Fold::Arg { op, .. }, _) => self.arg_reduce_serial(dst, op, Some(0), src),
            (Fold::Plain { .. }, Some(op)) => self.reduce_axis_serial(dst, op, 0, src),
            (Fold::Plain { .. }, None) => unreachable!("a plain fold names its op"),
        }
        // The whole tile in the scratch only where the serial form is compiled.
        if self.scratch_bytes.len() > terms {
            let whole = self.scratch_bytes.pop().expect("the serial form's term");
            self.fold_scratch_for(format!("({fast} ? 1 : {whole})"));
        }
        self.w.pp("#endif");
    }

    /// Accumulator `k` of the last fold as a `dst_dtype` value (a pair gives its index).
    fn fold_result(&mut self, fold: Fold, k: &str, dst_dtype: DType) -> String {
        match fold {
            Fold::Plain { acc, .. } => {
                ctype::convert(&format!("fuse_cv[{k}]"), acc, dst_dtype, &mut self.needs)
            }
            Fold::Arg { .. } => format!("fuse_ci[{k}]"),
        }
    }

    /// Folds `src` (in its length's layout) down its columns (`cols`; `None`: every lane is one
    /// column) into accumulators `fuse_cv` (and `fuse_ci`, the pairs' indices, lane `i`'s being
    /// `index(i)`) that every thread holds for the columns of its slots: slot `i` of chunk `j`
    /// holds accumulator `(j % fuse_na) * VEC + i % VEC` (`0` for one column). Declares
    /// `fuse_g` (chunks per row) and `fuse_na` in the enclosing block. Every thread must run it
    /// (shuffles and barriers); it needs `G` to divide `THREADS` or `THREADS` to divide `G`.
    fn fold_columns(&mut self, src: VarId, fold: Fold, cols: Option<&Len>, index: &dyn Fn(&str) -> String) {
        let p = self.tile(src).expect("reductions read tiles");
        let acc = Acc { fold, name: "fuse_c" };
        let (g, vc) = match cols {
            Some(c) => (format!("({}) / FUSE_VEC{p}", c.c_expr(&self.k.consts)), format!("FUSE_VEC{p}")),
            None => ("1".to_string(), "1".to_string()),
        };
        self.w.line(format!("constexpr int fuse_g = {g};"));
        self.w.line(
            "// Chunks fuse_na apart of one thread hold the same columns (a row wider than the block).",
        );
        self.w.line("constexpr int fuse_na = fuse_g > FUSE_THREADS ? fuse_g / FUSE_THREADS : 1;");
        let n = if cols.is_some() { format!("fuse_na * {vc}") } else { "1".to_string() };
        for l in acc.decl(&n) {
            self.w.line(l);
        }
        self.w.unrolled("fuse_a", &n, acc.init("fuse_a"));
        let i = format!("fuse_j * FUSE_VEC{p} + fuse_v");
        let (x, xi) = (self.at_as(src, &i, fold.value()), index(&i));
        let k = if cols.is_some() { format!("(fuse_j % fuse_na) * {vc} + fuse_v") } else { "0".to_string() };
        self.w.open_unrolled("fuse_j", &format!("FUSE_NCH{p}"));
        self.w.open(format!("if (FUSE_OK{p}(fuse_j))"));
        self.w.unrolled("fuse_v", &format!("FUSE_VEC{p}"), acc.fold_in(&k, &x, &xi));
        self.w.close();
        self.w.close();
        self.w.line("// Lanes fuse_g, 2 * fuse_g, .. apart in a warp hold the same columns.");
        self.w.pp("#pragma unroll");
        self.w.open("for (int fuse_s = fuse_g; fuse_s < 32; fuse_s <<= 1)");
        self.w.unrolled("fuse_a", &n, acc.shfl("fuse_a", "fuse_s"));
        self.w.close();
        // Across warps: W * min(G, 32) slots of shared memory per value, at most 16 KiB a pass.
        let bytes = fold.bytes();
        let gm = format!("({g})");
        let total = format!("(FUSE_NUM_WARPS * ({gm} < 32 ? {gm} : 32) * {vc} * {bytes})");
        self.fold_scratch_for(format!(
            "(FUSE_NUM_WARPS > 1 && {gm} < FUSE_THREADS ? ({total} < 16384 ? {total} : 16384) : 1)"
        ));
        self.w.pp("#if FUSE_NUM_WARPS > 1");
        self.w.open("if (fuse_g < FUSE_THREADS)");
        self.w
            .line("// The first fuse_sg lanes of warp w hold distinct columns: slot w * fuse_sg + lane. The");
        self.w.line("// threads holding column group q are slots q, q + fuse_g, ..; fuse_pv values a pass.");
        self.w.line("constexpr int fuse_sg = fuse_g < 32 ? fuse_g : 32;");
        self.w.line("constexpr int fuse_ns = FUSE_NUM_WARPS * fuse_sg;");
        self.w.line(format!("constexpr int fuse_room = 16384 / (fuse_ns * {bytes});"));
        self.w.line(format!(
            "constexpr int fuse_pv = fuse_room >= {vc} ? {vc} : fuse_room >= 8 ? 8 : fuse_room >= 4 ? 4 : fuse_room >= 2 ? 2 : 1;"
        ));
        self.w.line("const int fuse_q = fuse_tid % fuse_g;");
        self.w.pp("#pragma unroll");
        self.w.open(format!("for (int fuse_a0 = 0; fuse_a0 < {vc}; fuse_a0 += fuse_pv)"));
        let shared = "fuse_ns * fuse_pv";
        self.w.line("__syncthreads();");
        self.w.open("if ((fuse_tid & 31) < fuse_sg)");
        self.w.unrolled(
            "fuse_a",
            "fuse_pv",
            acc.to_shared(
                "fuse_a0 + fuse_a",
                "((fuse_tid >> 5) * fuse_sg + (fuse_tid & 31)) * fuse_pv + fuse_a",
                shared,
            ),
        );
        self.w.close();
        self.w.line("__syncthreads();");
        self.w.open_unrolled("fuse_a", "fuse_pv");
        self.w.line(acc.load_shared("fuse_a0 + fuse_a", "fuse_q * fuse_pv + fuse_a", shared));
        self.w.pp("#pragma unroll");
        self.w.line(format!(
            "for (int fuse_k = 1; fuse_k < fuse_ns / fuse_g; ++fuse_k) {}",
            acc.fold_shared("fuse_a0 + fuse_a", "(fuse_q + fuse_k * fuse_g) * fuse_pv + fuse_a", shared)
        ));
        self.w.close();
        self.w.close();
        self.w.close();
        self.w.pp("#endif");
    }

    /// `dst = argmax/argmin(src, 1)` for a `[R, C]` `src`, `C > 1`: as [`Emitter::reduce_rows`] with
    /// (value, index) pairs; the indices stay in the row layout when `dst` has it, else each
    /// row's first thread posts its row's through the scratch.
    fn arg_rows(&mut self, dst: VarId, op: ArgOp, src: VarId, cols: &Len) {
        let p = self.tile(src).expect("reductions read tiles");
        let kd = self.tile(dst).expect("axis reductions of 2-D tiles make tiles");
        let fold = Fold::Arg { op, val: self.dtype(src).compute() };
        let acc = Acc { fold, name: "fuse_r" };
        let (d, s) = (self.name(dst).to_string(), self.name(src).to_string());
        let c = cols.c_expr(&self.k.consts);
        self.w.line(format!(
            "// {d} = {}({s}, 1): each row over its fuse_g threads, (value, index) pairs",
            arg_name(op)
        ));
        self.w.open("");
        self.w.line(format!("constexpr int fuse_g = ({c}) / FUSE_VEC{p};"));
        let nch = format!("FUSE_NCH{p}");
        for l in acc.decl(&nch) {
            self.w.line(l);
        }
        let i = format!("fuse_j * FUSE_VEC{p} + fuse_v");
        let (x, xi) = (self.at_as(src, &i, fold.value()), format!("FUSE_IDX{p}({i}) % ({c})"));
        self.w.open_unrolled("fuse_j", &nch);
        self.w.line(acc.init("fuse_j"));
        self.w.open(format!("if (FUSE_OK{p}(fuse_j))"));
        self.w.unrolled("fuse_v", &format!("FUSE_VEC{p}"), acc.fold_in("fuse_j", &x, &xi));
        self.w.close();
        self.w.close();
        self.w.line("// Within the row's threads, or the whole warp when a row spans warps.");
        self.w.pp("#pragma unroll");
        self.w.open("for (int fuse_s = (fuse_g < 32 ? fuse_g : 32) / 2; fuse_s > 0; fuse_s >>= 1)");
        self.w.unrolled("fuse_j", &nch, acc.shfl("fuse_j", "fuse_s"));
        self.w.close();
        let bytes = fold.bytes();
        self.fold_scratch_for(format!("((({c}) / FUSE_VEC{p}) > 32 ? {nch} * FUSE_NUM_WARPS * {bytes} : 1)"));
        self.w.open("if (fuse_g > 32)");
        self.w.line(
            "// A row spans fuse_g / 32 warps: one pair per (chunk, warp), then each thread folds its row's.",
        );
        let shared = format!("{nch} * FUSE_NUM_WARPS");
        self.w.line("__syncthreads();");
        self.w.unrolled(
            "fuse_j",
            &nch,
            format!(
                "if ((fuse_tid & 31) == 0 && FUSE_OK{p}(fuse_j)) {}",
                acc.to_shared("fuse_j", "fuse_j * FUSE_NUM_WARPS + (fuse_tid >> 5)", &shared)
            ),
        );
        self.w.line("__syncthreads();");
        self.w.open_unrolled("fuse_j", &nch);
        self.w.open(format!("if (FUSE_OK{p}(fuse_j))"));
        self.w.line("const int fuse_w0 = ((fuse_j * FUSE_THREADS + fuse_tid) / fuse_g) * (fuse_g / 32);");
        self.w.line(acc.load_shared("fuse_j", "fuse_w0", &shared));
        self.w.line(format!(
            "for (int fuse_q = 1; fuse_q < fuse_g / 32; ++fuse_q) {}",
            acc.fold_shared("fuse_j", "fuse_w0 + fuse_q", &shared)
        ));
        self.w.close();
        self.w.close();
        self.w.close();
        if self.layout.find_row(p, cols, false) == Some(kd) {
            self.w.unrolled("fuse_j", &nch, format!("{d}[fuse_j] = fuse_ri[fuse_j];"));
        } else {
            // Each row's first thread posts it.
            self.fold_scratch_for(format!("(FUSE_L{kd} * 4)"));
            self.w.line("__syncthreads();");
            self.w.unrolled(
                "fuse_j",
                &nch,
                "if (FUSE_OK{p}(fuse_j) && (fuse_j * FUSE_THREADS + fuse_tid) % fuse_g == 0) ((int*)fuse_xs)[(fuse_j * FUSE_THREADS + fuse_tid) / fuse_g] = fuse_ri[fuse_j];"
                    .replace("{p}", &p.to_string()),
            );
            self.w.line("__syncthreads();");
            self.w.unrolled(
                "fuse_i",
                &format!("FUSE_EPT{kd}"),
                format!("if (FUSE_OK{kd}(fuse_i / FUSE_VEC{kd})) {d}[fuse_i] = ((int*)fuse_xs)[FUSE_IDX{kd}(fuse_i)];"),
            );
        }
        self.w.close();
    }
}

/// The largest of `terms` (C constant expressions) as `(a > b ? a : b)` over halves: each term
/// appears `O(n)` times, not `2^n` as in a left fold.
fn balanced_max(terms: &[String]) -> String {
    match terms {
        [one] => one.clone(),
        _ => {
            let (a, b) = terms.split_at(terms.len() / 2);
            let (a, b) = (balanced_max(a), balanced_max(b));
            format!("({a} > {b} ? {a} : {b})")
        }
    }
}

fn arg_name(op: ArgOp) -> &'static str {
    match op {
        ArgOp::Max => "argmax",
        ArgOp::Min => "argmin",
    }
}

fn reduce_name(op: ReduceOp) -> &'static str {
    match op {
        ReduceOp::Sum => "sum",
        ReduceOp::Max => "max",
        ReduceOp::Min => "min",
    }
}
