//! C identifiers for the user's names: kept as written unless they would collide with a C/C++
//! keyword, a CUDA builtin, a const-generic macro, the emitter's own `fuse_`/`FUSE_` names, or
//! another identifier in the kernel (C++ puts parameters and the body's outer block in one scope,
//! so `let x = load(x + offs)` needs the local renamed).
use fuse_ir::{Kernel, ParamKind};
use std::collections::HashSet;

/// Words a C identifier in the emitted source must avoid: C/C++ keywords, CUDA builtins and
/// types, and the functions the source may call. The checker keeps kernel and const-generic names
/// (which cannot be renamed) and its var names off them too.
pub(crate) const C_RESERVED: &[&str] = &[
    // C++ keywords and alternative tokens
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char8_t",
    "char16_t",
    "char32_t",
    "class",
    "compl",
    "concept",
    "const",
    "consteval",
    "constexpr",
    "constinit",
    "const_cast",
    "continue",
    "co_await",
    "co_return",
    "co_yield",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "requires",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
    "NULL",
    "main",
    // CUDA builtins and the device functions the emitted code calls
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "uint2",
    "uint4",
    "make_uint4",
    "min",
    "max",
    "expf",
    "exp2f",
    "logf",
    "log2f",
    "sqrtf",
    "rsqrtf",
    "erff",
    "tanhf",
    "floorf",
    "ceilf",
    "sinf",
    "cosf",
    "fabsf",
    "fmodf",
    "fmaxf",
    "fminf",
    "atomicCAS",
    "__ldg",
    "__shfl_xor_sync",
    "__syncthreads",
    "__umulhi",
    "__fmul_rn",
    "__uint_as_float",
    "__float_as_uint",
    "__int_as_float",
    // math functions and macros the source may call, and CUDA/C types
    "dim3",
    "half",
    "uint",
    "exp",
    "exp2",
    "log",
    "log2",
    "sqrt",
    "rsqrt",
    "erf",
    "tanh",
    "floor",
    "ceil",
    "sin",
    "cos",
    "abs",
    "fabs",
    "fmax",
    "fmin",
    "fmod",
    "llabs",
    "labs",
    "INFINITY",
    "NAN",
    "printf",
    "assert",
    "isnan",
    "isinf",
    "signbit",
    "copysign",
    "copysignf",
];

pub struct Names {
    /// C name of each [`fuse_ir::Param`].
    pub params: Vec<String>,
    /// C name of each pointer parameter's `_len` argument (empty string for scalars).
    pub lens: Vec<String>,
    /// C name of each [`fuse_ir::Var`].
    pub vars: Vec<String>,
}

impl Names {
    pub fn new(kernel: &Kernel) -> Names {
        let mut used: HashSet<String> = kernel.consts.iter().cloned().collect();
        used.insert(kernel.name.clone());
        let mut take = |want: &str| -> String {
            let mut base = want.to_string();
            if is_reserved(&base) {
                base.push('_');
            }
            let mut name = base.clone();
            let mut n = 2;
            while used.contains(&name) {
                name = format!("{base}_{n}");
                n += 1;
            }
            used.insert(name.clone());
            name
        };
        let params: Vec<String> = kernel.params.iter().map(|p| take(&p.name)).collect();
        let lens = kernel
            .params
            .iter()
            .zip(&params)
            .map(|(p, c)| match p.kind {
                ParamKind::Ptr { .. } => take(&format!("{c}_len")),
                ParamKind::Scalar(_) => String::new(),
            })
            .collect();
        let vars = kernel.vars.iter().map(|v| take(&v.name)).collect();
        Names { params, lens, vars }
    }
}

fn is_reserved(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    C_RESERVED.contains(&name) || lower.starts_with("fuse_") || name.starts_with("__") || name.is_empty()
}
