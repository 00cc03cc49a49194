//! `dot` of f32 tiles on tensor cores: TF32 `mma.sync.m16n8k8` (sm_80 and later), the part of
//! the MMA lowering ([`super::mma`]) that differs for 32-bit elements.
//!
//! **Rounding.** f32 operands are multiplied as TF32 (Triton's default for f32 `dot`): every
//! fragment register is rounded with `cvt.rna.tf32.f32` (to nearest, ties away from zero) right
//! after it is read from shared memory, which is how the CPU interpreter rounds them
//! (`fuse_ir::tf32::round`). Shared memory holds the f32 values as loaded, so an operand may get
//! there by any path (staged from registers, or `cp.async` in a pipelined loop). Products of
//! TF32 values are exact in f32: only the order of the sums differs from the interpreter's.
//!
//! **Fragments** (`g = lane / 4`, `t = lane % 4`; PTX ISA, "Matrix Fragments for mma.m16n8k8"):
//! A's four registers hold rows `g`, `g + 8` of column `t`, then of column `t + 4`; B's two hold
//! rows (K) `t` and `t + 4` of column (N) `g`; the accumulator's four are m16n8k16's (rows `g`,
//! `g + 8`, columns `2t`, `2t + 1`), so the MMA layout and everything that reads it are shared
//! with f16 and bf16. One K step is 8 columns of A.
//!
//! **Shared memory.** The operands are staged row-major in 16-byte chunks, as 16-bit ones are,
//! at two 16-bit units a float (`fuse_swz_f32`; rows wider than 32 floats in `[h, 32]` panels),
//! each row's chunks XOR-ed with the row's chunk index rotated left by one bit. An 8 x 8 `b16`
//! matrix of `ldmatrix` is 8 rows of 4 floats, lane `i` receiving row `i / 4`, float `i % 4`:
//! A's fragment of an m-tile is one `ldmatrix.x4` (and a K-major B's, `dot(a, trans(w))`, one per
//! two n-tiles), 8 rows of a chunk reading 8 distinct bank groups. A `[K, N]` B would need a
//! 32-bit transposing `ldmatrix`, which does not exist: its fragment is two 32-bit shared loads
//! per n-tile, 4 rows x 8 columns a load; the rotated XOR puts those rows' chunks on 32 distinct
//! banks (the plain XOR of `fuse_swz` would put rows `t` and `t + 1` on the same ones).
//!
//! **Not wgmma.** Hopper's `wgmma` takes TF32 only with both operands K-major; f32 dots keep
//! `mma.sync` on sm_90a, and a kernel whose tensor-core dots are all f32 never takes the
//! warpgroup grid ([`crate::emit_cuda::analysis::layout::Layout::warpgroups`]).
use super::Emitter;

/// The device helpers of the TF32 lowering (inline PTX; `fuse_ldmatrix_*` and `fuse_smem_addr`
/// are [`super::mma::PRELUDE`]'s).
pub const PRELUDE: &str = r#"// TF32 dot (f32 tiles): the shared-memory index, in 16-bit units, of element (r, c) of a row-major
// [h, w] f32 matrix: fuse_swz's layout at two units a float (panels of 32 floats), the chunk XOR
// rotated left one bit (so a B fragment's 4 rows x 8 floats hit 32 banks; 8 rows of a chunk, 8
// bank groups, as for ldmatrix).
__device__ __forceinline__ int fuse_swz_f32(int r, int c, int w, int h) {
  const int p = 2 * w > 64 ? 64 : 2 * w;
  const int cpr = p / 8;
  const int per = cpr >= 8 ? 1 : 8 / cpr;
  const int span = cpr >= 8 ? 8 : cpr;
  const int q = (r / per) % span;
  const int x = span > 1 ? (2 * q + q / (span / 2)) % span : 0;
  const int u = 2 * c;
  const int cc = u % p;
  return (u / p) * (h * p) + r * p + (((cc / 8) ^ x) * 8) + (cc % 8);
}
// Rounds fuse_n fragment registers (f32 bits) to TF32 in place, as the CPU interpreter does.
template <int fuse_n> __device__ __forceinline__ void fuse_tf32_frag(unsigned int* r) {
#pragma unroll
  for (int i = 0; i < fuse_n; ++i) asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r[i]) : "f"(__uint_as_float(r[i])));
}
__device__ __forceinline__ void fuse_mma_tf32(float* d, const unsigned int* a, const unsigned int* b) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
"#;

