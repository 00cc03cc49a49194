//! A tiny hand-written kernel (CUDA source + IR) shared by the runtime's tests.
#![allow(dead_code)]

use fuse_runtime::fuse_ir::{
    BinaryOp, DType, Expr, Kernel, Len, Literal, Param, ParamKind, Shape, Stmt, Ty, Var, VarId,
};
use fuse_runtime::KernelSpec;

/// `out[i] = x[i] + 1` for `i < n`, `BLOCK` elements per program, written by hand in the
/// conventions of docs/DESIGN.md (lengths and the error words after the user parameters).
pub const ADD_ONE_SOURCE: &str = r#"extern "C" __global__ void add_one(const float* __restrict__ x, float* out, int n,
                                   long long x_len, long long out_len, unsigned long long* fuse_err) {
    long long base = (long long)blockIdx.x * BLOCK;
    for (int t = threadIdx.x; t < BLOCK; t += 32 * FUSE_NUM_WARPS) {
        long long i = base + t;
        if (i < n) {
            float v = 0.0f;
            if (i >= 0 && i < x_len) {
                v = x[i];
            } else if (atomicCAS(&fuse_err[0], 0ull, 0ull + 1ull) == 0ull) {
                fuse_err[1] = (unsigned long long)i;
            }
            if (i >= 0 && i < out_len) {
                out[i] = v + 1.0f;
            } else if (atomicCAS(&fuse_err[0], 0ull, 1ull + 1ull) == 0ull) {
                fuse_err[1] = (unsigned long long)i;
            }
        }
    }
}
"#;

fn v(i: u32) -> VarId {
    VarId(i)
}

/// The IR of `add_one` (what the macro would produce for the same kernel).
pub fn add_one_ir(name: &str, elem: DType, index: DType) -> Kernel {
    let block = Len::of_const(0);
    let vars = vec![
        Var { name: "pid".into(), ty: Ty::scalar(index) },  // 0
        Var { name: "blk".into(), ty: Ty::scalar(index) },  // 1
        Var { name: "base".into(), ty: Ty::scalar(index) }, // 2
        Var { name: "offs".into(), ty: Ty::tile(DType::I32, block.clone()) }, // 3
        Var { name: "offs_w".into(), ty: Ty::tile(index, block.clone()) }, // 4
        Var { name: "idx".into(), ty: Ty::tile(index, block.clone()) }, // 5
        Var { name: "n".into(), ty: Ty::scalar(index) },    // 6
        Var { name: "mask".into(), ty: Ty::tile(DType::Bool, block.clone()) }, // 7
        Var { name: "xv".into(), ty: Ty::tile(elem, block.clone()) }, // 8
        Var { name: "one".into(), ty: Ty::scalar(elem) },   // 9
        Var { name: "r".into(), ty: Ty::tile(elem, block.clone()) }, // 10
        Var { name: "pid32".into(), ty: Ty::scalar(DType::I32) }, // 11
    ];
    let assign = |dst: u32, expr: Expr| Stmt::Assign { dst: v(dst), expr };
    let body = vec![
        assign(11, Expr::ProgramId(0)),
        assign(0, if index == DType::I32 { Expr::Copy(v(11)) } else { Expr::Cast(v(11)) }),
        assign(1, Expr::ConstGeneric(0)),
        assign(2, Expr::Binary(BinaryOp::Mul, v(0), v(1))),
        assign(3, Expr::Arange { start: 0 }),
        assign(4, if index == DType::I32 { Expr::Copy(v(3)) } else { Expr::Cast(v(3)) }),
        assign(5, Expr::Binary(BinaryOp::Add, v(2), v(4))),
        assign(6, Expr::Param(2)),
        assign(7, Expr::Binary(BinaryOp::Lt, v(5), v(6))),
        assign(8, Expr::Load { param: 0, offset: v(5), mask: Some(v(7)), other: None }),
        assign(9, Expr::Lit(Literal::Float(1.0))),
        assign(10, Expr::Binary(BinaryOp::Add, v(8), v(9))),
        Stmt::Store { param: 1, offset: v(5), value: v(10), mask: Some(v(7)) },
    ];
    let _ = Shape::Scalar;
    Kernel {
        name: name.into(),
        consts: vec!["BLOCK".into()],
        params: vec![
            Param { name: "x".into(), kind: ParamKind::Ptr { elem, mutable: false } },
            Param { name: "out".into(), kind: ParamKind::Ptr { elem, mutable: true } },
            Param { name: "n".into(), kind: ParamKind::Scalar(index) },
        ],
        vars,
        body,
    }
}

/// A leaked `KernelSpec` (as a `static` would be).
pub fn leak_spec(name: &'static str, source: &'static str, ir: &Kernel) -> &'static KernelSpec {
    let json: &'static str = Box::leak(ir.to_json().into_boxed_str());
    Box::leak(Box::new(KernelSpec::new(name, source, json, &[])))
}

pub fn add_one_spec() -> &'static KernelSpec {
    static SPEC: std::sync::OnceLock<&'static KernelSpec> = std::sync::OnceLock::new();
    SPEC.get_or_init(|| leak_spec("add_one", ADD_ONE_SOURCE, &add_one_ir("add_one", DType::F32, DType::I32)))
}

