//! The Rust item `#[fused_kernel]` expands to: a module named after the kernel holding the CUDA
//! source, the checked IR as JSON, the kernel spec and a typed `launch` function (DESIGN.md,
//! "The generated Rust item").
//!
//! On errors the same module is still emitted, with a `launch` of the same signature whose body is
//! `unreachable!()`, next to the `compile_error!`s: call sites keep type-checking, so the user sees
//! only the kernel's own errors.

use crate::ast::{KernelFn, ParamTy};
use crate::diag::{Diags, Sp};
use crate::{check, emit_cuda, parse};
use fuse_ir::{DType, Kernel, Specialization};
use proc_macro2::{Delimiter, TokenStream as TokenStream2, TokenTree};
use quote::{format_ident, quote, quote_spanned};

pub fn fused_kernel(attr: TokenStream2, item: TokenStream2) -> TokenStream2 {
    let mut diags = Diags::default();
    if !attr.is_empty() {
        diags.push(syn::Error::new_spanned(&attr, "`#[fused_kernel]` takes no arguments"));
    }
    let func = match parse_item_fn(&item) {
        Ok(func) => func,
        Err(parse_error) => return not_a_function(item, parse_error, diags),
    };
    let kernel_fn = parse::parse_kernel(&func, &mut diags);
    let kernel = check::check_kernel(&kernel_fn, &mut diags);
    match diags.combined() {
        None => kernel_module(&kernel_fn, &kernel),
        Some(errors) => {
            let errors = errors.to_compile_error();
            let stub = stub_module(&kernel_fn);
            quote! { #errors #stub }
        }
    }
}

/// The item is not a function: report it and give back the item itself if it is some other
/// valid item, so code that uses it does not pile up errors.
fn not_a_function(item: TokenStream2, parse_error: syn::Error, mut diags: Diags) -> TokenStream2 {
    let keep = match syn::parse2::<syn::Item>(item.clone()) {
        Ok(_) => {
            diags.error(
                item_head(&item),
                "`#[fused_kernel]` applies to a function: `fn name<const BLOCK: usize>(params) { .. }`",
            );
            item
        }
        Err(_) => {
            diags.push(parse_error);
            TokenStream2::new()
        }
    };
    let errors = diags.combined().map(|e| e.to_compile_error());
    quote! { #errors #keep }
}

/// `syn::parse2::<ItemFn>`, except that an error at the end of the tokens ("unexpected end of
/// input, expected curly braces", or the end of a `macro_rules!` `$t:ty` group) points at the
/// item's last token rather than at the call site: the item is parsed inside a brace group spanned
/// like its last token.
fn parse_item_fn(item: &TokenStream2) -> syn::Result<syn::ItemFn> {
    let last = item.clone().into_iter().last().map_or_else(proc_macro2::Span::call_site, |t| t.span());
    let mut group = proc_macro2::Group::new(Delimiter::Brace, item.clone());
    group.set_span(last);
    let parse = |input: syn::parse::ParseStream| {
        let content;
        syn::braced!(content in input);
        let f: syn::ItemFn = content.parse()?;
        if !content.is_empty() {
            return Err(content.error("unexpected tokens after the kernel function"));
        }
        Ok(f)
    };
    syn::parse::Parser::parse2(parse, TokenStream2::from(TokenTree::Group(group)))
}

/// The keyword and name of an item (`struct Kernel`), past its attributes and visibility.
fn item_head(item: &TokenStream2) -> Sp {
    let mut tokens = item.clone().into_iter().peekable();
    let mut words = Vec::new();
    while let Some(t) = tokens.next() {
        match &t {
            // `#[attr]` and `pub(crate)`.
            TokenTree::Punct(p) if p.as_char() == '#' => {
                tokens.next();
            }
            TokenTree::Ident(i) if i == "pub" => {
                if matches!(tokens.peek(), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis)
                {
                    tokens.next();
                }
            }
            TokenTree::Ident(_) => {
                words.push(t.span());
                if words.len() == 2 {
                    break;
                }
            }
            _ => break,
        }
    }
    match words.as_slice() {
        [] => Sp::of(item),
        [one] => Sp::single(*one),
        [first, .., last] => Sp { start: *first, end: *last },
    }
}

/// The launcher's parameter type for a kernel parameter: a reference to any memory of the element
/// type that the kernel may read (`*const T`: `&M`, a `&mut M` coerces) or write (`*mut T`: `&mut
/// M`, exclusive, and reborrowed rather than moved when the caller passes a `&mut` variable).
fn launch_type(ty: ParamTy) -> TokenStream2 {
    match ty {
        ParamTy::Ptr { elem, mutable: false } => {
            let t = rust_elem(elem);
            quote! { &(impl ::fuse::DeviceRead<#t> + ?::core::marker::Sized) }
        }
        ParamTy::Ptr { elem, mutable: true } => {
            let t = rust_elem(elem);
            quote! { &mut (impl ::fuse::DeviceWrite<#t> + ?::core::marker::Sized) }
        }
        ParamTy::Scalar(d) => rust_elem(d),
        // Only in the stub after an error: accept whatever the call site passes.
        ParamTy::Invalid => quote! { impl ::core::marker::Sized },
    }
}

fn rust_elem(d: DType) -> TokenStream2 {
    match d {
        DType::F16 => quote! { ::fuse::half::f16 },
        DType::BF16 => quote! { ::fuse::half::bf16 },
        other => {
            let id = format_ident!("{}", other.name());
            quote! { #id }
        }
    }
}

/// The module around `launch`, shared by the real item and the stub.
fn module(
    f: &KernelFn,
    source: &str,
    ir_json: &str,
    specs: &[Specialization],
    generics: TokenStream2,
    body: TokenStream2,
) -> TokenStream2 {
    let attrs = &f.attrs;
    let vis = &f.vis;
    let name = &f.name;
    let name_str = name.to_string();
    let params = f.params.iter().map(|p| {
        let n = &p.name;
        let t = launch_type(p.ty);
        quote! { #n: #t }
    });
    let specs = specs.iter().map(|s| match s {
        Specialization::Align16(i) => quote! { ::fuse::fuse_ir::Specialization::Align16(#i) },
        Specialization::Div16(i) => quote! { ::fuse::fuse_ir::Specialization::Div16(#i) },
        Specialization::InBounds(i) => quote! { ::fuse::fuse_ir::Specialization::InBounds(#i) },
        Specialization::AllTrue(i) => quote! { ::fuse::fuse_ir::Specialization::AllTrue(#i) },
    });
    let where_clause = &f.generics.where_clause;
    quote! {
        #(#attrs)*
        #vis mod #name {
            /// The kernel's name (also its CUDA entry point).
            pub const NAME: &str = #name_str;
            /// The CUDA C the kernel compiles to (const generics are `#define`d at launch).
            pub const SOURCE: &str = #source;
            /// The checked IR, for the CPU interpreter.
            pub const IR_JSON: &str = #ir_json;
            /// The kernel as the runtime takes it: name, CUDA C, IR and the specializations the
            /// source reads.
            pub static SPEC: ::fuse::KernelSpec = ::fuse::KernelSpec::new(NAME, SOURCE, IR_JSON, &[#(#specs),*]);

            /// Launches the kernel on `device` over the grid in `config`.
            #[allow(clippy::too_many_arguments, unused_variables)]
            pub fn launch #generics (
                device: &::fuse::Device,
                config: impl ::core::convert::Into<::fuse::LaunchConfig>,
                #(#params),*
            ) -> ::core::result::Result<(), ::fuse::Error> #where_clause {
                #body
            }
        }
    }
}

fn kernel_module(f: &KernelFn, kernel: &Kernel) -> TokenStream2 {
    let cuda = emit_cuda::emit_cuda(kernel);
    let name_str = f.name.to_string();
    let consts = &f.consts;
    // Spanned at the const generic in the kernel's signature: a bad `launch::<1000>` is reported
    // there, with rustc's note pointing at the call that instantiated it.
    let asserts = consts.iter().map(|c| {
        let msg = format!(
            "fuse: const generic {c} of kernel {name_str} must be a power of two, like 256 or 1024 (a run-time size goes through fuse::with_block!)"
        );
        quote_spanned! {c.span()=> const { ::core::assert!(#c.is_power_of_two(), #msg) }; }
    });
    let args = f.params.iter().map(|p| {
        let n = &p.name;
        match p.ty {
            ParamTy::Ptr { elem, mutable: false } => {
                let t = rust_elem(elem);
                quote! { ::fuse::DeviceRead::<#t>::kernel_arg(#n) }
            }
            ParamTy::Ptr { elem, mutable: true } => {
                let t = rust_elem(elem);
                quote! { ::fuse::DeviceWrite::<#t>::kernel_arg_mut(#n) }
            }
            _ => quote! { ::fuse::KernelArg::from(#n) },
        }
    });
    let body = quote! {
        #(#asserts)*
        ::fuse::launch(&SPEC, device, config.into(), &[#(#consts as u64),*], &mut [#(#args),*])
    };
    let generics = quote! { <#(const #consts: usize),*> };
    module(f, &cuda.source, &kernel.to_json(), &cuda.specializations, generics, body)
}

fn stub_module(f: &KernelFn) -> TokenStream2 {
    // `ImplGenerics` drops defaults (`const B: usize = 4`), which rustc would reject on a fn with
    // an error of its own, and prints nothing when there are no parameters.
    let (generics, _, _) = f.generics.split_for_impl();
    module(f, "", "", &[], quote! { #generics }, quote! { ::core::unreachable!() })
}
