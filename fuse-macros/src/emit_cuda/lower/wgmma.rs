//! `dot` on Hopper's warpgroup tensor cores (`wgmma.mma_async`, sm_90a), for f16, bf16 and i8.
//!
//! Where an MMA layout takes the warpgroup grid (`FUSE_WG<k>`, decided by the preprocessor: the
//! kernel is compiled for sm_90a, the warps come in whole warpgroups and the block has 64-row
//! blocks for them, see [`MmaLayout::macros`](crate::emit_cuda::analysis::tensor_cores::MmaLayout::macros)), each warpgroup of 4 warps owns
//! `FUSE_MI` blocks of 64 rows and `FUSE_NI * 8` columns, warp `w % 4` holding rows `16 (w % 4)`
//! of each block: exactly the accumulator fragment of `wgmma.m64nNk16`, whose register `j` is the
//! `mma.sync` slot `4 ni + 2 h + e` of the same row and column. So the accumulator is the same
//! array in the same slots whichever instruction runs, and the epilogue, row reductions and
//! broadcasts are unchanged.
//!
//! The operands are read straight from shared memory through matrix descriptors: the staging
//! layout (`fuse_swz`: rows of at most 64 columns, wider ones in `[h, 64]` panels, 16-byte chunks
//! XOR-ed with the row) is wgmma's canonical 128/64/32-byte swizzled layout for panels of
//! 64/32/16 columns, provided each buffer starts on a 1024-byte boundary (the shared buffers are
//! aligned so). A is K-major (`[M, K]`), or in registers where it is the accumulator of an
//! earlier dot with the same warpgroup grid (attention's `p`: wgmma's register-A form); B is
//! MN-major (`[K, N]`, the transposed-B form) or K-major (`[N, K]`, a `trans(w)` operand). Per K
//! step of 16: one `wgmma` per 64-row block, then one commit group, waited for before the
//! accumulators are read (or, in a K loop that only accumulates, one iteration later).
use super::Emitter;
use crate::emit_cuda::analysis::tensor_cores::{WgForm, WgInput};
use fuse_ir::DType;
use std::fmt::Write;

/// The warpgroup widths a `wgmma` may have here (the warpgroup's N; powers of two).
const WIDTHS: [usize; 5] = [16, 32, 64, 128, 256];

impl WgInput {
    /// The type's name in the PTX instruction and in the helpers' names.
    pub(in crate::emit_cuda) fn name(self) -> &'static str {
        match self {
            WgInput::F16 => "f16",
            WgInput::Bf16 => "bf16",
            WgInput::I8 => "s8",
        }
    }
}

