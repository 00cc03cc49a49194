//! (a) Token-level mutations of valid kernels, and the vocabulary they draw from (the grammar of
//! (b) shares its literals).

use super::*;

/// Names the mutator draws from: the language's functions and types, keywords, Rust-only names,
/// and the seeds' variables.
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
    "NAN",
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

pub(super) const LITERALS: &[&str] = &[
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

pub(super) fn mutated_kernel(rng: &mut Rng) -> TokenStream {
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
