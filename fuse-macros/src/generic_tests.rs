//! Generic kernels (`fn k<T: Float, ..>`): each instantiation is the kernel of concrete types it
//! stands for, the module has one submodule per instantiation and one generic launcher, and
//! misuse of a type parameter is one spanned error, reported once however many instantiations
//! share it.
//!
//! Sources are parsed from strings so spans carry real positions (see `tests.rs`).

use crate::{check, diag::Diags, emit_cuda, expand, generic, parse};
use fuse_ir::{DType, Kernel};
use proc_macro2::TokenStream;

fn tokens(src: &str) -> TokenStream {
    src.parse().unwrap_or_else(|e| panic!("test source does not lex: {e}"))
}

fn item(src: &str) -> syn::ItemFn {
    syn::parse2(tokens(src)).unwrap_or_else(|e| panic!("test source is not a fn: {e}"))
}

/// The kernel of concrete types, checked as `#[fused_kernel]` checks it, under the name `entry`.
fn concrete(src: &str, entry: &str) -> Kernel {
    let mut diags = Diags::default();
    let f = parse::parse_kernel(&item(src), &mut diags);
    let k = check::check_instance(&f, entry, &mut diags);
    assert!(diags.combined().is_none(), "the concrete kernel must check:\n{src}");
    k
}

/// Every instantiation, which must all check.
fn instances(src: &str) -> generic::Generic {
    let mut diags = Diags::default();
    let g = generic::instantiate(&item(src), &mut diags);
    if let Some(e) = diags.combined() {
        let msgs: Vec<String> = e.into_iter().map(|e| e.to_string()).collect();
        panic!("expected the generic kernel to check, got:\n{}", msgs.join("\n"));
    }
    g
}

/// (message, source text under the span) of every error of the expanded kernel.
fn errors(src: &str) -> Vec<(String, String)> {
    let mut diags = Diags::default();
    generic::instantiate(&item(src), &mut diags);
    match diags.combined() {
        None => panic!("expected errors, the kernel checked:\n{src}"),
        Some(e) => crate::tests::spanned(e),
    }
}

/// Exactly one error, whose message contains `msg` and whose span covers exactly `text`.
#[track_caller]
fn one_error(src: &str, msg: &str, text: &str) {
    crate::tests::assert_one_error(&errors(src), msg, text);
}

/// The example `add_mul` (fuse-kernels/src/add_mul.rs), generic over `T: Float`.
fn add_mul() -> String {
    crate::tests::example_fn(crate::tests::ADD_MUL_FILE, "add_mul")
}

/// A kernel of two type parameters: a row's sum of squares in `T`, written out in `O`.
const SUMSQ: &str = r#"
fn sumsq<T: Float, O: Half, const BLOCK: usize>(x: *const T, out: *mut O, scale: f32, n: i32) {
    let cols = arange(0, BLOCK);
    let v = load(x + program_id(0) * n + cols, cols < n, 0.0);
    let s = sum(v * v).to(O) * scale;
    store(out + program_id(0), s);
}"#;

#[test]
fn each_instantiation_is_the_kernel_of_its_element_type() {
    let g = instances(&add_mul());
    let got: Vec<(&str, &str)> =
        g.instances.iter().map(|i| (i.suffix.as_str(), i.kernel.name.as_str())).collect();
    assert_eq!(got, [("f32", "add_mul_f32"), ("f16", "add_mul_f16"), ("bf16", "add_mul_bf16")]);
    for inst in &g.instances {
        let dtype = inst.binding[0].1;
        let src = add_mul()
            .replace("<T: Float, ", "<")
            .replace("*const T", &format!("*const {dtype}"))
            .replace("*mut T", &format!("*mut {dtype}"));
        let want = concrete(&src, &inst.kernel.name);
        assert_eq!(inst.kernel, want, "T = {dtype}: the IR");
        assert_eq!(emit_cuda::emit_cuda(&inst.kernel).source, emit_cuda::emit_cuda(&want).source);
    }
}

