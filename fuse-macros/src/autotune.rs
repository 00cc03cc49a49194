//! `#[fused_kernel(autotune(configs = [..], key = [..], restore = [..]))]`: the attribute as
//! written ([`parse_attr`]), checked against the kernel's signature ([`resolve`]), and the items
//! it adds to the kernel's module ([`items`]): `Config`, `CONFIGS` and `launch_autotuned`, which
//! hands the candidates to `fuse::autotune::run` (docs/LANGUAGE.md, "Autotuning").

use crate::ast::{KernelFn, ParamTy};
use crate::diag::{closest, Diags, Sp};
use crate::expand::{elem_type, Prim};
use proc_macro2::{Delimiter, Ident, TokenStream as TokenStream2, TokenTree};
use quote::quote;
use syn::parse::{Parse, ParseStream, Parser};
use syn::{bracketed, parenthesized, LitInt, Token};

/// The attribute as written.
pub struct Attr {
    /// `autotune(..)`, where whole-attribute errors point.
    sp: Sp,
    /// `None` when not given, or when the options did not parse (already reported).
    configs: Option<(Sp, Vec<RawConfig>)>,
    key: Vec<Ident>,
    restore: Vec<Ident>,
    /// A syntax error inside was reported: report nothing more about it.
    poisoned: bool,
}

/// One `(NAME = value, ..)` of `configs`.
struct RawConfig {
    sp: Sp,
    entries: Vec<(Ident, LitInt)>,
}

/// The attribute checked against the kernel: every config gives every const generic a value.
pub struct Autotune {
    configs: Vec<Config>,
    key: Vec<Ident>,
    restore: Vec<Ident>,
}

#[derive(PartialEq, Eq)]
struct Config {
    /// Per const generic of the kernel, in declaration order.
    consts: Vec<u64>,
    num_warps: Option<u32>,
    num_stages: Option<u32>,
}

/// Names the launcher (`grid`) and `Config` (`num_warps`, `num_stages`) take for themselves.
const RESERVED: [&str; 3] = ["grid", "num_warps", "num_stages"];

const USAGE: &str =
    "`#[fused_kernel]` takes no arguments but `autotune(configs = [(NAME = value, .., num_warps = \
                     4, num_stages = 3), ..], key = [param, ..], restore = [param, ..])`";

/// Parses the attribute's arguments; `None` when there are none (or they are not `autotune(..)`,
/// reported).
pub fn parse_attr(attr: TokenStream2, diags: &mut Diags) -> Option<Attr> {
    if attr.is_empty() {
        return None;
    }
    let mut tokens = attr.clone().into_iter();
    let (Some(TokenTree::Ident(name)), Some(TokenTree::Group(group)), None) =
        (tokens.next(), tokens.next(), tokens.next())
    else {
        diags.error(Sp::of(&attr), USAGE);
        return None;
    };
    if name != "autotune" || group.delimiter() != Delimiter::Parenthesis {
        diags.error(Sp::of(&attr), USAGE);
        return None;
    }
    let sp = Sp { start: name.span(), end: group.span_close() };
    let mut out = Attr { sp, configs: None, key: Vec::new(), restore: Vec::new(), poisoned: false };
    let parsed = (|input: ParseStream| options(input, &mut out, diags)).parse2(group.stream());
    if let Err(e) = parsed {
        diags.push(e);
        out.poisoned = true;
    }
    Some(out)
}

