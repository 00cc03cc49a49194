//! The macro never panics (issue 4.5): random and mutated kernels go through the compiler's entry
//! point, and each must give either a kernel module or spanned `compile_error!`s, never a panic.
//!
//! Two kinds of input, from a seeded generator (so a failure is reproducible from its case number):
//! * token-level mutations of valid kernels (delete, duplicate, swap, replace tokens; idents
//!   replaced by other idents, keywords or literals; literals changed; groups dropped, unwrapped,
//!   re-delimited or added), one to four per case;
//! * kernels generated from a small grammar of the tile language (signatures, `let`, assignments,
//!   `store`, `if`, `for`, calls with right and wrong arities, methods, casts, operators), whose
//!   names and types are chosen at random, so most of them are wrong in some way; a quarter are
//!   generic (`T: Float`, `O: Half`, wrong bounds, defaults, `where` clauses) and use their type
//!   parameters in pointer types, casts and constants (`T::MAX`).
//!
//! `FUSE_FUZZ_CASES` overrides the number of cases (default 12,000); `FUSE_FUZZ_SEED` the seed.

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
        assert!(seeds.len() >= 9, "expected the example kernels, found {}", seeds.len());
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
];
const METHODS: &[&str] =
    &["exp", "sum", "max", "min", "sqrt", "abs", "maximum", "minimum", "sigmoid", "frobnicate"];
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
                    let args: Vec<String> = (0..arity).map(|_| self.expr()).collect();
                    format!("{f}({})", args.join(", "))
                }
                3 => {
                    let m = *self.rng.pick(METHODS);
                    let recv = self.expr();
                    let arg = if matches!(m, "maximum" | "minimum") || self.rng.chance(10) {
                        self.expr()
                    } else {
                        String::new()
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
                6 => format!("{}({})", self.rng.pick(&["-", "!"]), self.expr()),
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
                    format!("let {m}{name} = {e};\n")
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
    let names = ["a", "b", "c", "offs", "mask", "v", "acc", "t", "i", "x", "out", "n", "tmp", "r", "s"];
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
        consts.push(rng.pick(&["BLOCK", "B", "N", "K"]).to_string());
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

fn check_case(label: &str, attr: TokenStream, item: TokenStream, tally: &mut Tally) {
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
    let file = syn::parse2::<syn::File>(out.clone())
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
    // Cases run in batches, each on a fresh thread: proc-macro2's fallback keeps every parsed
    // source in a thread-local map that only grows (and slows span look-ups), and the batches
    // spread over the cores.
    const BATCH: u64 = 250;
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    let batches: Vec<u64> = (0..cases.div_ceil(BATCH)).collect();
    let mut tally = Tally::default();
    for round in batches.chunks(workers as usize) {
        let results: Vec<Tally> = std::thread::scope(|scope| {
            let handles: Vec<_> = round
                .iter()
                .map(|&b| scope.spawn(move || run_batch(seed, b * BATCH..((b + 1) * BATCH).min(cases))))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
        });
        for t in results {
            tally.cases += t.cases;
            tally.ok += t.ok;
            tally.errors += t.errors;
            tally.call_site_only += t.call_site_only;
            tally.generic_ok += t.generic_ok;
        }
    }
    eprintln!("fuzz: {tally:?} in {:.1?}", start.elapsed());
    assert_eq!(tally.cases as u64, cases);
    // Both outcomes occur: the inputs are neither all broken nor all fine.
    assert!(tally.ok > 0 && tally.errors > 0, "{tally:?}");
    assert!(tally.generic_ok > 0, "some generic kernels must expand: {tally:?}");
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