#[test]
fn several_type_parameters_instantiate_their_cross_product() {
    let g = instances(SUMSQ);
    let suffixes: Vec<&str> = g.instances.iter().map(|i| i.suffix.as_str()).collect();
    assert_eq!(suffixes, ["f32_f16", "f32_bf16", "f16_f16", "f16_bf16", "bf16_f16", "bf16_bf16"]);
    for inst in &g.instances {
        let (t, o) = (inst.binding[0].1, inst.binding[1].1);
        assert_eq!(inst.kernel.name, format!("sumsq_{t}_{o}"));
        let elems: Vec<DType> = inst
            .kernel
            .params
            .iter()
            .filter_map(|p| match p.kind {
                fuse_ir::ParamKind::Ptr { elem, .. } => Some(elem),
                _ => None,
            })
            .collect();
        assert_eq!(elems, [t, o]);
    }
    let text = expand::fused_kernel(TokenStream::new(), tokens(SUMSQ)).to_string();
    // The first type parameter selects outermost, in the order of the bound's element types.
    let select = "< T as :: fuse :: Float > :: select (< O as :: fuse :: Half > :: select_half (& self :: f32_f16 :: SPEC , & self :: f32_bf16 :: SPEC) , < O as :: fuse :: Half > :: select_half (& self :: f16_f16 :: SPEC , & self :: f16_bf16 :: SPEC) , < O as :: fuse :: Half > :: select_half (& self :: bf16_f16 :: SPEC , & self :: bf16_bf16 :: SPEC))";
    assert!(text.contains(select), "{text}");
    assert!(
        text.contains("pub fn launch < T : :: fuse :: Float , O : :: fuse :: Half , const BLOCK : usize >")
    );
}

#[test]
fn expands_to_instance_modules_and_one_generic_launcher() {
    let out =
        expand::fused_kernel(TokenStream::new(), tokens(&format!("/// Adds and multiplies.\n{}", add_mul())));
    let module: syn::ItemMod =
        syn::parse2(out.clone()).unwrap_or_else(|e| panic!("not a module: {e}\n{out}"));
    assert_eq!(module.ident, "add_mul");
    assert!(module.attrs.iter().any(|a| a.path().is_ident("doc")));
    let items = &module.content.as_ref().expect("inline module").1;
    let submodules: Vec<String> = items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Mod(m) => Some(m.ident.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(submodules, ["f32", "f16", "bf16"]);
    let text = out.to_string();
    for needle in [
        "pub mod f16 {",
        "pub const NAME : & str = \"add_mul_f16\"",
        "pub static SPEC : :: fuse :: KernelSpec = :: fuse :: KernelSpec :: new (NAME , SOURCE , IR_JSON , & [",
        "pub fn spec < T : :: fuse :: Float > () -> & 'static :: fuse :: KernelSpec { < T as :: fuse :: Float > :: select (& self :: f32 :: SPEC , & self :: f16 :: SPEC , & self :: bf16 :: SPEC) }",
        "pub fn launch < T : :: fuse :: Float , const BLOCK : usize > (device : & :: fuse :: Device , config : impl :: core :: convert :: Into < :: fuse :: LaunchConfig > , x : & (impl :: fuse :: DeviceRead < T > + ? :: core :: marker :: Sized) , y : & (impl :: fuse :: DeviceRead < T > + ? :: core :: marker :: Sized) , z : & (impl :: fuse :: DeviceRead < T > + ? :: core :: marker :: Sized) , out : & mut (impl :: fuse :: DeviceWrite < T > + ? :: core :: marker :: Sized) , n : :: core :: primitive :: i32)",
        "const { :: core :: assert ! (BLOCK . is_power_of_two () ,",
        ":: fuse :: launch (self :: spec :: < T > () , device , config . into () , & [BLOCK as :: core :: primitive :: u64] , & mut [:: fuse :: DeviceRead :: < T > :: kernel_arg (x) , :: fuse :: DeviceRead :: < T > :: kernel_arg (y) , :: fuse :: DeviceRead :: < T > :: kernel_arg (z) , :: fuse :: DeviceWrite :: < T > :: kernel_arg_mut (out) , :: fuse :: KernelArg :: from (n)] ,)",
    ] {
        assert!(text.contains(needle), "missing {needle}\nin {text}");
    }
}

#[test]
fn concrete_parameters_of_a_generic_kernel_name_primitives_by_path() {
    // Inside the module `f32` is the instantiation's submodule: the launcher says
    // `::core::primitive::f32`.
    let src = "fn k<T: Half, const B: usize>(x: *const T, w: *const f32, out: *mut T, eps: f32) {
        let c = arange(0, B);
        store(out + c, load(x + c) * load(w + c) + eps);
    }";
    let text = expand::fused_kernel(TokenStream::new(), tokens(src)).to_string();
    assert!(text.contains("w : & (impl :: fuse :: DeviceRead < :: core :: primitive :: f32 > + ? :: core :: marker :: Sized)"), "{text}");
    assert!(text.contains("eps : :: core :: primitive :: f32"));
    assert!(text.contains(":: fuse :: DeviceRead :: < :: core :: primitive :: f32 > :: kernel_arg (w)"));
    assert!(text.contains(
        "< T as :: fuse :: Half > :: select_half (& self :: f16 :: SPEC , & self :: bf16 :: SPEC)"
    ));
    assert!(!text.contains("pub mod f32"));
}

