//! `dot(a, b[, acc])`: operands typed by their storage type, the accumulator's type and shape, the
//! method form, and one spanned error naming both shapes for each mistake; const generic dims
//! become launch-time assertions.
//!
//! Sources are parsed from strings so spans carry real positions (see `tests.rs`).

use crate::expand;
use crate::tests::{assert_one_error, errors, ok, var_id};
use fuse_ir::{DType, Expr, Kernel, Len, Shape, Stmt, Ty, VarId};

/// A kernel multiplying an `a` tile of `[M, K]` loaded from `*const TA` (the expression `A`, in
/// which `xa` is the loaded tile) by `b` of `[K, N]` from `*const TB` (`B`, over `xb`), storing
/// `R` (over `r`, the product) into `*mut f32`.
fn kernel(ta: &str, tb: &str, m: u32, k: u32, n: u32, body: &str) -> String {
    format!(
        "fn mm(pa: *const {ta}, pb: *const {tb}, pc: *mut f32, pi: *mut i32, pacc: *const f16) {{
    let rm = arange(0, {m});
    let rk = arange(0, {k});
    let rn = arange(0, {n});
    let xa = load(pa + rm.expand_dims(1) * {k} + rk.expand_dims(0));
    let xb = load(pb + rk.expand_dims(1) * {n} + rn.expand_dims(0));
    let oc = rm.expand_dims(1) * {n} + rn.expand_dims(0);
    {body}
}}"
    )
}

fn dot_of(k: &Kernel, name: &str) -> (VarId, VarId, Option<VarId>) {
    let id = var_id(k, name);
    let mut found = None;
    k.visit_stmts(&mut |s| {
        if let Stmt::Assign { dst, expr: Expr::Dot { a, b, acc } } = s {
            if *dst == id {
                found = Some((*a, *b, *acc));
            }
        }
    });
    found.unwrap_or_else(|| panic!("{name} is not assigned a dot"))
}

fn lit(n: u32) -> Len {
    Len::literal_log2(n.trailing_zeros() as i32)
}

#[test]
fn operands_keep_their_storage_type() {
    for (input, acc) in [("f16", DType::F32), ("bf16", DType::F32), ("f32", DType::F32), ("i8", DType::I32)] {
        let store = if acc == DType::I32 { "pi" } else { "pc" };
        let k =
            ok(&kernel(input, input, 32, 16, 64, &format!("let r = dot(xa, xb); store({store} + oc, r);")));
        let (a, b, c) = dot_of(&k, "r");
        assert_eq!(k.ty(a).dtype.name(), input, "the loaded tile itself, not its widening");
        assert_eq!((a, b), (var_id(&k, "xa"), var_id(&k, "xb")));
        assert_eq!(c, None);
        assert_eq!(k.ty(var_id(&k, "r")), &Ty::tile2(acc, lit(32), lit(64)), "{input}");
    }
}

#[test]
fn computed_tiles_are_converted_back_to_their_storage_type() {
    // Arithmetic on f16 is f32; `.to(f16)` makes an f16 operand again.
    let k = ok(&kernel("f16", "f16", 16, 32, 16, "let r = dot((xa * 2.0).to(f16), xb); store(pc + oc, r);"));
    let (a, _, _) = dot_of(&k, "r");
    assert_eq!(k.ty(a).dtype, DType::F16);
    // And f32 values multiply as TF32 (f32 operands), whatever they were computed from.
    let k = ok(&kernel("f16", "f16", 16, 32, 16, "let r = dot(xa * 2.0, xb.to(f32)); store(pc + oc, r);"));
    let (a, b, _) = dot_of(&k, "r");
    assert_eq!((k.ty(a).dtype, k.ty(b).dtype), (DType::F32, DType::F32));
}

