//! The macro never panics (issue 4.5): random and mutated kernels go through the compiler's entry
//! point, and each must give either a kernel module or spanned `compile_error!`s, never a panic.
//!
//! Three kinds of input, from a seeded generator (so a failure is reproducible from its case number):
//! * token-level mutations of valid kernels (delete, duplicate, swap, replace tokens; idents
//!   replaced by other idents, keywords or literals; literals changed; groups dropped, unwrapped,
//!   re-delimited or added), one to four per case; the valid kernels include the 2-D ones of
//!   tests/tiles_2d.rs and a few more (shape operations, axis and arg reductions, generic 2-D);
//! * kernels generated from a small grammar of the tile language (signatures, `let`, assignments,
//!   `store`, `if`, `for`, calls with right and wrong arities, methods, casts, operators, shape
//!   literals and axes for the 2-D functions), whose names and types are chosen at random, so most
//!   of them are wrong in some way; a quarter are generic (`T: Float`, `O: Half`, wrong bounds,
//!   defaults, `where` clauses) and use their type parameters in pointer types, casts and
//!   constants (`T::MAX`);
//! * typed 2-D kernels (issue 14), built from a model of the types and shapes so that they are
//!   right: they must check and expand without errors; half of them get one statement that is
//!   wrong in a known way (axis out of range or not a literal, a reduction of a scalar, a reshape
//!   to another lane count, `trans` of a 1-D tile, shapes that do not broadcast, ...) and must give
//!   a spanned error (see "(c) typed 2-D kernels").
//!
//! `FUSE_FUZZ_CASES` overrides the number of cases of the first two kinds (default 12,000),
//! `FUSE_FUZZ_TYPED_CASES` of the third (default 2,000); `FUSE_FUZZ_SEED` the seed.

use crate::expand;
use proc_macro2::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

/// The example kernels (the seed patterns and the later ones), read from their files so the corpus
/// follows them.
const EXAMPLE_FILES: &[&str] = &[
    include_str!("../../examples/kernels/add_mul.rs"),
    include_str!("../../examples/kernels/softmax.rs"),
    include_str!("../../examples/kernels/layernorm.rs"),
    include_str!("../../examples/kernels/bias_gelu_dropout.rs"),
    include_str!("../../examples/kernels/add_rmsnorm.rs"),
    include_str!("../../examples/kernels/silu_and_mul.rs"),
    include_str!("../../examples/kernels/layernorm_quant.rs"),
    include_str!("../../examples/kernels/l2norm.rs"),
    // `dot` kernels: a K loop into an accumulator, `trans` of a loaded operand, an i8 one, a
    // computed operand cast back to its type.
    include_str!("../../examples/kernels/matmul.rs"),
    include_str!("../../examples/kernels/matmul_int8.rs"),
    include_str!("../../examples/kernels/ffn_sublayer.rs"),
    // The 2-D kernels (softmax over rows, every shape operation).
    include_str!("../../tests/tiles_2d.rs"),
];

/// Every valid kernel: the `#[fused_kernel]` fns of the example files (attribute stripped) and the
/// trickier forms of tests/ui/pass below.
fn seeds() -> &'static [&'static str] {
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

/// Names the mutator and the grammar draw from: the language's functions and types, keywords,
/// Rust-only names, and the seeds' variables.
const IDENTS: &[&str] = &[
    "program_id",
    "num_programs",
    "arange",
    "zeros",
    "full",
    "load",
    "store",
    "where_",
    "maximum",
    "minimum",
    "sum",
    "max",
    "min",
    "cdiv",
    "rand",
    "rand16",
    "abs",
    "exp",
    "exp2",
    "log",
    "log2",
    "sqrt",
    "rsqrt",
    "erf",
    "tanh",
    "sigmoid",
    "floor",
    "ceil",
    "sin",
    "cos",
    "to",
    "step_by",
    "expand_dims",
    "broadcast_to",
    "reshape",
    "trans",
    "split",
    "join",
    "dot",
    "argmax",
    "argmin",
    "f32",
    "f16",
    "bf16",
    "i32",
    "i64",
    "u32",
    "u64",
    "u8",
    "i8",
    "bool",
    "f64",
    "usize",
    "isize",
    "BLOCK",
    "N",
    "x",
    "y",
    "out",
    "offs",
    "mask",
    "n",
    "v",
    "acc",
    "row",
    "cols",
    "seed",
    "R",
    "C",
    "rows",
    "INFINITY",
    "NEG_INFINITY",
    "MAX",
    "MIN",
    "EPSILON",
    "T",
    "O",
    "Float",
    "Half",
    "Copy",
    "spec",
    "Vec",
    "String",
    "Self",
    "self",
    "mut",
    "const",
    "let",
    "fn",
    "for",
    "in",
    "if",
    "else",
    "match",
    "while",
    "loop",
    "return",
    "break",
    "continue",
    "as",
    "async",
    "await",
    "unsafe",
    "move",
    "pub",
    "crate",
    "super",
    "where",
    "impl",
    "dyn",
    "ref",
    "struct",
    "enum",
    "type",
    "static",
    "extern",
    "use",
    "mod",
    "trait",
    "true",
    "false",
    "_",
    "fuse_err",
    "threadIdx",
    "int",
    "device",
    "config",
    "NAME",
    "SOURCE",
    "SPEC",
    "FUSE_X",
    "fuse_tmp",
    "t0",
    "x_len",
    "main",
    "r#match",
];

const PUNCTS: &[&str] = &[
    "+", "-", "*", "/", "%", "&", "|", "^", "!", "<", ">", "=", ",", ";", ":", ".", "..", "..=", "::", "->",
    "=>", "==", "!=", "<=", ">=", "&&", "||", "+=", "-=", "*=", "/=", "%=", "<<", ">>", "?", "#", "@", "$",
    "~",
];

const LITERALS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "-1",
    "4",
    "16",
    "100",
    "1000",
    "1024",
    "65536",
    "2147483647",
    "2147483648",
    "4294967295",
    "9223372036854775807",
    "18446744073709551615",
    "99999999999999999999999",
    "0.0",
    "1.0",
    "-0.5",
    "0.5",
    "1e30",
    "1e-45",
    "3.4e38",
    "1e400",
    "1u64",
    "1i64",
    "2u32",
    "7i32",
    "1.5f32",
    "1f32",
    "1u8",
    "1usize",
    "1f64",
    "1.5u32",
    "0x10",
    "0b101",
    "0o17",
    "1_000",
    "'a'",
    "\"s\"",
    "b'a'",
    "b\"s\"",
    "1e",
];

