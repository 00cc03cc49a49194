//! `rand(seed, offset)`: Philox4x32-10 exactly as `fuse_ir::philox`. Per element in general;
//! where the offsets are `s + element_index` with 4 | s and 4 | VEC, each group of four slots
//! holds offsets 4b..4b+3, which share one Philox counter: one call gives all four values.
//! `rand16` likewise with groups of eight slots (8 | s, 8 | VEC), one call for eight half-words;
//! failing that, with groups of four slots (4 | s, 4 | VEC: f32 tiles, whose VEC is 4), offsets
//! 4b..4b+3 are one half of the eight-group 8(b >> 1)..: one call gives its four half-words (words
//! x, y for even b, z, w for odd), the other half unused.
//! `rand(..) > p` (the dropout test) compares the Philox words with integer bounds (see
//! [`Emitter::rand_gt`]) instead of converting them to floats; `rand16(..) > p` compares the
//! half-word with one integer bound.
use super::Emitter;
use crate::emit_cuda::analysis::affine::Fact;
use fuse_ir::{BinaryOp, DType, Expr, RandWidth, Stmt, VarId};

/// One Philox4x32-10 call at counter `fuse_c` (`(fuse_c, fuse_c >> 32, 0, 0)`), key `fuse_seed`.
const PHILOX_CALL: &str = "const uint4 fuse_p = fuse_philox((unsigned int)fuse_c, (unsigned int)(fuse_c >> 32), (unsigned int)fuse_seed, (unsigned int)(fuse_seed >> 32));";