#[test]
fn accumulators_and_the_method_form() {
    let k = ok(&kernel(
        "bf16",
        "bf16",
        16,
        16,
        32,
        "let mut acc = zeros([16, 32]);
    for i in 0..4 {
        acc = dot(xa, xb, acc);
    }
    let m = xa.dot(xb);
    let m2 = xa.dot(xb, acc);
    let h = load(pacc + oc);
    let w = dot(xa, xb, h);
    store(pc + oc, acc + m + m2 + w);",
    ));
    // `acc = dot(.., acc)` assigns the accumulator in place.
    let (_, _, c) = dot_of(&k, "acc");
    assert_eq!(c, Some(var_id(&k, "acc")));
    assert_eq!(dot_of(&k, "m").2, None);
    assert_eq!(dot_of(&k, "m2").2, Some(var_id(&k, "acc")));
    // An f16 accumulator widens to f32, as any arithmetic operand.
    let (_, _, c) = dot_of(&k, "w");
    let c = c.expect("an accumulator");
    assert_eq!(k.ty(c), &Ty::tile2(DType::F32, lit(16), lit(32)));
    assert_ne!(c, var_id(&k, "h"));
    // An i32 accumulator for i8.
    ok(&kernel("i8", "i8", 16, 64, 16, "let r = dot(xa, xb, full([16, 16], 7)); store(pi + oc, r);"));
}

#[test]
fn const_generic_dims_are_asserted_at_the_launch() {
    let src = "fn mm<const BM: usize, const BK: usize>(pa: *const f16, pb: *const f16, pc: *mut f32) {
    let rm = arange(0, BM);
    let rk = arange(0, 2 * BK);
    let rn = arange(0, 64);
    let xa = load(pa + rm.expand_dims(1) * (2 * BK) + rk.expand_dims(0));
    let xb = load(pb + rk.expand_dims(1) * 64 + rn.expand_dims(0));
    store(pc + rm.expand_dims(1) * 64 + rn.expand_dims(0), dot(xa, xb));
}";
    let k = ok(src);
    let (a, _, _) = dot_of(&k, &k.vars[k.vars.len() - 1].name.clone());
    assert_eq!(k.ty(a).shape, Shape::Tile2(Len::of_const(0), Len::of_const(1).mul(&lit(2))));
    let out = expand::fused_kernel(proc_macro2::TokenStream::new(), src.parse().unwrap()).to_string();
    assert!(!out.contains("compile_error"), "{out}");
    // M = BM needs BM >= 16; K = 2 * BK needs BK >= 8; N = 64 needs nothing.
    assert!(out.contains("0i64 + BM . trailing_zeros () as i64 >= 4i64"), "{out}");
    assert!(out.contains("1i64 + BK . trailing_zeros () as i64 >= 4i64"), "{out}");
    assert!(out.contains("`dot` needs M, N and K of at least 16, and its M is BM"), "{out}");
    assert!(out.contains("and its K is 2 * BK"), "{out}");
    assert_eq!(out.matches("trailing_zeros").count(), 2, "no assertion for literal dims: {out}");
}

// ---- one mistake each: one error, spanned, naming both shapes -------------------------------------

#[test]
fn error_inner_dimensions_differ() {
    let src = kernel(
        "f16",
        "f16",
        32,
        16,
        64,
        "let xb2 = reshape(xb, [32, 32]); let r = dot(xa, xb2); store(pc + oc, r);",
    );
    assert_one_error(
        &errors(&src),
        "the inner dimensions of `dot` differ: `a` is [32, 16] and `b` is [32, 32]",
        "dot(xa, xb2)",
    );
}

#[test]
fn error_accumulator_shape() {
    let src = kernel("f16", "f16", 32, 16, 64, "let r = xa.dot(xb, zeros([64, 32])); store(pc + oc, r);");
    assert_one_error(
        &errors(&src),
        "the accumulator of `dot` has shape [64, 32], but `a` [32, 16] times `b` [16, 64] is [32, 64]",
        "zeros([64, 32])",
    );
    let src = kernel("f16", "f16", 32, 16, 64, "let r = dot(xa, xb, 0.0); store(pc + oc, r);");
    assert_one_error(
        &errors(&src),
        "the accumulator of `dot` must be a [32, 64] tile, found a float literal",
        "0.0",
    );
}

