//! Stores of a tensor-core result through the scratch (Triton's coalesced store of a `dot`
//! result).
//!
//! An MMA layout holds two adjacent columns per thread, so storing it directly is one 4-byte
//! (f16) or 2-byte (i8) access per pair, and a warp's store writes 8 rows of 16 (8) bytes.
//! Written row-major to the scratch and read back in the tile's length layout, each thread
//! stores 16-byte runs and a warp whole rows: four (eight) times fewer store instructions, each
//! writing whole sectors. The scratch rows are padded by 16 bytes, so the pairs a warp writes
//! (8 rows, 4 threads per row) land in distinct banks, and the 16-byte reads stay aligned.
use super::ctype::c_type;
use super::Emitter;
use crate::emit_cuda::analysis::remat::BUDGET;
use fuse_ir::{DType, ParamKind, VarId};

/// The padding of a scratch row, in bytes.
const PAD_BYTES: usize = 16;

impl Emitter<'_> {
    /// The length layout a store of `value` passes through the scratch to, if it does: `value` is
    /// a 2-D tile in an MMA layout of the pointee's 1- or 2-byte type, and every tile among the
    /// offsets and the mask is already in that layout or an index tile recomputable there.
    pub(in crate::emit_cuda) fn coalesced_store_layout(
        &mut self,
        param: u32,
        offset: VarId,
        value: VarId,
        mask: Option<VarId>,
    ) -> Option<usize> {
        let m = self.tile(value)?;
        if !self.layout.is_mma(m) {
            return None;
        }
        let ParamKind::Ptr { elem, .. } = self.k.params[param as usize].kind else { return None };
        let d = self.dtype(value);
        if d != elem || d == DType::Bool || d.size_bytes() > 2 || self.k.ty(value).shape.dims().len() != 2 {
            return None;
        }
        let l = self.layout.index(&self.k.ty(value).shape.len()?);
        for v in [offset].into_iter().chain(mask) {
            let Some(kv) = self.tile(v) else { continue };
            if kv == l {
                continue;
            }
            if !self.transparent[v.0 as usize] {
                return None;
            }
            // The view `with_views` will make must exist.
            let mut budget = BUDGET;
            self.at_lanes_of(l, |emitter| emitter.value_at(v, "(fuse_f)", &mut budget))?;
        }
        Some(l)
    }

    /// `store(param[offset], value, mask)` with `value` moved to length layout `l` through the
    /// scratch first ([`Emitter::coalesced_store_layout`]).
    pub(in crate::emit_cuda) fn store_through_scratch(
        &mut self,
        (param, offset, value, mask): (u32, VarId, VarId, Option<VarId>),
        l: usize,
    ) {
        let m = self.tile(value).expect("an MMA tile");
        let d = self.dtype(value);
        let (t, esz) = (c_type(d), d.size_bytes());
        let dims = self.k.ty(value).shape.dims();
        let (rows, cols) = (dims[0].c_expr(&self.k.consts), dims[1].c_expr(&self.k.consts));
        let pitch = format!("(({cols}) + {})", PAD_BYTES / esz);
        self.scratch_bytes_for(format!("({rows}) * {pitch} * {esz}"));
        self.needs.words = true;
        let v = self.name(value).to_string();
        self.w.open("");
        self.w.line(format!("// {v} to layout {l} through the scratch (rows padded by {PAD_BYTES} bytes)"));
        self.w.line("__syncthreads();");
        // Slots i and i + 1 (i even) are adjacent columns of one row.
        let (pair, half) =
            if esz == 2 { ("unsigned int", "unsigned short") } else { ("unsigned short", "unsigned char") };
        self.w.open(format!("if (FUSE_OK{m}(0))"));
        self.w.pp("#pragma unroll");
        self.w.line(format!(
            "for (int fuse_i = 0; fuse_i < FUSE_EPT{m}; fuse_i += 2) *({pair}*)(({t}*)fuse_xs + FUSE_ROW{m}(fuse_i) * {pitch} + FUSE_COL{m}(fuse_i)) = ({pair})(({pair})({half}){v}[fuse_i] | (({pair})({half}){v}[fuse_i + 1] << {}));",
            8 * esz
        ));
        self.w.close();
        self.w.line("__syncthreads();");
        self.w.line(format!("{t} fuse_cv[FUSE_EPT{l}];"));
        self.w.open_unrolled("fuse_j", &format!("FUSE_NCH{l}"));
        self.w.line(format!("const int fuse_b = fuse_j * FUSE_VEC{l};"));
        self.w.line(format!("const int fuse_f = FUSE_IDX{l}(fuse_b);"));
        self.w.line(format!(
            "const {t}* fuse_p = ({t}*)fuse_xs + (fuse_f / ({cols})) * {pitch} + fuse_f % ({cols});"
        ));
        self.w.pp(format!("#if FUSE_VEC{l} * {esz} >= 4"));
        self.w.line(format!("unsigned int fuse_w[FUSE_VEC{l} * {esz} / 4] = {{}};"));
        self.w
            .line(format!("if (FUSE_OK{l}(fuse_j)) fuse_ld_words<FUSE_VEC{l} * {esz} / 4>(fuse_w, fuse_p);"));
        let unpacked = super::memory::unpack(d, "fuse_w", "fuse_v");
        self.w.unrolled("fuse_v", &format!("FUSE_VEC{l}"), format!("fuse_cv[fuse_b + fuse_v] = {unpacked};"));
        self.w.pp("#else");
        self.w.unrolled(
            "fuse_v",
            &format!("FUSE_VEC{l}"),
            format!("fuse_cv[fuse_b + fuse_v] = FUSE_OK{l}(fuse_j) ? fuse_p[fuse_v] : ({t})0;"),
        );
        self.w.pp("#endif");
        self.w.close();
        // The store proper reads `fuse_cv` as `value` in layout `l` (and views of the index tiles
        // there).
        let i = value.0 as usize;
        let old_name = std::mem::replace(&mut self.names.vars[i], "fuse_cv".into());
        let old_layout = self.var_layout[i].replace(l);
        let old_uniform = self.chunk_uniform[i].take();
        let vars: Vec<VarId> = [offset].into_iter().chain(mask).collect();
        self.with_views(value, &vars, &|emitter: &mut Self| emitter.store(param, offset, value, mask));
        self.names.vars[i] = old_name;
        self.var_layout[i] = old_layout;
        self.chunk_uniform[i] = old_uniform;
        self.w.close();
    }
}
