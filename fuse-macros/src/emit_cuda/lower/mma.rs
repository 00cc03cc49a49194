//! `dot` on tensor cores: the MMA layout of its result and the `mma.sync` lowering: m16n8k16 for
//! f16 and bf16 inputs (f32 accumulators), m16n8k32 for i8 (i32), m16n8k8 for f32 taken as TF32
//! (f32; its operand fetch is [`super::tf32`]'s).
//!
//! **The MMA layout** of a `[M, N]` tile: the program's warps form a `WM x WN` grid, warp
//! `(wm, wn)` owning the `M / WM` rows from `wm * M / WM` and the `N / WN` columns from
//! `wn * N / WN`, as `MI x NI` tiles of 16 x 8 (`MI = M / (16 WM)`, `NI = N / (8 WN)`). Lane `l`
//! (`g = l / 4`, `t = l % 4`) holds, of tile `(mi, ni)`, the elements at rows `g` and `g + 8`,
//! columns `2t` and `2t + 1`: the four accumulator registers `c0..c3` of `mma.sync`. Slot
//! `i = ((mi * NI + ni) * 2 + h) * 2 + e` holds row `g + 8h`, column `2t + e` of its tile, so two
//! consecutive slots are two consecutive lanes of one row (VEC = 2) and tile `(mi, ni)`'s registers
//! are slots `4 (mi NI + ni) + 0..3`. The layout is described by the same macros as every other
//! (`FUSE_L/VEC/NCH/EPT/FULL/OK/IDX`), so element-wise code, loads and stores (two-element vectors),
//! broadcasts and conversions through the scratch, and full reductions work on it unchanged.
//! The warp grid doubles along M while the warp tile has 32 or more rows and is at least as tall
//! as wide (or too narrow to split), else along N while it has 16 or more columns; warps beyond a
//! tile too small to share (`[16, 16]` over 8 warps) hold nothing (`FUSE_OK` is false for them).
//! On sm_90a the layout may take wgmma's **warpgroup grid** instead ([`super::wgmma`]): the same
//! slots, with a warp's m-tiles 64 rows apart (`FUSE_WROW<k>`, `FUSE_WNI<k>` say where a warp's
//! tiles start, for both grids).
//!
//! **The lowering** of `c = dot(a, b, acc)`: `a` (`[M, K]`) and `b` (`[K, N]`), whatever their
//! layout, are written to shared memory row-major, each row's 16-byte chunks XOR-swizzled by the
//! row (`fuse_swz`) so that `ldmatrix` reads 8 rows of one chunk from 8 distinct bank groups. Each
//! warp then walks K in steps of 16: `ldmatrix.x4` gives the A fragments of each of its m-tiles,
//! `ldmatrix.x4.trans` the B fragments of two n-tiles at a time (`.x2` for a last odd one), and one
//! `mma.sync` per `(mi, ni)` accumulates in place in the result's slots. f32 operands are staged
//! the same way (`fuse_swz_f32`) and walked in steps of 8 with m16n8k8, never on `wgmma`
//! ([`super::tf32`]).
use super::ctype::c_type;
use super::Emitter;
use crate::emit_cuda::analysis::tensor_cores::{may_take_wgmma, MmaLayout};
use fuse_ir::{DType, VarId};