#[test]
fn casts_and_constants_of_the_type_parameter() {
    let src = "fn k<T: Float, const B: usize>(x: *const f32, out: *mut f32, n: i32) {
        let c = arange(0, B);
        let v = minimum(load(x + c, c < n), T::MAX).to(T);
        let w = (v as T) + T::EPSILON + 0.5.to(T);
        store(out + c, where_(w > T::NEG_INFINITY, w, T::MIN_POSITIVE - T::MIN + T::INFINITY), c < n);
    }";
    let g = instances(src);
    for (inst, (max, eps)) in g.instances.iter().zip([
        (f64::from(f32::MAX), f64::from(f32::EPSILON)),
        (65504.0, 2f64.powi(-10)),
        (3.3895313892515355e38, 2f64.powi(-7)),
    ]) {
        let d = inst.binding[0].1;
        let want = src
            .replace("<T: Float, ", "<")
            .replace("T::MAX", &format!("{max:?}"))
            .replace("T::EPSILON", &format!("{eps:?}"));
        let want = want
            .replace("T::NEG_INFINITY", "f32::NEG_INFINITY")
            .replace("T::INFINITY", "f32::INFINITY")
            .replace("T::MIN_POSITIVE", &format!("{}::MIN_POSITIVE", d.name()))
            .replace("T::MIN", &format!("({:?})", -max))
            .replace("to(T)", &format!("to({d})"))
            .replace("as T", &format!("as {d}"));
        assert_eq!(inst.kernel, concrete(&want, &inst.kernel.name), "T = {d}");
    }
}

#[test]
fn an_error_every_instantiation_makes_is_reported_once() {
    let src = "fn k<T: Float, const B: usize>(x: *const T, out: *mut T, n: i32) {
        let c = arange(0, B);
        store(out + c, load(x + c) * undefined_thing, c < n);
    }";
    one_error(src, "undefined variable `undefined_thing`", "undefined_thing");
    let errs = errors(src);
    assert!(!errs[0].0.contains("note: in the instantiation"), "{errs:?}");
}

