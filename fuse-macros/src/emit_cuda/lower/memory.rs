//! Loads and stores, with the bounds check on every accessed lane.
//!
//! The plain path is per slot: a lane whose chunk is in the tile and whose mask is true checks
//! `0 <= offset < len` (one unsigned compare), then accesses memory or records the error.
//! Where the offsets are provably contiguous in VEC-aligned chunks (see `affine`) the source also
//! carries a vector path under `#if FUSE_ALIGN16_<p> && <divisibility>`. The thread first sorts
//! its chunks: "vector" (every lane's mask true, the whole chunk in bounds), "off" (no lane's
//! mask true) or neither. A vector chunk is one 4/8/16-byte access (read-only params through the
//! non-coherent path), an off chunk takes `other`, and only a chunk that is neither (a ragged
//! mask edge, or a chunk not wholly in bounds) takes the per-lane path. Where the launch proved
//! the access in bounds and the mask uniform per chunk (`unchecked_cond`), the fast path is all
//! there is. The per-lane path costs registers even when no chunk takes it (QK-norm + RoPE's two
//! gathers at loaded positions: 63 registers where 40 do without it).
//! An out-of-bounds lane is noted in the thread's `fuse_bad`/`fuse_bad_at` and reported once at
//! the end of the kernel: no call on the lane path (a call costs registers everywhere).
use super::ctype::{self, c_type};
use super::Emitter;
use crate::emit_cuda::analysis::affine::Fact;
use fuse_ir::{DType, ParamKind, Specialization, VarId};

/// What a memory statement touches.
struct Access {
    param: u32,
    ptr: String,
    len: String,
    elem: DType,
    mutable: bool,
    offset: VarId,
    mask: Option<VarId>,
    /// `FUSE_INB_<k>`: 1 when the runtime proved this access in bounds before the launch.
    inb: String,
}