impl MmaLayout {
    /// The `#define`s of MMA layout `k`.
    pub fn macros(&self, k: usize, consts: &[String]) -> Vec<String> {
        let (m, n) = (self.rows.c_expr(consts), self.cols.c_expr(consts));
        let mut out = vec![format!(
            "// MMA layout {k}: [{}, {}] as tensor-core accumulators, warps FUSE_WM{k} x FUSE_WN{k}",
            self.rows.display(consts),
            self.cols.display(consts)
        )];
        // The warpgroup grid of wgmma (sm_90a): FUSE_WGS<k> warpgroups of 4 warps, as many along M
        // as it has 64-row blocks (all of them with chained dots), the rest along N; each
        // warpgroup's N from 16 to 256 columns.
        out.push(format!("#define FUSE_WGS{k} (FUSE_NUM_WARPS >= 4 ? FUSE_NUM_WARPS / 4 : 1)"));
        out.push(format!("#define FUSE_WGM{k} (({m}) / 64 < FUSE_WGS{k} ? ({m}) / 64 : FUSE_WGS{k})"));
        out.push(format!("#define FUSE_WGN{k} (FUSE_WGS{k} / (FUSE_WGM{k} > 0 ? FUSE_WGM{k} : 1))"));
        let wg = if self.warpgroups {
            let gn = format!("FUSE_WGN{k}");
            // A B of [K, N] is read in panels of up to 64 columns: a warpgroup's columns start on one.
            let width = format!(
                "({n}) / {gn} >= 16 && ({n}) / {gn} <= 256 && ({n}) / {gn} >= (({n}) > 64 ? 64 : ({n}))"
            );
            let fits_n = if self.rows_first { format!("{gn} == 1 && {width}") } else { width };
            format!(
                "defined(__CUDA_ARCH_FEAT_SM90_ALL) && FUSE_NUM_WARPS % 4 == 0 && ({m}) % 64 == 0 && FUSE_WGM{k} >= 1 && {fits_n}"
            )
        } else {
            "0".to_string()
        };
        out.push(format!("#if {wg}"));
        out.push(format!("#define FUSE_WG{k} 1"));
        out.push(format!("#define FUSE_WM{k} (4 * FUSE_WGM{k})"));
        out.push(format!("#define FUSE_WN{k} FUSE_WGN{k}"));
        out.push(
            "// warp w: warpgroup w / 4 of the grid, rows 16 (w % 4) of each of its 64-row blocks"
                .to_string(),
        );
        out.push(format!("#define FUSE_WNI{k} (((fuse_tid >> 5) >> 2) % FUSE_WN{k})"));
        out.push(format!(
            "#define FUSE_WROW{k}(mi) (((((fuse_tid >> 5) >> 2) / FUSE_WN{k}) * FUSE_MI{k} + (mi)) * 64 + ((fuse_tid >> 5) & 3) * 16)"
        ));
        out.push("#else".to_string());
        out.push(format!("#define FUSE_WG{k} 0"));
        // The warp grid, doubling one side per doubling of the warp count (preprocessor-evaluable:
        // consts and FUSE_NUM_WARPS are integer literals).
        out.push(format!("#define FUSE_WM{k}_0 1"));
        out.push(format!("#define FUSE_WN{k}_0 1"));
        for s in 1..=5 {
            let (wm, wn) = (format!("FUSE_WM{k}_{}", s - 1), format!("FUSE_WN{k}_{}", s - 1));
            // Rows first: 16 rows or more per warp, and warps past M / 16 idle.
            let (split_m, split_n) = if self.rows_first {
                (format!("(({m}) / {wm} >= 32)"), "0".to_string())
            } else {
                (
                    format!("(({m}) / {wm} >= 32 && (({m}) / {wm} >= ({n}) / {wn} || ({n}) / {wn} < 16))"),
                    format!("(!FUSE_SPLITM{k}_{s} && ({n}) / {wn} >= 16)"),
                )
            };
            let grow = format!("FUSE_NUM_WARPS >= {}", 1 << s);
            out.push(format!("#define FUSE_SPLITM{k}_{s} {split_m}"));
            // The preprocessor picks each level's side, so a level names the one before it once:
            // as a ternary (`grow && split ? 2 * wm : wm`, the split test naming wm and wn again)
            // the expansion would grow ~6x a level, to megabytes of tokens per FUSE_IDX<k> at
            // level 5 and seconds of NVRTC front end per mma.sync variant.
            for (side, prev, test) in [("M", &wm, format!("FUSE_SPLITM{k}_{s}")), ("N", &wn, split_n)] {
                out.push(format!("#if ({grow}) && ({test})"));
                out.push(format!("#define FUSE_W{side}{k}_{s} (2 * {prev})"));
                out.push("#else".to_string());
                out.push(format!("#define FUSE_W{side}{k}_{s} {prev}"));
                out.push("#endif".to_string());
            }
        }
        out.push(format!("#define FUSE_WM{k} FUSE_WM{k}_5"));
        out.push(format!("#define FUSE_WN{k} FUSE_WN{k}_5"));
        out.push("// warp w: (w / WN, w % WN) of the grid, MI consecutive 16-row tiles".to_string());
        out.push(format!("#define FUSE_WNI{k} ((fuse_tid >> 5) % FUSE_WN{k})"));
        out.push(format!(
            "#define FUSE_WROW{k}(mi) ((((fuse_tid >> 5) / FUSE_WN{k}) * FUSE_MI{k} + (mi)) * 16)"
        ));
        out.push("#endif".to_string());
        out.push(format!("#define FUSE_MI{k} (({m}) / (16 * FUSE_WM{k}))"));
        out.push(format!("#define FUSE_NI{k} (({n}) / (8 * FUSE_WN{k}))"));
        out.push("// warps past the grid hold nothing".to_string());
        out.push(format!("#define FUSE_MMA_ON{k} ((fuse_tid >> 5) < FUSE_WM{k} * FUSE_WN{k})"));
        out.push(format!("#define FUSE_L{k} (({m}) * ({n}))"));
        out.push(format!("#define FUSE_VEC{k} 2"));
        out.push(format!("#define FUSE_NCH{k} (FUSE_MI{k} * FUSE_NI{k} * 2)"));
        out.push(format!("#define FUSE_EPT{k} (FUSE_MI{k} * FUSE_NI{k} * 4)"));
        out.push(format!("#define FUSE_FULL{k} (FUSE_WM{k} * FUSE_WN{k} == FUSE_NUM_WARPS)"));
        out.push(format!("#define FUSE_OK{k}(j) (FUSE_FULL{k} || FUSE_MMA_ON{k})"));
        out.push(
            "// slot i: tile (i / 4) of the warp's MI x NI, row g + 8 ((i / 2) % 2), column 2t + i % 2"
                .into(),
        );
        // Its row and column apart: a per-thread base plus a constant of i, so a broadcast row or
        // column and the offsets of the epilogue's stores are a register and an immediate each
        // (`FUSE_IDX / n` and `% n` are signed divisions the compiler keeps, and spills, per slot).
        out.push(format!(
            "#define FUSE_ROW{k}(i) (FUSE_WROW{k}(((i) / 4) / FUSE_NI{k}) + ((fuse_tid & 31) >> 2) + 8 * (((i) >> 1) & 1))"
        ));
        out.push(format!(
            "#define FUSE_COL{k}(i) ((FUSE_WNI{k} * FUSE_NI{k} + ((i) / 4) % FUSE_NI{k}) * 8 + 2 * (fuse_tid & 3) + ((i) & 1))"
        ));
        out.push(format!("#define FUSE_IDX{k}(i) (FUSE_ROW{k}(i) * ({n}) + FUSE_COL{k}(i))"));
        out
    }

