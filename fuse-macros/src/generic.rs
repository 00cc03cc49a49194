//! Generic kernels (`fn k<T: Float, const BLOCK: usize>(x: *const T, ..)`): one instantiation per
//! combination of the type parameters' element types, each parsed and checked on its own (its own
//! IR, and later its own CUDA C), and their diagnostics merged.
//!
//! An instantiation is the kernel parsed with each type parameter standing for one element type
//! (`parse::parse_instance`), so everything downstream (the checker, the emitter, the runtime)
//! sees an ordinary kernel of concrete types, named `k_f16` (`k_f16_f32` for two parameters).
//!
//! A mistake that has nothing to do with the element type is found by every instantiation, at
//! the same tokens with the same message: it is reported once, as for a kernel of concrete types.
//! A mistake only some element types make (assigning an f32 value to a variable that holds f16
//! values) is reported with a note naming those instantiations.

use crate::ast::{KernelFn, TypeBound, TypeParam};
use crate::diag::{Diags, Sp};
use crate::{check, parse};
use fuse_ir::{DType, Kernel};
use proc_macro2::{Ident, TokenTree};

/// One instantiation of a generic kernel.
pub struct Instance {
    /// The element type each valid type parameter stands for, in declaration order.
    pub binding: Vec<(Ident, DType)>,
    /// The element types' names joined by `_` (`f16`, `f16_f32`): the name of its Rust module and
    /// the suffix of its CUDA entry point. Empty when no type parameter is valid.
    pub suffix: String,
    /// The parsed kernel with the binding applied (its signature is the generic launcher's).
    pub kernel_fn: KernelFn,
    /// The checked IR, named `{kernel}_{suffix}`; meaningful only when no error was reported.
    pub kernel: Kernel,
}

/// A generic kernel: its type parameters and every instantiation.
pub struct Generic {
    pub type_params: Vec<TypeParam>,
    /// At least one (a single unbound one when no type parameter is valid: its errors are the
    /// kernel's).
    pub instances: Vec<Instance>,
}

impl Generic {
    /// The valid type parameters with their bounds, in declaration order.
    pub fn bounded(&self) -> Vec<(&Ident, TypeBound)> {
        self.type_params.iter().filter_map(|t| t.bound.map(|b| (&t.name, b))).collect()
    }
}

/// Parses and checks every instantiation of `item`, adding their merged diagnostics to `diags`.
pub fn instantiate(item: &syn::ItemFn, diags: &mut Diags) -> Generic {
    // The declarations' errors are reported again by every `parse_instance`, and merged there.
    let type_params = parse::type_params(&item.sig.generics, &mut Diags::default());
    let name = item.sig.ident.to_string();
    let mut instances = Vec::new();
    let mut reports = Vec::new();
    for binding in bindings(&type_params) {
        let suffix = binding.iter().map(|(_, d)| d.name()).collect::<Vec<_>>().join("_");
        let entry = if suffix.is_empty() { name.clone() } else { format!("{name}_{suffix}") };
        let mut d = Diags::default();
        let kernel_fn = parse::parse_instance(item, &binding, &mut d);
        let kernel = check::check_instance(&kernel_fn, &entry, &mut d);
        reports.push(d.into_errors());
        instances.push(Instance { binding, suffix, kernel_fn, kernel });
    }
    let labels: Vec<String> = instances.iter().map(label).collect();
    merge(reports, &labels, diags);
    Generic { type_params, instances }
}

/// The cross product of the valid type parameters' element types, the first parameter varying
/// slowest (the order of the launcher's nested `select`s).
fn bindings(type_params: &[TypeParam]) -> Vec<Vec<(Ident, DType)>> {
    let mut out: Vec<Vec<(Ident, DType)>> = vec![Vec::new()];
    for t in type_params {
        let Some(bound) = t.bound else { continue };
        out = out
            .into_iter()
            .flat_map(|prefix| {
                bound.dtypes().iter().map(move |&d| {
                    let mut b = prefix.clone();
                    b.push((t.name.clone(), d));
                    b
                })
            })
            .collect();
    }
    out
}

/// `T = f16, O = f32`.
fn label(i: &Instance) -> String {
    i.binding.iter().map(|(n, d)| format!("{n} = {d}")).collect::<Vec<_>>().join(", ")
}

/// Adds every distinct error of the instantiations to `diags`, in the order first reported: as is
/// when every instantiation reported it, else with a note naming the ones that did.
fn merge(reports: Vec<Vec<syn::Error>>, labels: &[String], diags: &mut Diags) {
    struct Merged {
        error: syn::Error,
        key: String,
        instances: Vec<usize>,
    }
    let mut merged: Vec<Merged> = Vec::new();
    for (i, errors) in reports.into_iter().enumerate() {
        for error in errors {
            let key = key(&error);
            match merged.iter_mut().find(|m| m.key == key) {
                Some(m) => {
                    if !m.instances.contains(&i) {
                        m.instances.push(i);
                    }
                }
                None => merged.push(Merged { error, key, instances: vec![i] }),
            }
        }
    }
    for m in merged {
        if m.instances.len() == labels.len() {
            diags.push(m.error);
        } else {
            let names: Vec<String> = m.instances.iter().map(|&i| format!("`{}`", labels[i])).collect();
            let note = match names.as_slice() {
                [one] => format!("in the instantiation {one}"),
                [init @ .., last] => format!("in the instantiations {} and {last}", init.join(", ")),
                [] => String::new(),
            };
            let (start, end) = range(&m.error);
            diags.push(Sp { start, end }.error(format!("{}\nnote: {note}", m.error)));
        }
    }
}

/// An error's identity: its message and the source range it points at. Spans have no equality
/// on stable Rust; their `Debug` text names the location (`#0 bytes(120..124)` in the compiler).
fn key(e: &syn::Error) -> String {
    let spans: Vec<String> = e.to_compile_error().into_iter().map(|t| format!("{:?}", t.span())).collect();
    format!("{e}\u{0}{}", spans.join(","))
}

/// The first and last span of an error (`compile_error!` is spanned from the one to the other).
fn range(e: &syn::Error) -> (proc_macro2::Span, proc_macro2::Span) {
    let tokens: Vec<TokenTree> = e.to_compile_error().into_iter().collect();
    let start = tokens.first().map_or_else(|| e.span(), TokenTree::span);
    let end = tokens.last().map_or(start, TokenTree::span);
    (start, end)
}