/// `add_one` whose result shows its specializations: `+100` when `FUSE_DIV16_n`, `+1000` when
/// `FUSE_ALIGN16_x`, so a test can see which variant ran.
pub fn add_one_specialized_spec() -> &'static KernelSpec {
    use fuse_runtime::fuse_ir::Specialization;
    static SPEC: std::sync::OnceLock<&'static KernelSpec> = std::sync::OnceLock::new();
    SPEC.get_or_init(|| {
        let src: &'static str = Box::leak(
            ADD_ONE_SOURCE
                .replace(
                    "v + 1.0f",
                    "v + 1.0f + (FUSE_DIV16_n ? 100.0f : 0.0f) + (FUSE_ALIGN16_x ? 1000.0f : 0.0f)",
                )
                .into_boxed_str(),
        );
        let ir = add_one_ir("add_one", DType::F32, DType::I32);
        let json: &'static str = Box::leak(ir.to_json().into_boxed_str());
        static SPECS: [Specialization; 2] = [Specialization::Div16(2), Specialization::Align16(0)];
        Box::leak(Box::new(KernelSpec::new("add_one", src, json, &SPECS)))
    })
}

/// A kernel under the dynamic shared memory contract (docs/DESIGN.md, "Runtime conventions"):
/// it asks for `bytes` (a C expression of the defines, e.g. `FUSE_NUM_STAGES * 1024u`) through
/// `fuse_dynamic_smem_bytes` (`decl` is `__device__` or `__constant__`), fills that many bytes of `extern __shared__` memory with one block's run of
/// `x` and writes it back reversed, so every byte of the request is written and read by another
/// thread than the one that wrote it. `out[b * W + t] = 2 * x[b * W + (W - 1 - t)]` for `W =
/// bytes / 4` floats per program (`-2` where the mirrored element is past `n`).
pub fn smem_reverse_source(decl: &str, bytes: &str) -> String {
    format!(
        r#"extern "C" {decl} const unsigned int fuse_dynamic_smem_bytes = {bytes};
extern "C" __global__ void smem_reverse(const float* __restrict__ x, float* out, int n,
                                        long long x_len, long long out_len, unsigned long long* fuse_err) {{
    extern __shared__ __align__(16) float fuse_dyn[];
    const long long words = fuse_dynamic_smem_bytes / 4u;
    const long long base = (long long)blockIdx.x * words;
    for (long long t = threadIdx.x; t < words; t += blockDim.x) {{
        long long i = base + t;
        fuse_dyn[t] = (i < n && i < x_len) ? x[i] : -1.0f;
    }}
    __syncthreads();
    for (long long t = threadIdx.x; t < words; t += blockDim.x) {{
        long long i = base + t;
        if (i < n && i < out_len) out[i] = 2.0f * fuse_dyn[words - 1 - t];
    }}
}}
"#
    )
}

/// The IR of `smem_reverse`: its parameters (no body: only the GPU runs it).
pub fn smem_reverse_ir() -> Kernel {
    Kernel {
        name: "smem_reverse".into(),
        consts: vec![],
        params: vec![
            Param { name: "x".into(), kind: ParamKind::Ptr { elem: DType::F32, mutable: false } },
            Param { name: "out".into(), kind: ParamKind::Ptr { elem: DType::F32, mutable: true } },
            Param { name: "n".into(), kind: ParamKind::Scalar(DType::I32) },
        ],
        vars: vec![],
        body: vec![],
    }
}

/// `smem_reverse` asking for `bytes` of dynamic shared memory, as a spec.
pub fn smem_reverse_spec(decl: &str, bytes: &str) -> &'static KernelSpec {
    let src: &'static str = Box::leak(smem_reverse_source(decl, bytes).into_boxed_str());
    leak_spec("smem_reverse", src, &smem_reverse_ir())
}

/// What `smem_reverse` writes for input `x` with `words` floats per program.
pub fn smem_reverse_expected(x: &[f32], words: usize) -> Vec<f32> {
    let n = x.len();
    (0..n)
        .map(|i| {
            let (b, t) = (i / words, i % words);
            let j = b * words + (words - 1 - t);
            2.0 * if j < n { x[j] } else { -1.0 }
        })
        .collect()
}

/// The bytes of the symbol `name` in an ELF64 little-endian file (a cubin): where its section
/// keeps them in the file (initialised data), `None` if there is no such symbol or the file is not
/// such an ELF. Enough of the format for the tests' look at what NVRTC emitted.
pub fn elf_symbol_bytes(elf: &[u8], name: &str) -> Option<Vec<u8>> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(elf.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(elf.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(elf.get(o..o + 8)?.try_into().ok()?) as usize);
    if elf.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let (shoff, shentsize, shnum) = (u64_at(0x28)?, u16_at(0x3A)? as usize, u16_at(0x3C)? as usize);
    // (type, offset, size, link) of section i.
    let section = |i: usize| {
        let h = shoff + i * shentsize;
        Some((u32_at(h + 4)?, u64_at(h + 0x18)?, u64_at(h + 0x20)?, u32_at(h + 0x28)? as usize))
    };
    let c_str = |at: usize| {
        let bytes = elf.get(at..)?;
        std::str::from_utf8(&bytes[..bytes.iter().position(|&b| b == 0)?]).ok()
    };
    for i in 0..shnum {
        let (kind, off, size, link) = section(i)?;
        if kind != 2 {
            continue; // SHT_SYMTAB only
        }
        let strtab = section(link)?.1;
        for s in (off..off + size).step_by(24) {
            if c_str(strtab + u32_at(s)? as usize)? != name {
                continue;
            }
            let (shndx, value, len) = (u16_at(s + 6)? as usize, u64_at(s + 8)?, u64_at(s + 16)?);
            let (data_kind, data_off, _, _) = section(shndx)?;
            if data_kind == 8 {
                return None; // SHT_NOBITS: no bytes in the file
            }
            return elf.get(data_off + value..data_off + value + len).map(<[u8]>::to_vec);
        }
    }
    None
}