    /// The `#define`s of the row layout `k` of MMA layout `p`: slot `j = 2 mi + h` holds row
    /// `g + 8h` of the warp's m-tile `mi`; the four lanes of a quad (and the `WN` warps of a warp
    /// row) hold the same rows.
    pub fn row_macros(k: usize, p: usize) -> Vec<String> {
        vec![
            format!("// MMA row layout {k}: the rows of MMA layout {p}"),
            format!("#define FUSE_L{k} (FUSE_L{p} / (8 * FUSE_NI{p} * FUSE_WN{p}))"),
            format!("#define FUSE_VEC{k} 1"),
            format!("#define FUSE_NCH{k} (FUSE_MI{p} * 2)"),
            format!("#define FUSE_EPT{k} (FUSE_MI{p} * 2)"),
            format!("#define FUSE_FULL{k} FUSE_FULL{p}"),
            format!("#define FUSE_OK{k}(j) FUSE_OK{p}(j)"),
            format!(
                "#define FUSE_IDX{k}(i) (FUSE_WROW{p}((i) / 2) + ((fuse_tid & 31) >> 2) + 8 * ((i) & 1))"
            ),
        ]
    }
}

/// The device helpers of the lowering (inline PTX: NVRTC has no headers).
pub const PRELUDE: &str = r#"// Tensor cores: the shared-memory index of element (r, c) of a row-major [h, w] matrix of 16-bit
// values. Rows wider than 64 are split into panels of [h, 64] one after the other; a row's 16-byte
// chunks are XOR-ed with the row (so ldmatrix's 8 rows hit 8 bank groups): wgmma's 128-, 64- and
// 32-byte swizzles for panels of 64, 32 and 16 columns.
__device__ __forceinline__ int fuse_swz(int r, int c, int w, int h) {
  const int p = w > 64 ? 64 : w;
  const int cpr = p / 8;
  const int per = cpr >= 8 ? 1 : 8 / cpr;
  const int span = cpr >= 8 ? 8 : cpr;
  const int cc = c % p;
  return (c / p) * (h * p) + r * p + (((cc / 8) ^ ((r / per) % span)) * 8) + (cc % 8);
}
// Orders this thread's shared-memory writes before the tensor cores' reads (wgmma reads through
// the async proxy); nothing before sm_90a, where no wgmma runs.
__device__ __forceinline__ void fuse_fence_async() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
__device__ __forceinline__ unsigned int fuse_smem_addr(const void* p) {
  unsigned int a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
__device__ __forceinline__ void fuse_ldmatrix_x4(unsigned int* r, unsigned int a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void fuse_ldmatrix_x2(unsigned int* r, unsigned int a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1]) : "r"(a));
}
__device__ __forceinline__ void fuse_ldmatrix_x4_trans(unsigned int* r, unsigned int a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void fuse_ldmatrix_x2_trans(unsigned int* r, unsigned int a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1]) : "r"(a));
}
__device__ __forceinline__ void fuse_mma_f16(float* d, const unsigned int* a, const unsigned int* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// i8 x i8 -> i32 (m16n8k32; its A and B fragments are the f16 m16n8k16 ones, byte for byte).
__device__ __forceinline__ void fuse_mma_s8(int* d, const unsigned int* a, const unsigned int* b) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void fuse_mma_bf16(float* d, const unsigned int* a, const unsigned int* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
"#;

/// The shared address of element `f` (row-major flat index) of a `[h, w]` operand staged at
/// `buf` (a `unsigned short*`), through `fuse_swz`. Rows are addressed in 16-bit units: an i8
/// (`esz` 1) column `c` is byte `c % 2` of unit `c / 2`, as a `byte*`; an f32 (`esz` 4) is two
/// units, through `fuse_swz_f32` ([`super::tf32::swizzled`]), as a `float*`.
pub(in crate::emit_cuda) fn swizzled(
    buf: &str,
    f: &str,
    (w, h): (&str, &str),
    esz: usize,
    byte: &str,
) -> String {
    if esz == 4 {
        super::tf32::swizzled(buf, f, (w, h))
    } else if esz == 1 {
        format!("({byte}*)({buf} + fuse_swz(({f}) / ({w}), (({f}) % ({w})) / 2, ({w}) / 2, {h})) + (({f}) % ({w})) % 2")
    } else {
        format!("{buf} + fuse_swz(({f}) / ({w}), ({f}) % ({w}), {w}, {h})")
    }
}

impl Emitter<'_> {
    /// `dst = dot(a, b, acc)` on tensor cores; `mma` is the MMA layout of `dst`'s shape. A `dst`
    /// (or `acc`) held in another layout is computed in (read into) MMA registers and converted
    /// through the scratch.
    pub(in crate::emit_cuda) fn dot_mma(
        &mut self,
        dst: VarId,
        a: VarId,
        b: VarId,
        acc: Option<VarId>,
        mma: usize,
    ) {
        self.needs.mma = true;
        let input = self.dtype(a);
        let (a_dims, b_dims) = (self.k.ty(a).shape.dims(), self.k.ty(b).shape.dims());
        let consts = &self.k.consts;
        let (m, kk, n) = (a_dims[0].c_expr(consts), a_dims[1].c_expr(consts), b_dims[1].c_expr(consts));
        // `b = trans(w)` read by this dot alone: `w` ([N, K] row-major) is B's K-major form, which
        // `ldmatrix` reads without transposing; `trans` itself was never emitted.
        let kmajor = self.kmajor_b.get(&b).copied();
        let b_src = kmajor.unwrap_or(b);
        let (a_layout, b_layout) =
            (self.tile(a).expect("dot reads tiles"), self.tile(b_src).expect("dot reads tiles"));
        let (a_name, b_name, d) =
            (self.name(a).to_string(), self.name(b_src).to_string(), self.name(dst).to_string());
        let in_place = self.tile(dst) == Some(mma);
        let b_shown = if kmajor.is_some() { format!("trans({b_name})") } else { b_name.clone() };
        self.w.line(format!(
            "// {d} = dot({a_name}, {b_shown}{}) on tensor cores",
            acc.map(|c| format!(", {}", self.name(c))).unwrap_or_default()
        ));
        // Operands a pipelined loop loaded ahead, or staged once before it, are in shared memory
        // already (lower/pipeline.rs); the others are staged here.
        let (in_a, in_b) = (self.staged.get(&a).cloned(), self.staged.get(&b_src).cloned());
        let esz = input.size_bytes();
        if in_a.is_none() || in_b.is_none() {
            // B from a 1024-byte boundary (wgmma's swizzle atoms); fuse_xs is aligned so.
            self.scratch_bytes_for(format!(
                "((({m}) * ({kk}) * {esz} + 1023) / 1024 * 1024 + ({kk}) * ({n}) * {esz})"
            ));
        }
        if !in_place || acc.is_some_and(|c| self.tile(c) != Some(mma)) {
            // A conversion between the MMA registers and another layout (f32 lanes).
            self.scratch_bytes_for(format!("(FUSE_L{mma} * 4)")); // f32 or i32 lanes
        }
        // The accumulator's C type: f32 (f16/bf16 inputs) or i32 (i8).
        let at = c_type(self.dtype(dst));
        let zero = if input == DType::I8 { "0" } else { "0.0f" };
        self.w.open("");
        // The accumulator: dst's own slots, or MMA registers to convert at the end.
        let c = if in_place { d.clone() } else { "fuse_c".to_string() };
        if !in_place {
            self.w.line(format!("{at} fuse_c[FUSE_EPT{mma}];"));
        }
        self.mma_accumulator_from(acc, (&c, at), mma, zero);
        // Shared rows are addressed in 16-bit units: an i8 row of K bytes is K / 2 of them, and
        // one m16n8k32 step reads the 16 of them that a f16 m16n8k16 step reads. (f32 rows are
        // addressed in floats, tf32.rs.)
        let kw = if input == DType::I8 { format!("(({kk}) / 2)") } else { kk.clone() };
        let (wb, hb) = if kmajor.is_some() { (kk.clone(), n.clone()) } else { (n.clone(), kk.clone()) };
        let a_op = (a_layout, a_name.as_str(), "fuse_sa", kk.as_str(), m.as_str());
        let b_op = (b_layout, b_name.as_str(), "fuse_sb", wb.as_str(), hb.as_str());
        let pointers = |emitter: &mut Self, a_in: Option<&String>| {
            for (buf, src) in [("fuse_sa", a_in), ("fuse_sb", in_b.as_ref())] {
                match src {
                    Some(p) => emitter.w.line(format!("const unsigned short* {buf} = {p};")),
                    None if buf == "fuse_sa" => emitter.w.line("unsigned short* fuse_sa = (unsigned short*)fuse_xs;"),
                    // In 16-bit units: A is `m * kk * esz` bytes.
                    None => emitter.w.line(format!("unsigned short* fuse_sb = (unsigned short*)(fuse_xs + (({m}) * ({kk}) * {esz} + 1023) / 1024 * 1024);")),
                }
            }
        };
        // `a` in the accumulator layout of an earlier dot with the same rows (attention's `p`):
        // its registers are already A fragments where the warp grids agree (Triton's and
        // FlashAttention's `P` in registers); else it goes through shared memory as any operand.
        // (Not f32: m16n8k8's A fragment holds columns t and t + 4, the accumulator 2t and 2t + 1.)
        let half = matches!(input, DType::F16 | DType::BF16);
        let regs = self.tile(a).filter(|&kp| self.layout.is_mma(kp) && in_a.is_none() && half);
        let wgmma = if may_take_wgmma(input) { format!("FUSE_WG{mma} ? 2u : 1u") } else { "1u".to_string() };
        if let Some(kp) = regs {
            let from_regs =
                format!("FUSE_WN{kp} == 1 && FUSE_WM{kp} == FUSE_WM{mma} && FUSE_WG{kp} == FUSE_WG{mma}");
            self.dot_paths.push(wgmma.clone());
            self.w.pp(format!("#if {from_regs}"));
            pointers(self, Some(&"(const unsigned short*)0".to_string()));
            if in_b.is_none() {
                self.stage_operands(&[b_op], esz);
            }
            self.w.pp(format!("#if FUSE_WG{mma}"));
            self.wgmma_steps(mma, dst, &c, input, (&m, &kw, &n), kmajor.is_some(), Some((kp, &a_name)));
            self.w.pp("#else");
            self.mma_steps(mma, &c, input, (&kw, &n, &m), kmajor.is_some(), Some((kp, &a_name)));
            self.w.pp("#endif");
            self.w.pp("#else");
        }
        if regs.is_none() {
            self.dot_paths.push(wgmma);
        }
        pointers(self, in_a.as_ref());
        let to_stage: Vec<_> = [(in_a.is_none(), a_op), (in_b.is_none(), b_op)]
            .into_iter()
            .filter(|x| x.0)
            .map(|x| x.1)
            .collect();
        if !to_stage.is_empty() {
            self.stage_operands(&to_stage, esz);
        }
        // Hopper's warpgroup MMA where the layout took its grid, else mma.sync; both walk the
        // rows in 16-bit units (`kw`: an i8 step of K 32 reads the bytes an f16 step of 16 does).
        // f32 is mma.sync on either grid (`FUSE_WROW`/`FUSE_WNI` place a warp's tiles in both).
        if may_take_wgmma(input) {
            self.w.pp(format!("#if FUSE_WG{mma}"));
            self.wgmma_steps(mma, dst, &c, input, (&m, &kw, &n), kmajor.is_some(), None);
            self.w.pp("#else");
            self.mma_steps(mma, &c, input, (&kw, &n, &m), kmajor.is_some(), None);
            self.w.pp("#endif");
        } else {
            self.mma_steps(mma, &c, input, (&kw, &n, &m), kmajor.is_some(), None);
        }
        if regs.is_some() {
            self.w.pp("#endif");
        }
        if !in_place {
            self.mma_result_to_layout(dst, mma, at);
        }
        self.w.close();
    }

    /// The accumulator `c` (of C type `at`, in the slots of MMA layout `mma`) at the start of a
    /// tensor-core `dot`: `acc`'s values (copied, or through the scratch from another layout), else
    /// zeros.
    fn mma_accumulator_from(&mut self, acc: Option<VarId>, (c, at): (&str, &str), mma: usize, zero: &str) {
        match acc {
            Some(acc) if self.tile(acc) == Some(mma) => {
                let s = self.name(acc).to_string();
                if s != c {
                    self.w.unrolled(
                        "fuse_i",
                        &format!("FUSE_EPT{mma}"),
                        format!("{c}[fuse_i] = {s}[fuse_i];"),
                    );
                }
            }
            Some(acc) => {
                // acc in another layout: through the scratch into MMA slots.
                let ks = self.tile(acc).expect("dot accumulators are tiles");
                let s = self.name(acc).to_string();
                self.w.line("__syncthreads();");
                self.w.unrolled(
                    "fuse_i",
                    &format!("FUSE_EPT{ks}"),
                    format!("if (FUSE_OK{ks}(fuse_i / FUSE_VEC{ks})) (({at}*)fuse_xs)[FUSE_IDX{ks}(fuse_i)] = {s}[fuse_i];"),
                );
                self.w.line("__syncthreads();");
                self.w.unrolled(
                    "fuse_i",
                    &format!("FUSE_EPT{mma}"),
                    format!(
                        "{c}[fuse_i] = FUSE_OK{mma}(0) ? (({at}*)fuse_xs)[FUSE_IDX{mma}(fuse_i)] : {zero};"
                    ),
                );
            }
            None => self.w.unrolled("fuse_i", &format!("FUSE_EPT{mma}"), format!("{c}[fuse_i] = {zero};")),
        }
    }

    /// `dst`, held in another layout than MMA layout `mma`, from the accumulator `fuse_c` (of C
    /// type `at`) through the scratch.
    fn mma_result_to_layout(&mut self, dst: VarId, mma: usize, at: &str) {
        let d = self.name(dst).to_string();
        let kd = self.tile(dst).expect("dot makes a tile");
        let t = c_type(self.dtype(dst));
        self.w.line("__syncthreads();");
        self.w.unrolled(
            "fuse_i",
            &format!("FUSE_EPT{mma}"),
            format!("if (FUSE_OK{mma}(0)) (({at}*)fuse_xs)[FUSE_IDX{mma}(fuse_i)] = fuse_c[fuse_i];"),
        );
        self.w.line("__syncthreads();");
        self.w.unrolled(
            "fuse_i",
            &format!("FUSE_EPT{kd}"),
            format!("if (FUSE_OK{kd}(fuse_i / FUSE_VEC{kd})) {d}[fuse_i] = ({t})(({at}*)fuse_xs)[FUSE_IDX{kd}(fuse_i)];"),
        );
    }

    /// Writes operands (layout, name, shared buffer, row width) from their registers to their
    /// buffers, row-major and swizzled, between barriers. An `[m, kk]` A and a `[kk, n]` B, or a
    /// `[n, kk]` one (K-major B: width `kk`); elements of `esz` bytes (2; 1 for i8, whose rows
    /// are addressed in 16-bit units: column `c` is byte `c % 2` of unit `c / 2`; 4 for f32,
    /// stored as loaded: the MMA steps round them to TF32).
    fn stage_operands(&mut self, ops: &[(usize, &str, &str, &str, &str)], esz: usize) {
        self.w.line("__syncthreads();");
        self.stage_writes(ops, esz);
        self.w.line("fuse_fence_async();");
        self.w.line("__syncthreads();");
    }

    /// The shared stores of [`Emitter::stage_operands`], without its barriers.
    pub(in crate::emit_cuda) fn stage_writes(&mut self, ops: &[(usize, &str, &str, &str, &str)], esz: usize) {
        self.needs.words = true;
        for &(k, s, buf, w, h) in ops {
            let at = |f: &str| swizzled(buf, f, (w, h), esz, "unsigned char");
            // A chunk (VEC consecutive lanes of one row, VEC-aligned) stays inside one swizzled
            // 16-byte chunk when it is at most 16 bytes: one shared store of whole words.
            let per_word = 4 / esz;
            self.w.pp(format!("#if FUSE_VEC{k} >= {per_word} && FUSE_VEC{k} * {esz} <= 16"));
            self.w.open_unrolled("fuse_j", &format!("FUSE_NCH{k}"));
            self.w.open(format!("if (FUSE_OK{k}(fuse_j))"));
            self.w.line(format!("const int fuse_f = FUSE_IDX{k}(fuse_j * FUSE_VEC{k});"));
            self.w.line(format!("unsigned int fuse_w[FUSE_VEC{k} / {per_word}];"));
            let word = (0..per_word)
                .map(|e| {
                    let lane = format!("{s}[fuse_j * FUSE_VEC{k} + {per_word} * fuse_v + {e}]");
                    let bits = 8 * esz * e;
                    match esz {
                        4 => format!("__float_as_uint({lane})"),
                        1 => format!("((unsigned int)(unsigned char){lane} << {bits})"),
                        _ => format!("((unsigned int)(unsigned short){lane} << {bits})"),
                    }
                })
                .collect::<Vec<_>>()
                .join(" | ");
            self.w.unrolled(
                "fuse_v",
                &format!("FUSE_VEC{k} / {per_word}"),
                format!("fuse_w[fuse_v] = {word};"),
            );
            self.w.line(format!("fuse_st_words<FUSE_VEC{k} / {per_word}>({}, fuse_w);", at("fuse_f")));
            self.w.close();
            self.w.close();
            self.w.pp("#else");
            self.w.open_unrolled("fuse_i", &format!("FUSE_EPT{k}"));
            self.w.open(format!("if (FUSE_OK{k}(fuse_i / FUSE_VEC{k}))"));
            self.w.line(format!("const int fuse_f = FUSE_IDX{k}(fuse_i);"));
            let t = match esz {
                1 => "signed char",
                4 => "float",
                _ => "unsigned short",
            };
            self.w.line(format!("*({t}*)({}) = {s}[fuse_i];", at("fuse_f")));
            self.w.close();
            self.w.close();
            self.w.pp("#endif");
        }
    }

    /// The warp's MMA steps over the staged `fuse_sa`/`fuse_sb`, K in steps of 16 (8 for f32),
    /// accumulating into the MMA-layout registers `c`. The fragments are double-buffered: step `k + 1`'s
    /// `ldmatrix`es are issued before step `k`'s `mma`s (both are `asm volatile`, which the
    /// compiler keeps in source order, so the overlap has to be written out).
    /// `a_regs`: A's fragments from the registers of an MMA-layout tile (its layout and name).
    fn mma_steps(
        &mut self,
        mma: usize,
        c: &str,
        input: DType,
        (kk, n, m): (&str, &str, &str),
        kmajor: bool,
        a_regs: Option<(usize, &str)>,
    ) {
        self.w.line("const int fuse_lane = fuse_tid & 31;");
        let (mma_fn, step) = match input {
            DType::BF16 => ("fuse_mma_bf16", 16),
            DType::I8 => ("fuse_mma_s8", 16),
            DType::F32 => ("fuse_mma_tf32", super::tf32::K_STEP),
            _ => ("fuse_mma_f16", 16),
        };
        self.w.open(format!("if (FUSE_OK{mma}(0))"));
        self.w.line(format!("unsigned int fuse_fa[2][FUSE_MI{mma}][4];"));
        self.w.line(format!("unsigned int fuse_fb[2][FUSE_NI{mma} + 1][2];"));
        let loads = |emitter: &mut Self, k: &str| {
            if input == DType::F32 {
                emitter.tf32_frag_loads(mma, k, (kk, n, m), kmajor);
            } else {
                emitter.frag_loads(mma, k, (kk, n, m), kmajor, a_regs);
            }
        };
        loads(self, "0");
        self.w.open_unrolled("fuse_k", &format!("({kk}) / {step}"));
        self.w.open(format!("if (fuse_k + 1 < ({kk}) / {step})"));
        loads(self, "fuse_k + 1");
        self.w.close();
        self.w.open_unrolled("fuse_mi", &format!("FUSE_MI{mma}"));
        self.w.unrolled(
            "fuse_ni",
            &format!("FUSE_NI{mma}"),
            format!(
                "{mma_fn}({c} + (fuse_mi * FUSE_NI{mma} + fuse_ni) * 4, fuse_fa[fuse_k & 1][fuse_mi], fuse_fb[fuse_k & 1][fuse_ni]);"
            ),
        );
        self.w.close();
        self.w.close();
        self.w.close();
    }

    /// A's fragment of K step `ks` and m-tile `fuse_mi` (C expressions) into `to[0..4]`, from the
    /// registers of `p`, a 16-bit tile in MMA layout `kp`: the accumulator fragments of n-tiles
    /// 2ks and 2ks + 1 (rows g, g + 8; columns 2t, 2t + 1, then 8 more) are the A fragment of K
    /// step ks, two 16-bit lanes a register (mma.sync's and wgmma's register A alike).
    pub(in crate::emit_cuda) fn pack_a_fragment(&mut self, (kp, p): (usize, &str), ks: &str, to: &str) {
        self.w.line(format!("const int fuse_t0 = (fuse_mi * FUSE_NI{kp} + 2 * ({ks})) * 4;"));
        self.w.line("const int fuse_t1 = fuse_t0 + 4;");
        for (r, (t, e)) in [("fuse_t0", 0), ("fuse_t0", 2), ("fuse_t1", 0), ("fuse_t1", 2)].iter().enumerate()
        {
            self.w.line(format!(
                "{to}[{r}] = (unsigned int){p}[{t} + {e}] | ((unsigned int){p}[{t} + {e} + 1] << 16);"
            ));
        }
    }

    /// The body of the loop over pairs of n-tiles (`fuse_ni += 2`) that reads a K-major B
    /// (`[n, kk]` staged by `swz`) with `ldmatrix` without `.trans`: matrices (ni, k lo), (ni, k
    /// hi), (ni + 1, k lo), (ni + 1, k hi), lanes 8q..8q+7 addressing matrix q's rows; `half_k`
    /// elements of K per matrix (8 halves for m16n8k16, 4 floats for TF32's m16n8k8).
    pub(in crate::emit_cuda) fn kmajor_b_fragments(
        &mut self,
        mma: usize,
        (kk, n): (&str, &str),
        swz: &str,
        half_k: u32,
    ) {
        self.w.line(format!(
            "const int fuse_n0 = (FUSE_WNI{mma} * FUSE_NI{mma} + fuse_ni) * 8 + (fuse_lane & 7);"
        ));
        self.w.line(format!(
            "const int fuse_kc = fuse_ks * {} + ((fuse_lane >> 3) & 1) * {half_k};",
            2 * half_k
        ));
        self.w.open(format!("if (fuse_ni + 1 < FUSE_NI{mma})"));
        self.w.line("unsigned int fuse_q[4];");
        self.w.line(format!(
            "fuse_ldmatrix_x4(fuse_q, fuse_smem_addr(fuse_sb + {swz}(fuse_n0 + (fuse_lane >> 4) * 8, fuse_kc, {kk}, {n})));"
        ));
        self.w.line("fuse_rb[fuse_ni][0] = fuse_q[0]; fuse_rb[fuse_ni][1] = fuse_q[1];");
        self.w.line("fuse_rb[fuse_ni + 1][0] = fuse_q[2]; fuse_rb[fuse_ni + 1][1] = fuse_q[3];");
        self.w.reopen("} else {");
        self.w.line(format!(
            "fuse_ldmatrix_x2(fuse_rb[fuse_ni], fuse_smem_addr(fuse_sb + {swz}(fuse_n0, fuse_kc, {kk}, {n})));"
        ));
        self.w.close();
    }

    /// The 16-bit (and i8) A and B fragments of K step `k` (a C expression) into buffer `k & 1`,
    /// in a block (f32's are [`Emitter::tf32_frag_loads`]). A
    /// K-major B (`[n, kk]` row-major) is read without `.trans`: its 8 x 8 matrices are (n-tile,
    /// k half) pairs, the lane's row `n` and its two halves `k`, `k + 1`, as `mma`'s B fragment.
    fn frag_loads(
        &mut self,
        mma: usize,
        k: &str,
        (kk, n, m): (&str, &str, &str),
        kmajor: bool,
        a_regs: Option<(usize, &str)>,
    ) {
        self.w.open("");
        self.w.line(format!("const int fuse_ks = {k};"));
        self.w.line("unsigned int (*fuse_ra)[4] = fuse_fa[fuse_ks & 1];");
        self.w.line("unsigned int (*fuse_rb)[2] = fuse_fb[fuse_ks & 1];");
        self.w.open_unrolled("fuse_mi", &format!("FUSE_MI{mma}"));
        if let Some((kp, p)) = a_regs {
            self.pack_a_fragment((kp, p), "fuse_ks", "fuse_ra[fuse_mi]");
        } else {
            self.w.line(format!("const int fuse_r = FUSE_WROW{mma}(fuse_mi) + (fuse_lane & 15);"));
            self.w.line(format!(
                "fuse_ldmatrix_x4(fuse_ra[fuse_mi], fuse_smem_addr(fuse_sa + fuse_swz(fuse_r, fuse_ks * 16 + (fuse_lane >> 4) * 8, {kk}, {m})));"
            ));
        }
        self.w.close();
        self.w.pp("#pragma unroll");
        self.w.open(format!("for (int fuse_ni = 0; fuse_ni < FUSE_NI{mma}; fuse_ni += 2)"));
        if kmajor {
            self.kmajor_b_fragments(mma, (kk, n), "fuse_swz", 8);
            self.w.close();
            self.w.close();
            return;
        }
        self.w.line("const int fuse_r = fuse_ks * 16 + (fuse_lane & 15);");
        self.w.line(format!("const int fuse_c0 = (FUSE_WNI{mma} * FUSE_NI{mma} + fuse_ni) * 8;"));
        self.w.open(format!("if (fuse_ni + 1 < FUSE_NI{mma})"));
        self.w.line("unsigned int fuse_q[4];");
        self.w.line(format!(
            "fuse_ldmatrix_x4_trans(fuse_q, fuse_smem_addr(fuse_sb + fuse_swz(fuse_r, fuse_c0 + (fuse_lane >> 4) * 8, {n}, {kk})));"
        ));
        self.w.line("fuse_rb[fuse_ni][0] = fuse_q[0]; fuse_rb[fuse_ni][1] = fuse_q[1];");
        self.w.line("fuse_rb[fuse_ni + 1][0] = fuse_q[2]; fuse_rb[fuse_ni + 1][1] = fuse_q[3];");
        self.w.reopen("} else {");
        self.w.line(format!(
            "fuse_ldmatrix_x2_trans(fuse_rb[fuse_ni], fuse_smem_addr(fuse_sb + fuse_swz(fuse_r, fuse_c0, {n}, {kk})));"
        ));
        self.w.close();
        self.w.close();
        self.w.close();
    }
}
