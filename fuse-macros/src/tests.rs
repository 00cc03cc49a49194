//! Front-end tests: the seed kernels check and lower to well-formed IR; mistakes give one precise
//! error each, pointing at the offending tokens.
//!
//! Sources are parsed from strings (not `quote!`) so spans carry real line/column positions
//! (the `span-locations` feature of proc-macro2 is on for tests) and `source_text()` works.

use crate::{check, diag::Diags, expand, parse};
use fuse_ir::*;
use proc_macro2::TokenStream;
use std::collections::HashSet;

fn tokens(src: &str) -> TokenStream {
    src.parse().unwrap_or_else(|e| panic!("test source does not lex: {e}"))
}

fn compile(src: &str) -> Result<Kernel, syn::Error> {
    let item: syn::ItemFn =
        syn::parse2(tokens(src)).unwrap_or_else(|e| panic!("test source is not a fn: {e}"));
    let mut diags = Diags::default();
    let f = parse::parse_kernel(&item, &mut diags);
    let k = check::check_kernel(&f, &mut diags);
    match diags.combined() {
        None => Ok(k),
        Some(e) => Err(e),
    }
}

pub(crate) fn ok(src: &str) -> Kernel {
    let k = compile(src).unwrap_or_else(|e| {
        let msgs: Vec<String> = e.into_iter().map(|e| e.to_string()).collect();
        panic!("expected the kernel to check, got:\n{}", msgs.join("\n"))
    });
    validate(&k);
    k
}

/// (message, source text under the span) of each error combined in `e`.
pub(crate) fn spanned(e: syn::Error) -> Vec<(String, String)> {
    e.into_iter().map(|e| (e.to_string(), e.span().source_text().unwrap_or_default())).collect()
}

/// `errs` is exactly one error, whose message contains `msg` and whose span covers exactly `text`.
#[track_caller]
pub(crate) fn assert_one_error(errs: &[(String, String)], msg: &str, text: &str) {
    assert_eq!(errs.len(), 1, "expected one error, got {errs:#?}");
    let (m, t) = &errs[0];
    assert!(m.contains(msg), "message {m:?} does not contain {msg:?}");
    assert_eq!(t, text, "span of {m:?}");
}

/// (message, source text under the span) of every error.
pub(crate) fn errors(src: &str) -> Vec<(String, String)> {
    match compile(src) {
        Ok(_) => panic!("expected errors, the kernel checked"),
        Err(e) => spanned(e),
    }
}

/// Exactly one error, whose message contains `msg` and whose span covers exactly `text`.
#[track_caller]
fn one_error(src: &str, msg: &str, text: &str) {
    assert_one_error(&errors(src), msg, text);
}

fn var<'k>(k: &'k Kernel, name: &str) -> &'k Var {
    k.vars.iter().find(|v| v.name == name).unwrap_or_else(|| {
        panic!("no var {name}; vars: {:?}", k.vars.iter().map(|v| &v.name).collect::<Vec<_>>())
    })
}

pub(crate) fn var_id(k: &Kernel, name: &str) -> VarId {
    VarId(k.vars.iter().position(|v| v.name == name).unwrap_or_else(|| panic!("no var {name}")) as u32)
}

fn block() -> Len {
    Len::of_const(0)
}

/// Every `dst = expr` in program order.
fn assigns(k: &Kernel) -> Vec<(VarId, Expr)> {
    let mut out = Vec::new();
    k.visit_stmts(&mut |s| {
        if let Stmt::Assign { dst, expr } = s {
            out.push((*dst, expr.clone()));
        }
    });
    out
}

fn expr_of(k: &Kernel, name: &str) -> Expr {
    let id = var_id(k, name);
    assigns(k)
        .into_iter()
        .find(|(d, _)| *d == id)
        .map(|(_, e)| e)
        .unwrap_or_else(|| panic!("{name} never assigned"))
}

fn stores(k: &Kernel) -> Vec<(u32, VarId, VarId, Option<VarId>)> {
    let mut out = Vec::new();
    k.visit_stmts(&mut |s| {
        if let Stmt::Store { param, offset, value, mask } = s {
            out.push((*param, *offset, *value, *mask));
        }
    });
    out
}

/// (dst, param, offset, mask, other) of every load.
type LoadInfo = (VarId, u32, VarId, Option<VarId>, Option<VarId>);

fn loads(k: &Kernel) -> Vec<LoadInfo> {
    assigns(k)
        .into_iter()
        .filter_map(|(d, e)| match e {
            Expr::Load { param, offset, mask, other } => Some((d, param, offset, mask, other)),
            _ => None,
        })
        .collect()
}

/// `half` is `whole` with its last dim halved: same dtype and rank, the other dims equal.
fn assert_halves(half: &Ty, whole: &Ty) {
    let (h, w) = (half.shape.dims(), whole.shape.dims());
    assert_eq!(half.dtype, whole.dtype);
    assert!(!h.is_empty() && h.len() == w.len());
    assert_eq!(h[..h.len() - 1], w[..w.len() - 1]);
    assert_eq!(h[h.len() - 1].log2 + 1, w[w.len() - 1].log2, "the last dim halved");
}

