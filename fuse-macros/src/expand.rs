//! The Rust item `#[fused_kernel]` expands to: a module named after the kernel holding the CUDA
//! source, the checked IR as JSON, the kernel spec and a typed `launch` function (DESIGN.md,
//! "The generated Rust item").
//!
//! A generic kernel (`fn k<T: Float, ..>`) expands to a module holding one submodule per
//! instantiation (`k::f16::SPEC`, ...), a `spec::<T>()` that picks one, and one generic `launch`.
//!
//! On errors the same module is still emitted, with a `launch` of the same signature whose body is
//! `unreachable!()`, next to the `compile_error!`s: call sites keep type-checking, so the user sees
//! only the kernel's own errors.

use crate::ast::{KernelFn, ParamDecl, ParamTy, TypeBound};
use crate::autotune::{self, Autotune};
use crate::diag::{Diags, Sp};
use crate::generic::{self, Generic};
use crate::{check, emit_cuda, parse};
use fuse_ir::{DType, Kernel, Specialization};
use proc_macro2::{Delimiter, Ident, TokenStream as TokenStream2, TokenTree};
use quote::{format_ident, quote, quote_spanned};

pub fn fused_kernel(attr: TokenStream2, item: TokenStream2) -> TokenStream2 {
    let mut diags = Diags::default();
    let tune_attr = autotune::parse_attr(attr, &mut diags);
    let func = match parse_item_fn(&item) {
        Ok(func) => func,
        Err(parse_error) => return not_a_function(item, parse_error, diags),
    };
    if func.sig.generics.type_params().next().is_some() {
        return generic_kernel(&func, diags, tune_attr);
    }
    let kernel_fn = parse::parse_kernel(&func, &mut diags);
    let kernel = check::check_kernel(&kernel_fn, &mut diags);
    let tune = tune_attr.map(|a| autotune::resolve(&a, &kernel_fn, &mut diags));
    match diags.combined() {
        None => kernel_module(&kernel_fn, &kernel, tune.as_ref()),
        Some(errors) => {
            let errors = errors.to_compile_error();
            let stub = stub_module(&kernel_fn, tune.as_ref());
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

/// How the generated code spells primitive types: `f32`, or `::core::primitive::f32` inside a
/// generic kernel's module, where `mod f32` (the `T = f32` instantiation) shadows the type.
#[derive(Clone, Copy)]
pub(crate) enum Prim {
    Plain,
    Qualified,
}

/// The launcher's parameter type for a kernel parameter: a reference to any memory of the element
/// type that the kernel may read (`*const T`: `&M`, a `&mut M` coerces) or write (`*mut T`: `&mut
/// M`, exclusive, and reborrowed rather than moved when the caller passes a `&mut` variable).
fn launch_type(p: &ParamDecl, prim: Prim) -> TokenStream2 {
    match p.ty {
        ParamTy::Ptr { elem, mutable: false } => {
            let t = elem_type(p, elem, prim);
            quote! { &(impl ::fuse::DeviceRead<#t> + ?::core::marker::Sized) }
        }
        ParamTy::Ptr { elem, mutable: true } => {
            let t = elem_type(p, elem, prim);
            quote! { &mut (impl ::fuse::DeviceWrite<#t> + ?::core::marker::Sized) }
        }
        ParamTy::Scalar(d) => rust_elem(d, prim),
        // Only in the stub after an error: accept whatever the call site passes.
        ParamTy::Invalid => quote! { impl ::core::marker::Sized },
    }
}

/// The argument `launch` hands the runtime for a kernel parameter.
fn launch_arg(p: &ParamDecl, prim: Prim) -> TokenStream2 {
    let n = &p.name;
    match p.ty {
        ParamTy::Ptr { elem, mutable: false } => {
            let t = elem_type(p, elem, prim);
            quote! { ::fuse::DeviceRead::<#t>::kernel_arg(#n) }
        }
        ParamTy::Ptr { elem, mutable: true } => {
            let t = elem_type(p, elem, prim);
            quote! { ::fuse::DeviceWrite::<#t>::kernel_arg_mut(#n) }
        }
        _ => quote! { ::fuse::KernelArg::from(#n) },
    }
}

/// A pointer's element type: the type parameter it was written as (`T`), else its own.
pub(crate) fn elem_type(p: &ParamDecl, elem: DType, prim: Prim) -> TokenStream2 {
    match &p.elem_param {
        Some(t) => quote! { #t },
        None => rust_elem(elem, prim),
    }
}

fn rust_elem(d: DType, prim: Prim) -> TokenStream2 {
    match d {
        DType::F16 => quote! { ::fuse::half::f16 },
        DType::BF16 => quote! { ::fuse::half::bf16 },
        other => {
            let id = format_ident!("{}", other.name());
            match prim {
                Prim::Plain => quote! { #id },
                Prim::Qualified => quote! { ::core::primitive::#id },
            }
        }
    }
}

/// The runtime's spelling of the specializations the source reads.
fn spec_list(specs: &[Specialization]) -> TokenStream2 {
    let specs = specs.iter().map(|s| match s {
        Specialization::Align16(i) => quote! { ::fuse::fuse_ir::Specialization::Align16(#i) },
        Specialization::Div16(i) => quote! { ::fuse::fuse_ir::Specialization::Div16(#i) },
        Specialization::InBounds(i) => quote! { ::fuse::fuse_ir::Specialization::InBounds(#i) },
        Specialization::AllTrue(i) => quote! { ::fuse::fuse_ir::Specialization::AllTrue(#i) },
        Specialization::BranchTaken(i) => quote! { ::fuse::fuse_ir::Specialization::BranchTaken(#i) },
        Specialization::BranchSkipped(i) => quote! { ::fuse::fuse_ir::Specialization::BranchSkipped(#i) },
        Specialization::TensorBox(i) => quote! { ::fuse::fuse_ir::Specialization::TensorBox(#i) },
    });
    quote! { &[#(#specs),*] }
}

/// `NAME`, `SOURCE`, `IR_JSON` and `SPEC`: one compiled kernel (the module of a kernel of concrete
/// types, or one instantiation's of a generic kernel).
fn spec_items(name: &str, source: &str, ir_json: &str, specs: &[Specialization]) -> TokenStream2 {
    let specs = spec_list(specs);
    quote! {
        /// The kernel's name (also its CUDA entry point).
        pub const NAME: &str = #name;
        /// The CUDA C the kernel compiles to (const generics are `#define`d at launch).
        pub const SOURCE: &str = #source;
        /// The checked IR, for the CPU interpreter.
        pub const IR_JSON: &str = #ir_json;
        /// The kernel as the runtime takes it: name, CUDA C, IR and the specializations the
        /// source reads.
        pub static SPEC: ::fuse::KernelSpec = ::fuse::KernelSpec::new(NAME, SOURCE, IR_JSON, #specs);
    }
}

/// The module around `launch`, shared by the real item and the stub; with `tune`, the autotuning
/// items too (and whether they are a stub's).
fn module(
    f: &KernelFn,
    source: &str,
    ir_json: &str,
    specs: &[Specialization],
    generics: TokenStream2,
    body: TokenStream2,
    tune: Option<(&Autotune, bool)>,
) -> TokenStream2 {
    let attrs = &f.attrs;
    let vis = &f.vis;
    let name = &f.name;
    let items = spec_items(&name.to_string(), source, ir_json, specs);
    let params: Vec<TokenStream2> = f
        .params
        .iter()
        .map(|p| {
            let n = &p.name;
            let t = launch_type(p, Prim::Plain);
            quote! { #n: #t }
        })
        .collect();
    let tune_items = tune.map(|(t, stub)| {
        let launcher = autotune::Launcher {
            f,
            type_generics: quote! {},
            params: params.clone(),
            spec: quote! { &SPEC },
            prim: Prim::Plain,
        };
        autotune::items(t, &launcher, stub)
    });
    let where_clause = &f.generics.where_clause;
    quote! {
        #(#attrs)*
        #vis mod #name {
            #items

            #tune_items

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

/// Spanned at the const generic in the kernel's signature: a bad `launch::<1000>` is reported
/// there, with rustc's note pointing at the call that instantiated it.
fn power_of_two_asserts(f: &KernelFn) -> Vec<TokenStream2> {
    let name_str = f.name.to_string();
    f.consts
        .iter()
        .map(|c| {
            let msg = format!(
                "fuse: const generic {c} of kernel {name_str} must be a power of two, like 256 or 1024 (a run-time size goes through fuse::with_block!)"
            );
            quote_spanned! {c.span()=> const { ::core::assert!(#c.is_power_of_two(), #msg) }; }
        })
        .collect()
}

/// The dims of every `dot` that the checker could not see are at least 16 because they are
/// written with const generics (`[BM, BK]`): asserted where `launch::<..>` is instantiated, like
/// the powers of two, spanned at the dim's first const generic. A dim `2^log2 * C1 * C2 ..` of
/// powers of two is at least 16 when `log2 + log2(C1) + .. >= 4`, which needs no multiplication.
fn dot_dim_asserts(f: &KernelFn, kernel: &Kernel) -> Vec<TokenStream2> {
    let min_log2 = i64::from(fuse_ir::DOT_MIN_DIM.trailing_zeros());
    let mut dims: Vec<(&'static str, fuse_ir::Len)> = Vec::new();
    kernel.visit_stmts(&mut |s| {
        if let fuse_ir::Stmt::Assign { expr: fuse_ir::Expr::Dot { a, b, .. }, .. } = s {
            let (ad, bd) = (kernel.ty(*a).shape.dims(), kernel.ty(*b).shape.dims());
            if let ([m, k], [_, n]) = (ad.as_slice(), bd.as_slice()) {
                for (role, len) in [("M", m), ("K", k), ("N", n)] {
                    let symbolic = !len.consts.is_empty() && i64::from(len.log2) < min_log2;
                    if symbolic && !dims.iter().any(|(_, l)| l == len) {
                        dims.push((role, len.clone()));
                    }
                }
            }
        }
    });
    let name_str = f.name.to_string();
    dims.iter()
        .filter_map(|(role, len)| {
            let generics: Vec<&Ident> = len.consts.iter().map(|&c| f.consts.get(c as usize)).collect::<Option<_>>()?;
            let shown = len.display(&kernel.consts);
            let msg = format!(
                "fuse: kernel {name_str}: `dot` needs M, N and K of at least {}, and its {role} is {shown} (a [M, K] by [K, N] product)",
                fuse_ir::DOT_MIN_DIM
            );
            let log2 = i64::from(len.log2);
            let span = generics.first()?.span();
            Some(quote_spanned! {span=>
                const { ::core::assert!(#log2 #(+ #generics.trailing_zeros() as i64)* >= #min_log2, #msg) };
            })
        })
        .collect()
}

fn kernel_module(f: &KernelFn, kernel: &Kernel, tune: Option<&Autotune>) -> TokenStream2 {
    let cuda = emit_cuda::emit_cuda(kernel);
    let consts = &f.consts;
    let mut asserts = power_of_two_asserts(f);
    asserts.extend(dot_dim_asserts(f, kernel));
    let args = f.params.iter().map(|p| launch_arg(p, Prim::Plain));
    let body = quote! {
        #(#asserts)*
        ::fuse::launch(&SPEC, device, config.into(), &[#(#consts as u64),*], &mut [#(#args),*])
    };
    let generics = quote! { <#(const #consts: usize),*> };
    module(
        f,
        &cuda.source,
        &kernel.to_json(),
        &cuda.specializations,
        generics,
        body,
        tune.map(|t| (t, false)),
    )
}

fn stub_module(f: &KernelFn, tune: Option<&Autotune>) -> TokenStream2 {
    // `ImplGenerics` drops defaults (`const B: usize = 4`), which rustc would reject on a fn with
    // an error of its own, and prints nothing when there are no parameters.
    let (generics, _, _) = f.generics.split_for_impl();
    module(f, "", "", &[], quote! { #generics }, quote! { ::core::unreachable!() }, tune.map(|t| (t, true)))
}

// ---- generic kernels ----------------------------------------------------------------------------

fn generic_kernel(func: &syn::ItemFn, mut diags: Diags, tune_attr: Option<autotune::Attr>) -> TokenStream2 {
    let g = generic::instantiate(func, &mut diags);
    // The instantiations share the signature the attribute is checked against.
    let tune =
        tune_attr.zip(g.instances.first()).map(|(a, i)| autotune::resolve(&a, &i.kernel_fn, &mut diags));
    match diags.combined() {
        None => generic_module(&g, false, tune.as_ref()),
        Some(errors) => {
            let errors = errors.to_compile_error();
            let stub = generic_module(&g, true, tune.as_ref());
            quote! { #errors #stub }
        }
    }
}

/// The trait of a bound, as `fuse` exports it.
fn bound_trait(b: TypeBound) -> TokenStream2 {
    let t = format_ident!("{}", b.name());
    quote! { ::fuse::#t }
}

/// The launcher's (and `spec`'s) generics, in the order of the kernel's: `T: ::fuse::Float`,
/// `const BLOCK: usize`. In the stub, a rejected type parameter keeps no bound, a const generic
/// its type as written, and a lifetime is kept.
fn generic_params(func_generics: &syn::Generics, g: &Generic, types_only: bool) -> TokenStream2 {
    let params = func_generics.params.iter().filter_map(|p| match p {
        syn::GenericParam::Type(t) => {
            let name = &t.ident;
            let bound = g.type_params.iter().find(|tp| tp.name == *name).and_then(|tp| tp.bound);
            Some(match bound {
                Some(b) => {
                    let tr = bound_trait(b);
                    quote! { #name: #tr }
                }
                None => quote! { #name },
            })
        }
        _ if types_only => None,
        syn::GenericParam::Const(c) => {
            let (name, ty) = (&c.ident, &c.ty);
            Some(quote! { const #name: #ty })
        }
        syn::GenericParam::Lifetime(l) => {
            let l = &l.lifetime;
            Some(quote! { #l })
        }
    });
    quote! { <#(#params),*> }
}

/// `<T as ::fuse::Float>::select(&self::f32::SPEC, &self::f16::SPEC, &self::bf16::SPEC)`, nested
/// for several type parameters (the first one outermost, as `generic::instantiate` orders them).
fn select(bounded: &[(&Ident, TypeBound)], prefix: &mut Vec<DType>) -> TokenStream2 {
    let Some(((t, bound), rest)) = bounded.split_first() else {
        let m = instance_module_name(prefix);
        return quote! { &self::#m::SPEC };
    };
    let arms: Vec<TokenStream2> = bound
        .dtypes()
        .iter()
        .map(|&d| {
            prefix.push(d);
            let arm = select(rest, prefix);
            prefix.pop();
            arm
        })
        .collect();
    let tr = bound_trait(*bound);
    match bound {
        TypeBound::Float => quote! { <#t as #tr>::select(#(#arms),*) },
        TypeBound::Half => quote! { <#t as #tr>::select_half(#(#arms),*) },
    }
}

fn instance_module_name(dtypes: &[DType]) -> Ident {
    format_ident!("{}", dtypes.iter().map(|d| d.name()).collect::<Vec<_>>().join("_"))
}

/// A generic kernel's module: one submodule per instantiation with its `NAME`, `SOURCE`, `IR_JSON`
/// and `SPEC`; `spec::<T, ..>()`, the instantiation for the given element types; and `launch`,
/// generic over the type parameters and the const generics. As a stub (after an error) the same
/// items, with empty sources and `unreachable!()` bodies.
fn generic_module(g: &Generic, stub: bool, tune: Option<&Autotune>) -> TokenStream2 {
    // Every instantiation has the same signature but for the pointers' element types, which the
    // launcher names by their type parameters.
    let Some(f) = g.instances.first().map(|i| &i.kernel_fn) else {
        // `generic::instantiate` always gives at least one.
        return TokenStream2::new();
    };
    let attrs = &f.attrs;
    let vis = &f.vis;
    let name = &f.name;
    let bounded = g.bounded();
    let instances = g.instances.iter().filter(|i| !i.suffix.is_empty()).map(|i| {
        let m = format_ident!("{}", i.suffix);
        let doc = format!(
            " The kernel instantiated for {}.",
            i.binding.iter().map(|(t, d)| format!("`{t} = {d}`")).collect::<Vec<_>>().join(", ")
        );
        let items = if stub {
            spec_items(&i.kernel.name, "", "", &[])
        } else {
            let cuda = emit_cuda::emit_cuda(&i.kernel);
            spec_items(&i.kernel.name, &cuda.source, &i.kernel.to_json(), &cuda.specializations)
        };
        quote! {
            #[doc = #doc]
            pub mod #m {
                #items
            }
        }
    });
    let type_generics = generic_params(&f.generics, g, true);
    let generics = generic_params(&f.generics, g, false);
    let type_names = g.type_params.iter().map(|t| &t.name);
    let params: Vec<TokenStream2> = f
        .params
        .iter()
        .map(|p| {
            let n = &p.name;
            let t = launch_type(p, Prim::Qualified);
            quote! { #n: #t }
        })
        .collect();
    let tune_items = tune.map(|t| {
        let launcher = autotune::Launcher {
            f,
            type_generics: type_generics.clone(),
            params: params.clone(),
            spec: {
                let names = g.type_params.iter().map(|t| &t.name);
                quote! { self::spec::<#(#names),*>() }
            },
            prim: Prim::Qualified,
        };
        autotune::items(t, &launcher, stub)
    });
    // A stub keeps a type parameter whose name was rejected (`f16: Float`) as written.
    let lints = if stub {
        quote! { #[allow(non_camel_case_types)] }
    } else {
        quote! {}
    };
    let (spec_body, launch_body) = if stub {
        (quote! { ::core::unreachable!() }, quote! { ::core::unreachable!() })
    } else {
        let mut asserts = power_of_two_asserts(f);
        if let Some(first) = g.instances.first() {
            // Dims do not depend on the element types: one instantiation's dots stand for all.
            asserts.extend(dot_dim_asserts(f, &first.kernel));
        }
        let consts = &f.consts;
        let args = f.params.iter().map(|p| launch_arg(p, Prim::Qualified));
        let spec = select(&bounded, &mut Vec::new());
        (
            spec,
            quote! {
                #(#asserts)*
                ::fuse::launch(
                    self::spec::<#(#type_names),*>(),
                    device,
                    config.into(),
                    &[#(#consts as ::core::primitive::u64),*],
                    &mut [#(#args),*],
                )
            },
        )
    };
    quote! {
        #(#attrs)*
        #vis mod #name {
            #(#instances)*

            #tune_items

            /// The instantiation for the given element types: one of the `SPEC`s above.
            #lints
            pub fn spec #type_generics () -> &'static ::fuse::KernelSpec {
                #spec_body
            }

            /// Launches the kernel on `device` over the grid in `config`, instantiated for the
            /// element types given (`launch::<f16, 1024>`) or taken from the buffers
            /// (`launch::<_, 1024>`).
            #lints
            #[allow(clippy::too_many_arguments, unused_variables)]
            pub fn launch #generics (
                device: &::fuse::Device,
                config: impl ::core::convert::Into<::fuse::LaunchConfig>,
                #(#params),*
            ) -> ::core::result::Result<(), ::fuse::Error> {
                #launch_body
            }
        }
    }
}