/// SplitMix64: small, fast, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }

    fn word(&mut self, xs: &[&'static str]) -> &'static str {
        xs[self.below(xs.len())]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

fn tokens(src: &str) -> TokenStream {
    src.parse().unwrap_or_else(|e| panic!("fuzz source does not lex: {e}\n{src}"))
}

// ---- (a) token-level mutations -------------------------------------------------------------------

/// A token tree whose groups are editable.
enum Tok {
    Leaf(TokenTree),
    Group(Delimiter, Vec<Tok>, Span),
}

impl Tok {
    fn span(&self) -> Span {
        match self {
            Tok::Leaf(t) => t.span(),
            Tok::Group(_, _, s) => *s,
        }
    }
}

fn to_toks(ts: TokenStream) -> Vec<Tok> {
    ts.into_iter()
        .map(|t| match t {
            TokenTree::Group(g) => Tok::Group(g.delimiter(), to_toks(g.stream()), g.span()),
            other => Tok::Leaf(other),
        })
        .collect()
}

fn from_toks(toks: Vec<Tok>) -> TokenStream {
    toks.into_iter()
        .map(|t| match t {
            Tok::Leaf(t) => t,
            Tok::Group(d, inner, span) => {
                let mut g = Group::new(d, from_toks(inner));
                g.set_span(span);
                TokenTree::Group(g)
            }
        })
        .collect()
}

/// Every token list (the top level and each group's contents), as index paths.
fn lists(toks: &[Tok], path: &mut Vec<usize>, out: &mut Vec<(Vec<usize>, usize)>) {
    out.push((path.clone(), toks.len()));
    for (i, t) in toks.iter().enumerate() {
        if let Tok::Group(_, inner, _) = t {
            path.push(i);
            lists(inner, path, out);
            path.pop();
        }
    }
}

fn list_at<'a>(toks: &'a mut Vec<Tok>, path: &[usize]) -> &'a mut Vec<Tok> {
    match path.split_first() {
        None => toks,
        Some((&i, rest)) => match &mut toks[i] {
            Tok::Group(_, inner, _) => list_at(inner, rest),
            Tok::Leaf(_) => unreachable!("paths only lead through groups"),
        },
    }
}

/// One token drawn from the pools, with `span`.
fn random_token(rng: &mut Rng, span: Span) -> Vec<Tok> {
    let mut out = Vec::new();
    match rng.below(3) {
        0 => {
            let name = *rng.pick(IDENTS);
            let ident = match name.strip_prefix("r#") {
                Some(raw) => Ident::new_raw(raw, span),
                None => Ident::new(name, span),
            };
            out.push(Tok::Leaf(TokenTree::Ident(ident)));
        }
        1 => {
            let p = *rng.pick(PUNCTS);
            let chars: Vec<char> = p.chars().collect();
            for (i, c) in chars.iter().enumerate() {
                let spacing = if i + 1 < chars.len() { Spacing::Joint } else { Spacing::Alone };
                let mut punct = Punct::new(*c, spacing);
                punct.set_span(span);
                out.push(Tok::Leaf(TokenTree::Punct(punct)));
            }
        }
        _ => out.extend(literal_tokens(rng.word(LITERALS), span)),
    }
    out
}

/// A literal (a leading `-` becomes its own token, as the lexer makes it).
fn literal_tokens(text: &str, span: Span) -> Vec<Tok> {
    let Ok(ts) = text.parse::<TokenStream>() else { return Vec::new() };
    let mut toks = to_toks(ts);
    for t in &mut toks {
        if let Tok::Leaf(leaf) = t {
            leaf.set_span(span);
        }
    }
    toks
}

fn random_literal(rng: &mut Rng, span: Span) -> Vec<Tok> {
    if rng.chance(60) {
        return literal_tokens(rng.word(LITERALS), span);
    }
    let mut lit = match rng.below(6) {
        0 => Literal::u64_unsuffixed(rng.next() >> rng.below(64)),
        1 => Literal::i64_unsuffixed(-((rng.next() >> 40) as i64)),
        2 => Literal::f64_unsuffixed(f64::from_bits(rng.next() >> 2).abs().min(1e300)),
        3 => Literal::u32_suffixed(rng.next() as u32),
        4 => Literal::f32_suffixed((rng.next() % 1000) as f32 / 7.0),
        _ => Literal::usize_unsuffixed(1 << rng.below(40)),
    };
    lit.set_span(span);
    vec![Tok::Leaf(TokenTree::Literal(lit))]
}

fn mutate_once(toks: &mut Vec<Tok>, rng: &mut Rng) {
    let mut all = Vec::new();
    lists(toks, &mut Vec::new(), &mut all);
    // Favour longer lists a little, so most edits land in bodies.
    let (path, len) = if rng.chance(70) {
        let total: usize = all.iter().map(|(_, n)| n + 1).sum();
        let mut k = rng.below(total);
        let mut chosen = all[0].clone();
        for (p, n) in &all {
            if k <= *n {
                chosen = (p.clone(), *n);
                break;
            }
            k -= n + 1;
        }
        chosen
    } else {
        rng.pick(&all).clone()
    };
    let anywhere = toks.first().map_or_else(Span::call_site, Tok::span);
    let list = list_at(toks, &path);
    if len == 0 {
        let new = random_token(rng, anywhere);
        list.extend(new);
        return;
    }
    let i = rng.below(len);
    let span = list[i].span();
    match rng.below(11) {
        0 => {
            list.remove(i);
        }
        1 => {
            let copy = from_toks(vec![clone_tok(&list[i])]);
            list.splice(i..i, to_toks(copy));
        }
        2 => {
            let j = if rng.chance(70) { (i + 1).min(len - 1) } else { rng.below(len) };
            list.swap(i, j);
        }
        3 => {
            let new = random_token(rng, span);
            list.splice(i..=i, new);
        }
        4 => {
            let new = random_token(rng, span);
            list.splice(i..i, new);
        }
        5 | 6 => {
            // Identifiers: another identifier, keyword or literal.
            let idents: Vec<usize> =
                (0..len).filter(|&k| matches!(&list[k], Tok::Leaf(TokenTree::Ident(_)))).collect();
            let k = if idents.is_empty() { i } else { *rng.pick(&idents) };
            let span = list[k].span();
            let new = if rng.chance(75) {
                let name = *rng.pick(IDENTS);
                match name.strip_prefix("r#") {
                    Some(raw) => vec![Tok::Leaf(TokenTree::Ident(Ident::new_raw(raw, span)))],
                    None => vec![Tok::Leaf(TokenTree::Ident(Ident::new(name, span)))],
                }
            } else {
                random_literal(rng, span)
            };
            list.splice(k..=k, new);
        }
        7 => {
            // Literals: another literal.
            let lits: Vec<usize> =
                (0..len).filter(|&k| matches!(&list[k], Tok::Leaf(TokenTree::Literal(_)))).collect();
            let k = if lits.is_empty() { i } else { *rng.pick(&lits) };
            let span = list[k].span();
            let new = random_literal(rng, span);
            list.splice(k..=k, new);
        }
        8 => {
            // Groups: drop one, unwrap it, or change its delimiter.
            let groups: Vec<usize> = (0..len).filter(|&k| matches!(&list[k], Tok::Group(..))).collect();
            if groups.is_empty() {
                list.remove(i);
                return;
            }
            let k = *rng.pick(&groups);
            match rng.below(3) {
                0 => {
                    list.remove(k);
                }
                1 => {
                    if let Tok::Group(_, inner, _) = list.remove(k) {
                        list.splice(k..k, inner);
                    }
                }
                _ => {
                    if let Tok::Group(d, _, _) = &mut list[k] {
                        *d = *rng.pick(&[
                            Delimiter::Parenthesis,
                            Delimiter::Brace,
                            Delimiter::Bracket,
                            Delimiter::None,
                        ]);
                    }
                }
            }
        }
        9 => {
            // Wrap a run of tokens in a new group.
            let end = (i + 1 + rng.below(4)).min(len);
            let inner: Vec<Tok> = list.drain(i..end).collect();
            let d =
                *rng.pick(&[Delimiter::Parenthesis, Delimiter::Brace, Delimiter::Bracket, Delimiter::None]);
            list.insert(i, Tok::Group(d, inner, span));
        }
        _ => {
            // Duplicate a run (a statement, an argument list...).
            let end = (i + 1 + rng.below(8)).min(len);
            let copy = from_toks(list[i..end].iter().map(clone_tok).collect());
            list.splice(end..end, to_toks(copy));
        }
    }
}

fn clone_tok(t: &Tok) -> Tok {
    match t {
        Tok::Leaf(l) => Tok::Leaf(l.clone()),
        Tok::Group(d, inner, s) => Tok::Group(*d, inner.iter().map(clone_tok).collect(), *s),
    }
}

fn mutated_kernel(rng: &mut Rng) -> TokenStream {
    let mut toks = to_toks(tokens(rng.word(seeds())));
    if rng.chance(20) {
        // Gentle: new values for a few literals, which often still check (and reach the emitter).
        for _ in 0..1 + rng.below(3) {
            let mut lits = Vec::new();
            literal_paths(&toks, &mut Vec::new(), &mut lits);
            if let Some((path, i)) = lits.get(rng.below(lits.len())).cloned() {
                let list = list_at(&mut toks, &path);
                let span = list[i].span();
                let text = rng
                    .word(&["0", "1", "2", "3", "4", "8", "64", "1024", "0.5", "2.0", "1e-6", "-1", "7u32"]);
                list.splice(i..=i, literal_tokens(text, span));
            }
        }
        return from_toks(toks);
    }
    for _ in 0..1 + rng.below(4) {
        mutate_once(&mut toks, rng);
    }
    from_toks(toks)
}

/// Every literal as (path of its list, index in the list).
fn literal_paths(toks: &[Tok], path: &mut Vec<usize>, out: &mut Vec<(Vec<usize>, usize)>) {
    for (i, t) in toks.iter().enumerate() {
        match t {
            Tok::Leaf(TokenTree::Literal(_)) => out.push((path.clone(), i)),
            Tok::Group(_, inner, _) => {
                path.push(i);
                literal_paths(inner, path, out);
                path.pop();
            }
            Tok::Leaf(_) => {}
        }
    }
}

// ---- (b) kernels from a grammar ---------------------------------------------------------------

const ELEM_TYPES: &[&str] = &["f32", "f16", "bf16", "i32", "i64", "u32", "u64", "u8", "i8", "bool", "f64"];
const SCALAR_TYPES: &[&str] = &[
    "i32", "i64", "u32", "u64", "f32", "f16", "u8", "bool", "f64", "usize", "Vec<f32>", "&[f32]", "String",
    "T",
];
const FUNCS: &[(&str, usize)] = &[
    ("program_id", 1),
    ("num_programs", 1),
    ("arange", 2),
    ("zeros", 1),
    ("full", 2),
    ("load", 2),
    ("load", 3),
    ("load", 1),
    ("where_", 3),
    ("maximum", 2),
    ("minimum", 2),
    ("sum", 1),
    ("max", 1),
    ("min", 1),
    ("cdiv", 2),
    ("rand", 2),
    ("rand16", 2),
    ("abs", 1),
    ("exp", 1),
    ("exp2", 1),
    ("log", 1),
    ("sqrt", 1),
    ("rsqrt", 1),
    ("erf", 1),
    ("tanh", 1),
    ("sigmoid", 1),
    ("floor", 1),
    ("ceil", 1),
    ("sin", 1),
    ("cos", 1),
    ("log2", 1),
    ("lod", 1),
    ("sum", 2),
    ("max", 2),
    ("min", 2),
    ("argmax", 1),
    ("argmax", 2),
    ("argmin", 1),
    ("argmin", 2),
    ("expand_dims", 2),
    ("expand_dims", 2),
    ("broadcast_to", 2),
    ("reshape", 2),
    ("trans", 1),
    ("split", 1),
    ("join", 2),
    ("dot", 2),
    ("dot", 3),
    ("zeros", 1),
    ("full", 2),
];
const METHODS: &[&str] = &[
    "exp",
    "sum",
    "max",
    "min",
    "sqrt",
    "abs",
    "maximum",
    "minimum",
    "sigmoid",
    "frobnicate",
    "argmax",
    "argmin",
    "expand_dims",
    "expand_dims",
    "broadcast_to",
    "reshape",
    "trans",
    "split",
    "join",
    "dot",
];
const BINOPS: &[&str] =
    &["+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "&", "|", "^", "&&", "||"];

struct Gen<'r> {
    rng: &'r mut Rng,
    names: Vec<String>,
    consts: Vec<String>,
    /// The kernel's type parameters (right or wrong), usable where a type goes.
    types: Vec<String>,
    depth: u32,
}

impl Gen<'_> {
    fn name(&mut self) -> String {
        if self.names.is_empty() || self.rng.chance(5) {
            return rng_ident(self.rng);
        }
        self.rng.pick(&self.names).clone()
    }

    fn constant(&mut self) -> String {
        if !self.consts.is_empty() && self.rng.chance(60) {
            let c = self.rng.pick(&self.consts).clone();
            return match self.rng.below(4) {
                0 => format!("2 * {c}"),
                1 => format!("{c} / 2"),
                _ => c,
            };
        }
        self.rng.pick(&["1", "2", "4", "128", "256", "3", "100", "0", "1024", "65536", "-4"]).to_string()
    }

    /// A tile shape: mostly `[M, N]` of constants, sometimes of another rank or not constant.
    fn shape(&mut self) -> String {
        let rank = match self.rng.below(10) {
            0 => 0,
            1 | 2 => 1,
            3 => 3,
            _ => 2,
        };
        let dims: Vec<String> =
            (0..rank).map(|_| if self.rng.chance(85) { self.constant() } else { self.expr() }).collect();
        format!("[{}]", dims.join(", "))
    }

    /// An axis: mostly 0 or 1.
    fn axis(&mut self) -> String {
        match self.rng.below(10) {
            0 => self.expr(),
            1 => self.rng.pick(&["2", "-1", "3", "1u32", "1.0", "R"]).to_string(),
            _ => self.rng.pick(&["0", "1"]).to_string(),
        }
    }

    /// An element type: the kernel's type parameters as often as the concrete ones.
    fn elem_type(&mut self) -> String {
        if !self.types.is_empty() && self.rng.chance(50) {
            return self.rng.pick(&self.types).clone();
        }
        self.rng.pick(ELEM_TYPES).to_string()
    }

    fn expr(&mut self) -> String {
        self.depth += 1;
        let leaf = self.depth > 4 || self.rng.chance(25);
        let e = if leaf {
            match self.rng.below(6) {
                0 => self.rng.pick(LITERALS).to_string(),
                1 => self.constant(),
                2 => {
                    let ty = if self.rng.chance(50) { self.elem_type() } else { "f32".into() };
                    format!(
                        "{ty}::{}",
                        self.rng.pick(&["NEG_INFINITY", "INFINITY", "MAX", "MIN", "EPSILON", "ONE"])
                    )
                }
                _ => self.name(),
            }
        } else {
            match self.rng.below(10) {
                0 => format!("arange(0, {})", self.constant()),
                1 | 2 => {
                    let (f, arity) = *self.rng.pick(FUNCS);
                    let arity = match self.rng.below(10) {
                        0 => arity + 1,
                        1 => arity.saturating_sub(1),
                        _ => arity,
                    };
                    // Shapes and axes where the 2-D functions take them, mostly.
                    let args: Vec<String> = (0..arity)
                        .map(|i| match (f, i) {
                            ("zeros" | "full", 0) | ("reshape" | "broadcast_to", 1)
                                if self.rng.chance(60) =>
                            {
                                self.shape()
                            }
                            ("sum" | "max" | "min" | "argmax" | "argmin" | "expand_dims", 1)
                                if self.rng.chance(60) =>
                            {
                                self.axis()
                            }
                            _ => self.expr(),
                        })
                        .collect();
                    format!("{f}({})", args.join(", "))
                }
                3 => {
                    let m = *self.rng.pick(METHODS);
                    let recv = self.expr();
                    let arg = match m {
                        "maximum" | "minimum" => self.expr(),
                        "expand_dims" if self.rng.chance(80) => self.axis(),
                        "reshape" | "broadcast_to" if self.rng.chance(80) => self.shape(),
                        "sum" | "max" | "min" | "argmax" | "argmin" if self.rng.chance(40) => self.axis(),
                        _ if self.rng.chance(10) => self.expr(),
                        _ => String::new(),
                    };
                    format!("({recv}).{m}({arg})")
                }
                4 => {
                    let t = self.elem_type();
                    let e = self.expr();
                    if self.rng.chance(50) {
                        format!("({e}).to({t})")
                    } else {
                        format!("({e}) as {t}")
                    }
                }
                5 => format!(
                    "{}(0) * {} + arange(0, {})",
                    self.rng.pick(&["program_id", "num_programs"]),
                    self.constant(),
                    self.constant()
                ),
                6 if self.rng.chance(50) => format!("{}({})", self.rng.pick(&["-", "!"]), self.expr()),
                6 => {
                    // The 2-D offsets pattern: rows down, columns across.
                    let (a, b, n) = (self.expr(), self.expr(), self.expr());
                    format!("({a}).expand_dims(1) * {n} + ({b}).expand_dims({})", self.axis())
                }
                7 => format!("load({} + {}, {})", self.name(), self.expr(), self.expr()),
                _ => {
                    let op = *self.rng.pick(BINOPS);
                    format!("({} {op} {})", self.expr(), self.expr())
                }
            }
        };
        self.depth -= 1;
        e
    }

    fn stmts(&mut self, n: usize, nest: u32) -> String {
        let mut out = String::new();
        for _ in 0..n {
            let s = match self.rng.below(if nest > 1 { 6 } else { 9 }) {
                0..=2 => {
                    let name = if self.rng.chance(70) || self.names.is_empty() {
                        rng_ident(self.rng)
                    } else {
                        self.name()
                    };
                    let m = if self.rng.chance(30) { "mut " } else { "" };
                    let e = self.expr();
                    self.names.push(name.clone());
                    if self.rng.chance(8) {
                        // A tuple `let`: of a split (right) or of anything else (an error).
                        let other = rng_ident(self.rng);
                        self.names.push(other.clone());
                        let init = if self.rng.chance(70) { format!("split({e})") } else { e };
                        format!("let ({m}{name}, {other}) = {init};\n")
                    } else {
                        format!("let {m}{name} = {e};\n")
                    }
                }
                3 => format!(
                    "{} {} {};\n",
                    self.name(),
                    self.rng.pick(&["=", "+=", "-=", "*=", "/=", "%="]),
                    self.expr()
                ),
                4 | 5 => {
                    let mask = if self.rng.chance(70) { format!(", {}", self.expr()) } else { String::new() };
                    format!("store({} + {}, {}{mask});\n", self.name(), self.expr(), self.expr())
                }
                6 => {
                    let count = 1 + self.rng.below(3);
                    let body = self.stmts(count, nest + 1);
                    let els = if self.rng.chance(40) {
                        format!(" else {{ {} }}", self.stmts(1, nest + 1))
                    } else {
                        String::new()
                    };
                    format!("if {} {{ {body} }}{els}\n", self.expr())
                }
                7 => {
                    let v = rng_ident(self.rng);
                    let range = if self.rng.chance(50) {
                        format!("{}..{}", self.expr(), self.expr())
                    } else {
                        format!("({}..{}).step_by({})", self.expr(), self.expr(), self.constant())
                    };
                    self.names.push(v.clone());
                    let count = 1 + self.rng.below(3);
                    let body = self.stmts(count, nest + 1);
                    format!("for {v} in {range} {{ {body} }}\n")
                }
                _ => format!("{};\n", self.expr()),
            };
            out.push_str(&s);
        }
        out
    }
}

