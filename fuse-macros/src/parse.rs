//! syn → [`crate::ast`]: accepts exactly the surface language of DESIGN.md and reports everything else as
//! "unsupported syntax". Parsing never stops at the first error: a rejected expression becomes
//! [`ExprKind::Error`] so that the checker still sees the names it binds and reports nothing more
//! about it.

use crate::ast::*;
use crate::diag::{Diags, Sp};
use fuse_ir::{BinaryOp, DType};
use proc_macro2::Ident;
use quote::ToTokens;
use syn::spanned::Spanned;

/// Parses the kernel function. The signature is always returned (rejected parameters are
/// [`ParamTy::Invalid`]) so that the expander can still write a launcher stub.
///
/// A generic kernel's type parameters are declared here but stand for nothing: their uses are
/// rejected silently. [`parse_instance`] parses one instantiation.
pub fn parse_kernel(item: &syn::ItemFn, diags: &mut Diags) -> KernelFn {
    parse_instance(item, &[], diags)
}

/// Parses the kernel with each type parameter named in `binding` standing for its element type
/// (`*const T`, `.to(T)`, `x as T`, `T::MAX`); a type parameter absent from it, or rejected, is
/// poisoned (its uses are not reported again). The errors are the same for every binding except
/// where a use of a type parameter is wrong for one element type.
pub fn parse_instance(item: &syn::ItemFn, binding: &[(Ident, DType)], diags: &mut Diags) -> KernelFn {
    let sig = &item.sig;
    let mut p = Parser { diags, types: Vec::new() };
    let returns_value = p.signature(sig);
    let attrs = p.attributes(&item.attrs);
    let (consts, type_params) = p.generics(&sig.generics);
    p.types = type_params
        .iter()
        .map(|t| {
            let d = t.bound.and_then(|_| binding.iter().find(|(n, _)| *n == t.name).map(|(_, d)| *d));
            (t.name.clone(), d)
        })
        .collect();
    let params = sig.inputs.iter().filter_map(|arg| p.param(arg)).collect();
    let mut body = p.block(&item.block);
    if returns_value {
        // The return type is already reported; the tail expression that returns the value is
        // the same mistake.
        if let Some(Stmt::Expr { semi, .. }) = body.stmts.last_mut() {
            *semi = true;
        }
    }
    KernelFn {
        attrs,
        vis: item.vis.clone(),
        name: sig.ident.clone(),
        generics: sig.generics.clone(),
        consts,
        params,
        body,
    }
}

/// The most type parameters a kernel may have (the instantiations are their cross product).
pub const MAX_TYPE_PARAMS: usize = 3;

/// The type parameters of a kernel's signature, each with its bound if the declaration is valid.
/// Reports what is wrong with each (the same errors [`parse_instance`] reports).
pub fn type_params(generics: &syn::Generics, diags: &mut Diags) -> Vec<TypeParam> {
    let mut out: Vec<TypeParam> = Vec::new();
    let mut consts: Vec<&Ident> = Vec::new();
    let duplicate = |diags: &mut Diags, id: &Ident| {
        diags.error(
            Sp::single(id.span()),
            format!("the name `{id}` is declared more than once in the kernel signature"),
        );
    };
    for param in &generics.params {
        match param {
            syn::GenericParam::Type(t) => {
                let mut p = type_param(t, where_bounds(generics, &t.ident), out.len(), diags);
                if consts.contains(&&t.ident) || out.iter().any(|o| o.name == t.ident) {
                    duplicate(diags, &t.ident);
                    p.bound = None;
                }
                out.push(p);
            }
            syn::GenericParam::Const(c) => {
                // A const generic after a type parameter of its name (the reverse is above).
                if let Some(t) = out.iter_mut().find(|t| t.name == c.ident) {
                    duplicate(diags, &c.ident);
                    t.bound = None;
                }
                consts.push(&c.ident);
            }
            syn::GenericParam::Lifetime(_) => {}
        }
    }
    out
}

/// The bounds a `where` clause gives the type parameter `name` (`where T: Float`): rejected with
/// the clause, but they stand for the bounds the parameter lacks, so it is not reported again.
fn where_bounds<'g>(
    generics: &'g syn::Generics,
    name: &Ident,
) -> Option<&'g syn::punctuated::Punctuated<syn::TypeParamBound, syn::Token![+]>> {
    generics.where_clause.as_ref()?.predicates.iter().find_map(|p| match p {
        syn::WherePredicate::Type(pt) => match &pt.bounded_ty {
            syn::Type::Path(tp) if tp.qself.is_none() && tp.path.is_ident(name) => Some(&pt.bounds),
            _ => None,
        },
        _ => None,
    })
}

/// Validates one type parameter: a name that is not an element type, exactly one known bound
/// (`Float`, `Half`, optionally as `fuse::Float`), no default. A parameter with no bound of its
/// own takes the bounds of a `where` clause (`where_bounds`), which is reported by itself.
fn type_param(
    t: &syn::TypeParam,
    where_bounds: Option<&syn::punctuated::Punctuated<syn::TypeParamBound, syn::Token![+]>>,
    index: usize,
    diags: &mut Diags,
) -> TypeParam {
    let name = t.ident.clone();
    let reject = |bound: Option<TypeBound>| TypeParam { name: t.ident.clone(), bound };
    const BOUNDS_HELP: &str =
        "bound it by the element types it ranges over: `T: Float` (f32, f16, bf16) or `T: Half` (f16, bf16); the kernel is instantiated for each";
    let s = name.to_string();
    if DType::from_name(&s).is_some() || s == "f64" {
        diags.error_help(
            Sp::single(name.span()),
            format!("`{s}` cannot name a type parameter: it is an element type"),
            "name it `T`",
        );
        return reject(None);
    }
    if index >= MAX_TYPE_PARAMS {
        diags.error_help(
            Sp::single(name.span()),
            format!("a kernel takes at most {MAX_TYPE_PARAMS} type parameters"),
            "each combination of their element types is compiled: give the others concrete types",
        );
        return reject(None);
    }
    if let Some(d) = &t.default {
        diags.error_help(
            Sp::of(d),
            unsupported("a default type for a type parameter"),
            format!("the launch gives the type, `k::launch::<f32, ..>(..)`, or `k::launch::<_, ..>(..)` takes it from the buffers; remove `= {}`", compact(d)),
        );
    }
    let all_bounds = match where_bounds {
        Some(w) if t.bounds.is_empty() => w,
        _ => &t.bounds,
    };
    let mut bounds = all_bounds.iter();
    let Some(first) = bounds.next() else {
        diags.error_help(
            Sp::single(name.span()),
            "unsupported syntax: a generic type parameter without a bound is not part of the fuse tile language",
            BOUNDS_HELP,
        );
        return reject(None);
    };
    let bound = known_bound(first);
    if bound.is_none() {
        diags.error_help(
            Sp::of(first),
            format!("unknown bound `{}` on the kernel's type parameter `{name}`", compact(first)),
            BOUNDS_HELP,
        );
    }
    if let Some(second) = bounds.next() {
        let last = all_bounds.iter().last().map_or(Sp::of(second), Sp::of);
        diags.error_help(
            Sp::of(second).to(last),
            "a kernel's type parameter takes exactly one bound, `Float` or `Half`",
            format!("remove `+ {}`", compact(second)),
        );
    }
    reject(bound)
}