impl Emitter<'_> {
    fn access(&mut self, param: u32, offset: VarId, mask: Option<VarId>) -> Access {
        // Accesses are numbered in program order, as `Kernel::accesses` lists them.
        let index = self.accesses;
        self.accesses += 1;
        self.access_at(index, param, offset, mask)
    }

    /// Access `index` of `Kernel::accesses` (a pipelined load is emitted again ahead of its
    /// iteration under its own index).
    fn access_at(&mut self, index: u32, param: u32, offset: VarId, mask: Option<VarId>) -> Access {
        let (elem, mutable) = match self.k.params[param as usize].kind {
            ParamKind::Ptr { elem, mutable } => (elem, mutable),
            ParamKind::Scalar(_) => unreachable!("the checker only loads through pointer params"),
        };
        let inb = Specialization::InBounds(index);
        self.spec(inb);
        Access {
            inb: inb.macro_name(&self.k.params),
            param,
            ptr: self.names.params[param as usize].clone(),
            len: self.names.lens[param as usize].clone(),
            elem,
            mutable,
            offset,
            mask,
        }
    }

    /// The `#if` condition for the vector path of tile length `k`, if the offsets allow one.
    /// Offsets permuted within chunks ([`Fact::ChunkXor`]) or repeating a half-length run
    /// ([`Fact::ChunkHalf`]) allow one for loads (`permuted`).
    fn vector_cond(&mut self, a: &Access, k: usize, permuted: bool) -> Option<String> {
        let (div, block, xor) = match self.facts.get(a.offset).clone() {
            Fact::Contig(d) | Fact::ContigRem(d) => (d, None, None),
            Fact::ChunkContig(d, b) => (d, Some(b), None),
            Fact::ChunkXor(d, b, x) if permuted => (d, Some(b), Some(x)),
            Fact::ChunkHalf(d, b) if permuted && a.elem != DType::Bool && a.elem.size_bytes() <= 4 => {
                return Some(self.half_run_cond(a, k, &d, &b));
            }
            _ => return None,
        };
        if a.elem == DType::Bool {
            return None;
        }
        self.spec(Specialization::Align16(a.param));
        let aligned = Specialization::Align16(a.param).macro_name(&self.k.params);
        let mut divisible = self.vec_divides(&div, k);
        if let Some(b) = block {
            // The chunk is one block of consecutive offsets (VEC divides the block bound).
            divisible = format!("{divisible} && {}", self.vec_divides(&b, k));
        }
        // Whole 32-bit words per chunk: bytes need VEC >= 4, wider types VEC >= 2.
        let min_vec = if a.elem.size_bytes() == 1 { 4 } else { 2 };
        if let Some(x) = xor {
            // Lane v of a chunk reads the run's v ^ x: inside the chunk.
            divisible = format!("{divisible} && {x} < FUSE_VEC{k}");
        }
        Some(format!("{aligned} && {divisible} && FUSE_VEC{k} >= {min_vec}"))
    }

    /// The vector condition of [`Fact::ChunkHalf`] offsets: each chunk's run of VEC / 2 elements
    /// starts at a multiple of VEC / 2 (so at a (VEC / 2 * size)-byte boundary of an aligned
    /// buffer) and spans whole 32-bit words.
    fn half_run_cond(
        &mut self,
        a: &Access,
        k: usize,
        start: &crate::emit_cuda::analysis::affine::Div,
        block: &crate::emit_cuda::analysis::affine::Div,
    ) -> String {
        self.spec(Specialization::Align16(a.param));
        let aligned = Specialization::Align16(a.param).macro_name(&self.k.params);
        let max_log2 = (self.layout.veck.trailing_zeros() as u8).saturating_sub(1);
        // (Never 0, even where VEC is 1 and the condition fails anyway: the preprocessor rejects
        // a division by zero.)
        let run = format!("(FUSE_VEC{k} >= 2 ? FUSE_VEC{k} / 2 : 1)");
        let starts = self.divisible(start, &run, max_log2);
        let blocks = self.vec_divides(block, k);
        let min_vec = 8 / a.elem.size_bytes().max(1); // VEC / 2 elements fill a word
        format!("FUSE_VEC{k} >= {} && {aligned} && {starts} && {blocks}", min_vec.max(2))
    }

    /// The elements one vector access of a chunk reads: VEC, or VEC / 2 for [`Fact::ChunkHalf`].
    fn run_len(&self, a: &Access, k: usize) -> String {
        match self.facts.get(a.offset) {
            Fact::ChunkHalf(..) => format!("(FUSE_VEC{k} / 2)"),
            _ => format!("FUSE_VEC{k}"),
        }
    }

    /// The `#if` condition under which a vector access needs neither a bounds check nor a per-lane
    /// path: proven in bounds, contiguous offsets (not a remainder, which may wrap inside a chunk),
    /// and a mask that is constant on each chunk. `None` if the offsets or mask never allow it.
    /// (The runtime's proof is per lane; reading a chunk's mask at its first lane is sound because
    /// `affine::Fact::ChunkUniform` proves every lane of the chunk has that value.)
    fn unchecked_cond(&self, a: &Access, vector_cond: &str) -> Option<String> {
        let (Fact::Contig(_) | Fact::ChunkContig(..) | Fact::ChunkXor(..) | Fact::ChunkHalf(..)) =
            self.facts.get(a.offset)
        else {
            return None;
        };
        let uniform = match a.mask {
            Some(m) if self.tile(m).is_some() => self.chunk_uniform[m.0 as usize].clone()?,
            _ => "1".to_string(),
        };
        let uniform = if uniform == "1" { String::new() } else { format!(" && {uniform}") };
        Some(format!("{} && {vector_cond}{uniform}", a.inb))
    }

    /// The lane condition: chunk inside the tile (`ok`) and mask true.
    fn lane_cond(&self, ok: Option<&str>, mask: Option<VarId>, i: &str) -> Option<String> {
        let parts: Vec<String> =
            ok.map(str::to_string).into_iter().chain(mask.map(|m| self.at(m, i))).collect();
        (!parts.is_empty()).then(|| parts.join(" && "))
    }

    /// The checked access of one lane: `body` runs with `fuse_o` in bounds.
    fn checked_lane(&mut self, a: &Access, i: &str, ok: Option<&str>, body: &str) {
        self.needs.oob = true;
        let off = self.at(a.offset, i);
        let check = format!(
            "if ({} || (unsigned long long)fuse_o < (unsigned long long){}) {body} else if (fuse_bad == 0u) {{ fuse_bad = {}u; fuse_bad_at = fuse_o; }}",
            a.inb,
            a.len,
            a.param + 1
        );
        match self.lane_cond(ok, a.mask, i) {
            Some(c) => {
                self.w.open(format!("if ({c})"));
                self.w.line(format!("const long long fuse_o = (long long){off};"));
                self.w.line(check);
                self.w.close();
            }
            None => {
                self.w.line(format!("const long long fuse_o = (long long){off};"));
                self.w.line(check);
            }
        }
    }

    fn read(&self, a: &Access, at: &str) -> String {
        if a.mutable {
            format!("{}[{at}]", a.ptr)
        } else {
            format!("__ldg(&{}[{at}])", a.ptr)
        }
    }

    pub(in crate::emit_cuda) fn load(
        &mut self,
        dst: VarId,
        param: u32,
        offset: VarId,
        mask: Option<VarId>,
        other: Option<VarId>,
    ) {
        let a = self.access(param, offset, mask);
        let d = self.name(dst).to_string();
        self.w.line(format!("// {d} = load({}[{}]{})", a.ptr, self.name(offset), mask_note(self, mask)));
        let Some(k) = self.tile(offset) else {
            self.load_lane(&a, dst, other, "", None, "");
            return;
        };
        let ok = format!("FUSE_OK{k}(fuse_i / FUSE_VEC{k})");
        match self.vector_cond(&a, k, true) {
            None => {
                self.w.pp("#pragma unroll");
                self.load_lane(&a, dst, other, "fuse_i", Some(&ok), &each(&format!("FUSE_EPT{k}"), "fuse_i"));
            }
            Some(cond) => {
                if let Some(unchecked) = self.unchecked_cond(&a, &cond) {
                    self.w.pp(format!("#if {unchecked}"));
                    self.vector_load(&a, dst, other, k, &ok, true);
                    self.w.pp(format!("#elif {cond}"));
                } else {
                    self.w.pp(format!("#if {cond}"));
                }
                self.vector_load(&a, dst, other, k, &ok, false);
                self.w.pp("#else");
                self.w.pp("#pragma unroll");
                self.load_lane(&a, dst, other, "fuse_i", Some(&ok), &each(&format!("FUSE_EPT{k}"), "fuse_i"));
                self.w.pp("#endif");
            }
        }
    }

    /// The vector path of a load (inside its `#if`): the fast path (one vector access per vector
    /// chunk, `other` for chunks that are off) or the per-lane path. Both fill the access's 32-bit
    /// words and the lanes are unpacked once after them, so narrow elements stay packed in
    /// registers (two f16 per word) on either path. `unchecked` (under [`Emitter::unchecked_cond`]):
    /// the fast path alone, a chunk being on when its first lane is.
    fn vector_load(
        &mut self,
        a: &Access,
        dst: VarId,
        other: Option<VarId>,
        k: usize,
        ok: &str,
        unchecked: bool,
    ) {
        self.needs.words = true;
        let (to, d) = (self.dtype(dst), self.name(dst).to_string());
        let sz = a.elem.size_bytes();
        let nw = format!("FUSE_VEC{k} * {sz} / 4");
        let zeroed = if sz < 4 { " = {}" } else { "" };
        let words = format!("unsigned int fuse_wd[FUSE_EPT{k} * {sz} / 4]{zeroed};");
        let chunk_on = if unchecked {
            self.w.open("");
            self.w.line(words);
            self.chunk_on(a, k)
        } else {
            self.sort_chunks(a, k, &words);
            "fuse_vec[fuse_j]".to_string()
        };
        // Fast path.
        self.w.open_unrolled("fuse_j", &format!("FUSE_NCH{k}"));
        self.w.line(format!("const int fuse_b = fuse_j * FUSE_VEC{k};"));
        self.w.open(format!("if ({chunk_on})"));
        let f = if a.mutable { "fuse_ld_words" } else { "fuse_ldg_words" };
        let first = self.run_start(a, "fuse_b");
        if let Fact::ChunkHalf(..) = self.facts.get(a.offset) {
            // The run of VEC / 2 elements, each then put in two consecutive lanes.
            self.w.line(format!("unsigned int fuse_h[FUSE_VEC{k} * {sz} / 8];"));
            self.w.line(format!("{f}<FUSE_VEC{k} * {sz} / 8>(fuse_h, {} + (long long){first});", a.ptr));
            let x = unpack(a.elem, "fuse_h", "(fuse_v / 2)");
            self.w.unrolled(
                "fuse_v",
                &format!("FUSE_VEC{k}"),
                pack(a.elem, "fuse_wd", &format!("(fuse_j * FUSE_VEC{k} + fuse_v)"), &x),
            );
        } else {
            self.w.line(format!("{f}<{nw}>(fuse_wd + fuse_j * ({nw}), {} + (long long){first});", a.ptr));
        }
        if !unchecked {
            self.w.reopen("} else if (fuse_some[fuse_j]) {");
            self.per_lane_load(a, other, k, ok);
        }
        self.w.reopen("} else {");
        let init = self.other_or_zero(a, other, "fuse_b + fuse_v");
        let slot = self.word_slot(a, "(fuse_b + fuse_v)");
        self.w.unrolled("fuse_v", &format!("FUSE_VEC{k}"), pack(a.elem, "fuse_wd", &slot, &init));
        self.w.close();
        self.w.close();
        let v = unpack(a.elem, "fuse_wd", &self.word_slot(a, "fuse_i"));
        let v = ctype::convert(&v, a.elem, to, &mut self.needs);
        self.w.unrolled("fuse_i", &format!("FUSE_EPT{k}"), format!("{d}[fuse_i] = {v};"));
        self.w.close();
    }

    /// Where lane `i`'s element sits in the words a vector load fills: memory order, so for
    /// offsets permuted by `^ x` ([`Fact::ChunkXor`]) at `i ^ x`; the per-lane and `other` paths
    /// put each lane's value there too, so one unpacking serves every path.
    fn word_slot(&self, a: &Access, i: &str) -> String {
        match self.facts.get(a.offset) {
            Fact::ChunkXor(_, _, x) => format!("({i} ^ {x})"),
            _ => i.to_string(),
        }
    }

    /// The first offset of the run of consecutive offsets that the chunk at slot `b` covers: its
    /// first lane's, or for offsets permuted by `^ x` (lane 0 holds the run's `x`) that minus `x`.
    fn run_start(&self, a: &Access, b: &str) -> String {
        let first = self.at(a.offset, b);
        match self.facts.get(a.offset) {
            Fact::ChunkXor(_, _, x) => format!("({first} - {x})"),
            _ => first,
        }
    }

    /// "Chunk `fuse_j` is inside the tile and its lanes are on", for the unchecked path.
    fn chunk_on(&self, a: &Access, k: usize) -> String {
        let ok = format!("FUSE_OK{k}(fuse_j)");
        match a.mask {
            Some(m) => format!("{ok} && {}", self.at(m, "fuse_b")),
            None => ok,
        }
    }

    /// The per-lane path of one chunk's words (chunk `fuse_j`, its first slot `fuse_b`).
    fn per_lane_load(&mut self, a: &Access, other: Option<VarId>, k: usize, ok: &str) {
        self.open_chunk_lanes(k);
        let init = self.other_or_zero(a, other, "fuse_i");
        self.w.line(format!("{} fuse_x = {init};", c_type(a.elem)));
        let read = self.read(a, "fuse_o");
        self.checked_lane(a, "fuse_i", Some(ok), &format!("fuse_x = {read};"));
        let slot = self.word_slot(a, "fuse_i");
        self.w.line(pack(a.elem, "fuse_wd", &slot, "fuse_x"));
        self.w.close();
    }

    /// Opens the loop over the lanes of chunk `fuse_j` (first slot `fuse_b`), each as slot
    /// `fuse_i`: a partial chunk's per-lane path.
    fn open_chunk_lanes(&mut self, k: usize) {
        self.w.open_unrolled("fuse_v", &format!("FUSE_VEC{k}"));
        self.w.line("const int fuse_i = fuse_b + fuse_v;");
    }

    /// Sorts the thread's chunks for a vector path: `fuse_vec[j]` (every lane on and the chunk in
    /// bounds: one vector access) and `fuse_some[j]` (some lane on). A chunk that is neither has
    /// no access; one with some lanes but not a vector takes the per-lane path alone, so a ragged
    /// edge (a row starting mid-vector) costs per-lane accesses in its one chunk only.
    /// Opens a block and declares `decl` in it.
    fn sort_chunks(&mut self, a: &Access, k: usize, decl: &str) {
        self.w.open("");
        if !decl.is_empty() {
            self.w.line(decl);
        }
        self.w.line(format!("bool fuse_vec[FUSE_NCH{k}], fuse_some[FUSE_NCH{k}];"));
        self.w.open_unrolled("fuse_j", &format!("FUSE_NCH{k}"));
        self.w.line(format!("const int fuse_b = fuse_j * FUSE_VEC{k};"));
        self.w.line(format!(
            "const long long fuse_c = (long long){};  // the chunk's first offset",
            self.run_start(a, "fuse_b")
        ));
        self.w.line(format!("bool fuse_all = FUSE_OK{k}(fuse_j), fuse_any = FUSE_OK{k}(fuse_j);"));
        if let Some(m) = a.mask {
            let (all, any) = match self.tile(m) {
                Some(_) => {
                    let mv = self.at(m, "fuse_b + fuse_v");
                    (format!("fuse_all = fuse_all && {mv};"), format!("fuse_on = fuse_on || {mv};"))
                }
                None => {
                    let mv = self.name(m).to_string();
                    (format!("fuse_all = fuse_all && {mv};"), format!("fuse_on = {mv};"))
                }
            };
            self.w.line("bool fuse_on = false;");
            self.w.unrolled("fuse_v", &format!("FUSE_VEC{k}"), format!("{{ {all} {any} }}"));
            self.w.line("fuse_any = fuse_any && fuse_on;");
        }
        // 0 <= c <= len - VEC as one unsigned compare against a uniform limit (0 when len < VEC).
        let run = self.run_len(a, k);
        let mut in_bounds = format!(
            "({inb} || (unsigned long long)fuse_c < (unsigned long long)({len} >= {run} ? {len} - ({run} - 1) : 0))",
            inb = a.inb,
            len = a.len
        );
        if let Fact::ContigRem(_) = self.facts.get(a.offset) {
            // Consecutive: the remainder did not wrap inside the chunk. For i32 offsets in 32-bit
            // arithmetic: the chunk's first offset is in [0, len - VEC] (checked, or proven with
            // every lane's) and len <= i32::MAX, so a wrapped difference cannot alias VEC - 1.
            let last = self.at(a.offset, &format!("fuse_b + FUSE_VEC{k} - 1"));
            in_bounds = if self.dtype(a.offset) == DType::I32 {
                let first = self.at(a.offset, "fuse_b");
                format!("{in_bounds} && (unsigned int){last} - (unsigned int){first} == FUSE_VEC{k} - 1")
            } else {
                // In unsigned 64-bit arithmetic (no signed overflow): exact for the same reason.
                format!("{in_bounds} && (unsigned long long){last} - (unsigned long long)fuse_c == FUSE_VEC{k} - 1")
            };
        }
        self.w.line(format!("fuse_vec[fuse_j] = fuse_all && {in_bounds};"));
        self.w.line("fuse_some[fuse_j] = fuse_any;");
        self.w.close();
    }

    /// A masked-off lane's value in slot `i`, in the pointee's dtype: `other`, else zero.
    fn other_or_zero(&mut self, a: &Access, other: Option<VarId>, i: &str) -> String {
        match other {
            Some(o) => self.at_as(o, i, a.elem),
            None => zero(a.elem),
        }
    }

    /// One lane's load into slot `i`, as a block opened by `head` (a loop header or nothing).
    fn load_lane(
        &mut self,
        a: &Access,
        dst: VarId,
        other: Option<VarId>,
        i: &str,
        ok: Option<&str>,
        head: &str,
    ) {
        let to = self.dtype(dst);
        let init = self.other_or_zero(a, other, i);
        let slot = if self.tile(dst).is_some() {
            format!("{}[{i}]", self.name(dst))
        } else {
            self.name(dst).to_string()
        };
        let read = self.read(a, "fuse_o");
        let read = ctype::convert(&read, a.elem, to, &mut self.needs);
        let init = ctype::convert(&init, a.elem, to, &mut self.needs);
        // Through a temporary: the destination may be the offset or `other` var itself.
        self.w.open(head);
        self.w.line(format!("{} fuse_x = {init};", c_type(to)));
        self.checked_lane(a, i, ok, &format!("fuse_x = {read};"));
        self.w.line(format!("{slot} = fuse_x;"));
        self.w.close();
    }

    /// Load access `index` (f16, bf16 or i8, `other` zero) into the swizzled row-major shared
    /// buffer `buf` (`unsigned short*`) of a `[h, w]` tile, for the pipeline ([`crate::emit_cuda::analysis::pipeline`]):
    /// one `cp.async` of VEC lanes per chunk where the vector path applies (zero-filled where its
    /// lanes are off), else checked per-lane loads and shared stores, in the same layout.
    pub(in crate::emit_cuda) fn async_load(
        &mut self,
        index: u32,
        (param, offset, mask): (u32, VarId, Option<VarId>),
        buf: &str,
        (w, h): (&str, &str),
    ) {
        self.needs.pipeline = true;
        self.needs.mma = true;
        let a = self.access_at(index, param, offset, mask);
        let k = self.tile(offset).expect("pipelined loads have tile offsets");
        self.w.line(format!(
            "// ahead: load({}[{}]{}) into its stage",
            a.ptr,
            self.name(offset),
            mask_note(self, mask)
        ));
        let esz = a.elem.size_bytes();
        let bytes = format!("FUSE_VEC{k} * {esz}");
        let at = |f: &str| super::mma::swizzled(buf, f, (w, h), esz, "signed char");
        let copy = |emitter: &Emitter<'_>, on: &str| {
            let first = emitter.run_start(&a, "fuse_b");
            format!(
                "if (FUSE_OK{k}(fuse_j)) fuse_cp_async<{bytes}>(fuse_smem_addr({}), {} + (long long){first}, {on} ? {bytes} : 0);",
                at(&format!("FUSE_IDX{k}(fuse_b)")),
                a.ptr
            )
        };
        let Some(cond) = self.vector_cond(&a, k, false) else {
            self.async_lanes(&a, k, &at("fuse_f"));
            return;
        };
        // A chunk's VEC lanes stay inside one swizzled 16-byte chunk.
        let cond = format!("{cond} && FUSE_VEC{k} * {esz} <= 16");
        if let Some(unchecked) = self.unchecked_cond(&a, &cond) {
            self.w.pp(format!("#if {unchecked}"));
            let on = match mask {
                Some(m) => self.at(m, "fuse_b"),
                None => "true".to_string(),
            };
            self.w.open_unrolled("fuse_j", &format!("FUSE_NCH{k}"));
            self.w.line(format!("const int fuse_b = fuse_j * FUSE_VEC{k};"));
            self.w.line(copy(self, &on));
            self.w.close();
            self.w.pp(format!("#elif {cond}"));
        } else {
            self.w.pp(format!("#if {cond}"));
        }
        self.sort_chunks(&a, k, "");
        self.w.open_unrolled("fuse_j", &format!("FUSE_NCH{k}"));
        self.w.line(format!("const int fuse_b = fuse_j * FUSE_VEC{k};"));
        // A chunk with some lanes on that is not one vector: its lanes one by one.
        self.w.open("if (fuse_vec[fuse_j] || !fuse_some[fuse_j])");
        self.w.line(copy(self, "fuse_vec[fuse_j]"));
        self.w.reopen("} else {");
        self.open_chunk_lanes(k);
        self.async_lane(&a, k, &at("fuse_f"));
        self.w.close();
        self.w.close();
        self.w.close();
        self.w.close();
        self.w.pp("#else");
        self.async_lanes(&a, k, &at("fuse_f"));
        self.w.pp("#endif");
    }

    /// The per-lane path of [`Emitter::async_load`]: every lane of the tile written to `at` (a shared
    /// address of `fuse_f`, the lane's index in the tile), 0 where its mask is off.
    fn async_lanes(&mut self, a: &Access, k: usize, at: &str) {
        self.w.open_unrolled("fuse_i", &format!("FUSE_EPT{k}"));
        self.async_lane(a, k, at);
        self.w.close();
    }

    /// Lane `fuse_i` of [`Emitter::async_lanes`].
    fn async_lane(&mut self, a: &Access, k: usize, at: &str) {
        self.w.open(format!("if (FUSE_OK{k}(fuse_i / FUSE_VEC{k}))"));
        self.w.line(format!("{} fuse_x = {};", c_type(a.elem), zero(a.elem)));
        let read = self.read(a, "fuse_o");
        self.checked_lane(a, "fuse_i", None, &format!("fuse_x = {read};"));
        self.w.line(format!("const int fuse_f = FUSE_IDX{k}(fuse_i);"));
        self.w.line(format!("*({at}) = fuse_x;"));
        self.w.close();
    }

    pub(in crate::emit_cuda) fn store(
        &mut self,
        param: u32,
        offset: VarId,
        value: VarId,
        mask: Option<VarId>,
    ) {
        let a = self.access(param, offset, mask);
        self.w.line(format!(
            "// store({}[{}], {}{})",
            a.ptr,
            self.name(offset),
            self.name(value),
            mask_note(self, mask)
        ));
        let Some(k) = self.tile(offset) else {
            self.w.open("");
            self.store_lane(&a, value, "", None);
            self.w.close();
            return;
        };
        let ok = format!("FUSE_OK{k}(fuse_i / FUSE_VEC{k})");
        match self.vector_cond(&a, k, false) {
            None => {
                self.w.open_unrolled("fuse_i", &format!("FUSE_EPT{k}"));
                self.store_lane(&a, value, "fuse_i", Some(&ok));
                self.w.close();
            }
            Some(cond) => {
                self.needs.words = true;
                if let Some(unchecked) = self.unchecked_cond(&a, &cond) {
                    self.w.pp(format!("#if {unchecked}"));
                    self.w.open("");
                    let on = self.chunk_on(&a, k);
                    self.vector_store(&a, value, k, &on, None);
                    self.w.close();
                    self.w.pp(format!("#elif {cond}"));
                } else {
                    self.w.pp(format!("#if {cond}"));
                }
                self.sort_chunks(&a, k, "");
                self.vector_store(&a, value, k, "fuse_vec[fuse_j]", Some(&ok));
                self.w.close();
                self.w.pp("#else");
                self.w.open_unrolled("fuse_i", &format!("FUSE_EPT{k}"));
                self.store_lane(&a, value, "fuse_i", Some(&ok));
                self.w.close();
                self.w.pp("#endif");
            }
        }
    }

    /// One vector store per chunk for which `chunk_on` holds; with `per_lane` (the lane
    /// condition), the other chunks with some lane on (`fuse_some`) store lane by lane.
    fn vector_store(&mut self, a: &Access, value: VarId, k: usize, chunk_on: &str, per_lane: Option<&str>) {
        self.w.open_unrolled("fuse_j", &format!("FUSE_NCH{k}"));
        self.w.line(format!("const int fuse_b = fuse_j * FUSE_VEC{k};"));
        self.w.open(format!("if ({chunk_on})"));
        let sz = a.elem.size_bytes();
        let nw = format!("FUSE_VEC{k} * {sz} / 4");
        if sz < 4 {
            self.w.line(format!("unsigned int fuse_w[{nw}] = {{}};"));
        } else {
            self.w.line(format!("unsigned int fuse_w[{nw}];"));
        }
        let v = self.at_as(value, "fuse_b + fuse_v", a.elem);
        let packed = pack(a.elem, "fuse_w", "fuse_v", &v);
        self.w.unrolled("fuse_v", &format!("FUSE_VEC{k}"), packed);
        let first = self.at(a.offset, "fuse_b");
        self.w.line(format!("fuse_st_words<{nw}>({} + (long long){first}, fuse_w);", a.ptr));
        if let Some(ok) = per_lane {
            self.w.reopen("} else if (fuse_some[fuse_j]) {");
            self.open_chunk_lanes(k);
            self.store_lane(a, value, "fuse_i", Some(ok));
            self.w.close();
        }
        self.w.close();
        self.w.close();
    }

    fn store_lane(&mut self, a: &Access, value: VarId, i: &str, ok: Option<&str>) {
        let v = self.at_as(value, i, a.elem);
        self.checked_lane(a, i, ok, &format!("{}[fuse_o] = {v};", a.ptr));
    }
}

