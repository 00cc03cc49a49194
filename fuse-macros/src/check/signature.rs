//! The kernel's signature: const generics and parameters bound in the outermost scope, and the
//! names they may not take (reserved in the generated C or Rust, or declared twice).

use super::{Binding, Bound, Checker, ConstExpr, Origin, Weak};
use crate::ast;
use crate::c_names::C_RESERVED;
use crate::diag::Sp;
use fuse_ir::{Param, ParamKind};
use std::collections::HashSet;

/// Names the generated Rust module defines; parameters and const generics may not take them.
pub(super) const RUST_RESERVED: &[&str] = &["device", "config", "NAME", "SOURCE", "SPEC", "IR_JSON"];
impl Checker<'_> {
    /// Binds const generics and parameters, and rejects names that would clash in the generated
    /// C or Rust.
    pub(super) fn declare_signature(&mut self, f: &ast::KernelFn) {
        let kernel_name = f.name.to_string();
        if C_RESERVED.contains(&kernel_name.as_str()) || kernel_name.starts_with("fuse_") {
            self.diags.error_help(
                Sp::single(f.name.span()),
                format!("`{kernel_name}` cannot name a kernel: it is reserved in the generated CUDA C"),
                "rename the kernel",
            );
        }
        let mut seen: HashSet<String> = HashSet::new();
        for (index, name) in f.consts.iter().enumerate() {
            let s = name.to_string();
            let sp = Sp::single(name.span());
            self.check_signature_name(&s, sp, "const generic", &mut seen);
            if C_RESERVED.contains(&s.as_str()) {
                self.diags.error_help(
                    sp,
                    format!("`{s}` cannot name a const generic: it is `#define`d in the generated CUDA C, where it is reserved"),
                    "rename it, e.g. in capitals like `BLOCK`",
                );
            }
            if s.starts_with("FUSE_") {
                self.diags.error_help(
                    sp,
                    format!("`{s}` cannot name a const generic: `FUSE_` names are reserved"),
                    "rename it",
                );
            }
            self.used_names.insert(s.clone());
            self.consts.push(s.clone());
            self.bind(
                s,
                Binding {
                    bound: Bound::Weak(Weak::Int(ConstExpr::Generic(index as u32))),
                    mutable: false,
                    origin: Origin::Const,
                },
            );
        }
        for p in &f.params {
            let s = p.name.to_string();
            let sp = Sp::single(p.name.span());
            self.check_signature_name(&s, sp, "parameter", &mut seen);
            self.used_names.insert(s.clone());
            self.used_names.insert(format!("{s}_len"));
            let index = self.params.len() as u32;
            let (kind, bound) = match p.ty {
                ast::ParamTy::Ptr { elem, mutable } => {
                    (Some(ParamKind::Ptr { elem, mutable }), Bound::Ptr { param: index, offset: None })
                }
                ast::ParamTy::Scalar(d) => (Some(ParamKind::Scalar(d)), Bound::ScalarParam(index)),
                ast::ParamTy::Invalid => (None, Bound::Err),
            };
            if let Some(kind) = kind {
                self.params.push(Param { name: s.clone(), kind });
            }
            self.bind(s, Binding { bound, mutable: false, origin: Origin::Param });
        }
    }

    pub(super) fn check_signature_name(&mut self, s: &str, sp: Sp, what: &str, seen: &mut HashSet<String>) {
        if !seen.insert(s.to_string()) {
            self.diags
                .error(sp, format!("the name `{s}` is declared more than once in the kernel signature"));
        } else if RUST_RESERVED.contains(&s) {
            self.diags.error_help(
                sp,
                format!("`{s}` cannot name a {what}: the generated module uses that name"),
                "rename it",
            );
        }
    }
}