#[test]
fn an_error_of_some_instantiations_names_them() {
    // `v` holds T values; an f32 value fits it only when T is f32.
    let src = "fn k<T: Float, const B: usize>(x: *const T, out: *mut T, n: i32) {
        let c = arange(0, B);
        let mut v = load(x + c);
        v = v * 2.0;
        store(out + c, v, c < n);
    }";
    let errs = errors(src);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    for ((m, text), d) in errs.iter().zip(["f16", "bf16"]) {
        assert!(m.contains(&format!("`v` is {d} tile")), "{m}");
        assert!(m.ends_with(&format!("note: in the instantiation `T = {d}`")), "{m}");
        assert_eq!(text, "v * 2.0");
    }
    // One message for several instantiations lists them all.
    let src = "fn k<T: Float, O: Float, const B: usize>(x: *const T, out: *mut O) {
        let c = arange(0, B);
        let mut v = load(x + c);
        v = v * 2.0;
        store(out + c, v);
    }";
    let errs = errors(src);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(
        errs[0].0.ends_with(
            "note: in the instantiations `T = f16, O = f32`, `T = f16, O = f16` and `T = f16, O = bf16`"
        ),
        "{}",
        errs[0].0
    );
}

#[test]
fn generic_misuse_is_one_spanned_error() {
    let body = "{ let c = arange(0, B); store(out + c, load(x + c)); }";
    let k = |generics: &str, params: &str| format!("fn k<{generics}>({params}) {body}");
    let ptrs = "x: *const T, out: *mut T";
    one_error(
        &k("T: Copy, const B: usize", ptrs),
        "unknown bound `Copy` on the kernel's type parameter `T`",
        "Copy",
    );
    one_error(
        &k("T: num_traits::Float, const B: usize", ptrs),
        "unknown bound `num_traits::Float`",
        "num_traits::Float",
    );
    one_error(&k("T: ?Sized, const B: usize", ptrs), "unknown bound `?Sized`", "?Sized");
    one_error(&k("T: Float + Copy, const B: usize", ptrs), "takes exactly one bound", "Copy");
    one_error(&k("T: Float + Copy + Send, const B: usize", ptrs), "takes exactly one bound", "Copy + Send");
    one_error(&k("T, const B: usize", ptrs), "a generic type parameter without a bound", "T");
    one_error(&k("T: Float = f32, const B: usize", ptrs), "a default type for a type parameter", "f32");
    one_error(&k("'a, T: Float, const B: usize", ptrs), "a lifetime parameter", "'a");
    one_error(
        &k("f16: Float, const B: usize", "x: *const f16, out: *mut f16"),
        "`f16` cannot name a type parameter",
        "f16",
    );
    one_error(&k("T: Float, const T: usize, const B: usize", ptrs), "`T` is declared more than once", "T");
    one_error(&k("T: Float, U: Half, T: Half, const B: usize", ptrs), "`T` is declared more than once", "T");
    one_error(
        &k("A: Float, C: Float, D: Float, E: Float, const B: usize", "x: *const A, out: *mut A"),
        "at most 3 type parameters",
        "E",
    );
    // A bound in a `where` clause is the clause's mistake alone.
    for (clause, bound) in [("where T: Float", "Float"), ("where T: fuse::Half,", "Half")] {
        let src = format!("fn k<T, const B: usize>({ptrs}) {clause} {body}");
        one_error(&src, "a `where` clause", "where");
        let mut diags = Diags::default();
        let g = generic::instantiate(&item(&src), &mut diags);
        assert_eq!(g.bounded()[0].1.name(), bound, "the body is still checked for each element type");
    }
    let errs = errors(&format!("fn k<T, const B: usize>({ptrs}) where T: Copy {body}"));
    let got: Vec<&str> = errs.iter().map(|(_, text)| text.as_str()).collect();
    assert_eq!(got, ["Copy", "where"], "{errs:#?}");
    let errs = errors(&format!("fn k<T: Float, const B: usize>({ptrs}) where T: Copy {body}"));
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(errs[0].0.contains("a `where` clause") && errs[0].0.contains("fn k<T: Float, ..>"), "{errs:?}");
    assert_eq!(errs[0].1, "where");
    one_error(
        &k("T: Float, const B: usize", "x: *const T, out: *mut T, s: T"),
        "a scalar parameter cannot have the type parameter `T`",
        "T",
    );
    one_error(
        &k("T: Float, const B: usize", "x: *const U, out: *mut T"),
        "unsupported pointer element type `U`",
        "U",
    );
    let errs = errors(&k("T: Float, const B: usize", "x: *const U, out: *mut T"));
    assert!(errs[0].0.contains("and the kernel's type parameter `T`"), "{errs:?}");
    let with =
        |stmt: &str| format!("fn k<T: Float, const B: usize>({ptrs}) {{ let c = arange(0, B); {stmt} }}");
    one_error(&with("store(out + c, load(x + c).to(U));"), "unsupported cast target `U`", "U");
    one_error(&with("store(out + c, load(x + c) as U);"), "unsupported cast target `U`", "U");
    one_error(&with("store(out + c, load(x + c) * T);"), "`T` is a type parameter, not a value", "T");
    one_error(&with("store(out + c, load(x + c) * T::ONE);"), "the constant `T::ONE`", "T::ONE");
    one_error(&with("store(out + c, load(x + c) * U::MAX);"), "the path `U::MAX`", "U::MAX");
    // A rejected type parameter's uses are not reported again.
    one_error(
        &format!("fn k<T: Copy, const B: usize>({ptrs}, s: T) {{ store(out, load(x).to(T) * T::MAX); }}"),
        "unknown bound",
        "Copy",
    );
}

