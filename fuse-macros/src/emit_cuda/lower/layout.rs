//! The preprocessor constants that describe the layouts (`FUSE_L`, `FUSE_VEC`, `FUSE_NCH`,
//! `FUSE_EPT`, `FUSE_IDX`, ...; see `analysis/layout.rs` for what they mean).
use crate::emit_cuda::analysis::layout::{Derived, Layout};
use crate::emit_cuda::analysis::tensor_cores::MmaLayout;

impl Layout {
    /// The preprocessor condition under which length `k` takes warp slabs (module doc): the
    /// kernel allows them, a whole tile, some 2-D tile of the length with a row
    /// wider than 32 chunks, and every such tile's rows whole within a warp's share (`L / W` a
    /// multiple of each column count; powers of two, so true where a row is at most 32 chunks).
    fn slab_condition(&self, k: usize, const_names: &[String]) -> String {
        if !self.slabs || self.caps[k].is_empty() {
            return "0".into();
        }
        let cols: Vec<String> = self.caps[k].iter().map(|c| c.c_expr(const_names)).collect();
        let wide = cols.iter().map(|c| format!("({c}) / FUSE_VEC{k} > 32")).collect::<Vec<_>>().join(" || ");
        let whole = cols
            .iter()
            .map(|c| format!("(FUSE_L{k} / FUSE_NUM_WARPS) % ({c}) == 0"))
            .collect::<Vec<_>>()
            .join(" && ");
        format!("(FUSE_FULL{k} && ({wide}) && {whole})")
    }

    /// A thread's chunk distance (`FUSE_CSTEP`) of layout `k`: its consecutive chunks are that many
    /// chunks apart (`FUSE_THREADS` for layouts that never take slabs).
    pub fn chunk_step(&self, k: usize) -> String {
        match k.checked_sub(self.lens.len()).map(|i| &self.derived[i]) {
            None | Some(Derived::Row(_)) => format!("FUSE_CSTEP{k}"),
            Some(Derived::Mma(_) | Derived::MmaRow(_)) => "FUSE_THREADS".into(),
        }
    }

    /// A preprocessor condition: a thread holds at most `n` lanes of every tile (true without
    /// tiles).
    pub fn lanes_at_most(&self, n: usize) -> String {
        let each: Vec<String> = (0..self.lens.len()).map(|k| format!("FUSE_EPT{k} <= {n}")).collect();
        if each.is_empty() {
            "1".into()
        } else {
            each.join(" && ")
        }
    }