fn rng_ident(rng: &mut Rng) -> String {
    let names = [
        "a", "b", "c", "offs", "mask", "v", "acc", "t", "i", "x", "out", "n", "tmp", "r", "s", "rows", "cols",
    ];
    let base = *rng.pick(&names);
    if rng.chance(30) {
        format!("{base}{}", rng.below(3))
    } else {
        base.to_string()
    }
}

fn generated_kernel(rng: &mut Rng) -> TokenStream {
    let mut consts = Vec::new();
    for _ in 0..rng.below(3) {
        consts.push(rng.pick(&["BLOCK", "B", "N", "K", "R", "C"]).to_string());
    }
    let mut generics: Vec<String> = consts
        .iter()
        .map(|c| format!("const {c}: {}", if rng.chance(95) { "usize" } else { "u32" }))
        .collect();
    // Generic kernels: mostly right (`T: Float`, `O: Half`), sometimes not.
    let mut types = Vec::new();
    let mut where_clause = String::new();
    if rng.chance(25) {
        let most = if rng.chance(10) { 4 } else { 2 };
        for name in ["T", "O", "U", "V"].into_iter().take(1 + rng.below(most)) {
            let decl = match rng.below(20) {
                0 => name.to_string(),
                1 => format!("{name}: Copy"),
                2 => format!("{name}: Float + Copy"),
                3 => format!("{name}: Float = f32"),
                4 => format!("{name}: fuse::Float"),
                5 => format!("{name}: ?Sized"),
                6 => {
                    where_clause = format!(" where {name}: Float");
                    name.to_string()
                }
                7 | 8 => format!("{name}: Half"),
                _ => format!("{name}: Float"),
            };
            generics.insert(types.len(), decl);
            types.push(name.to_string());
        }
        if rng.chance(5) {
            generics.insert(0, "'a".into());
        }
    }
    let mut g = Gen { rng, names: Vec::new(), consts: consts.clone(), types, depth: 0 };
    let mut params = Vec::new();
    for _ in 0..g.rng.below(6) {
        let name = rng_ident(g.rng);
        let ty = match g.rng.below(5) {
            0 | 1 => format!("*const {}", g.elem_type()),
            2 | 3 => format!("*mut {}", g.elem_type()),
            _ if !g.types.is_empty() && g.rng.chance(10) => g.rng.pick(&g.types).clone(),
            _ => g.rng.pick(SCALAR_TYPES).to_string(),
        };
        params.push(format!("{name}: {ty}"));
        g.names.push(name);
    }
    g.names.extend(consts.iter().cloned());
    let n = 1 + g.rng.below(8);
    let body = g.stmts(n, 0);
    let generics = if generics.is_empty() { String::new() } else { format!("<{}>", generics.join(", ")) };
    let src = format!("fn gen{generics}({}){where_clause} {{\n{body}}}", params.join(", "));
    // Every generated string lexes (balanced delimiters, known tokens).
    tokens(&src)
}

// ---- (c) typed 2-D kernels --------------------------------------------------------------------
//
// The grammar above mostly makes wrong kernels; this one builds kernels that are right by
// construction, from a model of the tile language's types (compute dtype and shape, with NumPy
// broadcasting over dims that are products of a power-of-two literal and the const generics `R`
// and `C`), so that they reach the emitter: 2-D tiles from `expand_dims` of aranges and loads,
// broadcasting in element-wise ops, comparisons, `where_`, pointer offsets, masks and `other`;
// `broadcast_to`, `reshape`, `trans`, `zeros`/`full` of 2-D shapes, axis reductions, `argmax`/
// `argmin` with and without an axis, each in function and method form. Such a kernel must check
// and expand without errors (`TypedKind::Valid`). Half of them then get one statement that is
// wrong in a known way (an axis out of range or not a literal, an axis on a scalar, a reshape that
// changes the lane count, `trans` of a 1-D tile, shapes that do not broadcast, ...), and must give
// a spanned error: an acceptance is a checker bug (`TypedKind::Broken`).

/// A compute type of the model (storage types are loaded and widen, see [`TExpr::storage`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Dt {
    F32,
    I32,
    Bool,
}

impl Dt {
    fn name(self) -> &'static str {
        match self {
            Dt::F32 => "f32",
            Dt::I32 => "i32",
            Dt::Bool => "bool",
        }
    }
}

/// A tile dim: `2^lit * R^r * C^c` (`lit` negative only next to a const generic: `C / 2`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Dim {
    lit: i8,
    r: u8,
    c: u8,
}

const ONE: Dim = Dim { lit: 0, r: 0, c: 0 };
const DIM_R: Dim = Dim { lit: 0, r: 1, c: 0 };
const DIM_C: Dim = Dim { lit: 0, r: 0, c: 1 };
/// The dims tiles are built from (`1` only in 2-D shapes).
const DIMS: &[Dim] = &[
    DIM_R,
    DIM_C,
    DIM_C,
    DIM_R,
    Dim { lit: 1, r: 0, c: 1 },
    Dim { lit: 2, r: 0, c: 0 },
    Dim { lit: 3, r: 0, c: 0 },
    Dim { lit: 0, r: 1, c: 1 },
    Dim { lit: -1, r: 0, c: 1 },
];

/// `dot`'s inner dims: at least 16 (literal) or written with a const generic (asserted at the
/// launch).
const DOT_DIMS: &[Dim] = &[
    DIM_R,
    DIM_C,
    Dim { lit: 1, r: 0, c: 1 },
    Dim { lit: 0, r: 1, c: 1 },
    Dim { lit: -1, r: 0, c: 1 },
    Dim { lit: 4, r: 0, c: 0 },
    Dim { lit: 5, r: 0, c: 0 },
];

/// Literal dims below `dot`'s 16.
const SMALL_DIMS: &[Dim] =
    &[ONE, Dim { lit: 1, r: 0, c: 0 }, Dim { lit: 2, r: 0, c: 0 }, Dim { lit: 3, r: 0, c: 0 }];

impl Dim {
    fn mul(self, o: Dim) -> Dim {
        Dim { lit: self.lit + o.lit, r: self.r + o.r, c: self.c + o.c }
    }

    /// Whether it can be written (a fraction needs a const generic to divide).
    fn ok(self) -> bool {
        self.lit >= 0 || self.r + self.c > 0
    }

    /// Whether `dot` takes it as M, N or K: at least 16, or symbolic (asserted at the launch).
    fn dot_ok(self) -> bool {
        self.r + self.c > 0 || self.lit >= 4
    }

    /// As written in a kernel, several ways (`2 * C`, `C * 2`, `(2 * C)`, `4`, `C / 2`,
    /// `(2 * C) / 2` for `C`, `C * 1`).
    fn text(self, rng: &mut Rng) -> String {
        let mut factors = Vec::new();
        if self.lit > 0 {
            factors.push((1u64 << self.lit).to_string());
        }
        factors.extend(std::iter::repeat_n("R".to_string(), self.r as usize));
        factors.extend(std::iter::repeat_n("C".to_string(), self.c as usize));
        if factors.is_empty() {
            return if rng.chance(90) { "1".into() } else { "(2 / 2)".into() };
        }
        if rng.chance(30) {
            factors.reverse();
        }
        let mut t = factors.join(" * ");
        if self.lit < 0 {
            t = format!("{t} / {}", 1u64 << -self.lit);
        } else if self.lit == 0 && rng.chance(5) {
            t = if rng.chance(50) { format!("(2 * {t}) / 2") } else { format!("{t} * 1") };
        }
        if (factors.len() > 1 || self.lit < 0) && rng.chance(20) {
            format!("({t})")
        } else {
            t
        }
    }
}

/// A shape: `[]` a scalar, `[N]`, `[M, N]`.
type Shp = Vec<Dim>;

fn lanes(s: &[Dim]) -> Dim {
    s.iter().fold(ONE, |a, d| a.mul(*d))
}

/// The checker's broadcasting rule: dims aligned at the right, equal or one of them 1.
fn bcast(a: &[Dim], b: &[Dim]) -> Option<Shp> {
    let rank = a.len().max(b.len());
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let x = (i + a.len()).checked_sub(rank).map(|j| a[j]);
        let y = (i + b.len()).checked_sub(rank).map(|j| b[j]);
        out.push(match (x, y) {
            (Some(x), Some(y)) if x == y => x,
            (Some(x), Some(y)) if x == ONE => y,
            (Some(x), Some(y)) if y == ONE => x,
            (Some(_), Some(_)) => return None,
            (Some(d), None) | (None, Some(d)) => d,
            (None, None) => unreachable!(),
        });
    }
    Some(out)
}

/// Whether a mask, stored value or `other` of shape `v` goes with offsets of shape `o` (the
/// checker asks a tile for tile offsets, else broadcasting).
fn fits_offsets(v: &[Dim], o: &[Dim]) -> bool {
    match (v.len(), o.len()) {
        (0, _) => true,
        (_, 0) => false,
        _ => bcast(v, o).is_some(),
    }
}

/// A generated expression: its text, and whether it may hold a storage type (an f16/bf16/u8/T
/// load, kept so by shape moves), which a compound assignment could not write back.
struct TExpr {
    text: String,
    storage: bool,
}

impl TExpr {
    fn of(text: String) -> TExpr {
        TExpr { text, storage: false }
    }
}

#[derive(Clone)]
struct TVar {
    name: String,
    dt: Dt,
    shape: Shp,
    storage: bool,
    mutable: bool,
}

#[derive(Clone)]
struct PVar {
    name: String,
    /// The parameter it points into.
    param: &'static str,
    dt: Dt,
    off: Shp,
    mutable: bool,
}

/// The kernel's pointer parameters: (name, compute dtype, readable, element type).
const TYPED_PTRS: &[(&str, Dt, bool, &str)] = &[
    ("x", Dt::F32, true, "f32"),
    ("h", Dt::F32, true, "f16"),
    ("hb", Dt::F32, true, "bf16"),
    ("idx", Dt::I32, true, "i32"),
    ("q", Dt::I32, true, "u8"),
    ("out", Dt::F32, false, "f32"),
    ("oh", Dt::F32, false, "bf16"),
    ("oi", Dt::I32, false, "i32"),
    ("oq", Dt::I32, false, "i8"),
];

struct Typed<'r> {
    rng: &'r mut Rng,
    vars: Vec<TVar>,
    ptrs: Vec<PVar>,
    /// Immutable `let`s of constants (`let w = 2 * C;`), which stay weak and can be dims.
    aliases: Vec<(String, Dim)>,
    next: usize,
    depth: u32,
    /// `x` and `out` are `*const T` / `*mut T` for `T: Float`.
    generic: bool,
}