/// `Float`, `Half`, `fuse::Float`, `::fuse::prelude::Half`, ...
fn known_bound(b: &syn::TypeParamBound) -> Option<TypeBound> {
    let syn::TypeParamBound::Trait(t) = b else { return None };
    if t.lifetimes.is_some()
        || !matches!(t.modifier, syn::TraitBoundModifier::None)
        || t.paren_token.is_some()
    {
        return None;
    }
    if t.path.segments.iter().any(|s| !s.arguments.is_none()) {
        return None;
    }
    let segs: Vec<String> = t.path.segments.iter().map(|s| s.ident.to_string()).collect();
    let (last, prefix) = segs.split_last()?;
    let prefix_ok = match prefix {
        [] => t.path.leading_colon.is_none(),
        [a] => a == "fuse",
        [a, b] => a == "fuse" && b == "prelude",
        _ => false,
    };
    if !prefix_ok {
        return None;
    }
    TypeBound::ALL.into_iter().find(|b| b.name() == last)
}

/// The value of `NAME` (`INFINITY`, `NAN`, `MAX`, ...) for a float element type, as in Rust
/// (`f16`/`bf16` as in the `half` crate); every one is exact in f32. `NAN` is the quiet NaN: Rust's
/// `f32::NAN` (`0x7fc00000`) in f32, and stored to f16 or bf16 as every NaN converts (`0x7fff`),
/// not `half`'s own NaN bits.
fn float_const(d: DType, name: &str) -> Option<f64> {
    let (max, min_positive, epsilon) = match d {
        DType::F32 => (f64::from(f32::MAX), f64::from(f32::MIN_POSITIVE), f64::from(f32::EPSILON)),
        // 65504, 2^-14, 2^-10.
        DType::F16 => (65504.0, 2f64.powi(-14), 2f64.powi(-10)),
        // (2 - 2^-7) * 2^127, 2^-126, 2^-7.
        DType::BF16 => ((2.0 - 2f64.powi(-7)) * 2f64.powi(127), 2f64.powi(-126), 2f64.powi(-7)),
        _ => return None,
    };
    Some(match name {
        "INFINITY" => f64::INFINITY,
        "NEG_INFINITY" => f64::NEG_INFINITY,
        "NAN" => f64::NAN,
        "MAX" => max,
        "MIN" => -max,
        "MIN_POSITIVE" => min_positive,
        "EPSILON" => epsilon,
        _ => return None,
    })
}

struct Parser<'d> {
    diags: &'d mut Diags,
    /// The type parameters and the element type each stands for in this instantiation (`None`:
    /// poisoned, its uses are not reported).
    types: Vec<(Ident, Option<DType>)>,
}

fn unsupported(what: &str) -> String {
    format!("unsupported syntax: {what} is not part of the fuse tile language")
}