    /// The `#define`s of every tile length.
    pub fn macros(&self, const_names: &[String]) -> Vec<String> {
        let mut out = vec![
            "#define FUSE_THREADS (32 * FUSE_NUM_WARPS)".to_string(),
            "// the smallest power of two >= FUSE_NUM_WARPS (lanes of the cross-warp butterfly)".to_string(),
            "#define FUSE_RED_P (FUSE_NUM_WARPS > 16 ? 32 : FUSE_NUM_WARPS > 8 ? 16 : FUSE_NUM_WARPS > 4 ? 8 : FUSE_NUM_WARPS > 2 ? 4 : FUSE_NUM_WARPS > 1 ? 2 : 1)".to_string(),
        ];
        for (k, len) in self.lens.iter().enumerate() {
            out.push(format!("// tile length {k}: {}", len.display(const_names)));
            out.push(format!("#define FUSE_L{k} {}", len.c_expr(const_names)));
            // The widest power of two ≤ min(veck, L / THREADS), at least 1.
            let mut vec = "1".to_string();
            let mut w = 2;
            while w <= self.veck {
                vec = format!("FUSE_L{k} >= FUSE_THREADS * {w} ? {w} : ({vec})");
                w *= 2;
            }
            let mut vec = vec.replacen("? 2 : (1)", "? 2 : 1", 1);
            for c in &self.caps[k] {
                // At most the columns of a 2-D tile of this length: a chunk stays inside a row.
                let c = c.c_expr(const_names);
                vec = format!("({vec}) < ({c}) ? ({vec}) : ({c})");
            }
            for w in &self.pair_caps[k] {
                // Half of the VEC of a length twice as long that a split or join pairs with it.
                let h = format!("(FUSE_VEC{w} > 2 ? FUSE_VEC{w} / 2 : 1)");
                vec = format!("({vec}) < {h} ? ({vec}) : {h}");
            }
            out.push(format!("#define FUSE_VEC{k} ({vec})"));
            out.push(format!("#define FUSE_NCH{k} ((FUSE_L{k} + FUSE_THREADS * FUSE_VEC{k} - 1) / (FUSE_THREADS * FUSE_VEC{k}))"));
            out.push(format!("#define FUSE_EPT{k} (FUSE_NCH{k} * FUSE_VEC{k})"));
            out.push(format!("#define FUSE_FULL{k} (FUSE_NCH{k} * FUSE_THREADS * FUSE_VEC{k} == FUSE_L{k})"));
            out.push(format!("#define FUSE_SLAB{k} {}", self.slab_condition(k, const_names)));
            out.push(format!("#define FUSE_CSTEP{k} (FUSE_SLAB{k} ? 32 : FUSE_THREADS)"));
            out.push("// the index of this thread's chunk j (in its warp's slab, or plain)".to_string());
            out.push(format!(
                "#define FUSE_CI{k}(j) ((FUSE_SLAB{k} ? (fuse_tid >> 5) * (FUSE_NCH{k} * 32) + (fuse_tid & 31) : fuse_tid) + (j) * FUSE_CSTEP{k})"
            ));
            out.push("// chunk j of this thread is inside the tile".to_string());
            out.push(format!(
                "#define FUSE_OK{k}(j) (FUSE_FULL{k} || FUSE_CI{k}(j) * FUSE_VEC{k} < FUSE_L{k})"
            ));
            out.push("// the tile element held in slot i of this thread".to_string());
            out.push(format!(
                "#define FUSE_IDX{k}(i) (FUSE_CI{k}((i) / FUSE_VEC{k}) * FUSE_VEC{k} + (i) % FUSE_VEC{k})"
            ));
        }
        for (i, d) in self.derived.iter().enumerate() {
            let k = self.lens.len() + i;
            let r = match d {
                Derived::Row(r) => r,
                Derived::Mma(m) => {
                    out.extend(m.macros(k, const_names));
                    continue;
                }
                Derived::MmaRow(p) => {
                    out.extend(MmaLayout::row_macros(k, *p));
                    continue;
                }
            };
            let p = r.parent;
            let c = r.cols.c_expr(const_names);
            if r.columns {
                out.push(format!(
                    "// column layout {k}: the columns of layout {p}'s [R, {}] tiles",
                    r.cols.display(const_names)
                ));
                out.push(format!("#define FUSE_L{k} ({c})"));
                for m in ["VEC", "NCH", "EPT", "FULL", "CSTEP"] {
                    out.push(format!("#define FUSE_{m}{k} FUSE_{m}{p}"));
                }
                out.push(format!("#define FUSE_OK{k}(j) FUSE_OK{p}(j)"));
                // Unsigned (indices are never negative): a power-of-two modulus is then a mask,
                // so chunks that hold the same columns compute the same index and their loads of
                // a broadcast row (LayerNorm's weight) merge into one.
                out.push(format!(
                    "#define FUSE_IDX{k}(i) ((int)((unsigned int)FUSE_IDX{p}(i) % (unsigned int)({c})))"
                ));
                continue;
            }
            out.push(format!(
                "// row layout {k}: the rows of layout {p}'s [R, {}] tiles",
                r.cols.display(const_names)
            ));
            out.push(format!("#define FUSE_L{k} (FUSE_L{p} / ({c}))"));
            out.push(format!("#define FUSE_VEC{k} 1"));
            out.push(format!("#define FUSE_NCH{k} FUSE_NCH{p}"));
            out.push(format!("#define FUSE_EPT{k} FUSE_NCH{p}"));
            out.push(format!("#define FUSE_FULL{k} FUSE_FULL{p}"));
            out.push(format!("#define FUSE_CSTEP{k} FUSE_CSTEP{p}"));
            out.push(format!("#define FUSE_OK{k}(j) FUSE_OK{p}(j)"));
            out.push("// the row of parent chunk i".to_string());
            out.push(format!(
                "#define FUSE_IDX{k}(i) ((int)((unsigned int)(FUSE_CI{p}(i) * FUSE_VEC{p}) / (unsigned int)({c})))"
            ));
            out.push("// how many consecutive threads hold one row".to_string());
            out.push(format!("#define FUSE_G{k} (({c}) / FUSE_VEC{p})"));
        }
        out
    }
}
