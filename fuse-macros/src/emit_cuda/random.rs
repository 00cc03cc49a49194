//! `rand(seed, offset)`: Philox4x32-10 exactly as `fuse_ir::philox`. Per element in general;
//! where the offsets are `s + element_index` with 4 | s and 4 | VEC, each group of four slots
//! holds offsets 4b..4b+3, which share one Philox counter: one call gives all four values.
use super::affine::Fact;
use super::Ctx;
use fuse_ir::{DType, VarId};

impl Ctx<'_> {
    pub(super) fn rand(&mut self, dst: VarId, seed: VarId, offset: VarId) {
        self.needs.philox = true;
        let d = self.name(dst).to_string();
        self.w.line(format!("// {d} = rand({}, {})", self.name(seed), self.name(offset)));
        self.w.open("");
        let s = self.at_as(seed, "", DType::U64);
        self.w.line(format!("const unsigned long long fuse_seed = {s};"));
        let Some(k) = self.tile(offset) else {
            let o = self.at_as(offset, "", DType::U64);
            self.w.line(format!("{d} = fuse_rand(fuse_seed, {o});"));
            self.w.close();
            return;
        };
        let per_element = |cx: &mut Self| {
            let o = cx.at_as(offset, "fuse_i", DType::U64);
            cx.w.unrolled(
                "fuse_i",
                &format!("FUSE_EPT{k}"),
                format!("{d}[fuse_i] = fuse_rand(fuse_seed, {o});"),
            );
        };
        match self.facts.get(offset).clone() {
            Fact::Contig(div) => {
                let divisible = self.divisible(&div, "4", 2);
                self.w.pp(format!("#if FUSE_VEC{k} % 4 == 0 && {divisible}"));
                self.w.pp("#pragma unroll");
                self.w.open(format!("for (int fuse_q = 0; fuse_q < FUSE_EPT{k}; fuse_q += 4)"));
                let o = self.at_as(offset, "fuse_q", DType::U64);
                self.w.line(format!("const unsigned long long fuse_c = {o} >> 2;  // offsets 4c .. 4c + 3"));
                self.w.line(
                    "const uint4 fuse_p = fuse_philox((unsigned int)fuse_c, (unsigned int)(fuse_c >> 32), (unsigned int)fuse_seed, (unsigned int)(fuse_seed >> 32));",
                );
                self.w.line(format!("{d}[fuse_q] = fuse_uniform(fuse_p.x);"));
                self.w.line(format!("{d}[fuse_q + 1] = fuse_uniform(fuse_p.y);"));
                self.w.line(format!("{d}[fuse_q + 2] = fuse_uniform(fuse_p.z);"));
                self.w.line(format!("{d}[fuse_q + 3] = fuse_uniform(fuse_p.w);"));
                self.w.close();
                self.w.pp("#else");
                per_element(self);
                self.w.pp("#endif");
            }
            _ => per_element(self),
        }
        self.w.close();
    }
}