/// The IR invariants fuse-ir documents, checked on every kernel the tests compile.
fn validate(k: &Kernel) {
    let mut names = HashSet::new();
    for v in &k.vars {
        assert!(names.insert(v.name.clone()), "duplicate var name {}", v.name);
        assert!(
            v.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !v.name.starts_with(|c: char| c.is_ascii_digit()),
            "not a C identifier: {}",
            v.name
        );
        assert!(!k.params.iter().any(|p| p.name == v.name), "var {} shadows a parameter", v.name);
        assert!(!k.consts.contains(&v.name), "var {} is a const generic", v.name);
    }
    let ty = |id: VarId| k.ty(id).clone();
    // Element-wise operands are scalars or have the result's shape (the checker inserts
    // explicit broadcasts).
    let fits = |id: VarId, shape: &Shape| ty(id).shape.is_scalar() || ty(id).shape == *shape;
    let pointee = |p: u32| match k.params[p as usize].kind {
        ParamKind::Ptr { elem, mutable } => (elem, mutable),
        ParamKind::Scalar(_) => panic!("param {p} is not a pointer"),
    };
    k.visit_stmts(&mut |s| match s {
        Stmt::Assign { dst, expr } => {
            let t = ty(*dst);
            match expr {
                Expr::Copy(a) => assert_eq!(ty(*a), t),
                Expr::Lit(_)
                | Expr::Param(_)
                | Expr::ConstGeneric(_)
                | Expr::ProgramId(_)
                | Expr::NumPrograms(_) => {
                    assert!(t.shape.is_scalar())
                }
                Expr::Arange { .. } => assert!(t.dtype == DType::I32 && !t.shape.is_scalar()),
                Expr::Splat(a) => {
                    assert!(ty(*a).shape.is_scalar() && ty(*a).dtype == t.dtype && !t.shape.is_scalar())
                }
                Expr::Unary(_, a) => {
                    assert!(t.dtype.is_compute());
                    assert_eq!(ty(*a), t);
                }
                Expr::Binary(op, a, b) => {
                    let (ta, tb) = (ty(*a), ty(*b));
                    assert_eq!(ta.dtype, tb.dtype, "binary operands");
                    assert!(ta.dtype.is_compute(), "binary on storage type");
                    assert_eq!(t.dtype, if op.is_comparison() { DType::Bool } else { ta.dtype });
                    assert!(fits(*a, &t.shape) && fits(*b, &t.shape));
                }
                Expr::Cast(a) => assert_eq!(ty(*a).shape, t.shape),
                Expr::Where(c, a, b) => {
                    assert_eq!(ty(*c).dtype, DType::Bool);
                    assert!(ty(*a).dtype == t.dtype && ty(*b).dtype == t.dtype);
                    assert!(fits(*c, &t.shape) && fits(*a, &t.shape) && fits(*b, &t.shape));
                }
                Expr::Load { param, offset, mask, other } => {
                    let (elem, _) = pointee(*param);
                    assert_eq!(t.dtype, elem);
                    assert!(ty(*offset).dtype.is_int());
                    assert_eq!(ty(*offset).shape, t.shape);
                    if let Some(m) = mask {
                        assert_eq!(ty(*m).dtype, DType::Bool);
                        assert!(fits(*m, &t.shape));
                    }
                    if let Some(o) = other {
                        assert_eq!(ty(*o).dtype, elem);
                        assert!(fits(*o, &t.shape));
                    }
                }
                Expr::Reduce(_, a) => {
                    assert!(!ty(*a).shape.is_scalar() && t.shape.is_scalar());
                    assert_eq!(ty(*a).dtype, t.dtype);
                    assert!(t.dtype.is_compute());
                }
                Expr::Rand { seed, offset, .. } => {
                    assert!(ty(*seed).dtype.is_int() && ty(*seed).shape.is_scalar());
                    assert!(ty(*offset).dtype.is_int());
                    assert_eq!(t, Ty { dtype: DType::F32, shape: ty(*offset).shape });
                }
                Expr::Broadcast(a) | Expr::Reshape(a) | Expr::Trans(a) => {
                    assert_eq!(ty(*a).dtype, t.dtype);
                    assert!(!ty(*a).shape.is_scalar() && !t.shape.is_scalar());
                    // `trans` of a square tile and `reshape` to the same shape keep the shape (the
                    // first still moves lanes, the second is a copy); a broadcast never does.
                    if matches!(expr, Expr::Broadcast(_)) {
                        assert_ne!(ty(*a).shape, t.shape, "a no-op broadcast");
                    }
                }
                Expr::Split { src, half } => {
                    assert!(*half < 2);
                    assert_halves(&t, &ty(*src));
                }
                Expr::Join(a, b) => {
                    assert_eq!(ty(*a), ty(*b));
                    assert_halves(&ty(*a), &t);
                }
                Expr::ReduceAxis { src, axis, .. } => {
                    assert_eq!(ty(*src).shape.rank(), 2);
                    assert!(*axis < 2);
                    assert_eq!(t.shape.rank(), 1);
                    assert_eq!(ty(*src).dtype, t.dtype);
                }
                Expr::Dot { a, b, acc } => {
                    let (ta, tb) = (ty(*a), ty(*b));
                    assert_eq!(ta.dtype, tb.dtype, "dot operands of one storage type");
                    assert_eq!(dot_accumulator(ta.dtype), Some(t.dtype), "dot accumulates in its type");
                    let (Shape::Tile2(m, k), Shape::Tile2(k2, n)) = (&ta.shape, &tb.shape) else {
                        panic!("dot of {ta:?} and {tb:?}")
                    };
                    assert_eq!(k, k2);
                    assert_eq!(t.shape, Shape::Tile2(m.clone(), n.clone()));
                    if let Some(c) = acc {
                        assert_eq!(ty(*c), t, "the accumulator has the result's type");
                    }
                }
                Expr::ArgReduce { src, axis, .. } => {
                    assert_eq!(t.dtype, DType::I32);
                    assert_eq!(ty(*src).shape.rank(), if axis.is_some() { 2 } else { ty(*src).shape.rank() });
                    assert_eq!(t.shape.rank(), if axis.is_some() { 1 } else { 0 });
                }
            }
        }
        Stmt::Store { param, offset, value, mask } => {
            let (elem, mutable) = pointee(*param);
            assert!(mutable);
            assert_eq!(ty(*value).dtype, elem);
            assert!(ty(*offset).dtype.is_int());
            let shape = ty(*offset).shape;
            assert!(fits(*value, &shape));
            if let Some(m) = mask {
                assert!(fits(*m, &shape));
            }
        }
        Stmt::If { cond, .. } => assert_eq!(ty(*cond), Ty::scalar(DType::Bool)),
        Stmt::For { var, start, end, step, .. } => {
            let t = ty(*var);
            assert!(t.shape.is_scalar() && t.dtype.is_int());
            assert!(ty(*start) == t && ty(*end) == t && ty(*step) == t);
        }
    });
    // Compared as JSON: floats serialise by their bits, and a kernel holding a NaN literal is not
    // `==` to itself.
    let json = k.to_json();
    assert_eq!(Kernel::from_json(&json).expect("IR round-trips through JSON").to_json(), json);
}

// ---- the seed kernels -----------------------------------------------------------------------
// Read from the example kernels' files (fuse-kernels/src), so the tests follow them.

pub(crate) const ADD_MUL_FILE: &str = include_str!("../../fuse-kernels/src/add_mul.rs");
const SOFTMAX_FILE: &str = include_str!("../../fuse-kernels/src/softmax.rs");
const LAYERNORM_FILE: &str = include_str!("../../fuse-kernels/src/layernorm.rs");
const BIAS_GELU_DROPOUT_FILE: &str = include_str!("../../fuse-kernels/src/bias_gelu_dropout.rs");

/// The text of the kernel fn `name` of an example file: from `pub fn name<` to its closing
/// brace, without its `#[fused_kernel]` (the files also hold launch helpers and references).
pub(crate) fn example_fn(file: &str, name: &str) -> String {
    let head = format!("pub fn {name}<");
    assert_eq!(file.matches(&head).count(), 1, "one `{head}` in the example file");
    let start = file.find(&head).expect("the kernel fn");
    let open = start + file[start..].find('{').expect("the kernel's body");
    let (mut depth, mut end, mut chars) = (0, None, file[open..].char_indices().peekable());
    while let Some((i, c)) = chars.next() {
        match c {
            // Comments may hold braces.
            '/' if chars.peek().is_some_and(|&(_, n)| n == '/') => {
                for (_, c) in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    end = Some(open + i + 1);
                    break;
                }
            }
            _ => {}
        }
    }
    file[start..end.expect("the kernel's closing brace")].to_string()
}

/// [`example_fn`] with its type parameter `T: Float`, if any, bound to `dtype`: an ordinary
/// kernel of concrete types, named `name`.
fn example_kernel(file: &str, name: &str, dtype: &str) -> String {
    let bound = example_fn(file, name)
        .replacen("<T: Float, ", "<", 1)
        .replace("*const T,", &format!("*const {dtype},"))
        .replace("*mut T,", &format!("*mut {dtype},"));
    assert!(!bound.contains(": Float") && !bound.contains(" T,"), "T left unbound in:\n{bound}");
    bound
}

fn add_mul() -> String {
    example_kernel(ADD_MUL_FILE, "add_mul", "f32")
}

fn softmax() -> String {
    example_kernel(SOFTMAX_FILE, "softmax", "f32")
}

/// `layernorm` on f16 rows (statistics in f32).
fn layernorm_f16() -> String {
    example_kernel(LAYERNORM_FILE, "layernorm", "f16")
}

/// `layernorm_wide`: rows wider than a tile, in loops over column blocks.
fn layernorm_wide() -> String {
    example_kernel(LAYERNORM_FILE, "layernorm_wide", "f32")
}

fn bias_gelu_dropout() -> String {
    example_kernel(BIAS_GELU_DROPOUT_FILE, "bias_gelu_dropout", "f32")
}

fn with_dtype(src: &str, from: &str, to: &str) -> String {
    src.replace(&format!("*const {from}"), &format!("*const {to}"))
        .replace(&format!("*mut {from}"), &format!("*mut {to}"))
}