/// Device helpers: descriptors, the fence/commit/wait protocol and, for each form used,
/// `fuse_wgmma_<ty>_<t>` (A from shared memory) or `fuse_wgmma_rs_<ty>_<t>` (A from four
/// registers a thread, the `mma.sync` A fragment of the warp's 16 rows) for every width.
pub fn prelude(kinds: &std::collections::BTreeSet<WgForm>) -> String {
    let mut out = String::from(
        r#"#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// wgmma (sm_90a). A shared-memory matrix descriptor: start address, leading and stride byte
// offsets (16-byte units) and the swizzle of panels of p 16-bit columns (128/64/32 bytes).
__device__ __forceinline__ unsigned long long fuse_wg_desc(unsigned int a, unsigned int lbo, unsigned int sbo, int p) {
  const unsigned long long mode = p == 64 ? 1ull : p == 32 ? 2ull : 3ull;
  return (unsigned long long)((a & 0x3FFFF) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3FFF) << 32) | (mode << 62);
}
// A K-major operand [h, w] (w = K) at shared address `base`: 64 (or N) rows from r0, K from k0.
// Rows are 2p bytes apart, groups of 8 rows 16p.
__device__ __forceinline__ unsigned long long fuse_wg_kmajor(unsigned int base, int r0, int k0, int w, int h) {
  const int p = w > 64 ? 64 : w;
  return fuse_wg_desc(base + 2u * (unsigned int)((k0 / p) * (h * p) + r0 * p + k0 % p), 16u, 16u * p, p);
}
// An MN-major B [h, w] (h = K, w = N): K rows from k0, columns from n0 (a multiple of the panel);
// the panels of p columns are 2hp bytes apart, groups of 8 K rows 16p.
__device__ __forceinline__ unsigned long long fuse_wg_mnmajor(unsigned int base, int k0, int n0, int w, int h) {
  const int p = w > 64 ? 64 : w;
  return fuse_wg_desc(base + 2u * (unsigned int)((n0 / p) * (h * p) + k0 * p), 2u * h * p, 16u * p, p);
}
// The thread's warpgroup, broadcast from lane 0: the compiler then knows it is warp-uniform and
// builds the matrix descriptors from it in uniform registers, not per thread.
__device__ __forceinline__ int fuse_warpgroup() { return __shfl_sync(0xffffffffu, (int)threadIdx.x >> 7, 0); }
__device__ __forceinline__ void fuse_wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void fuse_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits until at most N of the warpgroup's commit groups are pending.
template <int fuse_n> __device__ __forceinline__ void fuse_wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(fuse_n) : "memory"); }
"#,
    );
    for &(input, mn_major, rs) in kinds {
        let (ty, t) = (input.name(), u8::from(mn_major));
        let form = if rs { "rs_" } else { "" };
        // f32 accumulators ("+f", d = a b + d scaled by 1, 1) or i32 ("+r", 8-bit: no scales,
        // no transposes: both operands K-major).
        let (shape, types, acc, cty, tail) = match input {
            WgInput::I8 => ("k32", "s32.s8.s8", "+r", "int", String::new()),
            // The register-A form has no A transpose bit.
            _ if rs => (
                "k16",
                if input == WgInput::Bf16 { "f32.bf16.bf16" } else { "f32.f16.f16" },
                "+f",
                "float",
                format!(", 1, 1, {t}"),
            ),
            _ => (
                "k16",
                if input == WgInput::Bf16 { "f32.bf16.bf16" } else { "f32.f16.f16" },
                "+f",
                "float",
                format!(", 1, 1, 0, {t}"),
            ),
        };
        // Template and parameter names in the fuse_ namespace: a kernel's consts are macros.
        let _ = writeln!(out, "template <int fuse_n> struct fuse_wgmma_{form}{ty}_{t};");
        for n in WIDTHS {
            let regs = n / 2;
            let list = (0..regs).map(|i| format!("%{i}")).collect::<Vec<_>>().join(", ");
            let outs = (0..regs).map(|i| format!("\"{acc}\"(fuse_d[{i}])")).collect::<Vec<_>>().join(", ");
            // Operands after the accumulators: A (a descriptor, or four registers), B, scale-d.
            let (a_param, a_asm, a_in, next) = if rs {
                let a = (0..4).map(|i| format!("%{}", regs + i)).collect::<Vec<_>>().join(", ");
                let ins = (0..4).map(|i| format!("\"r\"(fuse_a[{i}])")).collect::<Vec<_>>().join(", ");
                ("const unsigned int* fuse_a", format!("{{{a}}}"), ins, regs + 4)
            } else {
                ("unsigned long long fuse_a", format!("%{regs}"), "\"l\"(fuse_a)".to_string(), regs + 1)
            };
            let _ = writeln!(
                out,
                "template <> struct fuse_wgmma_{form}{ty}_{t}<{n}> {{ static __device__ __forceinline__ void run({cty}* fuse_d, {a_param}, unsigned long long fuse_b) {{\n  asm volatile(\"{{ .reg .pred p; setp.ne.b32 p, %{}, 0; wgmma.mma_async.sync.aligned.m64n{n}{shape}.{types} {{{list}}}, {a_asm}, %{next}, p{tail}; }}\"\n    : {outs} : {a_in}, \"l\"(fuse_b), \"r\"(1));\n}} }};",
                next + 1,
            );
        }
    }
    out.push_str("#endif\n");
    out
}