/// `name = value, ..` inside `autotune(..)`.
fn options(input: ParseStream, out: &mut Attr, diags: &mut Diags) -> syn::Result<()> {
    let mut seen: Vec<String> = Vec::new();
    while !input.is_empty() {
        let name: Ident = input.parse()?;
        input.parse::<Token![=]>()?;
        let text = name.to_string();
        if seen.contains(&text) {
            diags.error(Sp::single(name.span()), format!("autotune option `{text}` is given twice"));
        }
        seen.push(text.clone());
        match text.as_str() {
            "configs" => out.configs = Some(configs(input)?),
            "key" => out.key = idents(input)?,
            "restore" => out.restore = idents(input)?,
            other => {
                let hint = closest(other, ["configs", "key", "restore"])
                    .map_or(String::new(), |c| format!(" (did you mean `{c}`?)"));
                diags.error(
                    Sp::single(name.span()),
                    format!(
                        "unknown autotune option `{other}`{hint}: expected `configs`, `key` or `restore`"
                    ),
                );
                input.parse::<syn::Expr>()?;
            }
        }
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(())
}

/// `[(NAME = 1024, num_warps = 4), ..]`.
fn configs(input: ParseStream) -> syn::Result<(Sp, Vec<RawConfig>)> {
    let list;
    let bracket = bracketed!(list in input);
    let mut out = Vec::new();
    while !list.is_empty() {
        let entries;
        let paren = parenthesized!(entries in list);
        let mut raw = RawConfig { sp: Sp::single(paren.span.join()), entries: Vec::new() };
        while !entries.is_empty() {
            let name: Ident = entries.parse()?;
            entries.parse::<Token![=]>()?;
            const LITERAL: &str = "a config value must be an integer literal like `1024`, not an expression";
            let value: LitInt = entries.parse().map_err(|e| syn::Error::new(e.span(), LITERAL))?;
            if !entries.is_empty() && !entries.peek(Token![,]) {
                return Err(entries.error(LITERAL));
            }
            raw.entries.push((name, value));
            if entries.is_empty() {
                break;
            }
            entries.parse::<Token![,]>()?;
        }
        out.push(raw);
        if list.is_empty() {
            break;
        }
        list.parse::<Token![,]>()?;
    }
    Ok((Sp::single(bracket.span.join()), out))
}

/// `[a, b]`.
fn idents(input: ParseStream) -> syn::Result<Vec<Ident>> {
    let list;
    bracketed!(list in input);
    Ok(list.parse_terminated(Ident::parse, Token![,])?.into_iter().collect())
}

/// Checks the attribute against the kernel's const generics and parameters, reporting each
/// mistake at its token; what is right is kept (for the items, real or stub).
pub fn resolve(attr: &Attr, f: &KernelFn, diags: &mut Diags) -> Autotune {
    let const_names: Vec<String> = f.consts.iter().map(|c| c.to_string()).collect();
    // `launch_autotuned(device, grid, ..)` and `Config`'s fields take these names.
    for (name, what) in
        f.consts.iter().map(|c| (c, "const generic")).chain(f.params.iter().map(|p| (&p.name, "parameter")))
    {
        if RESERVED.iter().any(|r| name == r) {
            diags.error_help(
                Sp::single(name.span()),
                format!("`{name}` cannot name a {what} of an autotuned kernel: `launch_autotuned` and `Config` use it"),
                "rename it",
            );
        }
    }
    let mut configs: Vec<Config> = Vec::new();
    match &attr.configs {
        None if !attr.poisoned => diags.error(
            attr.sp,
            "autotune needs `configs = [(..), ..]`: the candidate configurations, each setting every const \
             generic (and optionally `num_warps`, `num_stages`)",
        ),
        None => {}
        Some((sp, list)) if list.is_empty() => {
            diags.error(*sp, "autotune needs at least one config: `configs = [(NAME = value, ..), ..]`")
        }
        Some((_, list)) => {
            for raw in list {
                if let Some(c) = config(raw, f, &const_names, diags) {
                    match configs.iter().position(|other| *other == c) {
                        Some(j) => diags.error(
                            raw.sp,
                            format!("this config repeats config {j} (`CONFIGS[{j}]`): every candidate must differ"),
                        ),
                        None => configs.push(c),
                    }
                }
            }
        }
    }
    let key = params(f, &attr.key, "key", diags, |ty| {
        match ty {
        ParamTy::Scalar(_) => Ok(()),
        ParamTy::Ptr { .. } => Err(
            "is a pointer parameter: a key names scalar parameters (`i32`, `i64`, `u32`, `u64`, `f32`), whose \
             values pick the config",
        ),
        ParamTy::Invalid => Ok(()),
    }
    });
    let restore = params(f, &attr.restore, "restore", diags, |ty| {
        match ty {
        ParamTy::Ptr { mutable: true, .. } | ParamTy::Invalid => Ok(()),
        ParamTy::Ptr { mutable: false, .. } => Err(
            "is a read-only `*const` parameter: `restore` lists the `*mut` buffers the kernel writes in place, \
             which tuning puts back after each timed launch",
        ),
        ParamTy::Scalar(_) => Err("is a scalar parameter: `restore` lists `*mut` buffers the kernel writes in place"),
    }
    });
    Autotune { configs, key, restore }
}

/// One config's values, or `None` if it has a mistake (reported).
fn config(raw: &RawConfig, f: &KernelFn, const_names: &[String], diags: &mut Diags) -> Option<Config> {
    let mut consts: Vec<Option<u64>> = vec![None; const_names.len()];
    let (mut num_warps, mut num_stages) = (None, None);
    let mut ok = true;
    let mut seen: Vec<String> = Vec::new();
    for (name, lit) in &raw.entries {
        let text = name.to_string();
        let at = Sp::single(lit.span());
        if seen.contains(&text) {
            diags.error(Sp::single(name.span()), format!("`{text}` is set twice in this config"));
            ok = false;
            continue;
        }
        seen.push(text.clone());
        let Ok(value) = lit.base10_parse::<u64>() else {
            diags.error(at, format!("`{text}` must be a non-negative integer that fits u64"));
            ok = false;
            continue;
        };
        match text.as_str() {
            "num_warps" => match u32::try_from(value) {
                Ok(w) if w.is_power_of_two() && w <= 32 => num_warps = Some(w),
                _ => {
                    diags.error(at, format!("num_warps must be a power of two in 1..=32, got {value}"));
                    ok = false;
                }
            },
            "num_stages" => match u32::try_from(value) {
                Ok(s) if (1..=8).contains(&s) => num_stages = Some(s),
                _ => {
                    diags.error(at, format!("num_stages must be in 1..=8, got {value}"));
                    ok = false;
                }
            },
            _ => match const_names.iter().position(|c| *c == text) {
                Some(i) if value.is_power_of_two() => consts[i] = Some(value),
                Some(_) => {
                    diags.error_help(
                        at,
                        format!("const generic {text} must be a power of two, got {value}"),
                        format!(
                            "the nearest are {} and {}",
                            value.checked_next_power_of_two().map_or(0, |p| p / 2).max(1),
                            value.checked_next_power_of_two().map_or("none".into(), |p| p.to_string())
                        ),
                    );
                    ok = false;
                }
                None => {
                    let known = if const_names.is_empty() {
                        format!("kernel `{}` has no const generics", f.name)
                    } else {
                        format!("the const generics of `{}` are {}", f.name, const_names.join(", "))
                    };
                    let hint = closest(
                        &text,
                        const_names.iter().map(String::as_str).chain(["num_warps", "num_stages"]),
                    )
                    .map_or(String::new(), |c| format!("did you mean `{c}`? "));
                    diags.error_help(
                        Sp::single(name.span()),
                        format!("`{text}` is not a const generic of `{}`", f.name),
                        format!("{hint}{known}; a config sets those and `num_warps`, `num_stages`"),
                    );
                    ok = false;
                }
            },
        }
    }
    for (name, v) in const_names.iter().zip(&consts) {
        // A const named like a launch option is reported by `resolve`, and such an entry sets the option.
        if v.is_none() && ok && !RESERVED.contains(&name.as_str()) {
            diags.error(
                raw.sp,
                format!("this config does not set the const generic `{name}`: every config gives each one a value"),
            );
            ok = false;
        }
    }
    ok.then(|| Config { consts: consts.into_iter().map(|v| v.unwrap_or(1)).collect(), num_warps, num_stages })
}

/// The parameters `names` (of the `what` list), each a parameter that `fits`.
fn params(
    f: &KernelFn,
    names: &[Ident],
    what: &str,
    diags: &mut Diags,
    fits: impl Fn(ParamTy) -> Result<(), &'static str>,
) -> Vec<Ident> {
    let mut out: Vec<Ident> = Vec::new();
    for name in names {
        let sp = Sp::single(name.span());
        if out.contains(name) {
            diags.error(sp, format!("`{name}` is listed twice in `{what}`"));
            continue;
        }
        match f.params.iter().find(|p| p.name == *name) {
            None => {
                let hint = closest(
                    &name.to_string(),
                    f.params
                        .iter()
                        .map(|p| p.name.to_string())
                        .collect::<Vec<_>>()
                        .iter()
                        .map(String::as_str),
                )
                .map_or(String::new(), |c| format!(" (did you mean `{c}`?)"));
                diags.error(
                    sp,
                    format!("`{what}` names `{name}`, which is not a parameter of `{}`{hint}", f.name),
                );
            }
            Some(p) => match fits(p.ty) {
                Ok(()) => out.push(name.clone()),
                Err(why) => diags.error(sp, format!("`{name}` {why}")),
            },
        }
    }
    out
}

/// How the module's `launch` is spelled, for `launch_autotuned` to call it per candidate.
pub struct Launcher<'a> {
    pub f: &'a KernelFn,
    /// `<T: ::fuse::Float>` (the type parameters only), or nothing.
    pub type_generics: TokenStream2,
    /// The `launch` parameters after `device, config`, as declared.
    pub params: Vec<TokenStream2>,
    /// The kernel's spec for the launch's element types: `&SPEC` or `self::spec::<T>()`.
    pub spec: TokenStream2,
    pub prim: Prim,
}