#[test]
fn error_accumulator_dtype() {
    let src = kernel("f16", "f16", 32, 16, 64, "let r = dot(xa, xb, full([32, 64], 0)); store(pc + oc, r);");
    assert_one_error(
        &errors(&src),
        "the accumulator of `dot` must be f32 (f16 operands accumulate in f32), found i32 tile of shape [32, 64]",
        "full([32, 64], 0)",
    );
    let src = kernel("i8", "i8", 32, 16, 64, "let r = dot(xa, xb, zeros([32, 64])); store(pi + oc, r);");
    assert_one_error(
        &errors(&src),
        "the accumulator of `dot` must be i32 (i8 operands accumulate in i32), found f32 tile of shape [32, 64]",
        "zeros([32, 64])",
    );
}

#[test]
fn error_mixed_element_types() {
    let src = kernel("f16", "bf16", 32, 16, 64, "let r = dot(xa, xb); store(pc + oc, r);");
    assert_one_error(
        &errors(&src),
        "mismatched element types in `dot`: `a` is f16 tile of shape [32, 16] and `b` is bf16 tile of shape [16, 64]",
        "xa, xb",
    );
    // f16 next to f32 (arithmetic widened it): the help says how to get the f16 back.
    let src = kernel("f16", "f16", 32, 16, 64, "let r = dot(xa * 2.0, xb); store(pc + oc, r);");
    let errs = errors(&src);
    assert_one_error(
        &errs,
        "`a` is f32 tile of shape [32, 16] and `b` is f16 tile of shape [16, 64]",
        "xa * 2.0, xb",
    );
    assert!(errs[0].0.contains("convert `a` back with `.to(f16)`"), "{}", errs[0].0);
}

#[test]
fn error_unsupported_element_types() {
    let src = kernel("i32", "i32", 32, 16, 64, "let r = dot(xa, xb); store(pi + oc, r);");
    let errs = errors(&src);
    assert_eq!(errs.len(), 2, "one per operand: {errs:#?}");
    assert!(errs[0].0.contains(
        "`dot` multiplies f16, bf16, f32 (as TF32) or i8 tiles, but `a` is i32 tile of shape [32, 16]"
    ));
    assert_eq!((errs[0].1.as_str(), errs[1].1.as_str()), ("xa", "xb"));
    let src = kernel("u8", "i8", 32, 16, 64, "let r = dot(xa, xb); store(pi + oc, r);");
    assert_one_error(&errors(&src), "but `a` is u8 tile of shape [32, 16]", "xa");
}

#[test]
fn error_dims_below_16() {
    let src = kernel("f16", "f16", 32, 8, 64, "let r = dot(xa, xb); store(pc + oc, r);");
    assert_one_error(
        &errors(&src),
        "`dot` needs M, N and K of at least 16: `a` is [32, 8] and `b` is [8, 64] (K = 8)",
        "dot(xa, xb)",
    );
    let src = kernel("f16", "f16", 8, 16, 64, "let r = dot(xa, xb); store(pc + oc, r);");
    assert_one_error(&errors(&src), "`a` is [8, 16] and `b` is [16, 64] (M = 8)", "xa");
    let src = kernel("f16", "f16", 16, 16, 4, "let r = xa.dot(xb); store(pc + oc, r);");
    assert_one_error(&errors(&src), "`a` is [16, 16] and `b` is [16, 4] (N = 4)", "xb");
}

#[test]
fn error_operands_not_2d() {
    let src =
        kernel("f16", "f16", 32, 16, 64, "let v = load(pa + rk); let r = dot(v, xb); store(pc + oc, r);");
    assert_one_error(&errors(&src), "`dot` multiplies 2-D tiles, but `a` is f16 tile of length 16", "v");
    let src = kernel("f16", "f16", 32, 16, 64, "let r = dot(xa, 2.0); store(pc + oc, r);");
    assert_one_error(&errors(&src), "`dot` multiplies 2-D tiles, but `b` is a float literal", "2.0");
    let src = kernel("f16", "f16", 32, 16, 64, "let r = dot(xa); store(pc + oc, r);");
    assert_one_error(&errors(&src), "`dot` takes 2 to 3 arguments (a, b, acc), found 1", "dot");
}

#[test]
fn a_wrong_operand_is_reported_once() {
    // The undefined name is the only error: the dot, and the store of its result, say nothing more.
    let src = kernel("f16", "f16", 32, 16, 64, "let r = dot(xq, xb); store(pc + oc, r);");
    assert_one_error(&errors(&src), "undefined variable `xq`", "xq");
}