#[test]
fn add_mul_checks() {
    let k = ok(&add_mul());
    assert_eq!(k.name, "add_mul");
    assert_eq!(k.consts, ["BLOCK"]);
    assert_eq!(k.params.len(), 5);
    assert_eq!(k.params[3].kind, ParamKind::Ptr { elem: DType::F32, mutable: true });
    assert_eq!(k.params[4].kind, ParamKind::Scalar(DType::I32));
    assert_eq!(var(&k, "offs").ty, Ty::tile(DType::I32, block()));
    assert_eq!(var(&k, "mask").ty, Ty::tile(DType::Bool, block()));
    // `let x = load(x + ..)` shadows the parameter: the var is renamed, the load reads param 0.
    assert_eq!(var(&k, "x_1").ty, Ty::tile(DType::F32, block()));
    let ls = loads(&k);
    assert_eq!(ls.len(), 3);
    let offs = var_id(&k, "offs");
    let mask = var_id(&k, "mask");
    for (i, (_, param, offset, m, other)) in ls.iter().enumerate() {
        assert_eq!((*param, *offset, *m, *other), (i as u32, offs, Some(mask), None));
    }
    let st = stores(&k);
    assert_eq!(st.len(), 1);
    assert_eq!((st[0].0, st[0].1, st[0].3), (3, offs, Some(mask)));
    // BLOCK is used in i32 arithmetic: a ConstGeneric of type i32.
    assert!(assigns(&k)
        .iter()
        .any(|(d, e)| matches!(e, Expr::ConstGeneric(0)) && k.ty(*d) == &Ty::scalar(DType::I32)));
}

#[test]
fn softmax_checks() {
    let k = ok(&softmax());
    let ls = loads(&k);
    assert_eq!(ls.len(), 1);
    let (_, param, offset, _, other) = ls[0];
    assert_eq!(param, 1, "reads `inp`");
    assert_eq!(k.ty(offset), &Ty::tile(DType::I32, block()), "offset = row * in_stride + cols");
    let other = other.expect("other");
    assert_eq!(k.ty(other), &Ty::scalar(DType::F32));
    // -inf is a plain float literal (the IR serialises floats by bit pattern).
    assert!(
        matches!(expr_of(&k, &k.var(other).name), Expr::Lit(Literal::Float(f)) if f == f64::NEG_INFINITY)
    );
    assert!(assigns(&k).iter().any(|(_, e)| matches!(e, Expr::Reduce(ReduceOp::Max, _))));
    assert!(assigns(&k).iter().any(|(_, e)| matches!(e, Expr::Reduce(ReduceOp::Sum, _))));
    assert_eq!(var(&k, "y").ty, Ty::tile(DType::F32, block()));
    assert_eq!(stores(&k)[0].0, 0);
}

#[test]
fn layernorm_f16_widens_and_narrows() {
    let k = ok(&layernorm_f16());
    // The load keeps the storage type; arithmetic sees it widened.
    assert_eq!(var(&k, "xs").ty, Ty::tile(DType::F16, block()));
    assert_eq!(var(&k, "mean").ty, Ty::scalar(DType::F32));
    assert_eq!(var(&k, "xc").ty, Ty::tile(DType::F32, block()));
    assert_eq!(var(&k, "out").ty, Ty::tile(DType::F32, block()));
    let xs = var_id(&k, "xs");
    assert!(
        assigns(&k).iter().any(|(d, e)| *e == Expr::Cast(xs) && k.ty(*d) == &Ty::tile(DType::F32, block())),
        "xs widened to f32 before `sum`"
    );
    // `other` = 0.0 as f16.
    let (_, _, _, _, other) = loads(&k)[0];
    assert_eq!(k.ty(other.expect("other")).dtype, DType::F16);
    // The store narrows f32 -> f16.
    let (param, _, value, _) = stores(&k)[0];
    assert_eq!(param, 1);
    assert_eq!(k.ty(value), &Ty::tile(DType::F16, block()));
    assert_eq!(expr_of(&k, &k.var(value).name), Expr::Cast(var_id(&k, "out")));
}

#[test]
fn layernorm_wide_tracks_pointers_and_loops() {
    let k = ok(&layernorm_wide());
    assert_eq!(var(&k, "acc").ty, Ty::tile(DType::F32, block()));
    let fors: Vec<_> = k.body.iter().filter(|s| matches!(s, Stmt::For { .. })).collect();
    assert_eq!(fors.len(), 3);
    // `let x = x + row * stride` is an offset var; the loads add `cols` to it.
    assert_eq!(var(&k, "x_off").ty, Ty::scalar(DType::I32));
    assert!(k.vars.iter().all(|v| v.name != "x" && v.name != "y"), "no var for a pointer");
    let x_off = var_id(&k, "x_off");
    for (_, param, offset, _, _) in loads(&k) {
        assert!(param <= 3);
        if param == 0 {
            assert!(
                matches!(expr_of(&k, &k.var(offset).name), Expr::Binary(BinaryOp::Add, a, _) if a == x_off)
            );
        }
    }
    // `acc += load(..)` assigns acc directly.
    let acc = var_id(&k, "acc");
    assert!(assigns(&k)
        .iter()
        .any(|(d, e)| *d == acc && matches!(e, Expr::Binary(BinaryOp::Add, a, _) if *a == acc)));
    // The loop counts in i32 with step BLOCK.
    if let Stmt::For { var, step, .. } = fors[0] {
        assert_eq!(k.var(*var).name, "start");
        assert_eq!(expr_of(&k, &k.var(*step).name), Expr::ConstGeneric(0));
    }
    // Shadowed loop vars and `cols` get unique names.
    assert!(k.vars.iter().any(|v| v.name == "start_1") && k.vars.iter().any(|v| v.name == "cols_2"));
}

#[test]
fn bias_gelu_dropout_checks() {
    let k = ok(&bias_gelu_dropout());
    let r = var(&k, "r");
    assert_eq!(r.ty, Ty::tile(DType::F32, block()));
    let Expr::Rand { seed, offset, width: fuse_ir::RandWidth::W32 } = expr_of(&k, "r") else {
        panic!("r is rand")
    };
    assert_eq!(k.ty(seed), &Ty::scalar(DType::U64));
    assert_eq!(offset, var_id(&k, "offs"));
    // `offs % h` is an i32 tile offset into `bias`.
    let (_, param, offset, _, _) = loads(&k)[1];
    assert_eq!(param, 1);
    assert!(matches!(expr_of(&k, &k.var(offset).name), Expr::Binary(BinaryOp::Rem, ..)));
    assert!(assigns(&k).iter().any(|(_, e)| matches!(e, Expr::Unary(UnaryOp::Erf, _))));
}

#[test]
fn seed_kernels_in_f16_and_bf16() {
    for (src, from) in [
        (add_mul(), "f32"),
        (softmax(), "f32"),
        (layernorm_wide(), "f32"),
        (bias_gelu_dropout(), "f32"),
        (layernorm_f16(), "f16"),
    ] {
        for to in ["f16", "bf16", "f32"] {
            let k = ok(&with_dtype(&src, from, to));
            let d = DType::from_name(to).expect("dtype");
            for (param, _, value, _) in stores(&k) {
                assert_eq!(k.ty(value).dtype, d, "{} stores {to}", k.name);
                assert!(matches!(k.params[param as usize].kind, ParamKind::Ptr { elem, .. } if elem == d));
            }
            for (dst, ..) in loads(&k) {
                assert_eq!(k.ty(dst).dtype, d);
            }
        }
    }
}

#[test]
fn add_mul_in_bf16_widens_every_operand() {
    let k = ok(&with_dtype(&add_mul(), "f32", "bf16"));
    let casts = assigns(&k).into_iter().filter(|(_, e)| matches!(e, Expr::Cast(_))).count();
    assert_eq!(casts, 4, "x, y, z widened; the product narrowed");
}

