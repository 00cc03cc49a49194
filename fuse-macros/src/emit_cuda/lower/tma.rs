//! Hopper's tensor memory accelerator (TMA) for the pipelined loads of `dot` operands.
//!
//! A staged load that reads a 2-D box of a strided matrix ([`fuse_ir::TensorBox`]) is emitted
//! twice: the `cp.async` copy every thread issues for its chunks ([`super::memory`]), and, under
//! `FUSE_TMA_ON_<k>` (an sm_90a compile where the runtime set `FUSE_TMA_<k>` and passes the
//! tensor map `fuse_tmap<k>`), one thread issuing `cp.async.bulk.tensor` per 128-byte-wide
//! panel of the stage. TMA writes the panel in the same swizzled layout the MMAs read
//! (`fuse_swz`: 16-byte chunk index XOR row bits, which is TMA's 128B/64B/32B swizzle for rows of
//! 128/64/32 bytes), so nothing else changes. Completion goes through one `mbarrier` per stage:
//! the issuing thread arrives with the stage's byte count, the copies complete the transaction,
//! and every thread waits on the stage's phase before the barrier that already precedes the MMAs.
//! The barriers are initialised once at the top of the kernel, and each thread keeps one phase
//! bit per stage, so a pipelined loop may run many times (inside another loop).
use super::Emitter;
use fuse_ir::{Access, BoxStart, DType, Expr, Kernel, Stmt};

/// The device helpers (inline PTX; the instructions exist on sm_90 only, and are only reached
/// under `FUSE_TMA_ON_<k>`, which is 0 elsewhere).
pub const PRELUDE: &str = r#"// TMA: tensor maps are encoded by the runtime and passed as __grid_constant__ parameters.
struct __align__(64) fuse_tmap_t { unsigned long long fuse_w[16]; };
__device__ __forceinline__ void fuse_mbar_init(unsigned int bar, unsigned int count) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
// The issuing thread's arrival, announcing `bytes` to come from the copies.
__device__ __forceinline__ void fuse_mbar_expect(unsigned int bar, unsigned int bytes) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void fuse_mbar_wait(unsigned int bar, unsigned int parity) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n .reg .pred p;\n FUSE_WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra FUSE_WAIT;\n}" :: "r"(bar), "r"(parity) : "memory");
#endif
}
// The box of the map at (column c, row r) into shared `dst`, completing on `bar`.
__device__ __forceinline__ void fuse_tma_2d(unsigned int dst, const fuse_tmap_t* map, int c, int r, unsigned int bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
               :: "r"(dst), "l"(map), "r"(c), "r"(r), "r"(bar) : "memory");
#endif
}
// The same in plane z of a rank-3 map (a box whose offset has a per-program base).
__device__ __forceinline__ void fuse_tma_3d(unsigned int dst, const fuse_tmap_t* map, int c, int r, int z, unsigned int bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
               :: "r"(dst), "l"(map), "r"(c), "r"(r), "r"(z), "r"(bar) : "memory");
#endif
}
"#;

/// The bytes of a TMA panel's row: the stage's rows are split into panels of at most 128 bytes
/// (what `fuse_swz` and TMA's widest swizzle share).
pub const PANEL_BYTES: u64 = 128;

/// Whether staged load statement `load` (an [`Expr::Load`] of `k`) may go through TMA: its
/// element type is one `fuse_swz` lays out (16-bit or 8-bit) and it reads a tensor box.
pub(in crate::emit_cuda) fn tensor_box(k: &Kernel, load: &Stmt) -> Option<fuse_ir::TensorBox> {
    let Stmt::Assign { dst, expr: Expr::Load { param, offset, mask, .. } } = load else { return None };
    if !matches!(k.ty(*dst).dtype, DType::F16 | DType::BF16 | DType::I8) {
        return None;
    }
    k.tensor_box(&Access { param: *param, offset: *offset, mask: *mask })
}