impl Emitter<'_> {
    /// The warpgroup's `wgmma`s over the staged `fuse_sa` (`[m, kk]`) and `fuse_sb` (`[kk, n]`,
    /// or `[n, kk]` when `kmajor`), accumulating into the MMA-layout registers `c`.
    /// `dst`: the result; where it is an in-flight accumulator of the pipelined loop being
    /// emitted, one commit group is left pending (`FUSE_INFLIGHT<n>`). `a_regs`: A from the
    /// registers of a 16-bit tile in MMA layout (its layout, name) whose warp grid is `mma`'s
    /// (attention's `p`), packed for every K step before the fence (wgmma reads them while it runs).
    #[allow(clippy::too_many_arguments)]
    pub(in crate::emit_cuda) fn wgmma_steps(
        &mut self,
        mma: usize,
        dst: fuse_ir::VarId,
        c: &str,
        input: DType,
        (m, kk, n): (&str, &str, &str),
        kmajor: bool,
        a_regs: Option<(usize, &str)>,
    ) {
        let wg = WgInput::of(input).expect("wgmma takes f16, bf16 and i8");
        self.needs.wgmma.insert((wg, !kmajor, a_regs.is_some()));
        let ty = wg.name();
        self.w.open(format!("if (FUSE_OK{mma}(0))"));
        self.w.line("const unsigned int fuse_bb = fuse_smem_addr(fuse_sb);");
        self.w.line("const int fuse_wgi = fuse_warpgroup();");
        self.w.line(format!(
            "const int fuse_n0 = (fuse_wgi % FUSE_WN{mma}) * FUSE_NI{mma} * 8;  // the warpgroup's columns"
        ));
        let a = match a_regs {
            Some(regs) => {
                self.w.line(format!("unsigned int fuse_ra[({kk}) / 16][FUSE_MI{mma}][4];"));
                self.w.open_unrolled("fuse_k", &format!("({kk}) / 16"));
                self.w.open_unrolled("fuse_mi", &format!("FUSE_MI{mma}"));
                self.pack_a_fragment(regs, "fuse_k", "fuse_ra[fuse_k][fuse_mi]");
                self.w.close();
                self.w.close();
                "fuse_ra[fuse_k][fuse_mi]".to_string()
            }
            None => {
                self.w.line("const unsigned int fuse_ab = fuse_smem_addr(fuse_sa);");
                self.w.line(format!(
                    "const int fuse_r0 = (fuse_wgi / FUSE_WN{mma}) * FUSE_MI{mma} * 64;  // and rows"
                ));
                format!("fuse_wg_kmajor(fuse_ab, fuse_r0 + fuse_mi * 64, fuse_k * 16, {kk}, {m})")
            }
        };
        let form = if a_regs.is_some() { "rs_" } else { "" };
        self.w.line("fuse_wg_fence();");
        self.w.open_unrolled("fuse_k", &format!("({kk}) / 16"));
        self.w.open_unrolled("fuse_mi", &format!("FUSE_MI{mma}"));
        let b = if kmajor {
            format!("fuse_wg_kmajor(fuse_bb, fuse_n0, fuse_k * 16, {kk}, {n})")
        } else {
            format!("fuse_wg_mnmajor(fuse_bb, fuse_k * 16, fuse_n0, {n}, {kk})")
        };
        self.w.line(format!(
            "fuse_wgmma_{form}{ty}_{}<FUSE_NI{mma} * 8>::run({c} + fuse_mi * FUSE_NI{mma} * 4, {a}, {b});",
            u8::from(!kmajor)
        ));
        self.w.close();
        self.w.close();
        self.w.line("fuse_wg_commit();");
        match &self.inflight {
            // In place only: a result converted out of `fuse_c` is read right after.
            Some((l, accs)) if accs.contains(&dst) && c == self.name(dst) => {
                let l = *l;
                self.w.pp(format!("#if FUSE_INFLIGHT{l}"));
                self.w.line("fuse_wg_wait<1>();  // this iteration's MMAs run on; the last one's are done");
                self.w.pp("#else");
                self.w.line("fuse_wg_wait<0>();");
                self.w.pp("#endif");
            }
            _ => self.w.line("fuse_wg_wait<0>();"),
        }
        self.w.close();
    }
}