#[test]
fn integer_kernel_with_i8_widening() {
    let k = ok(r#"
        fn relu_i8<const BLOCK: usize>(x: *const i8, out: *mut i8, n: i64) {
            let offs = program_id(0).to(i64) * BLOCK + arange(0, BLOCK).to(i64);
            let v = load(x + offs, offs < n, 0);
            store(out + offs, maximum(v, 0), offs < n);
        }"#);
    assert_eq!(var(&k, "offs").ty, Ty::tile(DType::I64, block()));
    assert_eq!(var(&k, "v").ty.dtype, DType::I8);
    let (_, _, value, _) = stores(&k)[0];
    assert_eq!(k.ty(value).dtype, DType::I8);
}

#[test]
fn control_flow_and_mutable_pointers() {
    let k = ok(r#"
        fn rowsum<const BLOCK: usize>(x: *const f32, out: *mut f32, n_rows: i32, n_cols: i32, scale: f32) {
            let mut p = x + program_id(0) * n_cols;
            let mut total = 0.0;
            for r in 0..n_rows {
                let cols = arange(0, BLOCK);
                total += sum(load(p + cols, cols < n_cols, 0.0));
                p += n_cols;
            }
            if scale > 0.0 && n_rows != 0 {
                total = total * scale;
            } else if scale < 0.0 {
                total = -total;
            } else {
                total = f32::INFINITY;
            }
            store(out + program_id(0), total);
        }"#);
    assert_eq!(var(&k, "total").ty, Ty::scalar(DType::F32));
    let p_off = var_id(&k, "p_off");
    assert_eq!(k.ty(p_off), &Ty::scalar(DType::I32));
    // `p += n_cols` updates the offset var inside the loop.
    let Some(Stmt::For { body, .. }) = k.body.iter().find(|s| matches!(s, Stmt::For { .. })) else {
        panic!("for")
    };
    assert!(body.iter().any(|s| matches!(s, Stmt::Assign { dst, expr: Expr::Binary(BinaryOp::Add, a, _) } if *dst == p_off && *a == p_off)));
    let ifs: Vec<_> = k.body.iter().filter(|s| matches!(s, Stmt::If { .. })).collect();
    assert_eq!(ifs.len(), 1);
    if let Stmt::If { else_body, .. } = ifs[0] {
        assert!(matches!(else_body.last(), Some(Stmt::If { .. })), "else-if nests");
    }
    // A scalar store: offset and value scalars.
    let (_, offset, value, mask) = stores(&k)[0];
    assert!(k.ty(offset).shape.is_scalar() && k.ty(value).shape.is_scalar() && mask.is_none());
}

/// Offsets loaded from u8/i8 are carried as i32 (their compute type), so a mutable pointer over
/// them advances by any i32, like one over computed offsets (fuzz-2d report, finding 1).
#[test]
fn mutable_pointer_over_narrow_offsets_advances() {
    for narrow in ["u8", "i8"] {
        let k = ok(&format!(
            r#"
        fn gather<const BLOCK: usize>(idx: *const {narrow}, x: *const f32, out: *mut f32, n: i32) {{
            let offs = arange(0, BLOCK);
            let mut p = x + load(idx + offs, offs < n);
            p += 1;
            p = p - 2;
            p -= offs % 2;
            let mut q = x + load(idx);
            q += n;
            store(out + offs, load(p, offs < n) + load(q), offs < n);
        }}"#
        ));
        assert_eq!(var(&k, "p_off").ty, Ty::tile(DType::I32, block()), "{narrow}");
        assert_eq!(var(&k, "q_off").ty, Ty::scalar(DType::I32), "{narrow}");
        for (_, _, offset, _, _) in loads(&k) {
            assert!(k.ty(offset).dtype.is_compute(), "{narrow}: load offsets in a compute type");
        }
    }
    // A wider advance than the offsets' type is still a mismatch, named as one.
    one_error(
        "fn k<const BLOCK: usize>(idx: *const u8, x: *const f32, n: i64) {
            let mut p = x + load(idx + arange(0, BLOCK));
            p += n;
        }",
        "mismatched types in `+=`: i32 tile of length BLOCK and i64 scalar",
        "+=",
    );
}

/// Masks, offsets and `other` broadcast by the element-wise rule: a 1-D `[1]` tile goes with
/// `[N]` offsets, either way round (fuzz-2d: "not against offsets").
#[test]
fn unit_tiles_broadcast_against_offsets() {
    let k = ok(r#"
        fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
            let offs = arange(0, BLOCK);
            let one = arange(0, 1) + program_id(0);
            let live = one < n;
            let a = load(x + offs, live);
            let b = load(x + one, offs < n, 0.5);
            let c = load(x + one, live, full([BLOCK], 2.0));
            store(out + offs, a + b + c, live);
            store(out + one, sum(a), offs < n);
        }"#);
    let block_tile = |d: DType| Ty::tile(d, block());
    for name in ["a", "b", "c"] {
        assert_eq!(var(&k, name).ty, block_tile(DType::F32), "{name}");
    }
    // Each operand of the IR has the access's shape (explicit broadcasts, no back end re-derives it).
    for (dst, _, offset, mask, other) in loads(&k) {
        let shape = &k.ty(dst).shape;
        assert_eq!(&k.ty(offset).shape, shape);
        assert!(mask.into_iter().chain(other).all(|v| k.ty(v).shape.is_scalar() || &k.ty(v).shape == shape));
    }
    for (_, offset, value, mask) in stores(&k) {
        assert_eq!(k.ty(offset).shape, Shape::Tile(block()));
        assert!([value]
            .into_iter()
            .chain(mask)
            .all(|v| k.ty(v).shape.is_scalar() || k.ty(v).shape == Shape::Tile(block())));
    }
    // Lengths that do not broadcast are still named, and a tile mask needs tile offsets.
    one_error(
        &body("let o = arange(0, BLOCK); let v = load(x + o, arange(0, 2) < n);"),
        "tile lengths differ: the mask of `load` has length 2, the offsets BLOCK",
        "arange(0, 2) < n",
    );
    one_error(
        &body("let v = load(x + n, arange(0, 1) < n);"),
        "the mask of `load` is bool tile of length 1, but the pointer offset is a scalar",
        "arange(0, 1) < n",
    );
}

#[test]
fn constants_fold_and_adapt() {
    let k = ok(r#"
        fn consts<const BLOCK: usize, const WARPS: usize>(out: *mut u32, n: u64) {
            let half = BLOCK / 2;
            let a = arange(0, 2 * BLOCK);
            let b = arange(0, half);
            let c = arange(4, 12);
            let wide = n + 3 * BLOCK;
            let k = cdiv(n, 16);
            let w = arange(0, BLOCK * WARPS);
            store(out + a, (a + 1).to(u32), a < 10);
            store(out + b, b.to(u32) + WARPS);
            store(out + c, c.to(u32) + 4294967295);
            store(out + w, full(BLOCK * WARPS, 7u32));
        }"#);
    assert_eq!(var(&k, "a").ty, Ty::tile(DType::I32, Len::of_const(0).mul(&Len::literal_log2(1))));
    assert_eq!(var(&k, "b").ty, Ty::tile(DType::I32, Len { log2: -1, consts: vec![0] }));
    assert_eq!(var(&k, "c").ty, Ty::tile(DType::I32, Len::literal_log2(3)));
    assert_eq!(expr_of(&k, "c"), Expr::Arange { start: 4 });
    assert_eq!(var(&k, "wide").ty, Ty::scalar(DType::U64));
    assert_eq!(var(&k, "k").ty, Ty::scalar(DType::U64));
    assert_eq!(var(&k, "w").ty, Ty::tile(DType::I32, Len { log2: 0, consts: vec![0, 1] }));
    assert!(matches!(expr_of(&k, "k"), Expr::Binary(BinaryOp::Div, ..)));
    assert!(k.vars.iter().all(|v| v.name != "half"), "an immutable constant needs no var");
    assert!(assigns(&k).iter().any(|(_, e)| *e == Expr::Lit(Literal::Int(4294967295))));
}

#[test]
fn method_sugar_and_casts() {
    let k = ok(r#"
        fn sugar<const BLOCK: usize>(x: *const f32, out: *mut f32, idx: *mut i32) {
            let offs = arange(0, BLOCK);
            let v = load(x + offs);
            let s = v.exp().sum() + v.abs().max() + v.maximum(0.0).min();
            let t = (v * 2.0).sigmoid().tanh().sqrt().rsqrt().log().log2().exp2().erf().floor().ceil().sin().cos();
            store(out + offs, t + s);
            store(idx + offs, v as i32 + (s.to(i32) % 3) + abs(-offs));
            if !(s > 0.0) {
                store(out, 1);
            }
        }"#);
    assert_eq!(var(&k, "s").ty, Ty::scalar(DType::F32));
    assert_eq!(var(&k, "t").ty, Ty::tile(DType::F32, block()));
    assert!(assigns(&k).iter().any(|(_, e)| matches!(e, Expr::Unary(UnaryOp::Cos, _))));
    assert!(assigns(&k)
        .iter()
        .any(|(_, e)| matches!(e, Expr::Unary(UnaryOp::Abs, a) if k.ty(*a).dtype == DType::I32)));
}

#[test]
fn names_stay_c_safe() {
    let k = ok(r#"
        fn names<const BLOCK: usize>(out: *mut f32) {
            let mut int = 1.0;
            let mut fuse_tmp = 2.0;
            let mut t0 = 3.0;
            let max = int + fuse_tmp + t0;
            fuse_tmp += max;
            store(out, fuse_tmp);
        }"#);
    for v in &k.vars {
        assert!(!crate::c_names::C_RESERVED.contains(&v.name.as_str()), "{}", v.name);
        assert!(!v.name.starts_with("fuse_"), "{}", v.name);
    }
    let names: Vec<&str> = k.vars.iter().map(|v| v.name.as_str()).collect();
    for want in ["int_1", "v_fuse_tmp", "t0", "max_1"] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
}

// ---- errors ---------------------------------------------------------------------------------

const HEAD: &str = "fn k<const BLOCK: usize>(x: *const f32, y: *mut f32, n: i32, s: f32) {\n";

fn body(stmts: &str) -> String {
    format!("{HEAD}{stmts}\n}}")
}

#[test]
fn error_mixed_int_float() {
    one_error(
        &body("let o = arange(0, BLOCK); let v = o + s;"),
        "mismatched types in `+`: i32 tile of length BLOCK and f32 scalar",
        "+",
    );
    let errs = errors(&body("let o = arange(0, BLOCK); let v = o + s;"));
    assert!(errs[0].0.contains("help: convert one operand explicitly, e.g. `(..).to(f32)`"), "{}", errs[0].0);
}

#[test]
fn error_float_literal_with_int() {
    one_error(&body("let v = n * 0.5;"), "a float literal next to i32 scalar", "0.5");
}

#[test]
fn error_store_through_const() {
    one_error(
        &body("store(x + n, 1.0);"),
        "cannot store through `x`: it is a `*const f32` parameter",
        "x + n",
    );
    assert!(errors(&body("store(x, 1.0);"))[0].0.contains("declare it writable: `x: *mut f32`"));
}

#[test]
fn error_load_needs_pointer() {
    one_error(&body("let v = load(n);"), "`load` expects a pointer, found i32 scalar", "n");
}

#[test]
fn error_float_offset() {
    one_error(&body("let v = load(x + s);"), "pointer offsets must be integers, found f32 scalar", "s");
}

#[test]
fn error_mask_not_bool() {
    one_error(
        &body("let o = arange(0, BLOCK); let v = load(x + o, o);"),
        "the mask of `load` must be bool",
        "o",
    );
}

#[test]
fn error_where_branches_differ() {
    let src = body("let o = arange(0, BLOCK); let v = where_(o < n, o, s);");
    let errs = errors(&src);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0]
        .0
        .contains("mismatched types in the branches of `where_`: i32 tile of length BLOCK and f32 scalar"));
    assert_eq!(errs[0].1, "o, s");
}

#[test]
fn error_reduce_scalar() {
    one_error(&body("let v = sum(s);"), "`sum` reduces a tile, found f32 scalar", "s");
}

#[test]
fn error_arange_not_power_of_two() {
    one_error(
        &body("let o = arange(0, 100);"),
        "the length of `arange(0, 100)` is 100, which is not a power of two",
        "100",
    );
    assert!(errors(&body("let o = arange(0, 100);"))[0].0.contains("use `arange(0, 128)`"));
    one_error(&body("let o = arange(4, 10);"), "the length of `arange(4, 10)` is 6", "arange(4, 10)");
}

#[test]
fn error_arange_runtime_end() {
    one_error(
        &body("let o = arange(0, n);"),
        "the end of `arange` must be a compile-time constant, found i32 scalar",
        "n",
    );
}

#[test]
fn error_program_id_axis() {
    one_error(&body("let p = program_id(3);"), "the axis of `program_id` must be the literal 0, 1 or 2", "3");
    one_error(
        &body("let p = num_programs(n);"),
        "the axis of `num_programs` must be the literal 0, 1 or 2",
        "n",
    );
}

#[test]
fn error_rand_float_seed() {
    one_error(
        &body("let o = arange(0, BLOCK); let r = rand(s, o);"),
        "the seed of `rand` must be an integer scalar, found f32 scalar",
        "s",
    );
}

#[test]
fn error_math_on_int() {
    let errs = errors(&body("let v = exp(n);"));
    assert_eq!(errs.len(), 1);
    assert!(errs[0].0.contains("`exp` takes f32, found i32 scalar"));
    assert!(errs[0].0.contains("x.to(f32)"));
    assert_eq!(errs[0].1, "n");
}

#[test]
fn error_assign_immutable() {
    one_error(&body("let a = 1.0; a = 2.0;"), "cannot assign twice to the immutable variable `a`", "a");
    one_error(&body("n = 2;"), "cannot assign to the parameter `n`", "n");
    one_error(&body("for i in 0..n { i = 3; }"), "cannot assign to the loop variable `i`", "i");
    one_error(&body("BLOCK += 1;"), "cannot assign to the const generic `BLOCK`", "BLOCK");
}

#[test]
fn error_unknown_function_with_hint() {
    let errs = errors(&body("let v = sqr(s);"));
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].0.contains("unknown function `sqr`") && errs[0].0.contains("did you mean `sqrt`?"),
        "{}",
        errs[0].0
    );
    assert_eq!(errs[0].1, "sqr");
    one_error(&body("let v = s.powf(2.0);"), "unknown method `.powf()`", "powf");
    let errs = errors(&body("let v = s.sqr();"));
    assert!(
        errs[0].0.contains("unknown method `.sqr()`") && errs[0].0.contains("did you mean `.sqrt()`?"),
        "{}",
        errs[0].0
    );
}