impl Typed<'_> {
    /// A dim as written: through a `let` of it sometimes.
    fn dim_text(&mut self, d: Dim) -> String {
        let named: Vec<String> = self.aliases.iter().filter(|a| a.1 == d).map(|a| a.0.clone()).collect();
        if !named.is_empty() && self.rng.chance(30) {
            return self.rng.pick(&named).clone();
        }
        d.text(self.rng)
    }

    fn fresh_name(&mut self, base: &str) -> String {
        self.next += 1;
        format!("{base}{}", self.next)
    }

    fn dim(&mut self) -> Dim {
        *self.rng.pick(DIMS)
    }

    fn dim_or_one(&mut self) -> Dim {
        if self.rng.chance(20) {
            ONE
        } else {
            self.dim()
        }
    }

    /// A random tile shape, 2-D two times in three.
    fn tile_shape(&mut self) -> Shp {
        if self.rng.chance(33) {
            vec![self.dim()]
        } else {
            let (a, b) = (self.dim_or_one(), self.dim_or_one());
            vec![a, b]
        }
    }

    fn any_shape(&mut self) -> Shp {
        if self.rng.chance(15) {
            Vec::new()
        } else {
            self.tile_shape()
        }
    }

    fn shape_text(&mut self, s: &[Dim]) -> String {
        match s {
            [d] if self.rng.chance(40) => self.dim_text(*d),
            _ => {
                let dims: Vec<String> = s.iter().map(|d| self.dim_text(*d)).collect();
                format!("[{}]", dims.join(", "))
            }
        }
    }

    /// A shape that broadcasts to `s` (each dim kept or 1, leading dims maybe dropped), the scalar
    /// included when `scalar`.
    fn sub_shape(&mut self, s: &[Dim], scalar: bool) -> Shp {
        let mut options: Vec<Shp> = vec![s.to_vec()];
        if scalar {
            options.push(Vec::new());
        }
        if let [d] = s {
            // A 1-D `[1]` broadcasts like any unit dim (offsets, masks and `other` included).
            if *d != ONE && self.rng.chance(15) {
                options.push(vec![ONE]);
            }
        }
        if let [a, b] = s {
            if *b != ONE {
                options.push(vec![*b]);
                options.push(vec![ONE, *b]);
            }
            if *a != ONE {
                options.push(vec![*a, ONE]);
            }
            if self.rng.chance(15) {
                options.push(vec![ONE, ONE]);
            }
        }
        let k = if self.rng.chance(40) { 0 } else { self.rng.below(options.len()) };
        options.swap_remove(k)
    }

    /// Two shapes that broadcast together to `s` exactly.
    fn split(&mut self, s: &[Dim]) -> (Shp, Shp) {
        if s.len() == 1 && self.rng.chance(4) {
            // A 1-D `[1]` tile broadcasts like a unit dim.
            return if self.rng.chance(50) { (s.to_vec(), vec![ONE]) } else { (vec![ONE], s.to_vec()) };
        }
        let a = self.sub_shape(s, true);
        let b = self.sub_shape(s, true);
        if bcast(&a, &b).as_deref() == Some(s) {
            (a, b)
        } else if self.rng.chance(50) {
            (s.to_vec(), b)
        } else {
            (a, s.to_vec())
        }
    }

    fn var_of(&mut self, dt: Dt, shape: &[Dim]) -> Option<String> {
        let found: Vec<&TVar> = self.vars.iter().filter(|v| v.dt == dt && v.shape == shape).collect();
        if found.is_empty() {
            None
        } else {
            Some(self.rng.pick(&found).name.clone())
        }
    }

    /// A weak literal of `dt` (an operand next to a typed value).
    fn literal(&mut self, dt: Dt) -> String {
        match dt {
            Dt::F32 if self.generic && self.rng.chance(20) => {
                self.rng.word(&["T::MAX", "T::EPSILON", "T::MIN"]).to_string()
            }
            Dt::F32 => self.rng.word(&["2.0", "0.5", "1.0", "3", "f32::EPSILON", "1e-6", "0.0"]).to_string(),
            _ => self.rng.word(&["1", "2", "3", "7", "C", "R", "(2 * C)", "0"]).to_string(),
        }
    }

    /// A typed expression of exactly `dt` and `shape`.
    fn ex(&mut self, dt: Dt, shape: &[Dim]) -> TExpr {
        if self.rng.chance(30) {
            if let Some(v) = self.var_of(dt, shape) {
                let storage = self.vars.iter().any(|x| x.name == v && x.storage);
                return TExpr { text: v, storage };
            }
        }
        self.depth += 1;
        let e =
            if self.depth > 3 || self.rng.chance(20) { self.leaf(dt, shape) } else { self.node(dt, shape) };
        self.depth -= 1;
        e
    }

    fn leaf(&mut self, dt: Dt, shape: &[Dim]) -> TExpr {
        if self.rng.chance(70) {
            if let Some(v) = self.var_of(dt, shape) {
                let storage = self.vars.iter().any(|x| x.name == v && x.storage);
                return TExpr { text: v, storage };
            }
        }
        if shape.is_empty() {
            let t = match dt {
                Dt::F32 => self.rng.word(&["s", "(n_rows as f32)", "1.5f32", "s.exp()"]),
                Dt::I32 => self.rng.word(&["n_rows", "n_cols", "program_id(0)", "program_id(1)", "7i32"]),
                Dt::Bool => self.rng.word(&["(n_rows > 2)", "true", "false", "(s < 1.0)"]),
            };
            return TExpr::of(t.to_string());
        }
        let sh = self.shape_text(shape);
        let t = match (dt, shape) {
            (Dt::I32, [d]) if self.rng.chance(60) => format!("arange(0, {})", self.dim_text(*d)),
            (Dt::I32, [a, b]) if (*a == ONE) != (*b == ONE) && self.rng.chance(60) => {
                let (d, axis) = if *a == ONE { (*b, 0) } else { (*a, 1) };
                format!("arange(0, {}).expand_dims({axis})", self.dim_text(d))
            }
            (Dt::F32, _) if self.rng.chance(50) => format!("zeros({sh})"),
            (Dt::F32, _) => format!("full({sh}, {})", self.rng.word(&["0.5", "s", "-1.0", "f32::INFINITY"])),
            (Dt::I32, _) => format!("full({sh}, {})", self.rng.word(&["3", "n_cols", "-1", "program_id(0)"])),
            (Dt::Bool, _) => match self.rng.below(3) {
                0 => format!("full({sh}, true)"),
                1 => format!("(zeros({sh}) < s)"),
                _ => format!("full({sh}, n_rows > 0)"),
            },
        };
        TExpr::of(t)
    }

    fn node(&mut self, dt: Dt, shape: &[Dim]) -> TExpr {
        let two_d = shape.len() == 2;
        loop {
            let e = match self.rng.below(21) {
                0..=3 => self.binary(dt, shape),
                4 => self.unary(dt, shape),
                5 => {
                    let from = *self.rng.pick(&[Dt::F32, Dt::I32, Dt::Bool]);
                    let a = self.ex(from, shape);
                    // To the type parameter: f32, or a storage type in the other instantiations.
                    let to_t = self.generic && dt == Dt::F32 && self.rng.chance(20);
                    let t = if to_t { "T" } else { dt.name() };
                    TExpr {
                        text: match self.rng.below(3) {
                            0 => format!("({}).to({t})", a.text),
                            1 => format!("({} as {t})", paren(&a.text)),
                            _ => format!("{}.to({t})", paren(&a.text)),
                        },
                        storage: to_t,
                    }
                }
                6 => {
                    let (sa, sb) = self.split(shape);
                    let sc = self.sub_shape(shape, true);
                    let c = self.ex(Dt::Bool, &sc);
                    let a = self.ex(dt, &sa);
                    let b = if dt != Dt::Bool && sb.is_empty() && self.rng.chance(50) {
                        self.literal(dt)
                    } else {
                        self.ex(dt, &sb).text
                    };
                    let joined = bcast(&sa, &sb).and_then(|s| bcast(&s, &sc));
                    if joined.as_deref() != Some(shape) {
                        continue;
                    }
                    TExpr::of(format!("where_({}, {}, {b})", c.text, a.text))
                }
                7 if dt != Dt::Bool => {
                    let (sa, sb) = self.split(shape);
                    let a = self.ex(dt, &sa);
                    let b = if sb.is_empty() && self.rng.chance(40) {
                        self.literal(dt)
                    } else {
                        self.ex(dt, &sb).text
                    };
                    let f = self.rng.word(&["maximum", "minimum"]);
                    TExpr::of(if self.rng.chance(50) {
                        format!("{f}({}, {b})", a.text)
                    } else {
                        format!("{}.{f}({b})", paren(&a.text))
                    })
                }
                8 if two_d && (shape[0] == ONE) != (shape[1] == ONE) => {
                    let axis = if shape[0] == ONE { 0 } else { 1 };
                    let src = vec![shape[1 - axis]];
                    let a = self.ex(dt, &src);
                    TExpr {
                        text: if self.rng.chance(50) {
                            format!("expand_dims({}, {axis})", a.text)
                        } else {
                            format!("{}.expand_dims({axis})", paren(&a.text))
                        },
                        storage: a.storage,
                    }
                }
                9 if !shape.is_empty() => {
                    let src = self.sub_shape(shape, true);
                    let a = self.ex(dt, &src);
                    let sh = self.shape_text(shape);
                    TExpr {
                        text: if self.rng.chance(50) {
                            format!("broadcast_to({}, {sh})", a.text)
                        } else {
                            format!("{}.broadcast_to({sh})", paren(&a.text))
                        },
                        storage: a.storage,
                    }
                }
                10 if !shape.is_empty() => {
                    let src = self.same_lanes(shape);
                    let a = self.ex(dt, &src);
                    let sh = self.shape_text(shape);
                    TExpr {
                        text: if self.rng.chance(50) {
                            format!("reshape({}, {sh})", a.text)
                        } else {
                            format!("{}.reshape({sh})", paren(&a.text))
                        },
                        storage: a.storage,
                    }
                }
                11 if two_d => {
                    let a = self.ex(dt, &[shape[1], shape[0]]);
                    TExpr {
                        text: if self.rng.chance(50) {
                            format!("trans({})", a.text)
                        } else {
                            format!("{}.trans()", paren(&a.text))
                        },
                        storage: a.storage,
                    }
                }
                12 | 13 | 19 if dt != Dt::Bool && shape.len() < 2 => self.reduction(dt, shape),
                14 | 15 if dt != Dt::Bool => self.load(dt, shape),
                16 if dt == Dt::F32 && !shape.is_empty() => {
                    let o = self.ex(Dt::I32, shape);
                    let seed = self.rng.word(&["seed", "42", "n_rows", "program_id(0)"]);
                    let f = self.rng.word(&["rand", "rand16"]);
                    TExpr::of(format!("{f}({seed}, {})", o.text))
                }
                17 if dt == Dt::I32 => {
                    let (sa, sb) = self.split(shape);
                    let a = self.ex(dt, &sa);
                    let b =
                        if sb.is_empty() && self.rng.chance(50) { "4".into() } else { self.ex(dt, &sb).text };
                    TExpr::of(format!("cdiv({}, {b})", a.text))
                }
                18 if !shape.is_empty() => {
                    let sh = self.shape_text(shape);
                    if dt == Dt::F32 && self.rng.chance(40) {
                        TExpr::of(format!("zeros({sh})"))
                    } else {
                        let v = self.ex(dt, &[]);
                        TExpr::of(format!("full({sh}, {})", v.text))
                    }
                }
                19 => self.leaf(dt, shape),
                20 if dt != Dt::Bool && two_d && shape.iter().all(|d| d.dot_ok()) => self.dot(dt, shape),
                _ => continue,
            };
            return e;
        }
    }

    /// The operands of a `dot` giving `dt` (f32: f16, bf16, TF32 or, in a generic kernel, `T`
    /// inputs; i32: i8 inputs): `a` of `[m, k]` and `b` of `[k, n]` in their storage type.
    fn dot_operands(&mut self, dt: Dt, m: Dim, k: Dim, n: Dim) -> (String, String) {
        let input = match dt {
            Dt::I32 => "i8",
            _ if self.generic && self.rng.chance(30) => "T",
            _ => self.rng.word(&["f16", "bf16", "f32"]),
        };
        let from = if dt == Dt::I32 { Dt::I32 } else { Dt::F32 };
        let operand = |t: &mut Self, shape: [Dim; 2]| {
            let e = t.ex(from, &shape);
            // A storage-typed value (an f16 load) is converted to the input type, always where
            // that is not f32 (whose arithmetic results are f32 already).
            if input != "f32" || e.storage || t.rng.chance(20) {
                format!("{}.to({input})", paren(&e.text))
            } else {
                e.text
            }
        };
        (operand(self, [m, k]), operand(self, [k, n]))
    }

    /// `dot(a, b[, acc])` of `dt` and 2-D `shape` (both dims `dot_ok`).
    fn dot(&mut self, dt: Dt, shape: &[Dim]) -> TExpr {
        let (m, n) = (shape[0], shape[1]);
        let k = *self.rng.pick(DOT_DIMS);
        let (a, b) = self.dot_operands(dt, m, k, n);
        let acc = if self.rng.chance(50) { format!(", {}", self.ex(dt, shape).text) } else { String::new() };
        TExpr::of(if self.rng.chance(50) {
            format!("dot({a}, {b}{acc})")
        } else {
            format!("{}.dot({b}{acc})", paren(&a))
        })
    }

    /// One `dot` wrong in a known way.
    fn broken_dot(&mut self, name: &str) -> (String, &'static str) {
        let dt = *self.rng.pick(&[Dt::F32, Dt::F32, Dt::I32]);
        let (m, k, n) = (*self.rng.pick(DOT_DIMS), *self.rng.pick(DOT_DIMS), *self.rng.pick(DOT_DIMS));
        let (s, what) = match self.rng.below(7) {
            0 => {
                let k2 = loop {
                    let d = *self.rng.pick(DOT_DIMS);
                    if d != k {
                        break d;
                    }
                };
                let (a, _) = self.dot_operands(dt, m, k, n);
                let (_, b) = self.dot_operands(dt, m, k2, n);
                (format!("dot({a}, {b})"), "dot: inner dimensions differ")
            }
            1 => {
                let (a, b) = self.dot_operands(dt, m, k, n);
                let bad = loop {
                    let s = self.tile_shape();
                    if s != [m, n] {
                        break s;
                    }
                };
                let acc = self.ex(dt, &bad).text;
                (format!("dot({a}, {b}, {acc})"), "dot: accumulator shape")
            }
            2 => {
                let (a, b) = self.dot_operands(dt, m, k, n);
                let other = if dt == Dt::I32 { Dt::F32 } else { Dt::I32 };
                let acc = self.ex(other, &[m, n]).text;
                (format!("{}.dot({b}, {acc})", paren(&a)), "dot: accumulator dtype")
            }
            3 => {
                // Two input types: f16 and bf16, f16 and f32, or i8 and a float.
                let (x, y) =
                    *self.rng.pick(&[("f16", "bf16"), ("bf16", "f16"), ("f16", "f32"), ("i8", "bf16")]);
                let a = self.ex(Dt::F32, &[m, k]).text;
                let b = self.ex(Dt::F32, &[k, n]).text;
                (format!("dot({}.to({x}), {}.to({y}))", paren(&a), paren(&b)), "dot: mixed element types")
            }
            4 => {
                let (mut dims, i) = ([m, k, n], self.rng.below(3));
                dims[i] = *self.rng.pick(SMALL_DIMS);
                let (a, b) = self.dot_operands(dt, dims[0], dims[1], dims[2]);
                (format!("dot({a}, {b})"), "dot: a dim below 16")
            }
            5 => {
                let (a, b) = self.dot_operands(dt, m, k, n);
                let flat = self.ex(Dt::F32, &[m]).text;
                let e = if self.rng.chance(50) {
                    format!("dot({}.to(f16), {b})", paren(&flat))
                } else {
                    format!("dot({a}, 1.0)")
                };
                (e, "dot: an operand that is not a 2-D tile")
            }
            _ => {
                let t = self.rng.word(&["u8", "i32", "u32", "bool"]);
                let a = self.ex(Dt::I32, &[m, k]).text;
                let b = self.ex(Dt::I32, &[k, n]).text;
                (
                    format!("dot({}.to({t}), {}.to({t}))", paren(&a), paren(&b)),
                    "dot: unsupported element type",
                )
            }
        };
        (format!("let {name} = {s};\n"), what)
    }

    /// A shape with as many lanes as `s` (not `s` itself, mostly).
    fn same_lanes(&mut self, s: &[Dim]) -> Shp {
        let total = lanes(s);
        let mut options: Vec<Shp> = Vec::new();
        if total != ONE {
            options.push(vec![total]);
        }
        // Every split of the factors into two dims.
        for lit in total.lit.min(0)..=total.lit.max(0) {
            for r in 0..=total.r {
                for c in 0..=total.c {
                    let a = Dim { lit, r, c };
                    let b = Dim { lit: total.lit - lit, r: total.r - r, c: total.c - c };
                    if a.ok() && b.ok() {
                        options.push(vec![a, b]);
                    }
                }
            }
        }
        let differ: Vec<Shp> = options.iter().filter(|o| o.as_slice() != s).cloned().collect();
        if !differ.is_empty() && self.rng.chance(90) {
            self.rng.pick(&differ).clone()
        } else {
            self.rng.pick(&options).clone()
        }
    }

    fn binary(&mut self, dt: Dt, shape: &[Dim]) -> TExpr {
        let (sa, sb) = self.split(shape);
        // The operands' type: the result's, or any for a comparison.
        let (odt, op) = match dt {
            Dt::Bool if self.rng.chance(70) => {
                let odt = *self.rng.pick(&[Dt::F32, Dt::I32, Dt::I32]);
                (odt, self.rng.word(&["<", "<=", ">", ">=", "==", "!="]))
            }
            Dt::Bool => (Dt::Bool, self.rng.word(&["&", "|", "^", "&&", "||", "==", "!="])),
            Dt::F32 => (Dt::F32, self.rng.word(&["+", "-", "*", "/", "+", "*", "%"])),
            Dt::I32 => (Dt::I32, self.rng.word(&["+", "-", "*", "/", "%", "&", "|", "^", "+", "*"])),
        };
        let a = self.ex(odt, &sa);
        let b = if odt != Dt::Bool && sb.is_empty() && self.rng.chance(50) {
            self.literal(odt)
        } else {
            self.ex(odt, &sb).text
        };
        TExpr::of(if self.rng.chance(50) {
            format!("({} {op} {b})", a.text)
        } else {
            format!("({b} {op} {})", a.text)
        })
    }

    fn unary(&mut self, dt: Dt, shape: &[Dim]) -> TExpr {
        let a = self.ex(dt, shape);
        let f = match dt {
            Dt::F32 => self.rng.word(&[
                "-", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "erf", "tanh", "sigmoid", "floor",
                "ceil", "sin", "cos", "abs",
            ]),
            Dt::I32 => self.rng.word(&["-", "abs", "!"]),
            Dt::Bool => "!",
        };
        TExpr::of(match f {
            "-" | "!" => format!("({f}{})", paren(&a.text)),
            _ if self.rng.chance(50) => format!("{f}({})", a.text),
            _ => format!("{}.{f}()", paren(&a.text)),
        })
    }

    /// `sum/max/min` (or `argmax/argmin` for i32) to a scalar or along an axis.
    fn reduction(&mut self, dt: Dt, shape: &[Dim]) -> TExpr {
        let arg = dt == Dt::I32 && self.rng.chance(50);
        let f =
            if arg { self.rng.word(&["argmax", "argmin"]) } else { self.rng.word(&["sum", "max", "min"]) };
        let src_dt = if arg { *self.rng.pick(&[Dt::F32, Dt::I32]) } else { dt };
        let (src, axis) = match shape {
            [d] => {
                let x = self.dim_or_one();
                if self.rng.chance(50) {
                    (vec![*d, x], Some(1))
                } else {
                    (vec![x, *d], Some(0))
                }
            }
            _ => {
                let s = self.tile_shape();
                let axis = if s.len() == 1 && self.rng.chance(30) { Some(0) } else { None };
                (s, axis)
            }
        };
        let a = self.ex(src_dt, &src);
        TExpr::of(match (axis, self.rng.chance(50)) {
            (Some(ax), true) => format!("{f}({}, {ax})", a.text),
            (Some(ax), false) => format!("{}.{f}({ax})", paren(&a.text)),
            (None, true) => format!("{f}({})", a.text),
            (None, false) => format!("{}.{f}()", paren(&a.text)),
        })
    }

    /// A pointer into a readable (`read`) or writable parameter of compute type `dt`, with
    /// offsets of shape `off`: `p + offs`, through a pointer variable sometimes.
    fn pointer(&mut self, dt: Dt, read: bool, off: &[Dim]) -> (String, &'static str) {
        let own: Vec<PVar> = self
            .ptrs
            .iter()
            .filter(|p| p.dt == dt && TYPED_PTRS.iter().any(|t| t.0 == p.param && t.2 == read))
            .filter(|p| bcast(&p.off, off).as_deref() == Some(off))
            .cloned()
            .collect();
        if !own.is_empty() && self.rng.chance(50) {
            let p = self.rng.pick(&own).clone();
            let d = self.sub_shape(off, true);
            if bcast(&p.off, &d).as_deref() == Some(off) {
                if d.is_empty() && self.rng.chance(50) {
                    return (p.name, p.param);
                }
                let o = self.ex(Dt::I32, &d);
                return (format!("{} + {}", p.name, paren(&o.text)), p.param);
            }
        }
        let params: Vec<&str> = TYPED_PTRS.iter().filter(|t| t.1 == dt && t.2 == read).map(|t| t.0).collect();
        let param = *self.rng.pick(&params);
        let o = self.offsets(off);
        if self.rng.chance(10) {
            // 64-bit offsets.
            return (format!("{param} + {}.to(i64)", paren(&o.text)), param);
        }
        (format!("{param} + {}", paren(&o.text)), param)
    }

    /// Offsets of shape `off`: the 2-D pattern `rows[:, None] * n + cols[None, :]` often.
    fn offsets(&mut self, off: &[Dim]) -> TExpr {
        TExpr::of(match off {
            [a, b] if *a != ONE && *b != ONE && self.rng.chance(50) => format!(
                "{} * {} + {}",
                self.row_index(*a, 1),
                self.rng.word(&["n_cols", "C", "4", "(2 * C)"]),
                self.row_index(*b, 0)
            ),
            [d] if self.rng.chance(40) => self.row_index(*d, 2),
            _ => return self.ex(Dt::I32, off),
        })
    }

    /// An i32 index tile of length `d`, expanded on `axis` (2: not expanded).
    fn row_index(&mut self, d: Dim, axis: u8) -> String {
        let base = match self.rng.below(3) {
            0 => format!("arange(0, {})", self.dim_text(d)),
            1 => format!("(program_id(0) * {} + arange(0, {}))", self.dim_text(d), self.dim_text(d)),
            _ => match self.var_of(Dt::I32, &[d]) {
                Some(v) => v,
                None => format!("arange(0, {})", self.dim_text(d)),
            },
        };
        match axis {
            0 | 1 if self.rng.chance(50) => format!("{base}.expand_dims({axis})"),
            0 | 1 => format!("expand_dims({base}, {axis})"),
            _ => base,
        }
    }

    fn load(&mut self, dt: Dt, shape: &[Dim]) -> TExpr {
        // Offsets (a tile unless the load is a scalar), mask and `other` broadcast to `shape`.
        let mut o = if shape.is_empty() { Vec::new() } else { self.sub_shape(shape, false) };
        let m = self.sub_shape(shape, true);
        let t = self.sub_shape(shape, true);
        let with_mask = self.rng.chance(75);
        let with_other = with_mask && self.rng.chance(50);
        let m = if with_mask && fits_offsets(&m, &o) { m } else { o.clone() };
        let t = if with_other && fits_offsets(&t, &o) { t } else { o.clone() };
        let joined = bcast(&o, &m).and_then(|j| bcast(&j, &t));
        if joined.as_deref() != Some(shape) {
            // The offsets take the whole shape where the parts do not make it up.
            o = shape.to_vec();
        }
        let (m, t) = (
            if fits_offsets(&m, &o) { m } else { o.clone() },
            if fits_offsets(&t, &o) { t } else { o.clone() },
        );
        let (p, param) = self.pointer(dt, true, &o);
        let storage = matches!(param, "h" | "hb" | "q") || (self.generic && param == "x");
        let mut args = vec![p];
        if with_mask {
            args.push(self.ex(Dt::Bool, &m).text);
            if with_other {
                args.push(if t.is_empty() && self.rng.chance(60) {
                    match dt {
                        Dt::F32 => self.rng.word(&["f32::NEG_INFINITY", "0.0", "1", "-1.5"]).to_string(),
                        _ => self.rng.word(&["0", "-1", "127"]).to_string(),
                    }
                } else {
                    self.ex(dt, &t).text
                });
            }
        }
        TExpr { text: format!("load({})", args.join(", ")), storage }
    }

    // ---- statements

    fn stmts(&mut self, n: usize, nest: u32, out: &mut String) {
        for _ in 0..n {
            self.stmt(nest, out);
        }
    }

    fn stmt(&mut self, nest: u32, out: &mut String) {
        let mut k = self.rng.below(15);
        if nest >= 2 && (8..=10).contains(&k) {
            // Deep enough: no more blocks.
            k -= 8;
        }
        match k {
            0..=3 => {
                let dt = *self.rng.pick(&[Dt::F32, Dt::F32, Dt::I32, Dt::Bool]);
                let shape = self.any_shape();
                let mutable = self.rng.chance(25) && dt != Dt::Bool;
                let mut e = self.ex(dt, &shape);
                if mutable && e.storage {
                    e = TExpr::of(format!("{}.to({})", paren(&e.text), dt.name()));
                }
                // Shadowing, now and then: the name takes the new type.
                let name = if !self.vars.is_empty() && self.rng.chance(10) {
                    self.rng.pick(&self.vars).name.clone()
                } else {
                    self.fresh_name("t")
                };
                self.vars.retain(|v| v.name != name);
                let m = if mutable { "mut " } else { "" };
                out.push_str(&format!("let {m}{name} = {};\n", e.text));
                self.vars.push(TVar { name, dt, shape, storage: e.storage, mutable });
            }
            4 => {
                // A pointer variable holding part of the offsets, mutable sometimes.
                let (param, dt, _, _) = *self.rng.pick(TYPED_PTRS);
                let off = self.any_shape();
                let o = if off.is_empty() { self.ex(Dt::I32, &off) } else { self.offsets(&off) };
                let name = self.fresh_name("p");
                let mutable = self.rng.chance(30);
                // Offsets loaded from u8 (`q`) are widened to i32, so a mutable pointer over them
                // takes i32 advances like any other.
                let m = if mutable { "mut " } else { "" };
                out.push_str(&format!("let {m}{name} = {param} + {};\n", paren(&o.text)));
                self.ptrs.push(PVar { name, param, dt, off, mutable });
            }
            11 | 12 => self.row_reduction(out),
            14 if nest == 0 => {
                // A named constant (weak, so usable as a dim, in shapes and `arange`).
                let d = self.dim();
                let name = self.fresh_name("w");
                let text = self.dim_text(d);
                out.push_str(&format!("let {name} = {text};\n"));
                self.aliases.push((name, d));
            }
            14 => self.store(out),
            13 => {
                // A mutable pointer moves on (by a scalar, or by offsets that broadcast to its own).
                let muts: Vec<PVar> = self.ptrs.iter().filter(|p| p.mutable).cloned().collect();
                if muts.is_empty() {
                    return self.row_reduction(out);
                }
                let p = self.rng.pick(&muts).clone();
                let d = self.sub_shape(&p.off, true);
                let e = self.ex(Dt::I32, &d).text;
                out.push_str(&match self.rng.below(3) {
                    0 => format!("{} += {e};\n", p.name),
                    1 => format!("{} -= {e};\n", p.name),
                    _ => format!("{0} = {0} + {1};\n", p.name, paren(&e)),
                });
            }
            5 | 6 => self.store(out),
            7 => {
                let muts: Vec<TVar> = self.vars.iter().filter(|v| v.mutable).cloned().collect();
                if muts.is_empty() {
                    return self.store(out);
                }
                let v = self.rng.pick(&muts).clone();
                let ops: &[&str] = match v.dt {
                    Dt::F32 => &["=", "+=", "-=", "*=", "/="],
                    _ => &["=", "+=", "-=", "*=", "%=", "&=", "|=", "^="],
                };
                let op = self.rng.word(ops);
                // `=` takes the shape or what broadcasts to it (2-D), or a scalar; `op=` a part.
                let s = if op == "=" && v.shape.len() == 1 {
                    if self.rng.chance(20) {
                        Vec::new()
                    } else {
                        v.shape.clone()
                    }
                } else {
                    self.sub_shape(&v.shape, true)
                };
                let e = if s.is_empty() && self.rng.chance(30) {
                    self.literal(v.dt)
                } else {
                    self.ex(v.dt, &s).text
                };
                out.push_str(&format!("{} {op} {e};\n", v.name));
            }
            8 => {
                let c = self.ex(Dt::Bool, &[]);
                let saved = (self.vars.clone(), self.ptrs.clone());
                let mut body = String::new();
                let n = 1 + self.rng.below(3);
                self.stmts(n, nest + 1, &mut body);
                (self.vars, self.ptrs) = saved.clone();
                let els = if self.rng.chance(40) {
                    let mut e = String::new();
                    self.stmts(1, nest + 1, &mut e);
                    (self.vars, self.ptrs) = saved;
                    format!(" else {{\n{e}}}")
                } else {
                    String::new()
                };
                out.push_str(&format!("if {} {{\n{body}}}{els}\n", c.text));
            }
            9 => {
                let saved = (self.vars.clone(), self.ptrs.clone());
                let i = self.fresh_name("i");
                let range = if self.rng.chance(50) {
                    format!("0..{}", self.rng.word(&["n_rows", "4", "n_cols"]))
                } else {
                    format!(
                        "(0..{}).step_by({})",
                        self.rng.word(&["n_rows", "R"]),
                        self.rng.word(&["2", "C"])
                    )
                };
                self.vars.push(TVar {
                    name: i.clone(),
                    dt: Dt::I32,
                    shape: Vec::new(),
                    storage: false,
                    mutable: false,
                });
                let mut body = String::new();
                let n = 1 + self.rng.below(3);
                self.stmts(n, nest + 1, &mut body);
                (self.vars, self.ptrs) = saved;
                out.push_str(&format!("for {i} in {range} {{\n{body}}}\n"));
            }
            _ => {
                // A mutable accumulator over a loop (the 2-D reduction pattern).
                let shape = self.tile_shape();
                let acc = self.fresh_name("acc");
                let sh = self.shape_text(&shape);
                let i = self.fresh_name("i");
                let sub = self.sub_shape(&shape, true);
                let saved = self.vars.clone();
                self.vars.push(TVar {
                    name: i.clone(),
                    dt: Dt::I32,
                    shape: Vec::new(),
                    storage: false,
                    mutable: false,
                });
                let e = self.ex(Dt::F32, &sub);
                self.vars = saved;
                out.push_str(&format!(
                    "let mut {acc} = zeros({sh});\nfor {i} in 0..n_rows {{\n{acc} += {};\n}}\n",
                    e.text
                ));
                self.vars.push(TVar { name: acc, dt: Dt::F32, shape, storage: false, mutable: true });
            }
        }
    }

    /// The softmax pattern along an axis: a reduction, `expand_dims` back, broadcasting against
    /// the tile, another reduction (and an arg-reduction).
    fn row_reduction(&mut self, out: &mut String) {
        let shape = vec![self.dim_or_one(), self.dim_or_one()];
        let v = match self.var_of(Dt::F32, &shape) {
            Some(v) if self.rng.chance(50) => v,
            _ => {
                let name = self.fresh_name("v");
                let e = self.ex(Dt::F32, &shape);
                out.push_str(&format!("let {name} = {};\n", e.text));
                self.vars.push(TVar {
                    name: name.clone(),
                    dt: Dt::F32,
                    shape: shape.clone(),
                    storage: e.storage,
                    mutable: false,
                });
                name
            }
        };
        let ax = self.rng.below(2);
        let kept = vec![shape[1 - ax]];
        let (m, e, s, y, i) = (
            self.fresh_name("m"),
            self.fresh_name("e"),
            self.fresh_name("s"),
            self.fresh_name("y"),
            self.fresh_name("am"),
        );
        let red = self.rng.word(&["max", "min", "sum"]);
        let arg = self.rng.word(&["argmax", "argmin"]);
        let func = self.rng.chance(50);
        let call = |f: &str, x: &str| if func { format!("{f}({x}, {ax})") } else { format!("{x}.{f}({ax})") };
        let back =
            |x: &str| if func { format!("expand_dims({x}, {ax})") } else { format!("{x}.expand_dims({ax})") };
        out.push_str(&format!("let {m} = {};\n", call(red, &v)));
        out.push_str(&format!("let {e} = exp({v} - {});\n", back(&m)));
        out.push_str(&format!("let {s} = {};\n", call("sum", &e)));
        out.push_str(&format!("let {y} = {e} / {};\n", back(&s)));
        out.push_str(&format!("let {i} = {};\n", call(arg, &y)));
        let var = |name: String, dt: Dt, shape: &Shp| TVar {
            name,
            dt,
            shape: shape.clone(),
            storage: false,
            mutable: false,
        };
        self.vars.push(var(m, Dt::F32, &kept));
        self.vars.push(var(e, Dt::F32, &shape));
        self.vars.push(var(s, Dt::F32, &kept));
        self.vars.push(var(y, Dt::F32, &shape));
        self.vars.push(var(i, Dt::I32, &kept));
    }

    fn store(&mut self, out: &mut String) {
        let dt = *self.rng.pick(&[Dt::F32, Dt::F32, Dt::I32]);
        let shape = self.tile_shape();
        let o = self.sub_shape(&shape, false);
        let v = self.sub_shape(&shape, true);
        let v = if fits_offsets(&v, &o) { v } else { o.clone() };
        let (p, _) = self.pointer(dt, false, &o);
        let value = if v.is_empty() && self.rng.chance(30) {
            self.literal(dt)
        } else {
            // Prefer a variable: stores are what keep the kernel's values alive.
            match self.var_of(dt, &v) {
                Some(name) if self.rng.chance(60) => name,
                _ => self.ex(dt, &v).text,
            }
        };
        let value = if self.generic && p.starts_with("out ") && self.rng.chance(30) {
            format!("{}.to(T)", paren(&value))
        } else {
            value
        };
        let mask = if self.rng.chance(60) {
            let m = self.sub_shape(&shape, true);
            let m = if fits_offsets(&m, &o) { m } else { o.clone() };
            format!(", {}", self.ex(Dt::Bool, &m).text)
        } else {
            String::new()
        };
        out.push_str(&format!("store({p}, {value}{mask});\n"));
    }

    // ---- one statement that is wrong in a known way

    /// A tile variable (or a new tile) of rank `rank` and a non-bool dtype.
    fn tile_of_rank(&mut self, rank: usize) -> (String, Dt, Shp) {
        let found: Vec<TVar> =
            self.vars.iter().filter(|v| v.shape.len() == rank && v.dt != Dt::Bool).cloned().collect();
        if !found.is_empty() && self.rng.chance(60) {
            let v = self.rng.pick(&found).clone();
            return (v.name, v.dt, v.shape);
        }
        let dt = *self.rng.pick(&[Dt::F32, Dt::I32]);
        let shape = if rank == 1 { vec![self.dim()] } else { vec![self.dim_or_one(), self.dim_or_one()] };
        let e = self.ex(dt, &shape);
        (paren(&e.text), dt, shape)
    }

    /// Two shapes that do not broadcast together.
    fn clashing_shapes(&mut self) -> (Shp, Shp) {
        loop {
            let a = self.tile_shape();
            let b = match self.rng.below(3) {
                0 => vec![self.dim()],
                1 => a.iter().rev().copied().collect(),
                _ => self.tile_shape(),
            };
            if bcast(&a, &b).is_none() {
                return (a, b);
            }
        }
    }

    /// One wrong statement and what is wrong with it.
    fn broken_stmt(&mut self) -> (String, &'static str) {
        let name = self.fresh_name("bad");
        let red = self.rng.word(&["sum", "max", "min", "argmax", "argmin"]);
        match self.rng.below(24) {
            0 | 1 => {
                let rank = if self.rng.chance(70) { 2 } else { 1 };
                let (t, _, s) = self.tile_of_rank(rank);
                let axis = if s.len() == 2 {
                    self.rng.word(&["2", "3", "-1", "7", "-2"])
                } else {
                    self.rng.word(&["1", "2", "-1"])
                };
                let e = if self.rng.chance(50) {
                    format!("{red}({t}, {axis})")
                } else {
                    format!("{t}.{red}({axis})")
                };
                (format!("let {name} = {e};\n"), "axis out of range")
            }
            2 => {
                let rank = 1 + self.rng.below(2);
                let (t, _, _) = self.tile_of_rank(rank);
                let axis = self.rng.word(&[
                    "n_cols",
                    "R",
                    "C",
                    "program_id(0)",
                    "1.0",
                    "true",
                    "(n_rows - n_rows)",
                    "1u32",
                ]);
                let e = if self.rng.chance(50) {
                    format!("{red}({t}, {axis})")
                } else {
                    format!("{t}.{red}({axis})")
                };
                (format!("let {name} = {e};\n"), "axis not a literal")
            }
            3 => {
                let dt = *self.rng.pick(&[Dt::F32, Dt::I32]);
                let s = self.ex(dt, &[]).text;
                let s = if self.rng.chance(20) { self.literal(dt) } else { s };
                let axis = self.rng.word(&["0", "1"]);
                let e = match self.rng.below(3) {
                    0 => format!("{red}({s}, {axis})"),
                    1 => format!("{}.{red}({axis})", paren(&s)),
                    _ => format!("{red}({s})"),
                };
                (format!("let {name} = {e};\n"), "reduction of a scalar")
            }
            4 => {
                let rank = 1 + self.rng.below(2);
                let (t, _, s) = self.tile_of_rank(rank);
                let total = lanes(&s);
                let mut to = self.same_lanes(&s);
                // One dim doubled (or the lanes halved): another number of lanes.
                let k = self.rng.below(to.len());
                if to[k].lit > 0 && self.rng.chance(50) {
                    to[k].lit -= 1;
                } else {
                    to[k].lit += 1;
                }
                if !to[k].ok() {
                    to[k].lit += 2;
                }
                debug_assert_ne!(lanes(&to), total);
                if self.rng.chance(20) {
                    to = vec![self.dim(), self.dim(), ONE];
                }
                let sh = self.shape_text(&to);
                let e = if self.rng.chance(50) {
                    format!("reshape({t}, {sh})")
                } else {
                    format!("{t}.reshape({sh})")
                };
                (format!("let {name} = {e};\n"), "reshape changes the lane count")
            }
            5 if self.rng.chance(25) => {
                let v = self.ex(Dt::F32, &[]).text;
                let e = match self.rng.below(3) {
                    0 => format!("expand_dims({v}, 0)"),
                    1 => format!("reshape({v}, [1, 1])"),
                    _ => format!("{}.expand_dims(1)", paren(&v)),
                };
                (format!("let {name} = {e};\n"), "a shape function of a scalar")
            }
            5 => {
                let t = if self.rng.chance(80) { self.tile_of_rank(1).0 } else { self.ex(Dt::F32, &[]).text };
                let e = if self.rng.chance(50) {
                    format!("trans({t})")
                } else {
                    format!("{}.trans()", paren(&t))
                };
                (format!("let {name} = {e};\n"), "trans of a 1-D tile or scalar")
            }
            6 => {
                let (t, _, _) = self.tile_of_rank(2);
                let axis = self.rng.word(&["0", "1"]);
                let e = if self.rng.chance(50) {
                    format!("expand_dims({t}, {axis})")
                } else {
                    format!("{t}.expand_dims({axis})")
                };
                (format!("let {name} = {e};\n"), "expand_dims of a 2-D tile")
            }
            7 => {
                let (t, _, _) = self.tile_of_rank(1);
                let axis = self.rng.word(&["2", "-1", "n_cols", "R", "1.0"]);
                (format!("let {name} = expand_dims({t}, {axis});\n"), "expand_dims axis")
            }
            8..=11 => {
                let (sa, sb) = self.clashing_shapes();
                let dt = *self.rng.pick(&[Dt::F32, Dt::I32]);
                let a = self.ex(dt, &sa).text;
                let b = self.ex(dt, &sb).text;
                let e = match self.rng.below(6) {
                    0 => format!("{} + {}", paren(&a), paren(&b)),
                    1 => format!("{} < {}", paren(&a), paren(&b)),
                    2 => format!("maximum({a}, {b})"),
                    3 => {
                        let c = self.ex(Dt::Bool, &sa).text;
                        format!("where_({c}, {b}, 0)")
                    }
                    4 => {
                        let sc = self.sub_shape(&sa, true);
                        let c = self.ex(Dt::Bool, &sc).text;
                        format!("where_({c}, {a}, {b})")
                    }
                    _ => format!("{}.minimum({b})", paren(&a)),
                };
                (format!("let {name} = {e};\n"), "shapes that do not broadcast")
            }
            12 | 13 => {
                // A mask, `other` or stored value that does not go with the offsets.
                let (so, sv) = self.clashing_shapes();
                let dt = *self.rng.pick(&[Dt::F32, Dt::I32]);
                let read = self.rng.chance(50);
                let (p, _) = self.pointer(dt, read, &so);
                let s = match self.rng.below(3) {
                    0 => {
                        let m = self.ex(Dt::Bool, &sv).text;
                        format!("let {name} = load({p}, {m});\n")
                    }
                    1 => {
                        let m = self.sub_shape(&so, true);
                        let m = self.ex(Dt::Bool, &m).text;
                        let t = self.ex(dt, &sv).text;
                        format!("let {name} = load({p}, {m}, {t});\n")
                    }
                    _ => {
                        let (p, _) = self.pointer(dt, false, &so);
                        let v = self.ex(dt, &sv).text;
                        format!("store({p}, {v});\n")
                    }
                };
                (s, "mask, other or value that does not go with the offsets")
            }
            14 => {
                let (t, _, s) = self.tile_of_rank(2);
                // A target the source does not broadcast to: a smaller dim, a lower rank, another dim.
                let two = Dim { lit: 1, r: 0, c: 0 };
                let (a, b) = (s[0], s[1]);
                let (x, y) = (self.dim_or_one(), self.dim_or_one());
                let candidates = [
                    vec![ONE, b],
                    vec![a, ONE],
                    vec![b],
                    vec![a],
                    vec![a.mul(two), b],
                    vec![a, b.mul(two)],
                    vec![b, a],
                    vec![x, y],
                ];
                let bad: Vec<Shp> =
                    candidates.into_iter().filter(|to| bcast(&s, to).as_ref() != Some(to)).collect();
                let to = self.rng.pick(&bad).clone();
                let sh = self.shape_text(&to);
                (format!("let {name} = broadcast_to({t}, {sh});\n"), "broadcast_to a smaller shape")
            }
            15 => {
                let f = self.rng.word(&["zeros", "full", "reshape", "broadcast_to"]);
                let sh = self.rng.word(&[
                    "[R, C, 2]",
                    "[]",
                    "[R, 3]",
                    "[n_rows, C]",
                    "[2.0, C]",
                    "[0, C]",
                    "[R, C, 1, 1]",
                    "[-4, C]",
                    "[C, s]",
                    "[R, C / 3]",
                ]);
                let e = match f {
                    "zeros" => format!("zeros({sh})"),
                    "full" => format!("full({sh}, 1.0)"),
                    _ => {
                        let (t, _, _) = self.tile_of_rank(2);
                        format!("{f}({t}, {sh})")
                    }
                };
                (format!("let {name} = {e};\n"), "a bad shape literal")
            }
            16 => {
                let dims = [self.dim(), self.dim()];
                let sh = self.shape_text(&dims);
                let sh = if sh.starts_with('[') { sh } else { format!("[{sh}]") };
                (format!("let {name} = {sh};\n"), "a shape as a value")
            }
            17 => {
                let s = self.tile_shape();
                let b = self.ex(Dt::Bool, &s).text;
                let e = match self.rng.below(4) {
                    0 => format!("{red}({b}, {})", if s.len() == 2 { "1" } else { "0" }),
                    1 => format!("{}.{red}()", paren(&b)),
                    2 => format!("exp({})", self.ex(Dt::I32, &s).text),
                    _ => format!("{} + {}", paren(&b), paren(&b)),
                };
                (format!("let {name} = {e};\n"), "a reduction or math on the wrong dtype")
            }
            18 => {
                let s = self.tile_shape();
                let f = self.ex(Dt::F32, &s).text;
                let i = self.ex(Dt::I32, &s).text;
                let e = if self.rng.chance(50) {
                    format!("{} * {}", paren(&f), paren(&i))
                } else {
                    format!("where_({f} > 0.0, {f}, {i})")
                };
                (format!("let {name} = {e};\n"), "mixed dtypes")
            }
            19 => {
                let (t, _, s) = self.tile_of_rank(2);
                let e = match self.rng.below(8) {
                    0 => format!("trans({t}, 0)"),
                    1 => format!("expand_dims({t})"),
                    2 => format!("reshape({t})"),
                    3 => format!("broadcast_to({t}, [R, C], 1)"),
                    4 => format!("{t}.argmax(0, 1)"),
                    5 => format!("{t}.trans(1)"),
                    6 => {
                        let sh = self.shape_text(&s);
                        format!("full({sh}, {t})")
                    }
                    _ => format!("{t}.sum(0, 1)"),
                };
                (format!("let {name} = {e};\n"), "wrong arguments")
            }
            20 => {
                let s = vec![self.dim_or_one(), self.dim_or_one()];
                let c = self.ex(Dt::Bool, &s).text;
                (format!("if {c} {{\nlet {name} = 1;\n}}\n"), "a 2-D condition")
            }
            22 | 23 => self.broken_dot(&name),
            _ => {
                // A value that does not go into a mutable variable of another shape (a 1-D
                // variable takes its own length only, a 2-D one what broadcasts to its shape).
                let s = self.tile_shape();
                let v = self.fresh_name("mv");
                let init = self.shape_text(&s);
                let other = loop {
                    let o = self.tile_shape();
                    let fits = if s.len() == 1 { o == s } else { bcast(&s, &o).as_ref() == Some(&s) };
                    if !fits {
                        break o;
                    }
                };
                let e = self.ex(Dt::F32, &other).text;
                (format!("let mut {v} = zeros({init});\n{v} = {e};\n"), "assignment of another shape")
            }
        }
    }
}

