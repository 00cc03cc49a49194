//! C identifiers for the user's names: kept as written unless they would collide with a C/C++
//! keyword, a CUDA builtin, a const-generic macro, the emitter's own `fuse_`/`FUSE_` names, or
//! another identifier in the kernel (C++ puts parameters and the body's outer block in one scope,
//! so `let x = load(x + offs)` needs the local renamed).
use crate::c_names::C_RESERVED;
use fuse_ir::{Kernel, ParamKind};
use std::collections::HashSet;

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
