//! How tiles are spread over a program's threads (a "blocked vector" layout).
//!
//! A tile of length L (a power of two) is cut into chunks of VEC consecutive elements; chunk `j`
//! of thread `tid` holds elements `(j * THREADS + tid) * VEC + v`, `v < VEC`, so a warp's chunk
//! `j` is one contiguous, coalesced run, and a thread's VEC elements are one vector access.
//! Per thread: NCH chunks, EPT = NCH * VEC elements in `T name[EPT]`. VEC is the kernel's
//! vector width (16 bytes of its narrowest pointee) but at most L / THREADS, so with a power of
//! two warp count every thread is busy; otherwise (or when L < THREADS) the chunks past L are
//! "not ok" and are left out of memory accesses and reductions.
//! Everything is a preprocessor constant, so `#if` can test it and loops fully unroll.
use fuse_ir::{Kernel, Len, ParamKind};

pub struct Layout {
    pub lens: Vec<Len>,
    /// The widest VEC any tile may use.
    pub veck: u32,
}

impl Layout {
    pub fn new(k: &Kernel) -> Layout {
        let narrowest = k
            .params
            .iter()
            .filter_map(|p| match p.kind {
                ParamKind::Ptr { elem, .. } => Some(elem.size_bytes() as u32),
                ParamKind::Scalar(_) => None,
            })
            .min()
            .unwrap_or(4);
        Layout { lens: k.tile_lens(), veck: 16 / narrowest }
    }

    /// The index `k` of a tile length, naming its `FUSE_*k` macros.
    pub fn index(&self, len: &Len) -> usize {
        self.lens.iter().position(|l| l == len).expect("every tile length is in Kernel::tile_lens")
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
            let vec = vec.replacen("? 2 : (1)", "? 2 : 1", 1);
            out.push(format!("#define FUSE_VEC{k} ({vec})"));
            out.push(format!("#define FUSE_NCH{k} ((FUSE_L{k} + FUSE_THREADS * FUSE_VEC{k} - 1) / (FUSE_THREADS * FUSE_VEC{k}))"));
            out.push(format!("#define FUSE_EPT{k} (FUSE_NCH{k} * FUSE_VEC{k})"));
            out.push(format!("#define FUSE_FULL{k} (FUSE_NCH{k} * FUSE_THREADS * FUSE_VEC{k} == FUSE_L{k})"));
            out.push("// chunk j of this thread is inside the tile".to_string());
            out.push(format!("#define FUSE_OK{k}(j) (FUSE_FULL{k} || ((j) * FUSE_THREADS + fuse_tid) * FUSE_VEC{k} < FUSE_L{k})"));
            out.push("// the tile element held in slot i of this thread".to_string());
            out.push(format!(
                "#define FUSE_IDX{k}(i) ((((i) / FUSE_VEC{k}) * FUSE_THREADS + fuse_tid) * FUSE_VEC{k} + (i) % FUSE_VEC{k})"
            ));
        }
        out
    }
}
