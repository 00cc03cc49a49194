//! Scopes (`let` bindings and shadowing), undefined names (with a suggestion), and the unique,
//! C-safe names of vars.

use super::calls::is_builtin;
use super::{Binding, Checker};
use crate::diag::{closest, Sp};
use fuse_ir::DType;
use proc_macro2::Ident;

impl Checker<'_> {
    pub(super) fn bind(&mut self, name: String, b: Binding) {
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name, b);
        }
    }

    pub(super) fn lookup(&self, name: &str) -> Option<&Binding> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    pub(super) fn visible_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.scopes.iter().flat_map(|s| s.keys().cloned()).collect();
        names.sort();
        names.dedup();
        names
    }

    pub(super) fn undefined(&mut self, id: &Ident) {
        let name = id.to_string();
        let sp = Sp::single(id.span());
        if is_builtin(&name) {
            self.diags.error_help(
                sp,
                format!("`{name}` is a function, not a value"),
                format!("call it: `{name}(..)`"),
            );
            return;
        }
        if DType::from_name(&name).is_some() {
            self.diags.error_help(
                sp,
                format!("`{name}` is a type, not a value"),
                format!("convert with `x.to({name})`"),
            );
            return;
        }
        let names = self.visible_names();
        match closest(&name, names.iter().map(String::as_str)) {
            Some(close) => self.diags.error_help(
                sp,
                format!("undefined variable `{name}`"),
                format!("did you mean `{close}`?"),
            ),
            None => self.diags.error(sp, format!("undefined variable `{name}`")),
        }
    }

    /// A unique C identifier that keeps the user's name where it can.
    pub(super) fn unique_name(&mut self, base: &str) -> String {
        let base = c_safe(base);
        if self.used_names.insert(base.clone()) {
            return base;
        }
        let mut n = 1u32;
        loop {
            let candidate = format!("{base}_{n}");
            if self.used_names.insert(candidate.clone()) {
                return candidate;
            }
            n += 1;
        }
    }

    pub(super) fn temp_name(&mut self) -> String {
        loop {
            let candidate = format!("t{}", self.next_temp);
            self.next_temp += 1;
            if self.used_names.insert(candidate.clone()) {
                return candidate;
            }
        }
    }
}

/// A valid C identifier close to `name`, never clashing with the emitter's `fuse_` names.
pub(super) fn c_safe(name: &str) -> String {
    let name = name.strip_prefix("r#").unwrap_or(name);
    let mut out = String::new();
    for ch in name.chars() {
        if ch.is_ascii_alphanumeric() || ch == '_' {
            out.push(ch);
        } else {
            out.push_str(&format!("u{:x}", ch as u32));
        }
    }
    if out.is_empty() || out == "_" || out.starts_with("__") || out.starts_with(|c: char| c.is_ascii_digit())
    {
        out = format!("v{out}");
    }
    if out.starts_with("fuse_") || out.starts_with("FUSE_") {
        out = format!("v_{out}");
    }
    out
}
