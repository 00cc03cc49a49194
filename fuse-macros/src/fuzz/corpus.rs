//! The valid kernels the fuzzer starts from: the example kernels, read from their files, and the
//! trickier forms of tests/ui/pass.

/// The example kernels (the seed patterns and the later ones), read from their files so the corpus
/// follows them.
const EXAMPLE_FILES: &[&str] = &[
    include_str!("../../../fuse-kernels/src/add_mul.rs"),
    include_str!("../../../fuse-kernels/src/softmax.rs"),
    include_str!("../../../fuse-kernels/src/layernorm.rs"),
    include_str!("../../../fuse-kernels/src/bias_gelu_dropout.rs"),
    include_str!("../../../fuse-kernels/src/add_rmsnorm.rs"),
    include_str!("../../../fuse-kernels/src/silu_and_mul.rs"),
    include_str!("../../../fuse-kernels/src/layernorm_quant.rs"),
    include_str!("../../../fuse-kernels/src/l2norm.rs"),
    // `dot` kernels: a K loop into an accumulator, `trans` of a loaded operand, an i8 one, a
    // computed operand cast back to its type.
    include_str!("../../../fuse-kernels/src/matmul.rs"),
    include_str!("../../../fuse-kernels/src/matmul_int8.rs"),
    include_str!("../../../fuse-kernels/src/ffn_sublayer.rs"),
    // The 2-D kernels (softmax over rows, every shape operation).
    include_str!("../../../tests/tiles_2d.rs"),
];

