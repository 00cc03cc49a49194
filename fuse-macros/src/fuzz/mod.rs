//! The macro never panics: random and mutated kernels go through the compiler's entry
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
//! * typed 2-D kernels, built from a model of the types and shapes so that they are
//!   right: they must check and expand without errors; half of them get one statement that is
//!   wrong in a known way (axis out of range or not a literal, a reduction of a scalar, a reshape
//!   to another lane count, `trans` of a 1-D tile, shapes that do not broadcast, ...) and must give
//!   a spanned error (see `typed.rs`).
//!
//! `FUSE_FUZZ_CASES` overrides the number of cases of the first two kinds (default 12,000),
//! `FUSE_FUZZ_TYPED_CASES` of the third (default 2,000); `FUSE_FUZZ_SEED` the seed.

use crate::expand;
use proc_macro2::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

mod corpus;
mod grammar;
mod mutate;
mod typed;

use corpus::seeds;
use grammar::generated_kernel;
use mutate::mutated_kernel;
use typed::{typed_kernel, TypedKind};

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
/// kernels; needs libnvrtc on the loader path, and fails without it).
#[test]
#[cfg_attr(
    fuse_nvrtc,
    ignore = "slow (about 0.2 s a compile): cargo test --release -p fuse-macros fuzz -- --ignored"
)]
#[cfg_attr(
    not(fuse_nvrtc),
    ignore = "needs NVRTC: pip install nvidia-cuda-nvrtc and put its lib (site-packages/nvidia/cu13/lib) on LD_LIBRARY_PATH"
)]
fn typed_2d_kernels_compile_with_nvrtc() {
    use crate::{check, diag::Diags, emit_cuda, parse};
    assert!(
        unsafe { cudarc::nvrtc::sys::is_culib_present() },
        "NVRTC (libnvrtc.so) not found on the loader path: `python3 -m pip install nvidia-cuda-nvrtc` and put \
         site-packages/nvidia/cu13/lib on LD_LIBRARY_PATH"
    );
    let cases = env_num("FUSE_FUZZ_NVRTC_CASES", 100);
    let seed = env_num("FUSE_FUZZ_SEED", 0x5EED_F05E);
    let (start, mut compiled, mut refused) = (Instant::now(), 0, 0);
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
        // The first configuration from this case's turn on that the launcher accepts: it refuses
        // at compile time a `dot` whose const-generic dims come out below DOT_MIN_DIM.
        let Some(&(r, c, warps, spec)) = (0..CONFIGS.len())
            .map(|i| &CONFIGS[(case as usize + i) % CONFIGS.len()])
            .find(|&&(r, c, _, _)| dot_dims_hold(&k, |name| if name == "R" { r } else { c }))
        else {
            refused += 1;
            continue;
        };
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
    eprintln!(
        "fuzz (typed 2-D, NVRTC): {compiled} kernels compiled in {:.1?}; {refused} skipped (no configuration \
         gives their `dot`s dims the launcher accepts)",
        start.elapsed()
    );
}

/// Whether every `dot` of `k` has M, K and N of at least [`fuse_ir::DOT_MIN_DIM`] with the const
/// generics at `value` (by name): what the launcher asserts where `launch::<..>` is instantiated.
fn dot_dims_hold(k: &fuse_ir::Kernel, value: impl Fn(&str) -> u32) -> bool {
    let len_log2 = |len: &fuse_ir::Len| {
        len.log2
            + len.consts.iter().map(|&c| value(&k.consts[c as usize]).trailing_zeros() as i32).sum::<i32>()
    };
    let min_log2 = fuse_ir::DOT_MIN_DIM.trailing_zeros() as i32;
    let mut holds = true;
    k.visit_stmts(&mut |st| {
        if let fuse_ir::Stmt::Assign { expr: fuse_ir::Expr::Dot { a, b, .. }, .. } = st {
            for id in [*a, *b] {
                holds &= k.ty(id).shape.dims().iter().all(|len| len_log2(len) >= min_log2);
            }
        }
    });
    holds
}
