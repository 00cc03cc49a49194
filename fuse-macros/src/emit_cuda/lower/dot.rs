//! `dst = dot(a, b[, acc])` ([`fuse_ir::Expr::Dot`]).
//!
//! [`Emitter::dot`] is the entry point that picks a lowering: the **tensor cores** where
//! [`takes_mma`](crate::emit_cuda::analysis::tensor_cores::takes_mma) says so (f16 and bf16, f32 as TF32 ([`super::tf32`]), i8 with a
//! K-major B; `mma.sync`, or `wgmma` on sm_90a for all but f32), else the **general fallback**
//! ([`Emitter::dot_fallback`]): correct for every shape, element type and warp count, and
//! bit-identical to the CPU interpreter, but not fast — today only i8 with a `[K, N]` B (no byte
//! `ldmatrix.trans`) reaches it.
//!
//! The fallback writes both operands to the shared scratch `fuse_xs` at their lane indices
//! (between barriers, as [`super::shape`] does; `a` first, `b` right after it, in their storage
//! type, f32 inputs rounded to TF32 once on the way), then every thread computes each of its output
//! slots serially: it starts from the accumulator's slot (or 0) and adds `a[m, k] * b[k, n]` for
//! `k = 0..K` in order, the product and the sum each rounded (`__fmul_rn`/`__fadd_rn`, which NVRTC
//! never contracts into an FMA), or in wrapping i32 for i8 — the IR's order, the interpreter's.
use super::ctype::{self, c_type};
use super::Emitter;
use fuse_ir::{DType, VarId};

impl Emitter<'_> {
    /// `dst = dot(a, b[, acc])`: tensor cores ([`super::mma`]) for f16, bf16 and f32 inputs and
    /// i8 with a K-major B, the general fallback otherwise.
    pub(in crate::emit_cuda) fn dot(&mut self, dst: VarId, a: VarId, b: VarId, acc: Option<VarId>) {
        if crate::emit_cuda::analysis::tensor_cores::takes_mma(self.k, a, b) {
            let dims = self.k.ty(dst).shape.dims();
            let mma = self.layout.mma_index(&dims[0], &dims[1]);
            return self.dot_mma(dst, a, b, acc, mma);
        }
        self.dot_fallback(dst, a, b, acc);
    }

    /// The general fallback lowering: both operands through shared memory, a serial K loop per
    /// output slot (see the module doc).
    fn dot_fallback(&mut self, dst: VarId, a: VarId, b: VarId, acc: Option<VarId>) {
        let (ka, kb) = (self.tile(a).expect("dot reads tiles"), self.tile(b).expect("dot reads tiles"));
        let kd = self.tile(dst).expect("dot makes a tile");
        let (input, accum) = (self.dtype(a), self.dtype(dst));
        let t = c_type(input);
        let consts = &self.k.consts;
        let (k, n) =
            (self.k.ty(a).shape.dims()[1].c_expr(consts), self.k.ty(b).shape.dims()[1].c_expr(consts));
        self.scratch_bytes_for(format!("((FUSE_L{ka} + FUSE_L{kb}) * {})", input.size_bytes()));
        let (xa, xb) = (format!("(({t}*)fuse_xs)"), format!("(({t}*)fuse_xs + FUSE_L{ka})"));
        let (an, bn, dn) = (self.name(a).to_string(), self.name(b).to_string(), self.name(dst).to_string());
        let with_acc = acc.map_or(String::new(), |c| format!(", {}", self.name(c)));
        self.w.line(format!(
            "// {dn} = dot({an}, {bn}{with_acc}): the general fallback, the operands through shared memory"
        ));
        self.w.open("");
        self.w.line("__syncthreads();");
        for (src, k_src, base) in [(a, ka, &xa), (b, kb, &xb)] {
            let s = format!("{}[fuse_i]", self.name(src));
            let v = if input == DType::F32 {
                self.needs.tf32 = true;
                format!("fuse_tf32({s})")
            } else {
                s
            };
            self.w.unrolled(
                "fuse_i",
                &format!("FUSE_EPT{k_src}"),
                format!(
                    "if (FUSE_OK{k_src}(fuse_i / FUSE_VEC{k_src})) {base}[FUSE_IDX{k_src}(fuse_i)] = {v};"
                ),
            );
        }
        self.w.line("__syncthreads();");
        self.w.open_unrolled("fuse_i", &format!("FUSE_EPT{kd}"));
        self.w.open(format!("if (FUSE_OK{kd}(fuse_i / FUSE_VEC{kd}))"));
        self.w.line(format!("const int fuse_f = FUSE_IDX{kd}(fuse_i);"));
        self.w.line(format!("const int fuse_m = fuse_f / {n}, fuse_n = fuse_f % {n};"));
        let start = match acc {
            Some(c) => self.at_as(c, "fuse_i", accum),
            None => ctype::int_lit(0, accum),
        };
        self.w.line(format!("{} fuse_r = {start};", c_type(accum)));
        let x = ctype::convert(&format!("{xa}[fuse_m * {k} + fuse_k]"), input, accum, &mut self.needs);
        let y = ctype::convert(&format!("{xb}[fuse_k * {n} + fuse_n]"), input, accum, &mut self.needs);
        let step = if accum == DType::F32 {
            format!("fuse_r = __fadd_rn(fuse_r, __fmul_rn({x}, {y}));")
        } else {
            // i8 products fit in an int; the sum wraps (unsigned arithmetic, no overflow UB).
            format!("fuse_r = (int)((unsigned int)fuse_r + (unsigned int)({x} * {y}));")
        };
        self.w.line(format!("for (int fuse_k = 0; fuse_k < {k}; ++fuse_k) {step}"));
        self.w.line(format!("{dn}[fuse_i] = fuse_r;"));
        self.w.close();
        self.w.close();
        self.w.close();
    }
}
