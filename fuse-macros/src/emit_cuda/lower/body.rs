//! Statements and element-wise expressions. A tile assignment is one `#pragma unroll` loop over
//! the thread's EPT slots (all tiles of one operation share a length, hence a layout); a scalar
//! assignment is one C statement executed redundantly by every thread.
use super::ctype::{self, c_type, unsigned_of};
use super::Emitter;
use crate::emit_cuda::analysis::affine::Fact;
use crate::emit_cuda::analysis::remat::BUDGET;
use fuse_ir::{BinaryOp, DType, Expr, Specialization, Stmt, UnaryOp, VarId};

impl Emitter<'_> {
    pub(in crate::emit_cuda) fn body(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Assign { dst, expr } if self.needs_views(*dst, expr) => {
                let vars: Vec<VarId> = expr.operands();
                self.with_views(*dst, &vars, &|emitter: &mut Self| emitter.assign(*dst, expr));
            }
            Stmt::Assign { dst, expr } => self.assign(*dst, expr),
            Stmt::Store { param, offset, value, mask } => {
                if let Some(l) = self.coalesced_store_layout(*param, *offset, *value, *mask) {
                    return self.store_through_scratch((*param, *offset, *value, *mask), l);
                }
                let vars: Vec<VarId> = [*offset].into_iter().chain(*mask).collect();
                self.with_views(*value, &vars, &|emitter: &mut Self| {
                    emitter.store(*param, *offset, *value, *mask)
                });
            }
            Stmt::If { cond, then_body, else_body } => {
                let mut c = self.name(*cond).to_string();
                if let Some(b) = self.branches.iter().position(|v| v == cond) {
                    let (taken, skipped) =
                        (Specialization::BranchTaken(b as u32), Specialization::BranchSkipped(b as u32));
                    self.spec(taken);
                    self.spec(skipped);
                    c = format!(
                        "{} || (!{} && {c})",
                        taken.macro_name(&self.k.params),
                        skipped.macro_name(&self.k.params)
                    );
                }
                self.w.open(format!("if ({c})"));
                self.body(then_body);
                if else_body.is_empty() {
                    self.w.close();
                } else {
                    self.w.reopen("} else {");
                    self.body(else_body);
                    self.w.close();
                }
            }
            Stmt::For { var, start, end, step, body } => {
                // Bounds are evaluated once; the counter never steps past `end` (no overflow).
                self.needs.step = true;
                let n = self.loops;
                self.loops += 1;
                let d = self.dtype(*var);
                let t = c_type(d);
                let (v, s, e, st) = (
                    self.name(*var).to_string(),
                    self.at_as(*start, "", d),
                    self.at_as(*end, "", d),
                    self.at_as(*step, "", d),
                );
                self.w.open("");
                self.w.line(format!("const {t} fuse_end{n} = {e}, fuse_step{n} = {st};"));
                let zero = ctype::int_lit(0, d);
                if let Some(plan) = self.pipelines.get(var).cloned() {
                    self.w.open(format!("if (fuse_step{n} > {zero})"));
                    self.pipelined_for(n, (*var, &s), body, &plan);
                } else {
                    self.w.open(format!(
                        "if (fuse_step{n} > {zero}) for ({v} = {s}; {v} < fuse_end{n}; {v} = fuse_next({v}, fuse_end{n}, fuse_step{n}))"
                    ));
                    self.body(body);
                }
                self.w.close();
                self.w.close();
            }
        }
    }

    /// Whether `dst = expr` is an operation whose tiles share one layout (element-wise, casts,
    /// `where_`, loads), so that an index tile of another layout among its operands is read
    /// through a view.
    fn needs_views(&self, dst: VarId, expr: &Expr) -> bool {
        let shared = !matches!(
            expr,
            Expr::Reduce(..)
                | Expr::Broadcast(_)
                | Expr::Reshape(_)
                | Expr::Trans(_)
                | Expr::Split { .. }
                | Expr::Join(..)
                | Expr::ReduceAxis { .. }
                | Expr::ArgReduce { .. }
                | Expr::Dot { .. }
        );
        shared && self.tile(dst).is_some()
    }

    /// Runs `f` with each index tile of `vars` whose layout is not `like`'s replaced by a view:
    /// the tile recomputed at the lanes `like`'s layout holds ([`crate::emit_cuda::analysis::remat`]; the layout pass
    /// left such tiles out of the meet of a tensor-core layout). Tiles already in that layout,
    /// scalars and other tiles are read as they are.
    pub(in crate::emit_cuda) fn with_views(&mut self, like: VarId, vars: &[VarId], f: &dyn Fn(&mut Self)) {
        let Some(k) = self.tile(like) else { return f(self) };
        let mut views: Vec<(VarId, String, Option<usize>, Option<String>)> = Vec::new();
        for &v in vars {
            let i = v.0 as usize;
            if self.tile(v).is_none_or(|kv| kv == k)
                || !self.transparent[i]
                || views.iter().any(|(x, ..)| *x == v)
            {
                continue;
            }
            let mut budget = BUDGET;
            let Some(e) = self.at_lanes_of(k, |emitter| emitter.value_at(v, "(fuse_f)", &mut budget)) else {
                continue;
            };
            if views.is_empty() {
                self.w.open("");
            }
            let name = format!("fuse_view_{}", self.names.vars[i]);
            self.w.line(format!("// {name}: {} recomputed at the lanes of layout {k}", self.names.vars[i]));
            self.w.line(format!("{} {name}[FUSE_EPT{k}];", c_type(self.dtype(v))));
            self.w.open_unrolled("fuse_i", &format!("FUSE_EPT{k}"));
            self.w.line(format!("const int fuse_f = FUSE_IDX{k}(fuse_i);"));
            self.w.line(format!("{name}[fuse_i] = {e};"));
            self.w.close();
            let old_name = std::mem::replace(&mut self.names.vars[i], name);
            let old_layout = self.var_layout[i].replace(k);
            let old_uniform = std::mem::take(&mut self.chunk_uniform[i]);
            views.push((v, old_name, old_layout, old_uniform));
        }
        f(self);
        if views.is_empty() {
            return;
        }
        for (v, name, layout, uniform) in views {
            let i = v.0 as usize;
            self.names.vars[i] = name;
            self.var_layout[i] = layout;
            self.chunk_uniform[i] = uniform;
        }
        self.w.close();
    }

    fn assign(&mut self, dst: VarId, expr: &Expr) {
        if let Some(i) = self.host_scalars.iter().position(|&v| v == dst) {
            // The runtime computed it for this launch (fuse-ir's host_scalars.rs).
            self.w.line(format!("{} = fuse_host{i};", self.name(dst)));
            return;
        }
        match expr {
            Expr::Load { .. } if self.staged.contains_key(&dst) => {
                // Issued ahead into the stage its `dot` reads (analysis/pipeline.rs, lower/pipeline.rs).
                self.accesses += 1;
                self.w.line(format!("// {}: in its stage, loaded ahead", self.name(dst)));
            }
            Expr::Load { param, offset, mask, other } => self.load(dst, *param, *offset, *mask, *other),
            Expr::Reduce(op, src) => self.reduce(dst, *op, *src),
            Expr::Rand { seed, offset, width } => self.rand(dst, *seed, *offset, *width),
            Expr::Broadcast(src) => self.broadcast(dst, *src),
            Expr::Reshape(src) => self.reshape(dst, *src),
            Expr::Trans(src) if self.kmajor_b.contains_key(&dst) => {
                // Its dot reads `src` as B's K-major form (mma.rs).
                self.w.line(format!(
                    "// {} = trans({}): read by its dot as K-major B",
                    self.name(dst),
                    self.name(*src)
                ));
            }
            Expr::Trans(src) => self.trans(dst, *src),
            Expr::Split { src, half } => self.split(dst, *src, *half),
            Expr::Join(even, odd) => self.join(dst, *even, *odd),
            Expr::ReduceAxis { op, axis, src } => self.reduce_axis(dst, *op, *axis, *src),
            Expr::ArgReduce { op, axis, src } => self.arg_reduce(dst, *op, *axis, *src),
            Expr::Dot { a, b, acc } => self.dot(dst, *a, *b, *acc),
            Expr::Binary(BinaryOp::Rem, a, b)
                if self.dtype(*a).is_int()
                    && self.dtype(*a).size_bytes() >= 4
                    && self.tile(dst).is_some_and(|k| self.layout.row(k).is_none())
                    && self.tile(*b).is_none()
                    && matches!(self.facts.get(*a), Fact::Contig(_)) =>
            {
                self.rem_contig(dst, *a, *b)
            }
            _ => match self.tile(dst) {
                Some(k) if self.chunk_uniform[dst.0 as usize].is_some() && expr.operands().contains(&dst) => {
                    // Lanes of `dst` are read at their chunk's first slot: write that slot last.
                    let e = self.elem(dst, expr, "fuse_i");
                    let d = self.name(dst).to_string();
                    self.w.pp("#pragma unroll");
                    self.w.line(format!(
                        "for (int fuse_i = FUSE_EPT{k} - 1; fuse_i >= 0; --fuse_i) {d}[fuse_i] = {e};"
                    ));
                }
                Some(k) => {
                    let mut e = self.elem(dst, expr, "fuse_i");
                    if let Some(m) = self.masks.iter().position(|&v| v == dst) {
                        // Proven all-true at launch: a constant, which folds every test of it away.
                        let all_true = Specialization::AllTrue(m as u32);
                        self.spec(all_true);
                        self.masks_named += 1;
                        e = format!("{} || {e}", all_true.macro_name(&self.k.params));
                    }
                    let d = self.name(dst).to_string();
                    self.w.unrolled("fuse_i", &format!("FUSE_EPT{k}"), format!("{d}[fuse_i] = {e};"));
                }
                None => {
                    let e = self.elem(dst, expr, "");
                    let d = self.name(dst).to_string();
                    self.w.line(format!("{d} = {e};"));
                }
            },
        }
    }

    /// `dst = a % b` where `a` is consecutive within each chunk (`s + element index`) and `b` a
    /// scalar (e.g. the bias column `offs % h`): one division per thread. Chunk `j` of a thread
    /// starts `j * D` after its first (`D = FUSE_CSTEP * VEC`), so its remainder is the previous
    /// chunk's plus `D`, less `b` at most once when `D < b`; inside a chunk the remainder steps by 1
    /// (wrapping to 0 at `b`). The thread takes that path only where it is exact — `b > 0`, the
    /// first value non-negative, and no lane wrapped — and else divides every lane. `a` is
    /// `s + index` modulo its type or a type it was cast from, so along the index it steps by +1
    /// except where some type wrapped, where the step differs from +1 by a multiple of that
    /// type's 2^bits (-2^bits, or 2^64 - 2^32 where a sign extension into a wider unsigned type
    /// follows an i32 wrap). Its last slot `z` is `K` indices after its first `a0`
    /// (`K = (NCH - 1) * D + VEC - 1`), so `z - a0 = K + J` with `J` the jumps' total. `z >= a0`
    /// and `z - a0 == K` modulo 2^bits of `a`'s type force `J = 0`: jumps that cancel modulo
    /// 2^bits without cancelling outright would need far more wraps, or a far longer span, than a
    /// tile of at most 2^16 elements allows. 4- and 8-byte types only (`D` fits them).
    fn rem_contig(&mut self, dst: VarId, a: VarId, b: VarId) {
        self.needs.int_div = true;
        let k = self.tile(dst).expect("tile");
        let d = self.dtype(a);
        let t = c_type(d);
        let (dn, an, bn) = (self.name(dst).to_string(), self.name(a).to_string(), self.at_as(b, "", d));
        let zero = ctype::int_lit(0, d);
        let lo = if d.is_signed_int() { format!("{an}[0] >= {zero} && ") } else { String::new() };
        self.w.line(format!("// {dn} = {an} % {bn}: one division per thread, the rest stepped"));
        self.w.open("");
        let u = unsigned_of(d);
        let step = self.layout.chunk_step(k);
        self.w.line(format!(
            "const {t} fuse_a0 = {an}[0], fuse_z = {an}[FUSE_EPT{k} - 1], fuse_d = ({t})({step} * FUSE_VEC{k});"
        ));
        self.w.line(format!(
            "const bool fuse_step = {lo}{bn} > {zero} && (FUSE_NCH{k} == 1 || fuse_d < {bn}) && fuse_z >= fuse_a0 && ({u})fuse_z - ({u})fuse_a0 == ({u})(FUSE_NCH{k} - 1) * ({u})fuse_d + ({u})(FUSE_VEC{k} - 1);"
        ));
        self.w.open("if (fuse_step)");
        self.w.line(format!("{t} fuse_r = fuse_rem(fuse_a0, {bn});"));
        self.w.open_unrolled("fuse_j", &format!("FUSE_NCH{k}"));
        self.w.line(format!("const int fuse_b = fuse_j * FUSE_VEC{k};"));
        // r + D - b without overflow: r < b and D < b.
        self.w.line(format!(
            "if (fuse_j > 0) fuse_r = fuse_r >= {bn} - fuse_d ? fuse_r - ({bn} - fuse_d) : fuse_r + fuse_d;"
        ));
        // With VEC dividing both the chunk's start and `b`, `r` is a multiple of VEC and at most
        // `b - VEC`: the chunk never wraps.
        let no_wrap = match (self.facts.get(a), self.facts.get(b)) {
            (Fact::Contig(da), fb) => fb.uniform_div().map(|db| da.min(&db)),
            _ => None,
        };
        let no_wrap = no_wrap.map(|d| self.vec_divides(&d, k));
        if let Some(c) = &no_wrap {
            self.w.pp(format!("#if {c}"));
            self.w.unrolled(
                "fuse_v",
                &format!("FUSE_VEC{k}"),
                format!("{dn}[fuse_b + fuse_v] = fuse_r + fuse_v;"),
            );
            self.w.pp("#else");
        }
        self.w.line(format!("{t} fuse_q = fuse_r;"));
        self.w.line(format!("{dn}[fuse_b] = fuse_q;"));
        self.w.pp("#pragma unroll");
        self.w.open(format!("for (int fuse_v = 1; fuse_v < FUSE_VEC{k}; ++fuse_v)"));
        self.w.line(format!("fuse_q = fuse_q + 1 == {bn} ? {zero} : fuse_q + 1;"));
        self.w.line(format!("{dn}[fuse_b + fuse_v] = fuse_q;"));
        self.w.close();
        if no_wrap.is_some() {
            self.w.pp("#endif");
        }
        self.w.close();
        self.w.reopen("} else {");
        self.w.unrolled(
            "fuse_i",
            &format!("FUSE_EPT{k}"),
            format!("{dn}[fuse_i] = fuse_rem({an}[fuse_i], {bn});"),
        );
        self.w.close();
        self.w.close();
    }

    /// The C expression for slot `i` of an element-wise `expr`, of `dst`'s dtype.
    fn elem(&mut self, dst: VarId, expr: &Expr, i: &str) -> String {
        let to = self.dtype(dst);
        match *expr {
            Expr::Copy(v) | Expr::Splat(v) | Expr::Cast(v) => self.at_as(v, i, to),
            Expr::Lit(ref lit) => ctype::literal(lit, to, &mut self.needs),
            Expr::Param(p) => {
                let from = match self.k.params[p as usize].kind {
                    fuse_ir::ParamKind::Scalar(d) => d,
                    fuse_ir::ParamKind::Ptr { .. } => unreachable!("pointer params are not values"),
                };
                ctype::convert(&self.names.params[p as usize].clone(), from, to, &mut self.needs)
            }
            Expr::ConstGeneric(c) => format!("(({}){})", c_type(to), self.k.consts[c as usize]),
            Expr::ProgramId(a) => {
                ctype::convert(&format!("(int)blockIdx.{}", axis(a)), DType::I32, to, &mut self.needs)
            }
            Expr::NumPrograms(a) => {
                ctype::convert(&format!("(int)gridDim.{}", axis(a)), DType::I32, to, &mut self.needs)
            }
            Expr::Arange { start } => {
                let k = self.tile(dst).expect("arange makes a tile");
                // Unsigned addition: padding slots (past the tile) must not overflow either.
                let e = if start == 0 {
                    format!("(FUSE_IDX{k}({i}))")
                } else {
                    let s = ctype::int_lit(i128::from(start), DType::I32);
                    format!("((int)((unsigned int)({s}) + (unsigned int)FUSE_IDX{k}({i})))")
                };
                ctype::convert(&e, DType::I32, to, &mut self.needs)
            }
            Expr::Unary(op, a) => {
                let d = self.dtype(a).compute();
                let x = self.at_as(a, i, d);
                let e = self.unary(op, d, &x);
                let rd = if op == UnaryOp::Not && d == DType::Bool { DType::Bool } else { d };
                ctype::convert(&e, rd, to, &mut self.needs)
            }
            Expr::Binary(op, a, b) => match self.rand_gt(op, a, b, i) {
                Some(e) => ctype::convert(&e, DType::Bool, to, &mut self.needs),
                None => self.binary_elem(op, a, b, i, to),
            },
            Expr::Where(c, a, b) => {
                let c = self.at_as(c, i, DType::Bool);
                let (x, y) = (self.at_as(a, i, to), self.at_as(b, i, to));
                format!("({c} ? {x} : {y})")
            }
            Expr::Load { .. }
            | Expr::Reduce(..)
            | Expr::Rand { .. }
            | Expr::Broadcast(_)
            | Expr::Reshape(_)
            | Expr::Trans(_)
            | Expr::Split { .. }
            | Expr::Join(..)
            | Expr::ReduceAxis { .. }
            | Expr::ArgReduce { .. }
            | Expr::Dot { .. } => unreachable!("handled by assign"),
        }
    }

    fn binary_elem(&mut self, op: BinaryOp, a: VarId, b: VarId, i: &str, to: DType) -> String {
        let d = self.dtype(a).compute();
        let (x, y) = (self.at_as(a, i, d), self.at_as(b, i, d));
        let e = self.binary(op, d, &x, &y);
        let rd = if op.is_comparison() { DType::Bool } else { d };
        ctype::convert(&e, rd, to, &mut self.needs)
    }

    pub(in crate::emit_cuda) fn unary(&mut self, op: UnaryOp, d: DType, x: &str) -> String {
        let f = d == DType::F32;
        match op {
            UnaryOp::Neg if f => format!("(-{x})"),
            UnaryOp::Neg => wrap_neg(d, x),
            UnaryOp::Not if d == DType::Bool => format!("(!{x})"),
            UnaryOp::Not => format!("(({})~{x})", c_type(d)),
            UnaryOp::Abs if f => format!("fabsf({x})"),
            UnaryOp::Abs if d.is_signed_int() => format!("({x} < 0 ? {} : {x})", wrap_neg(d, x)),
            UnaryOp::Abs => x.to_string(),
            UnaryOp::Exp => format!("expf({x})"),
            UnaryOp::Exp2 => {
                self.needs.exp2 = true;
                format!("fuse_exp2({x})")
            }
            UnaryOp::Log => format!("logf({x})"),
            UnaryOp::Log2 => format!("log2f({x})"),
            UnaryOp::Sqrt => format!("sqrtf({x})"),
            UnaryOp::Rsqrt => format!("rsqrtf({x})"),
            UnaryOp::Erf => {
                self.needs.erf = true;
                format!("fuse_erff({x})")
            }
            UnaryOp::Tanh => format!("tanhf({x})"),
            UnaryOp::Sigmoid => {
                self.needs.sigmoid = true;
                format!("fuse_sigmoid({x})")
            }
            UnaryOp::Floor => format!("floorf({x})"),
            UnaryOp::Ceil => format!("ceilf({x})"),
            UnaryOp::Sin => format!("sinf({x})"),
            UnaryOp::Cos => format!("cosf({x})"),
        }
    }

    pub(in crate::emit_cuda) fn binary(&mut self, op: BinaryOp, d: DType, x: &str, y: &str) -> String {
        let f = d == DType::F32;
        let sym = match op {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::And => "&",
            BinaryOp::Or => "|",
            BinaryOp::Xor => "^",
            BinaryOp::Div if f => "/",
            BinaryOp::Rem if f => return format!("fmodf({x}, {y})"),
            BinaryOp::Div | BinaryOp::Rem => {
                self.needs.int_div = true;
                let fun = if op == BinaryOp::Div { "fuse_div" } else { "fuse_rem" };
                return format!("{fun}({x}, {y})");
            }
            BinaryOp::Max | BinaryOp::Min => {
                let (fun, cmp) = if op == BinaryOp::Max { ("fmaxf", ">") } else { ("fminf", "<") };
                return if f { format!("{fun}({x}, {y})") } else { format!("({x} {cmp} {y} ? {x} : {y})") };
            }
        };
        match op {
            // Signed overflow wraps in the IR; do it in the unsigned type (same instruction).
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul if d.is_signed_int() => {
                let u = unsigned_of(d);
                format!("(({})(({u}){x} {sym} ({u}){y}))", c_type(d))
            }
            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor if d == DType::Bool => {
                format!("((bool)({x} {sym} {y}))")
            }
            _ => format!("({x} {sym} {y})"),
        }
    }
}

fn wrap_neg(d: DType, x: &str) -> String {
    let u = unsigned_of(d);
    format!("(({})(({u})0 - ({u}){x}))", c_type(d))
}

fn axis(a: u8) -> char {
    match a {
        0 => 'x',
        1 => 'y',
        _ => 'z',
    }
}