/// `Config`, `CONFIGS` and `launch_autotuned` (with an `unreachable!()` body in a stub).
pub fn items(t: &Autotune, l: &Launcher, stub: bool) -> TokenStream2 {
    let f = l.f;
    let kernel = f.name.to_string();
    let usize_t = quote! { ::core::primitive::usize };
    let u32_t = quote! { ::core::primitive::u32 };
    // A name that clashes with the launcher's or `Config`'s own is reported by `resolve`; leaving
    // it out here keeps the stub free of errors of its own.
    let reserved = |name: &Ident| RESERVED.iter().any(|r| name == r);
    let grid = if f.params.iter().any(|p| p.name == "grid") {
        quote! { __fuse_grid }
    } else {
        quote! { grid }
    };
    let const_fields = f.consts.iter().filter(|c| !reserved(c)).map(|c| {
        let doc = format!(" The const generic `{c}`.");
        quote! { #[doc = #doc] pub #c: #usize_t, }
    });
    let opt = |v: Option<u32>| match v {
        Some(v) => quote! { ::core::option::Option::Some(#v) },
        None => quote! { ::core::option::Option::None },
    };
    let config_values: Vec<TokenStream2> = t
        .configs
        .iter()
        .map(|c| {
            let fields = f.consts.iter().zip(&c.consts).filter(|(n, _)| !reserved(n)).map(|(n, v)| {
                let v = *v as usize;
                quote! { #n: #v, }
            });
            let (w, s) = (opt(c.num_warps), opt(c.num_stages));
            quote! { Config { #(#fields)* num_warps: #w, num_stages: #s } }
        })
        .collect();
    let candidates = t.configs.iter().map(|c| {
        let consts = &c.consts;
        let (w, s) = (opt(c.num_warps), opt(c.num_stages));
        quote! { ::fuse::autotune::Candidate::new(&[#(#consts),*], #w, #s) }
    });
    let key_names = t.key.iter().map(|k| k.to_string());
    let restores = !t.restore.is_empty();
    let type_generics = &l.type_generics;
    let params = &l.params;
    let body = if stub {
        quote! { ::core::unreachable!() }
    } else {
        launch_body(t, l)
    };
    let doc_config = format!(
        " One candidate configuration of `{kernel}`'s autotuning: a value for each const generic, and the \
         launch's warps and pipeline stages (`None`: the runtime's defaults)."
    );
    quote! {
        #[doc = #doc_config]
        #[allow(non_snake_case)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct Config {
            #(#const_fields)*
            /// Warps per program (`None`: `fuse::default_num_warps`).
            pub num_warps: ::core::option::Option<#u32_t>,
            /// Software-pipeline stages (`None`: `fuse::DEFAULT_NUM_STAGES`).
            pub num_stages: ::core::option::Option<#u32_t>,
        }

        impl Config {
            /// This candidate's launch configuration over `grid`.
            pub fn launch_config(&self, grid: impl ::core::convert::Into<::fuse::Grid>) -> ::fuse::LaunchConfig {
                let mut config = ::fuse::LaunchConfig::new(grid);
                config.num_warps = self.num_warps;
                config.num_stages = self.num_stages;
                config
            }
        }

        /// The candidates, in the attribute's order. The first is the one taken on the CPU and
        /// with `FUSE_AUTOTUNE=0`.
        pub const CONFIGS: &[Config] = &[#(#config_values),*];

        /// What `fuse::autotune::run` tunes: the candidates as the runtime sees them.
        static TUNING: ::fuse::autotune::Tuning = ::fuse::autotune::Tuning::new(
            &[#(#candidates),*],
            &[#(#key_names),*],
            #restores,
        );

        /// Launches the fastest of [`CONFIGS`] for this launch's key on `device` over the grid
        /// `grid` gives for it, and returns the config it launched. The first launch of a key on a
        /// GPU times every candidate (a candidate that fails to compile or launch is left out) and
        /// keeps the winner in memory and on disk; later launches take it at once. The CPU, and
        /// `FUSE_AUTOTUNE=0`, take the first candidate. Timing runs the kernel many times over
        /// these arguments: buffers it writes in place must be in the attribute's `restore`.
        #[allow(clippy::too_many_arguments, unused_variables, unused_mut)]
        pub fn launch_autotuned #type_generics (
            device: &::fuse::Device,
            #grid: impl ::core::ops::Fn(&Config) -> ::fuse::Grid,
            #(#params),*
        ) -> ::core::result::Result<Config, ::fuse::Error> {
            #body
        }
    }
}

/// `launch_autotuned`'s body: the key, one `launch::<..>` per candidate, the restore buffers.
fn launch_body(t: &Autotune, l: &Launcher) -> TokenStream2 {
    let f = l.f;
    let keys = &t.key;
    let nkey = keys.len();
    let arms = t.configs.iter().enumerate().map(|(i, c)| {
        let generic_args = f.generics.params.iter().filter_map(|p| match p {
            syn::GenericParam::Type(ty) => {
                let id = &ty.ident;
                Some(quote! { #id })
            }
            syn::GenericParam::Const(k) => {
                let at = f.consts.iter().position(|n| *n == k.ident)?;
                let v = c.consts[at] as usize;
                Some(quote! { #v })
            }
            syn::GenericParam::Lifetime(_) => None,
        });
        let args = f.params.iter().map(|p| {
            let n = &p.name;
            match p.ty {
                ParamTy::Ptr { mutable: true, .. } => quote! { &mut *#n },
                _ => quote! { #n },
            }
        });
        quote! {
            #i => {
                let __fuse_config = &CONFIGS[#i];
                self::launch::<#(#generic_args),*>(device, __fuse_config.launch_config(grid(__fuse_config)), #(#args),*)
            }
        }
    });
    let restore_step = if t.restore.is_empty() {
        quote! {
            ::fuse::autotune::Step::Save(_) | ::fuse::autotune::Step::Restore(_) => ::core::result::Result::Ok(()),
        }
    } else {
        let names: Vec<String> = t.restore.iter().map(|r| r.to_string()).collect();
        let bufs: Vec<TokenStream2> = t
            .restore
            .iter()
            .filter_map(|r| f.params.iter().find(|p| p.name == *r))
            .filter_map(|p| match p.ty {
                ParamTy::Ptr { elem, .. } => {
                    let (n, ty) = (&p.name, elem_type(p, elem, l.prim));
                    Some(quote! { ::fuse::DeviceWrite::<#ty>::kernel_arg_mut(&mut *#n) })
                }
                _ => None,
            })
            .collect();
        quote! {
            ::fuse::autotune::Step::Save(__fuse_saved) => {
                __fuse_saved.save(device, &[#(#names),*], &mut [#(#bufs),*])
            }
            ::fuse::autotune::Step::Restore(__fuse_saved) => {
                __fuse_saved.restore(device, &[#(#names),*], &mut [#(#bufs),*])
            }
        }
    };
    let spec = &l.spec;
    quote! {
        let __fuse_key: [::core::primitive::u64; #nkey] = [#(::fuse::autotune::KeyValue::key_word(#keys)),*];
        let mut __fuse_step = |__fuse_step: ::fuse::autotune::Step<'_>| -> ::core::result::Result<(), ::fuse::Error> {
            match __fuse_step {
                ::fuse::autotune::Step::Launch(__fuse_i) => match __fuse_i {
                    #(#arms)*
                    __fuse_i => ::core::result::Result::Err(::fuse::autotune::no_such_config(__fuse_i)),
                },
                #restore_step
            }
        };
        let __fuse_winner = ::fuse::autotune::run(&TUNING, #spec, device, &__fuse_key, &mut __fuse_step)?;
        ::core::result::Result::Ok(CONFIGS[__fuse_winner])
    }
}

#[cfg(test)]
mod tests {
    use crate::expand::fused_kernel;
    use proc_macro2::TokenStream;

    const KERNEL: &str = "pub fn k<const BLOCK: usize>(acc: *mut f32, x: *const f32, n: i32) {
        let offs = program_id(0) * BLOCK + arange(0, BLOCK);
        store(acc + offs, load(acc + offs, offs < n) + load(x + offs, offs < n), offs < n);
    }";

    fn expand(attr: &str, src: &str) -> TokenStream {
        fused_kernel(attr.parse().unwrap(), src.parse().unwrap())
    }

    fn errors(out: &TokenStream) -> usize {
        out.to_string().matches("compile_error").count()
    }

    #[test]
    fn a_valid_attribute_adds_the_items() {
        let out = expand("autotune(configs = [(BLOCK = 256), (BLOCK = 1024, num_warps = 4, num_stages = 2)], key = [n], restore = [acc])", KERNEL);
        assert_eq!(errors(&out), 0, "{out}");
        let module: syn::ItemMod = syn::parse2(out.clone()).unwrap();
        let text = out.to_string();
        for item in [
            "pub struct Config",
            "pub const CONFIGS",
            "static TUNING",
            "pub fn launch_autotuned",
            "pub fn launch",
        ] {
            assert!(text.contains(item), "{item} missing: {text}");
        }
        assert!(text.contains("self :: launch :: < 1024usize > (device"), "{text}");
        assert!(text.contains("kernel_arg_mut (& mut * acc)"), "{text}");
        assert!(text.contains("key_word (n)"), "{text}");
        assert_eq!(module.ident, "k");
    }

    #[test]
    fn generic_kernels_pass_their_type_parameters_in_declaration_order() {
        let src = "pub fn g<const BLOCK: usize, T: Float>(x: *const T, out: *mut T, n: i32) {
            let offs = program_id(0) * BLOCK + arange(0, BLOCK);
            store(out + offs, load(x + offs, offs < n), offs < n);
        }";
        let out = expand("autotune(configs = [(BLOCK = 512)])", src);
        assert_eq!(errors(&out), 0, "{out}");
        let text = out.to_string();
        assert!(text.contains("self :: launch :: < 512usize , T > (device"), "{text}");
        assert!(text.contains("pub fn launch_autotuned < T : :: fuse :: Float > (device"), "{text}");
        assert!(text.contains("self :: spec :: < T > ()"), "{text}");
    }

    #[test]
    fn malformed_attributes_are_errors_never_panics() {
        for attr in [
            "autotune",
            "autotune()",
            "autotune[]",
            "autotune(configs)",
            "autotune(configs = )",
            "autotune(configs = [()])",
            "autotune(configs = [(BLOCK)])",
            "autotune(configs = [(BLOCK = )])",
            "autotune(configs = [(BLOCK = -4)])",
            "autotune(configs = [(BLOCK = 99999999999999999999999)])",
            "autotune(configs = [(BLOCK = 4.0)])",
            "autotune(configs = [(BLOCK = 4)], key = n)",
            "autotune(configs = [(BLOCK = 4)], key = [1])",
            "autotune(configs = [(BLOCK = 4)], configs = [(BLOCK = 8)])",
            "autotune(configs = [(BLOCK = 4)]) extra",
            "other(configs = [])",
            "autotune(configs = [(BLOCK = 4)],,)",
        ] {
            let out = expand(attr, KERNEL);
            assert!(errors(&out) >= 1, "{attr}: no error in {out}");
            // The module is still there for the call sites.
            let text = out.to_string();
            assert!(text.contains("pub mod k"), "{attr}: {text}");
        }
    }
}