#[test]
fn error_wrong_arity() {
    one_error(&body("let v = exp(s, s);"), "`exp` takes 1 argument (x), found 2", "exp");
    one_error(&body("let v = s.exp(s);"), "`.exp()` takes no arguments besides its receiver, found 1", "exp");
    one_error(
        &body("let v = x.load(n < 0, 1.0, 2.0);"),
        "`.load(..)` takes 0 to 2 arguments (mask, other) besides its receiver (ptr), found 3",
        "load",
    );
    assert!(errors(&body("let v = s.max(s);"))[0].0.contains("use `a.maximum(b)`"));
    let errs = errors(&body("let v = max(s, s);"));
    assert!(errs[0].0.contains("use `maximum(a, b)`"), "{}", errs[0].0);
    one_error(&body("store(y);"), "`store` takes 2 to 3 arguments (ptr, value, mask), found 1", "store");
}

#[test]
fn error_undefined_variable_did_you_mean() {
    let errs = errors(&body("let offsets = arange(0, BLOCK); let v = load(x + ofsets);"));
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].0.contains("undefined variable `ofsets`") && errs[0].0.contains("did you mean `offsets`?"),
        "{}",
        errs[0].0
    );
    assert_eq!(errs[0].1, "ofsets");
    one_error(&body("let v = zzz;"), "undefined variable `zzz`", "zzz");
}