/// The K of one TF32 `mma.sync` (m16n8k8).
pub const K_STEP: usize = 8;

/// The shared address (a `float*`) of element `f` (row-major flat index) of a `[h, w]` f32
/// operand staged at `buf` (an `unsigned short*`).
pub(in crate::emit_cuda) fn swizzled(buf: &str, f: &str, (w, h): (&str, &str)) -> String {
    format!("(float*)({buf} + fuse_swz_f32(({f}) / ({w}), ({f}) % ({w}), {w}, {h}))")
}

impl Emitter<'_> {
    /// The TF32 A and B fragments of K step `k` (a C expression; 8 columns of A a step) into
    /// buffer `k & 1` of `fuse_fa`/`fuse_fb`, in a block: read from the staged `fuse_sa` (`[m, kk]`)
    /// and `fuse_sb` (`[kk, n]`, or `[n, kk]` when `kmajor`), then rounded to TF32.
    pub(in crate::emit_cuda) fn tf32_frag_loads(
        &mut self,
        mma: usize,
        k: &str,
        (kk, n, m): (&str, &str, &str),
        kmajor: bool,
    ) {
        self.needs.tf32_mma = true;
        self.w.open("");
        self.w.line(format!("const int fuse_ks = {k};"));
        self.w.line("unsigned int (*fuse_ra)[4] = fuse_fa[fuse_ks & 1];");
        self.w.line("unsigned int (*fuse_rb)[2] = fuse_fb[fuse_ks & 1];");
        // A: matrices (rows 0-7, floats 0-3), (rows 8-15, floats 0-3), then floats 4-7: a0..a3.
        self.w.open_unrolled("fuse_mi", &format!("FUSE_MI{mma}"));
        self.w.line(format!("const int fuse_r = FUSE_WROW{mma}(fuse_mi) + (fuse_lane & 15);"));
        self.w.line(format!(
            "fuse_ldmatrix_x4(fuse_ra[fuse_mi], fuse_smem_addr(fuse_sa + fuse_swz_f32(fuse_r, fuse_ks * 8 + (fuse_lane >> 4) * 4, {kk}, {m})));"
        ));
        self.w.line("fuse_tf32_frag<4>(fuse_ra[fuse_mi]);");
        self.w.close();
        if kmajor {
            // `[n, kk]`: matrices (ni, k 0-3), (ni, k 4-7), (ni + 1, ..): b0, b1 of two n-tiles.
            self.w.pp("#pragma unroll");
            self.w.open(format!("for (int fuse_ni = 0; fuse_ni < FUSE_NI{mma}; fuse_ni += 2)"));
            self.kmajor_b_fragments(mma, (kk, n), "fuse_swz_f32", 4);
            self.w.close();
        } else {
            // `[kk, n]`: b0 = (k t, n g), b1 = (k t + 4, n g), one 32-bit load each.
            self.w.open_unrolled("fuse_ni", &format!("FUSE_NI{mma}"));
            self.w.line(format!(
                "const int fuse_c = (FUSE_WNI{mma} * FUSE_NI{mma} + fuse_ni) * 8 + (fuse_lane >> 2);"
            ));
            self.w.line("const int fuse_r = fuse_ks * 8 + (fuse_lane & 3);");
            for (h, dr) in [(0, ""), (1, " + 4")] {
                self.w.line(format!(
                    "fuse_rb[fuse_ni][{h}] = *(const unsigned int*)(fuse_sb + fuse_swz_f32(fuse_r{dr}, fuse_c, {n}, {kk}));"
                ));
            }
            self.w.close();
        }
        self.w.unrolled("fuse_ni", &format!("FUSE_NI{mma}"), "fuse_tf32_frag<2>(fuse_rb[fuse_ni]);");
        self.w.close();
    }
}