#[test]
fn the_bound_may_be_a_path_to_fuse() {
    for bound in ["Float", "fuse::Float", "::fuse::Float", "fuse::prelude::Float", "::fuse::Half"] {
        let src = add_mul().replace("T: Float", &format!("T: {bound}"));
        let g = instances(&src);
        assert_eq!(g.instances.len(), if bound.ends_with("Half") { 2 } else { 3 }, "{bound}");
    }
}

#[test]
fn the_stub_keeps_the_generic_signature() {
    let src = add_mul().replace("(x + y) * z", "(x + y) * w");
    let out = expand::fused_kernel(TokenStream::new(), tokens(&src));
    let text = out.to_string();
    assert_eq!(text.matches("compile_error").count(), 1, "{text}");
    assert!(text.contains("pub fn launch < T : :: fuse :: Float , const BLOCK : usize > (device : & :: fuse :: Device , config : impl :: core :: convert :: Into < :: fuse :: LaunchConfig > , x : & (impl :: fuse :: DeviceRead < T > + ? :: core :: marker :: Sized)"), "{text}");
    assert!(text.contains("pub fn spec < T : :: fuse :: Float > () -> & 'static :: fuse :: KernelSpec { :: core :: unreachable ! () }"));
    assert!(text.contains("pub mod bf16 {"));
    let file: syn::File = syn::parse2(out).expect("errors + module parse");
    assert!(file.items.iter().any(|i| matches!(i, syn::Item::Mod(m) if m.ident == "add_mul")));
    // A rejected type parameter keeps its name, unbounded; its parameters take anything.
    let text = expand::fused_kernel(
        TokenStream::new(),
        tokens("fn k<T: Copy, const B: usize>(x: *const T, n: i32) {}"),
    )
    .to_string();
    assert!(text.contains("pub fn launch < T , const B : usize > (device : & :: fuse :: Device , config : impl :: core :: convert :: Into < :: fuse :: LaunchConfig > , x : impl :: core :: marker :: Sized , n : :: core :: primitive :: i32)"), "{text}");
}

#[test]
fn kernels_of_concrete_types_expand_as_before() {
    // No type parameter, no generic module: the `tests.rs` expansion tests pin the rest.
    let text = expand::fused_kernel(
        TokenStream::new(),
        tokens(&add_mul().replace("T: Float, ", "").replace(" T", " f32")),
    )
    .to_string();
    assert!(!text.contains("pub fn spec"), "{text}");
    assert!(text.contains("pub const NAME : & str = \"add_mul\""));
}