#[test]
fn error_unsupported_param_types() {
    one_error("fn k(x: Vec<f32>) {}", "unsupported parameter type `Vec<f32>`", "Vec<f32>");
    one_error("fn k(x: &[f32]) {}", "references are not kernel parameters", "&[f32]");
    one_error("fn k(x: f64) {}", "unsupported parameter type `f64`", "f64");
    one_error("fn k(x: *const f64) {}", "unsupported pointer element type `f64`", "f64");
    one_error("fn k(x: String) {}", "unsupported parameter type `String`", "String");
    one_error("fn k(x: f16) {}", "`f16` scalar parameters are not supported", "f16");
}

#[test]
fn error_unsupported_syntax() {
    one_error(
        &body("let f = |a| a;"),
        "unsupported syntax: a closure is not part of the fuse tile language",
        "|a|",
    );
    one_error(&body("let v = match n { _ => 1 };"), "unsupported syntax: `match`", "match");
    one_error(&body("let r = &n;"), "unsupported syntax: a reference `&x`", "&");
    one_error(&body("let r = &mut n;"), "unsupported syntax: a reference `&x`", "&mut");
    one_error(&body("while true {}"), "unsupported syntax: a `while` loop", "while");
    one_error(&body("let v = x[3];"), "unsupported syntax: indexing `a[i]`", "[3]");
    one_error(&body("println!(\"hi\");"), "unsupported syntax: a macro invocation", "println!");
    one_error(&body("let v = println!(\"hi\");"), "unsupported syntax: a macro invocation", "println!");
    one_error(&body("return;"), "unsupported syntax: `return`", "return");
    one_error(&body("if n > 0 { return 1.0; }"), "a kernel cannot return a value", "return");
    // The returned value is still checked: its mistakes are independent.
    let errs = errors(&body("if n > 0 { return zzz; }"));
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_eq!((errs[1].0.as_str(), errs[1].1.as_str()), ("undefined variable `zzz`", "zzz"));
    one_error(&body("let v = if n > 0 { 1 } else { 2 };"), "`if` as a value", "if");
    one_error(&body("loop {}"), "unsupported syntax: `loop`", "loop");
    one_error(&body("let v = n << 2;"), "unsupported syntax: a shift operator", "<<");
    one_error(&body("let v = async { 1 };"), "unsupported syntax: an `async` block", "async");
    one_error(&body("let v = P { a: 1 };"), "unsupported syntax: a struct literal", "P");
    one_error(&body("let v = s.re;"), "unsupported syntax: field access", ".re");
    one_error(&body("let v = 0..n;"), "unsupported syntax: a range outside a `for` header", "..");
    one_error(&body("for i in 0..=n {}"), "inclusive range", "..=");
    one_error("fn k<T>(x: *const f32) {}", "a generic type parameter", "T");
    // Uses of the type parameter are the same mistake: reported once.
    one_error("fn k<T>(x: *const T, y: *mut T, s: T) {}", "a generic type parameter", "T");
    // So is the tail expression of a kernel declared to return a value.
    one_error("fn k(x: *const f32) -> f32 { load(x) }", "a kernel cannot return a value", "-> f32");
    one_error("fn k(x: *const f32) -> f32 {}", "a kernel cannot return a value", "-> f32");
    one_error("async fn k(x: *const f32) {}", "an `async` kernel", "async");
}

#[test]
fn error_tile_lengths_differ() {
    one_error(
        &body("let a = arange(0, BLOCK); let b = arange(0, 2 * BLOCK); let c = a + b;"),
        "tile lengths differ: BLOCK and 2 * BLOCK",
        "+",
    );
}

#[test]
fn error_if_condition_tile() {
    one_error(
        &body("let o = arange(0, BLOCK); if o < n { }"),
        "an `if` condition must be a scalar bool, found bool tile of length BLOCK",
        "o < n",
    );
    one_error(&body("if n { }"), "an `if` condition must be a bool, found i32 scalar", "n");
}

#[test]
fn documented_forms_of_the_language_reference_check() {
    // The language reference (docs/LANGUAGE.md) names these as accepted: float `%`, `offs + ptr` and `ptr - offs`, a
    // pointer variable advanced by `+=`, a `[N]` tile assigned into a `[M, N]` variable, `for _`,
    // method forms of `load`/`store`/`where_`, an integer literal to a math function, and an
    // expression statement.
    let src = "fn k<const BLOCK: usize>(x: *const f32, y: *mut f32, n: i32, s: f32) {
        let o = arange(0, BLOCK);
        let m = o < n;
        let v = (o + x).load(m) % s;
        let mut p = y + o;
        for _ in 0..n { p += 1; }
        let mut t = zeros([4, BLOCK]);
        t = v;
        load(x - 0);
        let w = m.where_(v * exp(1), 0.0);
        p.store(w + sum(t, 0), m);
    }";
    if let Err(e) = compile(src) {
        panic!("{:#?}", spanned(e));
    }
}

#[test]
fn documented_errors_of_the_language_reference() {
    // The language reference names these as compile errors; each is one error at its token.
    one_error(&body("for i in 0..n { break; }"), "unsupported syntax: `break`", "break");
    one_error(&body("for i in 0..n { continue; }"), "unsupported syntax: `continue`", "continue");
    let errs = errors(&body("store(y, f32::PI);"));
    assert_one_error(
        &errs,
        "unsupported syntax: the constant `f32::PI` is not part of the fuse tile language",
        "f32::PI",
    );
    assert!(errs[0].0.contains("`f32::NAN`"), "the help lists the constants: {}", errs[0].0);
    one_error(&body("let a = 7 / 0; store(y, a.to(f32));"), "division by zero in a constant expression", "/");
    one_error(
        &body("let o = arange(BLOCK, 2 * BLOCK); store(y + o, 1.0);"),
        "the start of `arange` must be an integer literal, found the const generic `BLOCK`",
        "BLOCK",
    );
    one_error(
        &body("let o = arange(0, BLOCK); let b = o && o;"),
        "`&&` cannot be applied to i32 tile of length BLOCK: `&&` and `||` take bools",
        "&&",
    );
    one_error(
        &body("let o = arange(0, BLOCK); store(y + o, o);"),
        "mismatched types: the value stored into `y` must be f32, found i32 tile of length BLOCK",
        "o",
    );
}

#[test]
fn error_loop_bounds() {
    one_error(&body("for i in 0..s { }"), "the loop end must be an integer scalar, found f32 scalar", "s");
    one_error(&body("for i in (0..n).step_by(0) { }"), "`step_by` needs a positive step, found 0", "0");
}

#[test]
fn error_store_value_type() {
    one_error(
        &body("let o = arange(0, BLOCK); store(y + o, o);"),
        "the value stored into `y` must be f32, found i32 tile of length BLOCK",
        "o",
    );
}

#[test]
fn error_store_tile_through_scalar_pointer() {
    one_error(
        &body("let o = arange(0, BLOCK); store(y, o.to(f32));"),
        "the stored value is f32 tile of length BLOCK, but the pointer offset is a scalar",
        "o.to(f32)",
    );
    assert!(errors(&body("let o = arange(0, BLOCK); store(y, o.to(f32));"))[0].0.contains("`y + offs`"));
    // The mask has the same shape problem: reported once, at the value.
    one_error(
        &body("let o = arange(0, BLOCK); store(y, o.to(f32), o < n);"),
        "the stored value is f32 tile of length BLOCK, but the pointer offset is a scalar",
        "o.to(f32)",
    );
}

#[test]
fn error_assign_type_mismatch() {
    one_error(
        &body("let mut a = 0.0; a = n;"),
        "mismatched types: `a` is f32 scalar, the value is i32 scalar",
        "n",
    );
    one_error(
        &body("let mut a = 0.0; a = arange(0, BLOCK).to(f32);"),
        "cannot assign f32 tile of length BLOCK to `a`, which is f32 scalar",
        "arange(0, BLOCK).to(f32)",
    );
}