fn each(count: &str, var: &str) -> String {
    format!("for (int {var} = 0; {var} < {count}; ++{var})")
}

fn mask_note(emitter: &Emitter<'_>, mask: Option<VarId>) -> String {
    mask.map(|m| format!(", mask {}", emitter.name(m))).unwrap_or_default()
}

fn zero(d: DType) -> String {
    match d {
        DType::F16 | DType::BF16 => "(unsigned short)0".into(),
        _ => ctype::int_lit(0, d),
    }
}

/// Element `v` of a chunk held as 32-bit words (little-endian).
pub(in crate::emit_cuda) fn unpack(d: DType, w: &str, v: &str) -> String {
    let t = c_type(d);
    match d.size_bytes() {
        1 => format!("({t})({w}[{v} / 4] >> (8 * ({v} % 4)))"),
        2 => format!("({t})({w}[{v} / 2] >> (16 * ({v} % 2)))"),
        4 if d == DType::F32 => format!("__uint_as_float({w}[{v}])"),
        4 => format!("({t}){w}[{v}]"),
        _ => format!("({t})(((unsigned long long){w}[2 * {v} + 1] << 32) | {w}[2 * {v}])"),
    }
}

/// The statement that puts element `i` (value `x`) into the words `w` (zeroed first where elements
/// are narrower than a word).
fn pack(d: DType, w: &str, i: &str, x: &str) -> String {
    match d.size_bytes() {
        1 => format!("{w}[{i} / 4] |= (unsigned int)(unsigned char){x} << (8 * ({i} % 4));"),
        2 => format!("{w}[{i} / 2] |= (unsigned int)(unsigned short){x} << (16 * ({i} % 2));"),
        4 if d == DType::F32 => format!("{w}[{i}] = __float_as_uint({x});"),
        4 => format!("{w}[{i}] = (unsigned int){x};"),
        _ => format!(
            "{{ const unsigned long long fuse_q = (unsigned long long){x}; {w}[2 * {i}] = (unsigned int)fuse_q; {w}[2 * {i} + 1] = (unsigned int)(fuse_q >> 32); }}"
        ),
    }
}