/// Every valid kernel: the `#[fused_kernel]` fns of the example files (attribute stripped) and the
/// trickier forms of tests/ui/pass below.
pub(super) fn seeds() -> &'static [&'static str] {
    static SEEDS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    SEEDS.get_or_init(|| {
        let mut seeds: Vec<&'static str> = Vec::new();
        for file in EXAMPLE_FILES {
            let parsed =
                syn::parse_file(file).unwrap_or_else(|e| panic!("example kernel file does not parse: {e}"));
            for item in parsed.items {
                if let syn::Item::Fn(mut f) = item {
                    if f.attrs.iter().any(|a| a.path().is_ident("fused_kernel")) {
                        f.attrs.retain(|a| !a.path().is_ident("fused_kernel"));
                        seeds.push(Box::leak(quote::quote!(#f).to_string().into_boxed_str()));
                    }
                }
            }
        }
        assert!(seeds.len() >= 11, "expected the example and 2-D kernels, found {}", seeds.len());
        seeds.extend_from_slice(TRICKY);
        seeds
    })
}

/// The trickier valid forms of tests/ui/pass.
const TRICKY: &[&str] = &[
    r#"fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, rows: i32, stride: i32) {
        let cols = arange(0, BLOCK);
        let mut src = x + program_id(0) * BLOCK;
        let mut dst = out + program_id(0) * BLOCK;
        for _ in 0..rows {
            store(dst + cols, load(src + cols) + 1.0);
            src += stride;
            dst = dst + stride;
        }
    }"#,
    r#"fn k<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32, mode: i32) {
        let offs = program_id(0) * BLOCK + arange(0, BLOCK);
        let mask = offs < n;
        let v = load(x + offs, mask);
        let mut r = v;
        if mode == 0 { r = v * 2.0; } else if mode == 1 && n > 16 { r = exp(v); } else if mode != 2 { r = zeros(BLOCK); } else { r = r + 1.0; }
        store(out + offs, r, mask);
    }"#,
    r#"fn k<const BLOCK: usize>(x: *const f32, idx: *mut i32, y: *mut f32, n: i32) {
        let offs = program_id(0) * BLOCK + arange(0, BLOCK);
        let mask = offs < n;
        let v = load(x + offs, mask, f32::NEG_INFINITY);
        let e = (v - v.max()).exp();
        let i = v.to(i32);
        let j = (v * 4.0) as i64;
        store(idx + offs, i + j.to(i32), mask);
        store(y + offs, e / e.sum() + offs.to(f32) + (n as u32).to(f32) + mask.to(f32), mask);
    }"#,
    r#"fn k<const BLOCK: usize>(a: *const f16, b: *const bf16, c: *const i8, d: *const u8, out: *mut f16, q: *mut u8, n: i32) {
        let offs = program_id(0) * BLOCK + arange(0, BLOCK);
        let m = offs < n;
        let s = load(a + offs, m) + load(b + offs, m) * 0.5;
        let t = load(c + offs, m) + load(d + offs, m);
        store(out + offs, s + t.to(f32), m);
        store(q + offs, t, m);
    }"#,
    r#"fn k<const BLOCK: usize>(out: *mut i32, seed32: i32, seed64: u64, n: i32) {
        let tiles = cdiv(n, 2 * BLOCK);
        for t in (0..tiles).step_by(2) {
            let offs = t * (2 * BLOCK) + arange(0, 2 * BLOCK) + program_id(1) * num_programs(2);
            let r = rand(seed32, offs) + rand(seed64, offs) + rand(42, offs);
            store(out + offs, full(2 * BLOCK, t) + cdiv(offs, 4) + where_(r > 0.5, 1, -1), offs < n);
        }
    }"#,
    r#"fn mean_sq<T: Float, O: Half, const BLOCK: usize>(x: *const T, out: *mut O, w: *const f32, n: i32) {
        let cols = arange(0, BLOCK);
        let v = minimum(load(x + program_id(0) * n + cols, cols < n, 0.0), T::MAX) * load(w + cols, cols < n);
        let m = (sum(v * v) / n as f32).to(O) as T;
        store(out + program_id(0), maximum(m, O::MIN_POSITIVE) + T::EPSILON);
    }"#,
    r#"fn fill(out: *mut u64, value: u64, n: i64) {
        let offs = program_id(0).to(i64) * 256 + arange(0, 256).to(i64);
        let v = maximum(full(256, value) * 3 + 1, value) ^ 7;
        store(out + offs, minimum(v, value), offs < n && offs >= 0);
    }"#,
    // 2-D: a pointer with row offsets, a [R, 1] mask under [R, C] offsets, f16 in and bf16 out,
    // scalar broadcast_to, trans twice, reshape through 1-D, arg-reductions of both kinds.
    r#"fn k<const R: usize, const C: usize>(x: *const f16, idx: *mut i32, out: *mut bf16, n: i32) {
        let r = arange(0, R);
        let c = arange(0, C);
        let p = x + r.expand_dims(1) * C;
        let m = r.expand_dims(1) < n;
        let v = load(p + c.expand_dims(0), m, 0.0);
        let z = broadcast_to(1.5, [R, C]) + v.trans().trans();
        let flat = z.reshape([R * C]).reshape([C, R]);
        store(idx + c, flat.argmax(1).maximum(argmin(z, 0)));
        store(idx + program_id(0), argmax(z) + argmin(flat));
        store(out + r.expand_dims(1) * C + c.expand_dims(0), where_(m, z, full([1, C], 2.0)), m);
    }"#,
    // 2-D: a [R, B] accumulator over column blocks, reduced along the rows.
    r#"fn k<const R: usize, const B: usize>(x: *const f32, out: *mut f32, n_rows: i32, n_cols: i32) {
        let rows = program_id(0) * R + arange(0, R);
        let rmask = (rows < n_rows).expand_dims(1);
        let mut acc = zeros([R, B]);
        let p = x + rows.expand_dims(1) * n_cols;
        for start in (0..n_cols).step_by(B) {
            let cols = start + arange(0, B);
            let v = load(p + cols.expand_dims(0), rmask & (cols < n_cols).expand_dims(0), 0.0);
            acc += v * v;
        }
        let ms = acc.sum(1) / n_cols.to(f32);
        store(out + rows, rsqrt(ms + 1e-5), rows < n_rows);
    }"#,
    // 2-D, generic: T tiles widen against an f32 row, a transposed store, T::MAX.
    r#"fn k<T: Float, const M: usize, const N: usize>(x: *const T, out: *mut T, w: *const f32) {
        let r = arange(0, M);
        let c = arange(0, N);
        let t = load(x + r.expand_dims(1) * N + c.expand_dims(0));
        let s = (t * load(w + c)).sum(1).expand_dims(1);
        let u = minimum(t / s, T::MAX).to(T);
        store(out + c.expand_dims(1) * M + r.expand_dims(0), u.trans());
        store(out + r, zeros([M, 1]).sum(1).to(T));
    }"#,
    // 2-D: rand over 2-D offsets, [1, 1] and [M, 1] tiles, broadcast_to as a method.
    r#"fn k<const M: usize, const N: usize>(out: *mut f32, seed: u64, p: f32) {
        let offs = arange(0, M).expand_dims(1) * N + arange(0, N).expand_dims(0);
        let keep = rand(seed, offs) > p;
        let keep16 = rand16(seed, offs + 3) > p;
        let ones = full([1, 1], 1.0);
        let col = full([M, 1], 2.0).broadcast_to([M, N]);
        store(out + offs, where_(keep & keep16, col * ones, 0.0) + zeros([N]).expand_dims(0));
    }"#,
];