#[test]
fn error_bool_arithmetic_and_logic() {
    one_error(&body("let b = n > 0; let c = b + b;"), "`+` cannot be applied to bool scalar", "+");
    one_error(&body("let c = n && n;"), "`&&` and `||` take bools", "&&");
    one_error(&body("let c = s & s;"), "bitwise operators take bools or integers", "&");
}

#[test]
fn error_pointer_misuse() {
    one_error(&body("let v = x * 2;"), "`*` is not defined on pointers", "*");
    one_error(&body("let v = exp(x);"), "expected a value, found a pointer into `x`", "x");
    one_error(
        &body("let mut p = x; p = y;"),
        "`p` points into `x`; it cannot be made to point into `y`",
        "y",
    );
}

#[test]
fn error_reserved_names() {
    one_error("fn k(device: *const f32) {}", "`device` cannot name a parameter", "device");
    one_error("fn k<const int: usize>(x: *const f32) {}", "`int` cannot name a const generic", "int");
    one_error("fn k<const N: i32>(x: *const f32) {}", "const generics of a kernel must be `usize`", "i32");
    one_error("fn k(x: *const f32, x: *const f32) {}", "declared more than once", "x");
}

#[test]
fn error_literal_out_of_range() {
    one_error(&body("let v = n + 3000000000;"), "the literal 3000000000 does not fit in i32", "3000000000");
}

#[test]
fn error_cdiv_float() {
    one_error(&body("let v = cdiv(s, 2);"), "`cdiv` takes integers, found f32 scalar", "s");
}

#[test]
fn error_store_returns_nothing() {
    one_error(&body("let v = store(y, 1.0);"), "store(..)` returns no value", "store(y, 1.0)");
}

#[test]
fn error_tail_value() {
    one_error(&body("n + 1"), "a kernel returns nothing", "n + 1");
}

#[test]
fn errors_are_all_collected_without_cascades() {
    let src = body(
        "let a = undefined_thing;
         let b = a + 1;            // a is poisoned: no second error
         let c = exp(n);
         let d = |q| q;
         let e = d + c;            // both poisoned
         store(x, 1.0);",
    );
    let errs = errors(&src);
    let msgs: Vec<&str> = errs.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(errs.len(), 4, "{msgs:#?}");
    assert!(msgs[0].contains("closure"), "parse errors first: {msgs:?}");
    assert!(msgs[1].contains("undefined variable `undefined_thing`"));
    assert!(msgs[2].contains("`exp` takes f32"));
    assert!(msgs[3].contains("cannot store through `x`"));
}

#[test]
fn error_spans_have_positions() {
    let errs = compile(&body("let v = n * 0.5;")).expect_err("an error");
    let span = errs.span();
    assert_eq!(span.start().line, 2);
    assert_eq!(span.start().column, 12);
}

// ---- expansion ------------------------------------------------------------------------------

fn expand_src(attr: &str, src: &str) -> String {
    expand::fused_kernel(tokens(attr), tokens(src)).to_string()
}