impl Parser<'_> {
    fn unsupported(&mut self, node: &impl ToTokens, what: &str) {
        self.diags.error(Sp::of(node), unsupported(what));
    }

    fn unsupported_help(&mut self, node: &impl ToTokens, what: &str, help: &str) {
        self.diags.error_help(Sp::of(node), unsupported(what), help);
    }

    /// Reports what a kernel signature cannot have; true if it declares a return value.
    fn signature(&mut self, sig: &syn::Signature) -> bool {
        if let Some(t) = &sig.constness {
            self.unsupported(t, "a `const fn` kernel");
        }
        if let Some(t) = &sig.asyncness {
            self.unsupported(t, "an `async` kernel");
        }
        if let Some(t) = &sig.unsafety {
            self.unsupported_help(t, "an `unsafe` kernel", "kernels are checked; remove `unsafe`");
        }
        if let Some(t) = &sig.abi {
            self.unsupported(t, "an `extern` ABI");
        }
        if let Some(t) = &sig.variadic {
            self.unsupported(t, "a variadic parameter");
        }
        if let syn::ReturnType::Type(arrow, ty) = &sig.output {
            let is_unit = matches!(&**ty, syn::Type::Tuple(t) if t.elems.is_empty());
            if !is_unit {
                self.diags.error_help(
                    Sp::of(arrow).to(Sp::of(ty)),
                    "a kernel cannot return a value",
                    "write results through a `*mut` parameter with `store(ptr, value, mask)`",
                );
                return true;
            }
        }
        false
    }

    fn attributes(&mut self, attrs: &[syn::Attribute]) -> Vec<syn::Attribute> {
        const FORWARDED: [&str; 7] = ["doc", "cfg", "cfg_attr", "allow", "warn", "deny", "expect"];
        let mut kept = Vec::new();
        for attr in attrs {
            if FORWARDED.iter().any(|name| attr.path().is_ident(name)) {
                kept.push(attr.clone());
            } else {
                self.diags.error_help(
                    Sp::of(attr),
                    "unsupported attribute on a fused kernel",
                    "only doc comments, `cfg` and lint attributes are allowed; they apply to the generated module",
                );
            }
        }
        kept
    }

    fn generics(&mut self, generics: &syn::Generics) -> (Vec<Ident>, Vec<TypeParam>) {
        let mut consts = Vec::new();
        for param in &generics.params {
            match param {
                syn::GenericParam::Const(c) => {
                    let is_usize =
                        matches!(&c.ty, syn::Type::Path(p) if p.qself.is_none() && p.path.is_ident("usize"));
                    if !is_usize {
                        self.diags.error_help(
                            Sp::of(&c.ty),
                            "const generics of a kernel must be `usize`",
                            format!("write `const {}: usize`", c.ident),
                        );
                    }
                    if let Some(d) = &c.default {
                        self.unsupported(d, "a default value for a const generic");
                    }
                    consts.push(c.ident.clone());
                }
                // Declared by `type_params` below.
                syn::GenericParam::Type(_) => {}
                syn::GenericParam::Lifetime(l) => self.unsupported(l, "a lifetime parameter"),
            }
        }
        let types = type_params(generics, self.diags);
        if let Some(w) = &generics.where_clause {
            // At `where` itself: an empty clause prints no tokens.
            if types.is_empty() {
                self.unsupported(&w.where_token, "a `where` clause");
            } else {
                self.unsupported_help(
                    &w.where_token,
                    "a `where` clause",
                    "bound each type parameter where it is declared: `fn k<T: Float, ..>`",
                );
            }
        }
        (consts, types)
    }

    /// The element type a type parameter's name stands for: `Some(Some(d))` in this
    /// instantiation, `Some(None)` poisoned (already reported), `None` not a type parameter.
    fn type_param_type(&self, id: &Ident) -> Option<Option<DType>> {
        self.types.iter().find(|(n, _)| n == id).map(|(_, d)| *d)
    }

    /// " and the kernel's type parameter `T`", for the helps that list the types.
    fn type_param_list(&self) -> String {
        let names: Vec<String> = self.types.iter().map(|(n, _)| format!("`{n}`")).collect();
        match names.as_slice() {
            [] => String::new(),
            [one] => format!(", and the kernel's type parameter {one}"),
            more => format!(", and the kernel's type parameters {}", more.join(", ")),
        }
    }

    fn param(&mut self, arg: &syn::FnArg) -> Option<ParamDecl> {
        let typed = match arg {
            syn::FnArg::Receiver(r) => {
                self.unsupported_help(r, "a `self` parameter", "a kernel is a free function");
                return None;
            }
            syn::FnArg::Typed(t) => t,
        };
        let name = match &*typed.pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                if let Some(m) = &pi.mutability {
                    self.diags.error_help(
                        Sp::of(m),
                        "kernel parameters are immutable",
                        format!("remove `mut` and shadow it instead: `let mut {0} = {0};`", pi.ident),
                    );
                }
                pi.ident.clone()
            }
            other => {
                self.unsupported_help(
                    other,
                    "a pattern in parameter position",
                    "name each parameter: `x: *const f32`",
                );
                return None;
            }
        };
        let ty = self.param_type(&typed.ty);
        let elem_param = match (&*typed.ty, ty) {
            (syn::Type::Ptr(p), ParamTy::Ptr { .. }) => match &*p.elem {
                syn::Type::Path(tp) => {
                    tp.path.get_ident().filter(|id| self.type_param_type(id).is_some()).cloned()
                }
                _ => None,
            },
            _ => None,
        };
        Some(ParamDecl { name, ty, elem_param })
    }

    fn param_type(&mut self, ty: &syn::Type) -> ParamTy {
        const HELP: &str = "parameters are `*const T` (read-only buffer), `*mut T` (writable buffer) with T in f32 f16 bf16 i32 i64 u32 u64 u8 i8, or scalars i32 i64 u32 u64 f32";
        match ty {
            syn::Type::Ptr(p) => {
                let Some(elem) = self.elem_name(&p.elem) else {
                    return ParamTy::Invalid;
                };
                if let Some(bound) = self.type_param_type(&elem) {
                    return match bound {
                        Some(dtype) => ParamTy::Ptr { elem: dtype, mutable: p.mutability.is_some() },
                        None => ParamTy::Invalid,
                    };
                }
                match DType::from_name(&elem.to_string()) {
                    Some(DType::Bool) => {
                        self.diags.error_help(
                            Sp::of(&p.elem),
                            "bool buffers are not supported",
                            "store flags as `u8`",
                        );
                        ParamTy::Invalid
                    }
                    Some(dtype) => ParamTy::Ptr { elem: dtype, mutable: p.mutability.is_some() },
                    None => {
                        let help = if elem == "f64" {
                            "f64 is not supported: store data as f32 (or f16/bf16)".to_string()
                        } else {
                            format!(
                                "pointers point at f32 f16 bf16 i32 i64 u32 u64 u8 or i8{}",
                                self.type_param_list()
                            )
                        };
                        self.diags.error_help(
                            Sp::of(&elem),
                            format!("unsupported pointer element type `{elem}`"),
                            help,
                        );
                        ParamTy::Invalid
                    }
                }
            }
            syn::Type::Path(tp) if tp.qself.is_none() && tp.path.get_ident().is_some() => {
                let Some(ident) = tp.path.get_ident() else { return ParamTy::Invalid };
                if let Some(bound) = self.type_param_type(ident) {
                    if bound.is_some() {
                        self.diags.error_help(
                            Sp::of(ident),
                            format!("a scalar parameter cannot have the type parameter `{ident}` as its type"),
                            "scalar parameters are i32, i64, u32, u64 or f32 (a float scalar is f32 for every element type: values of f16 and bf16 are computed in f32)",
                        );
                    }
                    return ParamTy::Invalid;
                }
                match DType::from_name(&ident.to_string()) {
                    Some(d @ (DType::I32 | DType::I64 | DType::U32 | DType::U64 | DType::F32)) => {
                        ParamTy::Scalar(d)
                    }
                    Some(d) => {
                        self.diags.error_help(
                            Sp::of(ident),
                            format!("`{d}` scalar parameters are not supported"),
                            "scalar parameters are i32, i64, u32, u64 or f32",
                        );
                        ParamTy::Invalid
                    }
                    None if ident == "f64" => {
                        self.diags.error_help(
                            Sp::of(ident),
                            "unsupported parameter type `f64`",
                            "f64 is not supported: use f32",
                        );
                        ParamTy::Invalid
                    }
                    None => {
                        self.diags.error_help(
                            Sp::of(ty),
                            format!("unsupported parameter type `{ident}`"),
                            HELP,
                        );
                        ParamTy::Invalid
                    }
                }
            }
            syn::Type::Reference(r) => {
                let mutable = r.mutability.is_some();
                let elem_hint = match &*r.elem {
                    syn::Type::Slice(s) => compact(&s.elem),
                    other => compact(other),
                };
                let kind = if mutable { "*mut" } else { "*const" };
                self.diags.error_help(
                    Sp::of(ty),
                    "unsupported parameter type: references are not kernel parameters",
                    format!("take a pointer, `{kind} {elem_hint}`; the launcher takes `&{}fuse::Buffer<{elem_hint}>`", if mutable { "mut " } else { "" }),
                );
                ParamTy::Invalid
            }
            other => {
                self.diags.error_help(
                    Sp::of(other),
                    format!("unsupported parameter type `{}`", compact(other)),
                    HELP,
                );
                ParamTy::Invalid
            }
        }
    }

    /// The element type name of a pointer, reporting anything that is not a bare type name.
    fn elem_name(&mut self, ty: &syn::Type) -> Option<Ident> {
        match ty {
            syn::Type::Path(tp) if tp.qself.is_none() => {
                if let Some(id) = tp.path.get_ident() {
                    return Some(id.clone());
                }
                self.diags.error_help(
                    Sp::of(ty),
                    format!("unsupported pointer element type `{}`", compact(&tp.path)),
                    "pointers point at f32 f16 bf16 i32 i64 u32 u64 u8 or i8",
                );
                None
            }
            other => {
                self.diags.error_help(
                    Sp::of(other),
                    format!("unsupported pointer element type `{}`", compact(other)),
                    "pointers point at f32 f16 bf16 i32 i64 u32 u64 u8 or i8",
                );
                None
            }
        }
    }

    fn block(&mut self, block: &syn::Block) -> Block {
        let mut stmts = Vec::new();
        for stmt in &block.stmts {
            if let Some(s) = self.stmt(stmt) {
                stmts.push(s);
            }
        }
        Block { stmts }
    }

    fn stmt(&mut self, stmt: &syn::Stmt) -> Option<Stmt> {
        match stmt {
            syn::Stmt::Local(local) => self.local(local),
            syn::Stmt::Item(item) => {
                self.unsupported(item, "an item declaration inside a kernel");
                None
            }
            syn::Stmt::Macro(m) => {
                let sp = Sp::of(&m.mac.path).to(Sp::of(&m.mac.bang_token));
                self.diags.error_help(
                    sp,
                    unsupported("a macro invocation"),
                    "kernels cannot print or call macros",
                );
                None
            }
            // A stray `;` (syn keeps it as an empty expression statement): Rust allows it.
            syn::Stmt::Expr(syn::Expr::Verbatim(v), Some(_)) if v.is_empty() => None,
            syn::Stmt::Expr(e, semi) => self.expr_stmt(e, semi.is_some()),
        }
    }

    fn local(&mut self, local: &syn::Local) -> Option<Stmt> {
        if let syn::Pat::Tuple(t) = &local.pat {
            return self.local_pair(local, t);
        }
        let (name, mutable) = match (plain_name(&local.pat), &local.pat) {
            (Some(plain), _) => plain,
            (None, syn::Pat::Type(pt)) => {
                self.unsupported_help(
                    &pt.ty,
                    "a type annotation on `let`",
                    "types are inferred; convert explicitly with `.to(f32)` or `as f32`",
                );
                match &*pt.pat {
                    syn::Pat::Ident(pi) => (pi.ident.clone(), pi.mutability.is_some()),
                    _ => return None,
                }
            }
            (None, other) => {
                self.unsupported_help(other, "a destructuring pattern", "bind one name per `let`");
                return None;
            }
        };
        let init = self.let_init(local, &format!("let {name}"), &format!("let {name} = ...;"));
        Some(Stmt::Let { name, mutable, init })
    }

    /// The initial value of a `let` (an error expression, reported, if it has none; `let ...
    /// else` reported as unsupported).
    fn let_init(&mut self, local: &syn::Local, what: &str, example: &str) -> Expr {
        let sp = Sp::of(local);
        let Some(init) = &local.init else {
            self.diags.error_help(
                sp,
                format!("`{what}` needs an initial value"),
                format!("write `{example}`"),
            );
            return Expr { kind: ExprKind::Error, sp };
        };
        if let Some((_, diverge)) = &init.diverge {
            self.unsupported(diverge, "`let ... else`");
        }
        self.expr(&init.expr)
    }

    /// `let (a, b) = init;` (the checker takes it for `split` alone).
    fn local_pair(&mut self, local: &syn::Local, t: &syn::PatTuple) -> Option<Stmt> {
        let names: Vec<(Ident, bool)> = t.elems.iter().filter_map(plain_name).collect();
        let pair = <[(Ident, bool); 2]>::try_from(names).ok().filter(|_| t.elems.len() == 2);
        let Some([a, b]) = pair else {
            self.unsupported_help(
                t,
                "this destructuring pattern",
                "a tuple `let` binds two names to `split`'s halves: `let (even, odd) = split(x);`",
            );
            return None;
        };
        let init = self.let_init(local, "let (..)", "let (even, odd) = split(x);");
        Some(Stmt::LetPair { names: [a, b], init })
    }

    fn expr_stmt(&mut self, e: &syn::Expr, semi: bool) -> Option<Stmt> {
        let sp = Sp::of(e);
        match e {
            syn::Expr::Assign(a) => {
                let target = self.assign_target(&a.left)?;
                Some(Stmt::Assign { target, op: None, value: self.expr(&a.right), sp })
            }
            syn::Expr::Binary(b) if compound_op(&b.op).is_some() => {
                let target = self.assign_target(&b.left)?;
                let op = compound_op(&b.op).map(|op| (op, Sp::of(&b.op)));
                Some(Stmt::Assign { target, op, value: self.expr(&b.right), sp })
            }
            syn::Expr::If(i) => self.if_stmt(i).map(Stmt::If),
            syn::Expr::ForLoop(f) => self.for_loop(f),
            _ => Some(Stmt::Expr { expr: self.expr(e), semi }),
        }
    }

    fn assign_target(&mut self, e: &syn::Expr) -> Option<Ident> {
        match e {
            syn::Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
                p.path.get_ident().cloned()
            }
            syn::Expr::Index(_) => {
                self.unsupported_help(
                    e,
                    "assignment through an index",
                    "write memory with `store(ptr + offs, value, mask)`",
                );
                None
            }
            syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => {
                self.unsupported_help(
                    e,
                    "assignment through `*`",
                    "write memory with `store(ptr + offs, value, mask)`",
                );
                None
            }
            _ => {
                self.unsupported_help(
                    e,
                    "this assignment target",
                    "assign to a variable declared with `let mut`",
                );
                None
            }
        }
    }

    fn if_stmt(&mut self, i: &syn::ExprIf) -> Option<If> {
        if let syn::Expr::Let(l) = &*i.cond {
            self.unsupported(l, "`if let`");
            return None;
        }
        let cond = self.expr(&i.cond);
        let then_body = self.block(&i.then_branch);
        let else_branch = match &i.else_branch {
            None => None,
            Some((_, e)) => match &**e {
                syn::Expr::If(inner) => self.if_stmt(inner).map(|x| Else::If(Box::new(x))),
                syn::Expr::Block(b) => Some(Else::Block(self.block(&b.block))),
                other => {
                    self.unsupported(other, "this `else` branch");
                    None
                }
            },
        };
        Some(If { cond, then_body, else_branch })
    }

    fn for_loop(&mut self, f: &syn::ExprForLoop) -> Option<Stmt> {
        let sp = Sp::of(f);
        if let Some(label) = &f.label {
            self.unsupported(label, "a loop label");
        }
        let var = match &*f.pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() && pi.mutability.is_none() => {
                pi.ident.clone()
            }
            syn::Pat::Ident(pi) if pi.mutability.is_some() => {
                self.diags.error_help(
                    Sp::of(&pi.mutability),
                    "a `for` loop variable cannot be `mut`",
                    format!("copy it: `let mut {0} = {0};`", pi.ident),
                );
                pi.ident.clone()
            }
            syn::Pat::Wild(w) => Ident::new("_", w.span()),
            other => {
                self.unsupported_help(other, "this loop pattern", "write `for i in a..b`");
                return None;
            }
        };
        let body = self.block(&f.body);
        let (start, end, step) = self.loop_range(&f.expr)?;
        Some(Stmt::For { var, start, end, step, body, sp })
    }

    /// `a..b` or `(a..b).step_by(s)`.
    fn loop_range(&mut self, e: &syn::Expr) -> Option<(Expr, Expr, Option<Expr>)> {
        const HELP: &str = "loops are `for i in a..b` or `for i in (a..b).step_by(s)`";
        match e {
            syn::Expr::Range(r) => self.range(r).map(|(a, b)| (a, b, None)),
            syn::Expr::Paren(p) => self.loop_range(&p.expr),
            syn::Expr::MethodCall(m)
                if m.method == "step_by" && m.args.len() == 1 && m.turbofish.is_none() =>
            {
                let (a, b, inner_step) = self.loop_range(&m.receiver)?;
                if inner_step.is_some() {
                    self.diags.error_help(Sp::of(&m.method), "`step_by` applied twice", HELP);
                }
                let step = m.args.first().map(|s| self.expr(s));
                Some((a, b, step))
            }
            syn::Expr::MethodCall(m) => {
                self.unsupported_help(&m.method, &format!("`.{}()` on a loop range", m.method), HELP);
                None
            }
            other => {
                self.unsupported_help(other, "this loop iterator", HELP);
                None
            }
        }
    }

    fn range(&mut self, r: &syn::ExprRange) -> Option<(Expr, Expr)> {
        if let syn::RangeLimits::Closed(t) = &r.limits {
            self.unsupported_help(t, "an inclusive range `..=`", "write `a..b + 1`");
        }
        match (&r.start, &r.end) {
            (Some(a), Some(b)) => Some((self.expr(a), self.expr(b))),
            _ => {
                self.unsupported_help(r, "an open range", "write both bounds: `a..b`");
                None
            }
        }
    }

    fn expr(&mut self, e: &syn::Expr) -> Expr {
        let sp = Sp::of(e);
        let kind = self.expr_kind(e);
        Expr { kind, sp }
    }

    fn expr_kind(&mut self, e: &syn::Expr) -> ExprKind {
        use syn::Expr as E;
        match e {
            E::Lit(l) => self.literal(&l.lit),
            E::Path(p) => self.path(p),
            E::Paren(p) => self.expr(&p.expr).kind,
            E::Group(g) => self.expr(&g.expr).kind,
            E::Unary(u) => self.unary_expr(u),
            E::Binary(b) => self.binary_expr(b),
            E::Call(c) => self.call_expr(c),
            E::MethodCall(m) => self.method_call_expr(m),
            E::Cast(c) => {
                let Some(to) = self.cast_target_type(&c.ty) else { return ExprKind::Error };
                ExprKind::Cast { expr: Box::new(self.expr(&c.expr)), to }
            }
            // `[M, N]` is a shape; where a shape is not expected the checker says so.
            E::Array(a) => ExprKind::Shape(a.elems.iter().map(|x| self.expr(x)).collect()),
            _ => self.unsupported_expr(e),
        }
    }

    /// `-x` or `!x` (a `*` dereference is an error).
    fn unary_expr(&mut self, u: &syn::ExprUnary) -> ExprKind {
        let op = match u.op {
            syn::UnOp::Neg(_) => UnaryKind::Neg,
            syn::UnOp::Not(_) => UnaryKind::Not,
            _ => {
                self.unsupported_help(
                    &u.op,
                    "dereferencing with `*`",
                    "read memory with `load(ptr + offs, mask)`",
                );
                return ExprKind::Error;
            }
        };
        ExprKind::Unary { op, expr: Box::new(self.expr(&u.expr)) }
    }

    fn binary_expr(&mut self, b: &syn::ExprBinary) -> ExprKind {
        let Some(op) = self.binary_op(&b.op) else { return ExprKind::Error };
        ExprKind::Binary {
            op,
            op_sp: Sp::of(&b.op),
            lhs: Box::new(self.expr(&b.left)),
            rhs: Box::new(self.expr(&b.right)),
        }
    }

    /// A call of a function by its bare name (a path or a computed callee is an error).
    fn call_expr(&mut self, c: &syn::ExprCall) -> ExprKind {
        use syn::Expr as E;
        let func = match &*c.func {
            E::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => p.path.get_ident().cloned(),
            E::Path(p) => {
                let last = p.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
                self.diags.error_help(
                    Sp::of(&c.func),
                    "unsupported syntax: a path call is not part of the fuse tile language",
                    format!("call tile-language functions by their bare name: `{last}(..)`"),
                );
                None
            }
            other => {
                self.unsupported(other, "calling this expression");
                None
            }
        };
        let args = c.args.iter().map(|a| self.expr(a)).collect();
        match func {
            Some(func) => ExprKind::Call { func, args, method: false },
            None => ExprKind::Error,
        }
    }

    /// `x.to(T)`, or method sugar: `x.f(args)` is `f(x, args)`.
    fn method_call_expr(&mut self, m: &syn::ExprMethodCall) -> ExprKind {
        if let Some(t) = &m.turbofish {
            self.unsupported(t, "a turbofish `::<>`");
            return ExprKind::Error;
        }
        if m.method == "to" {
            if m.args.len() != 1 {
                self.diags.error_help(Sp::of(&m.method), "`.to(..)` takes one type", "write `x.to(f32)`");
                return ExprKind::Error;
            }
            let Some(to) = m.args.first().and_then(|t| self.cast_target_expr(t)) else {
                return ExprKind::Error;
            };
            return ExprKind::Cast { expr: Box::new(self.expr(&m.receiver)), to };
        }
        if m.method == "step_by" {
            self.unsupported_help(
                &m.method,
                "`step_by` outside a `for` header",
                "write `for i in (a..b).step_by(s)`",
            );
            return ExprKind::Error;
        }
        let mut args = vec![self.expr(&m.receiver)];
        args.extend(m.args.iter().map(|a| self.expr(a)));
        ExprKind::Call { func: m.method.clone(), args, method: true }
    }

    /// The error for an expression the tile language does not have (`if` as a value, indexing,
    /// closures, `return`, ...), at the token that introduces it.
    fn unsupported_expr(&mut self, e: &syn::Expr) -> ExprKind {
        use syn::Expr as E;
        match e {
            // Unsupported syntax is reported at the token that introduces it (`match`, `|..|`,
            // `return`, ...), not across the whole construct.
            E::If(i) => {
                self.diags.error_help(
                    Sp::of(&i.if_token),
                    "unsupported syntax: `if` as a value is not part of the fuse tile language",
                    "select per lane with `where_(cond, a, b)`",
                );
                ExprKind::Error
            }
            E::Index(i) => {
                let brackets = Sp::single(i.bracket_token.span.join());
                self.diags.error_help(
                    brackets,
                    unsupported("indexing `a[i]`"),
                    "read memory with `load(ptr + offs, mask)`",
                );
                ExprKind::Error
            }
            E::Reference(r) => {
                let sp = match &r.mutability {
                    Some(m) => Sp::of(&r.and_token).to(Sp::of(m)),
                    None => Sp::of(&r.and_token),
                };
                self.diags.error_help(
                    sp,
                    unsupported("a reference `&x`"),
                    "pointer arithmetic is `ptr + offs`; values are used directly",
                );
                ExprKind::Error
            }
            E::Closure(c) => self.reject_at(
                Sp::of(&c.or1_token).to(Sp::of(&c.or2_token)),
                "a closure",
                Some("compute inline, or bind the value with `let`"),
            ),
            E::Match(m) => self.reject_at(
                Sp::of(&m.match_token),
                "`match`",
                Some("use `if`/`else` or `where_(cond, a, b)`"),
            ),
            E::Struct(st) => self.reject_at(
                Sp::of(&st.path),
                "a struct literal",
                Some("kernels work on scalars and tiles; pass each field as its own parameter"),
            ),
            E::Async(a) => self.reject_at(Sp::of(&a.async_token), "an `async` block", None),
            E::Await(a) => self.reject_at(Sp::of(&a.await_token), "`.await`", None),
            E::Return(r) if r.expr.is_some() => {
                self.diags.error_help(
                    Sp::of(&r.return_token),
                    "a kernel cannot return a value",
                    "write results through a `*mut` parameter with `store(ptr, value, mask)`",
                );
                // The value stands in for the `return`, so its own (independent) mistakes are
                // still checked; no code is generated after an error.
                match &r.expr {
                    Some(v) => self.expr(v).kind,
                    None => ExprKind::Error,
                }
            }
            E::Return(r) => self.reject_at(
                Sp::of(&r.return_token),
                "`return`",
                Some("a kernel runs to the end of its body; guard work with `if` or masks"),
            ),
            E::Break(b) => self.reject_at(
                Sp::of(&b.break_token),
                "`break`",
                Some("loops run their whole range; guard work with `if`"),
            ),
            E::Continue(c) => self.reject_at(
                Sp::of(&c.continue_token),
                "`continue`",
                Some("guard the rest of the body with `if`"),
            ),
            E::While(w) => self.reject_at(
                Sp::of(&w.while_token),
                "a `while` loop",
                Some("write `for i in a..b` or `for i in (a..b).step_by(s)`"),
            ),
            E::Loop(l) => self.reject_at(Sp::of(&l.loop_token), "`loop`", Some("write `for i in a..b`")),
            E::ForLoop(f) => self.reject_at(Sp::of(&f.for_token), "a `for` loop used as a value", None),
            E::Macro(m) => self.reject_at(
                Sp::of(&m.mac.path).to(Sp::of(&m.mac.bang_token)),
                "a macro invocation",
                Some("kernels cannot print or call macros"),
            ),
            E::Tuple(_) => self.reject(e, "a tuple"),
            E::Repeat(_) => self.reject_help(e, "an array", "make tiles with `arange`, `zeros` or `full`"),
            E::Field(f) => self.reject_at(Sp::of(&f.dot_token).to(Sp::of(&f.member)), "field access", None),
            E::Block(_) => self.reject(e, "a block expression"),
            E::Unsafe(u) => self.reject_at(
                Sp::of(&u.unsafe_token),
                "an `unsafe` block",
                Some("kernels are checked; remove `unsafe`"),
            ),
            E::Try(t) => self.reject_at(Sp::of(&t.question_token), "the `?` operator", None),
            E::TryBlock(t) => self.reject_at(Sp::of(&t.try_token), "a `try` block", None),
            E::Let(l) => self.reject_at(Sp::of(&l.let_token), "`let` in an expression", None),
            E::Range(r) => self.reject_at(
                Sp::of(&r.limits),
                "a range outside a `for` header",
                Some("ranges only appear in `for i in a..b`; for a tile use `arange(a, b)`"),
            ),
            E::Assign(a) => self.reject_at(
                Sp::of(&a.eq_token),
                "an assignment used as a value",
                Some("assign in its own statement"),
            ),
            E::Yield(y) => self.reject_at(Sp::of(&y.yield_token), "`yield`", None),
            E::Const(c) => self.reject_at(Sp::of(&c.const_token), "a `const` block", None),
            E::Infer(_) => self.reject(e, "`_`"),
            _ => self.reject(e, "this expression"),
        }
    }

    fn reject_at(&mut self, sp: Sp, what: &str, help: Option<&str>) -> ExprKind {
        match help {
            Some(help) => self.diags.error_help(sp, unsupported(what), help),
            None => self.diags.error(sp, unsupported(what)),
        }
        ExprKind::Error
    }

    fn reject(&mut self, e: &syn::Expr, what: &str) -> ExprKind {
        self.unsupported(e, what);
        ExprKind::Error
    }

    fn reject_help(&mut self, e: &syn::Expr, what: &str, help: &str) -> ExprKind {
        self.unsupported_help(e, what, help);
        ExprKind::Error
    }

    fn literal(&mut self, lit: &syn::Lit) -> ExprKind {
        match lit {
            syn::Lit::Int(i) => {
                let Some(suffix) = self.literal_suffix(lit, i.suffix()) else { return ExprKind::Error };
                if suffix.is_some_and(DType::is_float) {
                    return match i.base10_parse::<u64>() {
                        Ok(v) => ExprKind::Float { value: v as f64, suffix },
                        Err(e) => self.lit_error(lit, e),
                    };
                }
                match i.base10_parse::<u64>() {
                    Ok(value) => ExprKind::Int { value, suffix },
                    Err(e) => self.lit_error(lit, e),
                }
            }
            syn::Lit::Float(f) => {
                let Some(suffix) = self.literal_suffix(lit, f.suffix()) else { return ExprKind::Error };
                if suffix.is_some_and(|d| !d.is_float()) {
                    self.diags.error(Sp::of(lit), "a float literal cannot have an integer suffix");
                    return ExprKind::Error;
                }
                match f.base10_parse::<f64>() {
                    Ok(value) => ExprKind::Float { value, suffix },
                    Err(e) => self.lit_error(lit, e),
                }
            }
            syn::Lit::Bool(b) => ExprKind::Bool(b.value),
            syn::Lit::Str(_) => {
                self.unsupported(lit, "a string literal");
                ExprKind::Error
            }
            _ => {
                self.unsupported(lit, "this literal");
                ExprKind::Error
            }
        }
    }

    fn lit_error(&mut self, lit: &syn::Lit, e: syn::Error) -> ExprKind {
        self.diags.error(Sp::of(lit), format!("invalid literal: {e}"));
        ExprKind::Error
    }

    /// `Some(None)`: no suffix; `Some(Some(t))`: a supported suffix; `None`: rejected.
    fn literal_suffix(&mut self, lit: &syn::Lit, suffix: &str) -> Option<Option<DType>> {
        if suffix.is_empty() {
            return Some(None);
        }
        match DType::from_name(suffix) {
            Some(d) if d.is_compute() && d != DType::Bool => Some(Some(d)),
            _ => {
                self.diags.error_help(
                    Sp::of(lit),
                    format!("unsupported literal suffix `{suffix}`"),
                    "literal suffixes are i32 i64 u32 u64 f32; unsuffixed literals take the type of the other operand",
                );
                None
            }
        }
    }

    fn path(&mut self, p: &syn::ExprPath) -> ExprKind {
        if p.qself.is_none() {
            if let Some(id) = p.path.get_ident() {
                if let Some(bound) = self.type_param_type(id) {
                    if bound.is_some() {
                        self.diags.error_help(
                            Sp::of(id),
                            format!("`{id}` is a type parameter, not a value"),
                            format!("convert with `x.to({id})`, or take a constant of it: `{id}::MAX`"),
                        );
                    }
                    return ExprKind::Error;
                }
                return ExprKind::Name(id.clone());
            }
            let segs: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
            if p.path.leading_colon.is_none() && p.path.segments.iter().all(|s| s.arguments.is_none()) {
                if let (Some(ty), [_, name]) = (p.path.segments.first(), segs.as_slice()) {
                    let dtype = match self.type_param_type(&ty.ident) {
                        Some(None) => return ExprKind::Error,
                        Some(Some(d)) => Some(d),
                        None => DType::from_name(&ty.ident.to_string()).filter(|d| d.is_float()),
                    };
                    if let Some(d) = dtype {
                        if let Some(value) = float_const(d, name) {
                            return ExprKind::Float { value, suffix: None };
                        }
                        let ty = &segs[0];
                        self.diags.error_help(
                            Sp::of(p),
                            format!("unsupported syntax: the constant `{ty}::{name}` is not part of the fuse tile language"),
                            format!("the float constants are `{ty}::INFINITY`, `{ty}::NEG_INFINITY`, `{ty}::NAN`, `{ty}::MAX`, `{ty}::MIN`, `{ty}::MIN_POSITIVE` and `{ty}::EPSILON`"),
                        );
                        return ExprKind::Error;
                    }
                }
            }
            self.diags.error_help(
                Sp::of(p),
                format!("unsupported syntax: the path `{}` is not part of the fuse tile language", segs.join("::")),
                "the only paths are float constants like `f32::INFINITY`, `f16::MAX` or `T::MAX`; name variables, parameters and const generics directly",
            );
            return ExprKind::Error;
        }
        self.unsupported(p, "a qualified path");
        ExprKind::Error
    }

    fn binary_op(&mut self, op: &syn::BinOp) -> Option<BinaryKind> {
        use syn::BinOp as B;
        Some(BinaryKind::Op(match op {
            B::Add(_) => BinaryOp::Add,
            B::Sub(_) => BinaryOp::Sub,
            B::Mul(_) => BinaryOp::Mul,
            B::Div(_) => BinaryOp::Div,
            B::Rem(_) => BinaryOp::Rem,
            B::BitAnd(_) => BinaryOp::And,
            B::BitOr(_) => BinaryOp::Or,
            B::BitXor(_) => BinaryOp::Xor,
            B::Lt(_) => BinaryOp::Lt,
            B::Le(_) => BinaryOp::Le,
            B::Gt(_) => BinaryOp::Gt,
            B::Ge(_) => BinaryOp::Ge,
            B::Eq(_) => BinaryOp::Eq,
            B::Ne(_) => BinaryOp::Ne,
            B::And(_) => return Some(BinaryKind::LogicalAnd),
            B::Or(_) => return Some(BinaryKind::LogicalOr),
            B::Shl(_) | B::Shr(_) | B::ShlAssign(_) | B::ShrAssign(_) => {
                self.unsupported_help(op, "a shift operator", "multiply or divide by a power of two");
                return None;
            }
            _ => {
                self.unsupported_help(
                    op,
                    "a compound assignment inside an expression",
                    "assign in its own statement: `x += y;`",
                );
                return None;
            }
        }))
    }

    /// The type argument of `.to(T)`, which syn sees as an expression.
    fn cast_target_expr(&mut self, e: &syn::Expr) -> Option<DType> {
        match e {
            syn::Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
                let id = p.path.get_ident()?;
                self.dtype_name(id)
            }
            other => {
                self.diags.error_help(Sp::of(other), "`.to(..)` takes a type name", "write `x.to(f32)`");
                None
            }
        }
    }

    fn cast_target_type(&mut self, ty: &syn::Type) -> Option<DType> {
        match ty {
            syn::Type::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
                let id = p.path.get_ident()?;
                self.dtype_name(id)
            }
            other => {
                self.diags.error_help(
                    Sp::of(other),
                    "unsupported cast target",
                    "cast to a type name: `x as f32`",
                );
                None
            }
        }
    }

    fn dtype_name(&mut self, id: &Ident) -> Option<DType> {
        if let Some(bound) = self.type_param_type(id) {
            // `None`: a rejected type parameter, already reported.
            return bound;
        }
        let name = id.to_string();
        let found = DType::from_name(&name);
        if found.is_none() {
            let help = match name.as_str() {
                "f64" => "f64 is not supported; use f32".to_string(),
                "usize" | "isize" => "use i32 or i64".to_string(),
                _ => {
                    format!("the types are bool i8 u8 i32 u32 i64 u64 f16 bf16 f32{}", self.type_param_list())
                }
            };
            self.diags.error_help(Sp::of(id), format!("unsupported cast target `{name}`"), help);
        }
        found
    }
}