/// `t` in parentheses unless it is a name or already one group.
fn paren(t: &str) -> String {
    let simple = t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let grouped = t.starts_with('(') && t.ends_with(')') && {
        let mut depth = 0i32;
        t.char_indices().all(|(i, c)| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            depth > 0 || i == t.len() - 1
        })
    };
    if simple || grouped {
        t.to_string()
    } else {
        format!("({t})")
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum TypedKind {
    /// Right by construction: must check and expand.
    Valid,
    /// One statement wrong in a known way: must give a spanned error.
    Broken,
}

/// A typed 2-D kernel, and what was broken in it (if it was).
fn typed_kernel(rng: &mut Rng, kind: TypedKind) -> (TokenStream, &'static str) {
    let generic = rng.chance(15);
    let mut t =
        Typed { rng, vars: Vec::new(), ptrs: Vec::new(), aliases: Vec::new(), next: 0, depth: 0, generic };
    let mut body = String::new();
    // The usual prologue, then random statements.
    body.push_str("let rows = program_id(0) * R + arange(0, R);\nlet cols = arange(0, C);\n");
    t.vars.push(TVar {
        name: "rows".into(),
        dt: Dt::I32,
        shape: vec![DIM_R],
        storage: false,
        mutable: false,
    });
    t.vars.push(TVar {
        name: "cols".into(),
        dt: Dt::I32,
        shape: vec![DIM_C],
        storage: false,
        mutable: false,
    });
    if t.rng.chance(70) {
        let m = t.rng.word(&["rows.expand_dims(1) < n_rows", "expand_dims(rows < n_rows, 1)"]);
        body.push_str(&format!(
            "let offs = rows.expand_dims(1) * n_cols + cols.expand_dims(0);\nlet mask = ({m}) & (cols < n_cols).expand_dims(0);\n"
        ));
        t.vars.push(TVar {
            name: "offs".into(),
            dt: Dt::I32,
            shape: vec![DIM_R, DIM_C],
            storage: false,
            mutable: false,
        });
        t.vars.push(TVar {
            name: "mask".into(),
            dt: Dt::Bool,
            shape: vec![DIM_R, DIM_C],
            storage: false,
            mutable: false,
        });
    }
    let n = 2 + t.rng.below(6);
    // The wrong statement goes anywhere among the others, made from the variables before it.
    let broken_at = if kind == TypedKind::Broken { t.rng.below(n + 1) } else { usize::MAX };
    let mut what = "";
    for i in 0..=n {
        if i == broken_at {
            let (bad, w) = t.broken_stmt();
            body.push_str(&bad);
            what = w;
        }
        if i < n {
            t.stmt(0, &mut body);
        }
    }
    t.store(&mut body);
    let head = if generic { "T: Float, " } else { "" };
    let params: Vec<String> = TYPED_PTRS
        .iter()
        .map(|&(name, _, read, elem)| {
            let elem = if generic && matches!(name, "x" | "out") { "T" } else { elem };
            format!("{name}: *{} {elem}", if read { "const" } else { "mut" })
        })
        .collect();
    let src = format!(
        "fn k2<{head}const R: usize, const C: usize>({}, n_rows: i32, n_cols: i32, s: f32, seed: u64) {{\n{body}}}",
        params.join(", ")
    );
    (tokens(&src), what)
}

// ---- the property ------------------------------------------------------------------------------

#[derive(Default, Debug)]
struct Tally {
    cases: usize,
    ok: usize,
    errors: usize,
    /// Error outputs whose every `compile_error!` sits at the call site.
    call_site_only: usize,
    /// Generic kernels that expanded without errors.
    generic_ok: usize,
    /// Typed kernels with a `dot` that expanded without errors, and typed kernels with a broken
    /// `dot` that were rejected.
    dot_ok: usize,
    dot_rejected: usize,
}

fn span_text(s: Span) -> String {
    format!("{s:?}")
}

/// The spans of every `compile_error` ident in `ts`.
fn compile_error_spans(ts: &TokenStream, out: &mut Vec<Span>) {
    for t in ts.clone() {
        match t {
            TokenTree::Ident(i) if i == "compile_error" => out.push(i.span()),
            TokenTree::Group(g) => compile_error_spans(&g.stream(), out),
            _ => {}
        }
    }
}

/// Runs one case through the macro; the expansion (a kernel module, or spanned errors) and whether
/// it has errors.
fn check_case(label: &str, attr: TokenStream, item: TokenStream, tally: &mut Tally) -> (TokenStream, bool) {
    let shown = item.to_string();
    let result = catch_unwind(AssertUnwindSafe(|| expand::fused_kernel(attr, item)));
    let out = match result {
        Ok(out) => out,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{label}: the macro panicked ({msg}) on:\n{shown}");
        }
    };
    tally.cases += 1;
    let file = syn::parse2::<syn::File>(without_long_strings(&out))
        .unwrap_or_else(|e| panic!("{label}: the expansion is not Rust items ({e}):\n{out}\n\non:\n{shown}"));
    let mut spans = Vec::new();
    compile_error_spans(&out, &mut spans);
    if spans.is_empty() {
        let has_module = file.items.iter().any(|i| matches!(i, syn::Item::Mod(_)));
        assert!(has_module, "{label}: no error and no kernel module:\n{out}\n\non:\n{shown}");
        tally.ok += 1;
        if out.to_string().contains("pub fn spec <") {
            tally.generic_ok += 1;
        }
    } else {
        tally.errors += 1;
        let call_site = span_text(Span::call_site());
        if spans.iter().all(|s| span_text(*s) == call_site) {
            tally.call_site_only += 1;
            panic!("{label}: every error is at the call site (unspanned):\n{out}\n\non:\n{shown}");
        }
    }
    let has_errors = !spans.is_empty();
    (out, has_errors)
}