impl Emitter<'_> {
    pub(in crate::emit_cuda) fn rand(&mut self, dst: VarId, seed: VarId, offset: VarId, width: RandWidth) {
        self.needs.philox = true;
        self.needs.philox16 |= width == RandWidth::W16;
        let d = self.name(dst).to_string();
        let f = width.name();
        self.w.line(format!("// {d} = {f}({}, {})", self.name(seed), self.name(offset)));
        self.w.open("");
        let s = self.at_as(seed, "", DType::U64);
        self.w.line(format!("const unsigned long long fuse_seed = {s};"));
        let Some(k) = self.tile(offset) else {
            let o = self.at_as(offset, "", DType::U64);
            self.w.line(format!("{d} = fuse_{f}(fuse_seed, {o});"));
            self.w.close();
            return;
        };
        // Tiles keep the Philox words (half-words for rand16) too (`fuse_bits_<d>`), for integer
        // `rand > p` tests; whichever of words and floats is not read is dead code to NVRTC.
        let bits = format!("fuse_bits_{d}");
        if !self.rand_words.contains(&dst) {
            self.rand_words.push(dst);
        }
        if width == RandWidth::W16 && !self.rand16_words.contains(&dst) {
            self.rand16_words.push(dst);
        }
        let uniform = match width {
            RandWidth::W32 => "fuse_uniform",
            RandWidth::W16 => "fuse_uniform16",
        };
        let per_element = |emitter: &mut Self| {
            let o = emitter.at_as(offset, "fuse_i", DType::U64);
            emitter.w.unrolled(
                "fuse_i",
                &format!("FUSE_EPT{k}"),
                format!("{{ {bits}[fuse_i] = fuse_{f}_bits(fuse_seed, {o}); {d}[fuse_i] = {uniform}({bits}[fuse_i]); }}"),
            );
        };
        let (lanes, log2) = match width {
            RandWidth::W32 => (4, 2),
            RandWidth::W16 => (8, 3),
        };
        match self.facts.get(offset).clone() {
            Fact::Contig(div) => {
                // Slots fuse_q .. fuse_q + lanes - 1 (lanes | fuse_q, lanes | VEC) lie in one VEC chunk,
                // whose element indices start at a multiple of VEC: their offsets are consecutive
                // and the first is a multiple of `lanes` when `lanes` divides the start.
                let divisible = self.divisible(&div, &lanes.to_string(), log2);
                self.w.pp(format!("#if FUSE_VEC{k} % {lanes} == 0 && {divisible}"));
                self.w.pp("#pragma unroll");
                self.w.open(format!("for (int fuse_q = 0; fuse_q < FUSE_EPT{k}; fuse_q += {lanes})"));
                let o = self.at_as(offset, "fuse_q", DType::U64);
                self.w.line(format!(
                    "const unsigned long long fuse_c = {o} >> {log2};  // offsets {lanes}c .. {lanes}c + {}",
                    lanes - 1
                ));
                self.w.line(PHILOX_CALL);
                for j in 0..lanes {
                    let lane = ["x", "y", "z", "w"][j * 4 / lanes];
                    let word = match (width, j % 2) {
                        (RandWidth::W32, _) => format!("fuse_p.{lane}"),
                        (RandWidth::W16, 0) => format!("(fuse_p.{lane} & 0xFFFFu)"),
                        (RandWidth::W16, _) => format!("(fuse_p.{lane} >> 16)"),
                    };
                    self.rand_slot(&d, &bits, uniform, width, j, word);
                }
                self.w.close();
                if width == RandWidth::W16 {
                    // Four slots at offsets o .. o + 3, 4 | o, are half-words (o & 7) .. (o & 7) + 3
                    // of block o >> 3: words x, y for o & 4 == 0, else z, w. One call per four
                    // slots where VEC is 4 (f32) or the start is a multiple of 4 but not of 8.
                    let divisible = self.divisible(&div, "4", 2);
                    self.w.pp(format!("#elif FUSE_VEC{k} % 4 == 0 && {divisible}"));
                    self.w.pp("#pragma unroll");
                    self.w.open(format!("for (int fuse_q = 0; fuse_q < FUSE_EPT{k}; fuse_q += 4)"));
                    let o = self.at_as(offset, "fuse_q", DType::U64);
                    self.w.line(format!(
                        "const unsigned long long fuse_o = {o};  // offsets o .. o + 3, 4 | o: half-words o & 7 .. (o & 7) + 3 of block o >> 3"
                    ));
                    self.w.line("const unsigned long long fuse_c = fuse_o >> 3;");
                    self.w.line(PHILOX_CALL);
                    self.w.line("const unsigned int fuse_w0 = (fuse_o & 4ull) ? fuse_p.z : fuse_p.x;");
                    self.w.line("const unsigned int fuse_w1 = (fuse_o & 4ull) ? fuse_p.w : fuse_p.y;");
                    for j in 0..4 {
                        let w = j / 2;
                        let word = if j % 2 == 0 {
                            format!("(fuse_w{w} & 0xFFFFu)")
                        } else {
                            format!("(fuse_w{w} >> 16)")
                        };
                        self.rand_slot(&d, &bits, uniform, width, j, word);
                    }
                    self.w.close();
                }
                self.w.pp("#else");
                per_element(self);
                self.w.pp("#endif");
            }
            _ => per_element(self),
        }
        self.w.close();
    }

    /// Slot `fuse_q + j` of a shared-Philox group: its word (half-word) `word` and its float.
    fn rand_slot(&mut self, d: &str, bits: &str, uniform: &str, width: RandWidth, j: usize, word: String) {
        let q = if j == 0 { "fuse_q".to_string() } else { format!("fuse_q + {j}") };
        self.w.line(format!("{bits}[{q}] = {word};"));
        let from = if width == RandWidth::W32 { word } else { format!("{bits}[{q}]") };
        self.w.line(format!("{d}[{q}] = {uniform}({from});"));
    }

    /// `r > p` (or `p < r`) for a tile `r` assigned once by `rand` and a scalar f32 `p`, on the
    /// Philox words: exact (see `fuse_rand_gt_bound`), two integer compares instead of a
    /// conversion, a multiply and a float compare. `None` if the operands are not of that form.
    pub(in crate::emit_cuda) fn rand_gt(
        &mut self,
        op: BinaryOp,
        a: VarId,
        b: VarId,
        i: &str,
    ) -> Option<String> {
        let (r, p) = match op {
            BinaryOp::Gt => (a, b),
            BinaryOp::Lt => (b, a),
            _ => return None,
        };
        if !self.rand_words.contains(&r)
            || self.assignments[r.0 as usize] != 1
            || self.tile(p).is_some()
            || self.dtype(p) != DType::F32
        {
            return None;
        }
        let width = if self.rand16_words.contains(&r) { RandWidth::W16 } else { RandWidth::W32 };
        // A bound declared at the top level for a `p` assigned once holds wherever `p` is read;
        // any other is declared here, for this comparison.
        let n = match self.top_rand_bounds.iter().find(|(q, w, _)| *q == p && *w == width) {
            Some(&(_, _, n)) => n,
            None => self.rand_bound(p, width),
        };
        let x = format!("fuse_bits_{}[{i}]", self.name(r));
        Some(match width {
            RandWidth::W32 => format!("({x} >= fuse_lb{n} && {x} <= ~fuse_lb{n})"),
            RandWidth::W16 => format!("({x} >= fuse_lb{n})"),
        })
    }

    /// Emits `fuse_lb<n> = fuse_rand_gt_bound(p)` (`fuse_rand16_gt_bound`) and returns `n`.
    fn rand_bound(&mut self, p: VarId, width: RandWidth) -> usize {
        let n = self.rand_bounds;
        self.rand_bounds += 1;
        let f = width.name();
        self.w.line(format!("const unsigned int fuse_lb{n} = fuse_{f}_gt_bound({});", self.name(p)));
        n
    }

    /// After the prologue and the uniform scalars moved up to it (see [`crate::emit_cuda::analysis::schedule`]): the
    /// bound of each scalar assigned once there that some `rand(..) > p` in the statements still
    /// to come (`later`) compares with, so that its branches run before the tile math too. A
    /// bound [`Emitter::rand_gt`] then declines to use is dead code to NVRTC.
    pub(in crate::emit_cuda) fn hoisted_rand_bounds<'s>(
        &mut self,
        uniform: impl Iterator<Item = &'s Stmt>,
        later: impl Iterator<Item = &'s Stmt>,
    ) {
        let mut rands: Vec<(VarId, RandWidth)> = Vec::new();
        self.k.visit_stmts(&mut |s| {
            if let Stmt::Assign { dst, expr: Expr::Rand { width, .. } } = s {
                rands.push((*dst, *width))
            }
        });
        let mut thresholds: Vec<(VarId, VarId)> = Vec::new();
        for s in later {
            fuse_ir::visit_stmts(std::slice::from_ref(s), &mut |s| {
                if let Stmt::Assign {
                    expr: Expr::Binary(BinaryOp::Gt, r, p) | Expr::Binary(BinaryOp::Lt, p, r),
                    ..
                } = s
                {
                    thresholds.push((*r, *p))
                }
            });
        }
        for s in uniform {
            let Stmt::Assign { dst: p, .. } = s else { continue };
            if self.assignments[p.0 as usize] != 1 || self.tile(*p).is_some() {
                continue;
            }
            if self.dtype(*p) != DType::F32 {
                continue;
            }
            for width in [RandWidth::W32, RandWidth::W16] {
                let compared = thresholds
                    .iter()
                    .any(|(r, q)| q == p && rands.iter().any(|&(v, w)| v == *r && w == width));
                if compared && !self.top_rand_bounds.iter().any(|(q, w, _)| q == p && *w == width) {
                    self.needs.philox = true;
                    self.needs.philox16 |= width == RandWidth::W16;
                    let n = self.rand_bound(*p, width);
                    self.top_rand_bounds.push((*p, width, n));
                }
            }
        }
    }
}