#[test]
fn expands_to_module_with_launcher() {
    let out =
        expand::fused_kernel(TokenStream::new(), tokens(&format!("/// Adds and multiplies.\n{}", add_mul())));
    let module: syn::ItemMod =
        syn::parse2(out.clone()).unwrap_or_else(|e| panic!("not a module: {e}\n{out}"));
    assert_eq!(module.ident, "add_mul");
    assert!(matches!(module.vis, syn::Visibility::Public(_)));
    assert!(module.attrs.iter().any(|a| a.path().is_ident("doc")));
    let text = out.to_string();
    for needle in [
        "pub const NAME : & str = \"add_mul\"",
        "pub const SOURCE : & str =",
        "pub const IR_JSON : & str =",
        "pub static SPEC : :: fuse :: KernelSpec = :: fuse :: KernelSpec :: new (NAME , SOURCE , IR_JSON , & [",
        "pub fn launch < const BLOCK : usize > (device : & :: fuse :: Device , config : impl :: core :: convert :: Into < :: fuse :: LaunchConfig > , x : & (impl :: fuse :: DeviceRead < f32 > + ? :: core :: marker :: Sized) , y : & (impl :: fuse :: DeviceRead < f32 > + ? :: core :: marker :: Sized) , z : & (impl :: fuse :: DeviceRead < f32 > + ? :: core :: marker :: Sized) , out : & mut (impl :: fuse :: DeviceWrite < f32 > + ? :: core :: marker :: Sized) , n : i32)",
        "-> :: core :: result :: Result < () , :: fuse :: Error >",
        "const { :: core :: assert ! (BLOCK . is_power_of_two () , \"fuse: const generic BLOCK of kernel add_mul must be a power of two, like 256 or 1024 (a run-time size goes through fuse::with_block!)\") } ;",
        ":: fuse :: launch (& SPEC , device , config . into () , & [BLOCK as u64] , & mut [:: fuse :: DeviceRead :: < f32 > :: kernel_arg (x) , :: fuse :: DeviceRead :: < f32 > :: kernel_arg (y) , :: fuse :: DeviceRead :: < f32 > :: kernel_arg (z) , :: fuse :: DeviceWrite :: < f32 > :: kernel_arg_mut (out) , :: fuse :: KernelArg :: from (n)])",
    ] {
        assert!(text.contains(needle), "missing {needle}\nin {text}");
    }
    // The specializations are the emitter's, spelled as paths.
    let specs = crate::emit_cuda::emit_cuda(&ok(&add_mul())).specializations;
    for s in &specs {
        let spelled = match s {
            Specialization::Align16(i) => format!(":: fuse :: fuse_ir :: Specialization :: Align16 ({i}u32)"),
            Specialization::Div16(i) => format!(":: fuse :: fuse_ir :: Specialization :: Div16 ({i}u32)"),
            Specialization::InBounds(i) => {
                format!(":: fuse :: fuse_ir :: Specialization :: InBounds ({i}u32)")
            }
            Specialization::AllTrue(i) => format!(":: fuse :: fuse_ir :: Specialization :: AllTrue ({i}u32)"),
            Specialization::BranchTaken(i) => {
                format!(":: fuse :: fuse_ir :: Specialization :: BranchTaken ({i}u32)")
            }
            Specialization::BranchSkipped(i) => {
                format!(":: fuse :: fuse_ir :: Specialization :: BranchSkipped ({i}u32)")
            }
            Specialization::TensorBox(i) => {
                format!(":: fuse :: fuse_ir :: Specialization :: TensorBox ({i}u32)")
            }
        };
        assert!(text.contains(&spelled), "missing {spelled}");
    }
    // The IR in the module is the checked kernel.
    let ir = module
        .content
        .iter()
        .flat_map(|(_, items)| items)
        .find_map(|i| match i {
            syn::Item::Const(c) if c.ident == "IR_JSON" => match &*c.expr {
                syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .expect("IR_JSON");
    assert_eq!(Kernel::from_json(&ir).expect("valid IR"), ok(&add_mul()));
}

#[test]
fn expands_half_buffers() {
    let text = expand_src("", &with_dtype(&layernorm_f16(), "f16", "bf16"));
    assert!(
        text.contains(
            "x : & (impl :: fuse :: DeviceRead < :: fuse :: half :: bf16 > + ? :: core :: marker :: Sized)"
        ),
        "{text}"
    );
    assert!(text.contains("y : & mut (impl :: fuse :: DeviceWrite < :: fuse :: half :: bf16 > + ? :: core :: marker :: Sized)"), "{text}");
    assert!(text.contains("eps : f32"));
}

#[test]
fn expands_errors_with_stub() {
    let out = expand::fused_kernel(TokenStream::new(), tokens(&body("let v = n * 0.5; let w = exp(n);")));
    let text = out.to_string();
    assert_eq!(text.matches("compile_error").count(), 2, "{text}");
    assert!(text.contains(":: core :: unreachable ! ()"));
    assert!(text.contains("pub fn launch < const BLOCK : usize > (device : & :: fuse :: Device"));
    let file: syn::File = syn::parse2(out).expect("errors + module parse");
    assert!(file.items.iter().any(|i| matches!(i, syn::Item::Mod(m) if m.ident == "k")));
}

#[test]
fn stub_keeps_signature_of_bad_params() {
    let text = expand_src("", "pub fn k(x: Vec<f32>, y: *mut f16) {}");
    assert!(text.contains("x : impl :: core :: marker :: Sized"), "{text}");
    assert!(text.contains("y : & mut (impl :: fuse :: DeviceWrite < :: fuse :: half :: f16 > + ? :: core :: marker :: Sized)"), "{text}");
}

#[test]
fn attribute_arguments_are_rejected() {
    let text = expand_src("num_warps = 4", &add_mul());
    assert!(text.contains("takes no arguments"), "{text}");
    assert!(text.contains("pub mod add_mul"));
}

#[test]
fn non_function_items_are_reported_and_kept() {
    let text = expand_src("", "struct S { a: i32 }");
    assert!(text.contains("applies to a function"));
    assert!(text.contains("struct S"));
}

/// The source text under each `compile_error!` of an expansion.
fn expansion_error_texts(out: &TokenStream) -> Vec<String> {
    let mut texts = Vec::new();
    for t in out.clone() {
        if let proc_macro2::TokenTree::Ident(i) = &t {
            if i == "compile_error" {
                texts.push(i.span().source_text().unwrap_or_default());
            }
        }
    }
    texts
}

#[test]
fn parse_errors_at_the_end_of_the_item_point_at_its_last_token() {
    // A missing body: syn says "unexpected end of input" at the call site; we point at `)`.
    let out = expand::fused_kernel(TokenStream::new(), tokens("fn k(x: *const f32)"));
    assert_eq!(expansion_error_texts(&out), [")"], "{out}");
    let out = expand::fused_kernel(TokenStream::new(), tokens("struct S { a: i32 }"));
    // (`compile_error` carries the first token's span; rustc underlines `struct S`, see tests/ui.)
    assert_eq!(expansion_error_texts(&out), ["struct"], "{out}");
}

#[test]
fn stray_semicolons_are_fine() {
    ok("fn k(x: *mut f32) { ; store(x, 1.0);; }");
}

#[test]
fn quote_token_streams_work_too() {
    let item = quote::quote! {
        fn scale<const BLOCK: usize>(x: *mut f32, a: f32) {
            let o = arange(0, BLOCK);
            store(x + o, load(x + o) * a);
        }
    };
    let out = expand::fused_kernel(TokenStream::new(), item);
    assert!(syn::parse2::<syn::ItemMod>(out).is_ok());
}

#[test]
fn macro_never_panics_on_odd_input() {
    for src in [
        "fn k() {}",
        "fn k(x: *const f32) { let v = load(x); }",
        "fn k(x: *mut f32) { store(x, f32::NEG_INFINITY); store(x, -f32::INFINITY); }",
        "fn k(x: *mut f32) { let a = 1 / 0; }",
        "fn k(x: *mut f32) { let a = 99999999999999999999u64; }",
        "fn k(x: *mut u64) { store(x, 18446744073709551615); }",
        "fn k(x: *mut f32) { let a = arange(0, 0); let b = arange(5, 3); let c = zeros(3); }",
        "fn k<const B: usize>(x: *mut f32) { let a = arange(B, 2 * B); let b = arange(0, B + 1); let c = arange(0, B / B); }",
        "fn k(x: *mut f32) { let δ = 1.0; store(x, δ); }",
        "fn k(self) {}",
        "fn k((a, b): (i32, i32)) {}",
        "fn k(x: *mut f32) { let _ = load(x); for _ in 0..4 {} let a = x.to(q); let b = 1 as usize; }",
        "fn k(x: *mut f32) { let a = 2 * -(3 - 4) % 5; let b = a & 1 | 2 ^ 3; let mut c = a; c -= 1; c *= 2; c /= 3; c %= 4; }",
    ] {
        let _ = expand::fused_kernel(TokenStream::new(), tokens(src));
        let _ = compile(src);
    }
}

#[test]
fn more_errors() {
    one_error("fn k(x: &mut [f32]) {}", "references are not kernel parameters", "&mut [f32]");
    assert!(errors("fn k(x: &mut [f32]) {}")[0].0.contains("take a pointer, `*mut f32`"));
    one_error(&body("let a: f32 = 1.0;"), "a type annotation on `let`", "f32");
    one_error(&body("let a = exp;"), "`exp` is a function, not a value", "exp");
    one_error(&body("let a = f32;"), "`f32` is a type, not a value", "f32");
    one_error(&body("let a = x.to(f64);"), "unsupported cast target `f64`", "f64");
    one_error(&body("let a = 1.5u32;"), "a float literal cannot have an integer suffix", "1.5u32");
    one_error(&body("let a = 1usize;"), "unsupported literal suffix `usize`", "1usize");
    one_error(
        &body("let a = f64::MAX;"),
        "the path `f64::MAX` is not part of the fuse tile language",
        "f64::MAX",
    );
    one_error(&body("let a = fuse::load(x);"), "a path call", "fuse::load");
    one_error(&body("for i in 0..n { } let j = i;"), "undefined variable `i`", "i");
    one_error(
        &body("let b = n.to(i64); for i in b..n { }"),
        "the loop end is i32, but the loop counts in i64",
        "n",
    );
    one_error(
        &body("let a = arange(0, BLOCK); let b = zeros(n);"),
        "the length of `zeros` must be a compile-time constant, found i32 scalar",
        "n",
    );
    one_error(
        &body("let a = arange(0, BLOCK) + 1.0;"),
        "a float literal next to i32 tile of length BLOCK",
        "1.0",
    );
    one_error(
        &body("let a = sum(arange(0, BLOCK) < n);"),
        "`sum` cannot reduce a bool tile",
        "arange(0, BLOCK) < n",
    );
    one_error(
        &body("let a = abs(n.to(u32));"),
        "`abs` takes f32 or a signed integer, found u32 scalar",
        "n.to(u32)",
    );
    one_error(&body("let a = -(n > 0);"), "`-` cannot be applied to bool scalar", "-(n > 0)");
    one_error(&body("let a = !s;"), "`!` cannot be applied to f32 scalar", "!s");
    one_error(
        &body("let o = arange(0, BLOCK); let a = load(x + o, o < n, arange(0, 2 * BLOCK).to(f32));"),
        "tile lengths differ",
        "arange(0, 2 * BLOCK).to(f32)",
    );
}

#[test]
fn parameters_shadowed_and_reused() {
    let k = ok(r#"
        fn shadow<const BLOCK: usize>(x: *const f32, n: i32, out: *mut f32) {
            let n = n * 2;
            let x = x + n;
            let v = load(x + arange(0, BLOCK));
            let x = v * 2.0;
            store(out + arange(0, BLOCK), x);
        }"#);
    assert_eq!(var(&k, "n_1").ty, Ty::scalar(DType::I32));
    assert_eq!(var(&k, "x_1").ty, Ty::tile(DType::F32, block()));
    assert_eq!(loads(&k)[0].1, 0);
}

#[test]
fn tile_length_out_of_range_is_an_error_not_a_panic() {
    for len in ["B * 1073741824 * 1073741824 * 16", "B / 1073741824 / 1073741824 / 1073741824"] {
        let src = format!(
            "fn k<const B: usize>(y: *mut f32) {{ let t = zeros({len}); store(y + arange(0, B), t); }}"
        );
        let errs = errors(&src);
        assert!(errs.iter().any(|(m, _)| m.contains("out of range")), "{len}: {errs:#?}");
    }
}