/// Tokens as users write them: `Vec<f32>`, not `Vec < f32 >`.
fn compact(node: &impl ToTokens) -> String {
    let mut s = node.to_token_stream().to_string();
    for (from, to) in [
        (" < ", "<"),
        ("< ", "<"),
        (" <", "<"),
        (" >", ">"),
        (" :: ", "::"),
        (" ,", ","),
        ("& ", "&"),
        ("* ", "*"),
        ("? ", "?"),
    ] {
        s = s.replace(from, to);
    }
    s
}

fn compound_op(op: &syn::BinOp) -> Option<BinaryOp> {
    match op {
        syn::BinOp::AddAssign(_) => Some(BinaryOp::Add),
        syn::BinOp::SubAssign(_) => Some(BinaryOp::Sub),
        syn::BinOp::MulAssign(_) => Some(BinaryOp::Mul),
        syn::BinOp::DivAssign(_) => Some(BinaryOp::Div),
        syn::BinOp::RemAssign(_) => Some(BinaryOp::Rem),
        syn::BinOp::BitAndAssign(_) => Some(BinaryOp::And),
        syn::BinOp::BitOrAssign(_) => Some(BinaryOp::Or),
        syn::BinOp::BitXorAssign(_) => Some(BinaryOp::Xor),
        _ => None,
    }
}

/// `name` or `mut name` (no `ref`, no `@` subpattern): the name and whether it is `mut`.
fn plain_name(p: &syn::Pat) -> Option<(Ident, bool)> {
    match p {
        syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
            Some((pi.ident.clone(), pi.mutability.is_some()))
        }
        _ => None,
    }
}