/// `ts` with its long string literals (the CUDA source, the IR's JSON: tens of kilobytes, which
/// syn would unescape again to parse them) emptied: the expansion's structure is what is checked.
fn without_long_strings(ts: &TokenStream) -> TokenStream {
    ts.clone()
        .into_iter()
        .map(|t| match t {
            TokenTree::Group(g) => {
                let mut new = Group::new(g.delimiter(), without_long_strings(&g.stream()));
                new.set_span(g.span());
                TokenTree::Group(new)
            }
            TokenTree::Literal(l) if l.to_string().len() > 256 && l.to_string().starts_with('"') => {
                let mut new = Literal::string("");
                new.set_span(l.span());
                TokenTree::Literal(new)
            }
            other => other,
        })
        .collect()
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn seeds_expand_without_errors() {
    for (i, seed) in seeds().iter().enumerate() {
        let out = expand::fused_kernel(TokenStream::new(), tokens(seed));
        let mut spans = Vec::new();
        compile_error_spans(&out, &mut spans);
        assert!(spans.is_empty(), "seed {i} does not check:\n{out}");
    }
}

#[test]
fn macro_never_panics_on_random_and_mutated_kernels() {
    let cases = env_num("FUSE_FUZZ_CASES", 12_000);
    let seed = env_num("FUSE_FUZZ_SEED", 0x5EED_F05E);
    let start = Instant::now();
    let tally = in_batches(seed, cases, run_batch);
    eprintln!("fuzz: {tally:?} in {:.1?}", start.elapsed());
    assert_eq!(tally.cases as u64, cases);
    // Both outcomes occur: the inputs are neither all broken nor all fine.
    assert!(tally.ok > 0 && tally.errors > 0, "{tally:?}");
    assert!(tally.generic_ok > 0, "some generic kernels must expand: {tally:?}");
}

/// Typed 2-D kernels: the right ones check and expand, the broken ones give spanned errors.
#[test]
fn typed_2d_kernels_expand_or_fail_as_built() {
    let cases = env_num("FUSE_FUZZ_TYPED_CASES", 2_000);
    let seed = env_num("FUSE_FUZZ_SEED", 0x5EED_F05E);
    let start = Instant::now();
    let tally = in_batches(seed, cases, run_typed_batch);
    eprintln!("fuzz (typed 2-D): {tally:?} in {:.1?}", start.elapsed());
    assert_eq!(tally.cases as u64, cases);
    assert_eq!(tally.ok + tally.errors, tally.cases);
    assert!(tally.generic_ok > 0, "some generic kernels must expand: {tally:?}");
    assert!(
        tally.dot_ok > 0 && tally.dot_rejected > 0,
        "`dot` must be generated, right and wrong: {tally:?}"
    );
}

/// Runs `cases` in batches, each on a fresh thread: proc-macro2's fallback keeps every parsed
/// source in a thread-local map that only grows (and slows span look-ups), and the batches spread
/// over the cores.
fn in_batches(seed: u64, cases: u64, run: fn(u64, std::ops::Range<u64>) -> Tally) -> Tally {
    const BATCH: u64 = 250;
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    let batches: Vec<u64> = (0..cases.div_ceil(BATCH)).collect();
    let mut tally = Tally::default();
    for round in batches.chunks(workers as usize) {
        let results: Vec<Tally> = std::thread::scope(|scope| {
            let handles: Vec<_> = round
                .iter()
                .map(|&b| scope.spawn(move || run(seed, b * BATCH..((b + 1) * BATCH).min(cases))))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
        });
        for t in results {
            tally.cases += t.cases;
            tally.ok += t.ok;
            tally.errors += t.errors;
            tally.call_site_only += t.call_site_only;
            tally.generic_ok += t.generic_ok;
            tally.dot_ok += t.dot_ok;
            tally.dot_rejected += t.dot_rejected;
        }
    }
    tally
}

fn run_batch(seed: u64, cases: std::ops::Range<u64>) -> Tally {
    let mut tally = Tally::default();
    for case in cases {
        // One generator per case: case `c` reproduces alone from FUSE_FUZZ_SEED and `c`.
        let mut rng = Rng(seed ^ case.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let attr = if rng.chance(2) {
            tokens(rng.word(&["num_warps = 4", "x", "()", "BLOCK"]))
        } else {
            TokenStream::new()
        };
        let (kind, item) = if case % 3 == 2 {
            ("generated", generated_kernel(&mut rng))
        } else {
            ("mutated", mutated_kernel(&mut rng))
        };
        check_case(&format!("case {case} ({kind}, seed {seed:#x})"), attr, item, &mut tally);
    }
    tally
}

fn run_typed_batch(seed: u64, cases: std::ops::Range<u64>) -> Tally {
    let mut tally = Tally::default();
    for case in cases {
        // Its own stream of generators (the typed cases are not the other test's).
        let mut rng = Rng((seed ^ 0x2D2D_2D2D) ^ case.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let kind = if case % 2 == 0 { TypedKind::Valid } else { TypedKind::Broken };
        let (item, what) = typed_kernel(&mut rng, kind);
        let shown = item.to_string();
        let label = format!("case {case} (typed 2-D, {kind:?}, seed {seed:#x}; FUSE_FUZZ_TYPED_CASES)");
        let (out, has_errors) = check_case(&label, TokenStream::new(), item, &mut tally);
        match kind {
            TypedKind::Valid if has_errors => {
                panic!("{label}: a well-typed kernel was rejected:\n{}\n\non:\n{shown}", error_messages(&out))
            }
            TypedKind::Broken if !has_errors => {
                panic!("{label}: a kernel with {what} was accepted:\n{shown}")
            }
            TypedKind::Valid if shown.contains("dot (") => tally.dot_ok += 1,
            TypedKind::Broken if what.starts_with("dot:") => tally.dot_rejected += 1,
            _ => {}
        }
    }
    tally
}

/// The messages of the `compile_error!`s in an expansion.
fn error_messages(ts: &TokenStream) -> String {
    let mut out = Vec::new();
    fn walk(ts: &TokenStream, out: &mut Vec<String>) {
        let toks: Vec<TokenTree> = ts.clone().into_iter().collect();
        for (i, t) in toks.iter().enumerate() {
            match t {
                TokenTree::Ident(id) if id == "compile_error" => {
                    if let Some(TokenTree::Group(g)) = toks.get(i + 2) {
                        out.push(g.stream().to_string());
                    }
                }
                TokenTree::Group(g) => walk(&g.stream(), out),
                _ => {}
            }
        }
    }
    walk(ts, &mut out);
    out.join("\n")
}

/// The emitted CUDA of typed 2-D kernels compiles with NVRTC (sm_90) under a few shapes, warp
/// counts and specialisations. About 0.2 s a compile, so not in the default run:
/// `cargo test --release -p fuse-macros fuzz -- --ignored` (`FUSE_FUZZ_NVRTC_CASES`, default 100
/// kernels; needs libnvrtc on the loader path).
#[test]
#[ignore]
fn typed_2d_kernels_compile_with_nvrtc() {
    use crate::{check, diag::Diags, emit_cuda, parse};
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("skipping: NVRTC (libnvrtc.so) not found on the loader path");
        return;
    }
    let cases = env_num("FUSE_FUZZ_NVRTC_CASES", 100);
    let seed = env_num("FUSE_FUZZ_SEED", 0x5EED_F05E);
    let (start, mut compiled) = (Instant::now(), 0);
    // (R, C, FUSE_NUM_WARPS, value of every specialisation macro).
    const CONFIGS: &[(u32, u32, u32, u32)] = &[(1, 32, 4, 0), (8, 4, 2, 1), (4, 16, 4, 1), (2, 2, 1, 0)];
    for case in 0..cases {
        let mut rng = Rng((seed ^ 0xC0DA) ^ case.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let (item, _) = typed_kernel(&mut rng, TypedKind::Valid);
        let shown = item.to_string();
        if shown.contains("T : Float") {
            // Generic kernels expand per instantiation; the concrete ones cover the emitter.
            continue;
        }
        let f: syn::ItemFn = syn::parse2(item).unwrap_or_else(|e| panic!("case {case}: {e}\n{shown}"));
        let mut diags = Diags::default();
        let kf = parse::parse_kernel(&f, &mut diags);
        let k = check::check_kernel(&kf, &mut diags);
        assert!(diags.combined().is_none(), "case {case}: a well-typed kernel was rejected:\n{shown}");
        let out = emit_cuda::emit_cuda(&k);
        let &(r, c, warps, spec) = &CONFIGS[case as usize % CONFIGS.len()];
        let mut src = String::new();
        for name in &k.consts {
            src.push_str(&format!("#define {name} {}\n", if name == "R" { r } else { c }));
        }
        src.push_str(&format!("#define FUSE_NUM_WARPS {warps}\n"));
        for s in &out.specializations {
            src.push_str(&format!("#define {} {spec}\n", s.macro_name(&k.params)));
        }
        src.push_str(&out.source);
        let opts = cudarc::nvrtc::CompileOptions {
            options: vec!["--gpu-architecture=sm_90".into()],
            ..Default::default()
        };
        match cudarc::nvrtc::compile_ptx_with_opts(&src, opts) {
            Ok(_) => compiled += 1,
            Err(cudarc::nvrtc::CompileError::CompileError { log, .. }) => panic!(
                "case {case} (R={r} C={c} warps={warps} specs={spec}): NVRTC failed:\n{}\n\non:\n{shown}\n\n{src}",
                log.to_string_lossy()
            ),
            Err(e) => panic!("case {case}: {e:?}"),
        }
    }
    eprintln!("fuzz (typed 2-D, NVRTC): {compiled} kernels compiled in {:.1?}", start.elapsed());
}