impl Emitter<'_> {
    /// The C expression of a box's start.
    fn box_start(&self, s: BoxStart) -> String {
        match s.var {
            Some(v) if s.offset == 0 => format!("(int)({})", self.name(v)),
            Some(v) => format!("(int)({} + {})", self.name(v), s.offset),
            None => s.offset.to_string(),
        }
    }

    /// Loop `n`'s TMA copy of access `access` (a [`fuse_ir::TensorBox`] `b`) into the stage at
    /// `buf` (an `unsigned short*`), issued by thread 0 on the stage's barrier `fuse_wr<n>`.
    pub(in crate::emit_cuda) fn tma_copy(
        &mut self,
        n: usize,
        access: u32,
        b: &fuse_ir::TensorBox,
        buf: &str,
        esz: usize,
    ) {
        self.needs.tma = true;
        let (h, w) = (b.height.c_expr(&self.k.consts), b.width.c_expr(&self.k.consts));
        let (r0, c0) = (self.box_start(b.row_start), self.box_start(b.col_start));
        self.w.line(format!(
            "// ahead: the box at row {r0}, column {c0} through TMA (tensor map fuse_tmap{access})"
        ));
        self.w.open("if (fuse_tid == 0)");
        self.w.line(format!(
            "const int fuse_pc = ({w}) * {esz} > {PANEL_BYTES} ? {PANEL_BYTES} / {esz} : ({w});  // columns per panel"
        ));
        self.w.line(format!("const unsigned int fuse_bar = fuse_smem_addr(&fuse_bar{n}[fuse_wr{n}]);"));
        self.w.line(format!("const unsigned int fuse_dst = fuse_smem_addr({buf});"));
        self.w.line(format!("fuse_mbar_expect(fuse_bar, ({h}) * ({w}) * {esz});"));
        self.w.pp("#pragma unroll");
        self.w.open(format!("for (int fuse_q = 0; fuse_q < ({w}) / fuse_pc; ++fuse_q)"));
        // A per-program base is the map's third coordinate; a fixed one is in the map's address.
        let (rank, z) = match b.base_index {
            Some(z) => ("3d", format!(", (int)({})", self.name(z))),
            None => ("2d", String::new()),
        };
        self.w.line(format!(
            "fuse_tma_{rank}(fuse_dst + fuse_q * ({h}) * fuse_pc * {esz}, &fuse_tmap{access}, {c0} + fuse_q * fuse_pc, {r0}{z}, fuse_bar);"
        ));
        self.w.close();
        self.w.close();
    }

    /// At the top of loop `n`'s iteration: waits for the TMA copies of stage `fuse_rd<n>`.
    pub(in crate::emit_cuda) fn tma_wait(&mut self, n: usize) {
        self.w.pp(format!("#if FUSE_TMA_LOOP{n}"));
        self.w.line(format!(
            "fuse_mbar_wait(fuse_smem_addr(&fuse_bar{n}[fuse_rd{n}]), (fuse_ph{n} >> fuse_rd{n}) & 1u);"
        ));
        self.w.line(format!("fuse_ph{n} ^= 1u << fuse_rd{n};"));
        self.w.pp("#endif");
    }
}

/// The preprocessor switches of the TMA loads, before the kernel: `FUSE_TMA_ON_<k>` per load (the
/// runtime's `FUSE_TMA_<k>` on an sm_90a compile), and per loop whether any is on and how many.
pub(in crate::emit_cuda) fn switches(loops: &[(usize, Vec<u32>)]) -> Vec<String> {
    let mut out = Vec::new();
    for (n, accesses) in loops {
        for a in accesses {
            out.push(format!("#if defined(__CUDA_ARCH_FEAT_SM90_ALL) && FUSE_TMA_{a}"));
            out.push(format!("#define FUSE_TMA_ON_{a} 1"));
            out.push("#else".into());
            out.push(format!("#define FUSE_TMA_ON_{a} 0"));
            out.push("#endif".into());
        }
        let on: Vec<String> = accesses.iter().map(|a| format!("FUSE_TMA_ON_{a}")).collect();
        out.push(format!("#define FUSE_TMA_LOOP{n} ({})", on.join(" || ")));
        out.push(format!("#define FUSE_TMA_COUNT{n} ({})", on.join(" + ")));
    }
    out
}

/// The kernel's opening lines for the TMA loops: each loop's barriers (one per stage), initialised
/// by thread 0 before any thread can wait on them, and this thread's phase bits.
pub(in crate::emit_cuda) fn declarations(loops: &[(usize, Vec<u32>)]) -> Vec<String> {
    let mut out = Vec::new();
    for (n, _) in loops {
        out.push(format!("#if FUSE_TMA_LOOP{n}"));
        out.push("  static_assert(FUSE_PIPE <= 32, \"one phase bit per stage\");".into());
        out.push(format!("  __shared__ __align__(8) unsigned long long fuse_bar{n}[FUSE_PIPE];"));
        out.push(format!("  unsigned int fuse_ph{n} = 0u;  // per stage: the parity of its next phase"));
        out.push("  if (fuse_tid == 0) {".into());
        out.push(format!(
            "    for (int fuse_s = 0; fuse_s < FUSE_PIPE; ++fuse_s) fuse_mbar_init(fuse_smem_addr(&fuse_bar{n}[fuse_s]), FUSE_TMA_COUNT{n});"
        ));
        out.push("  }".into());
        out.push("  __syncthreads();".into());
        out.push("#endif".into());
    }
    out
}
