//! Source ranges and error collection.
//!
//! On stable Rust a proc macro cannot join two spans, so a multi-token expression is remembered as
//! its first and last token: `syn::Error::new_spanned` turns such a pair into a diagnostic that
//! underlines the whole range (the same trick syn uses for `Error::new_spanned`).

use proc_macro2::{Punct, Spacing, Span, TokenStream, TokenTree};
use quote::ToTokens;

/// The source range of one AST node: its first and last token.
#[derive(Clone, Copy, Debug)]
pub struct Sp {
    pub start: Span,
    pub end: Span,
}

impl Sp {
    pub fn single(span: Span) -> Sp {
        Sp { start: span, end: span }
    }

    /// The range covering every token of `node`.
    pub fn of(node: &impl ToTokens) -> Sp {
        let mut tokens = node.to_token_stream().into_iter();
        let start = tokens.next().map_or_else(Span::call_site, |t| t.span());
        let end = tokens.last().map_or(start, |t| t.span());
        Sp { start, end }
    }

    /// From the start of `self` to the end of `other`.
    pub fn to(self, other: Sp) -> Sp {
        Sp { start: self.start, end: other.end }
    }

    pub fn error(self, message: impl std::fmt::Display) -> syn::Error {
        let mut start = Punct::new('#', Spacing::Alone);
        start.set_span(self.start);
        let mut end = Punct::new('#', Spacing::Alone);
        end.set_span(self.end);
        let tokens: TokenStream = [TokenTree::Punct(start), TokenTree::Punct(end)].into_iter().collect();
        syn::Error::new_spanned(tokens, message)
    }
}

/// Every error found so far. Phases keep going after an error so the user sees all of them at once.
#[derive(Default)]
pub struct Diags {
    errors: Vec<syn::Error>,
}

impl Diags {
    pub fn error(&mut self, sp: Sp, message: impl std::fmt::Display) {
        self.errors.push(sp.error(message));
    }

    /// An error with a `help:` line saying what would be right.
    pub fn error_help(&mut self, sp: Sp, message: impl std::fmt::Display, help: impl std::fmt::Display) {
        self.errors.push(sp.error(format!("{message}\nhelp: {help}")));
    }

    pub fn push(&mut self, error: syn::Error) {
        self.errors.push(error);
    }

    /// Every error, one `syn::Error` each, in the order reported.
    pub fn into_errors(self) -> Vec<syn::Error> {
        self.errors.into_iter().flat_map(|e| e.into_iter()).collect()
    }

    /// All errors as one `syn::Error` (`None` if there were none).
    pub fn combined(self) -> Option<syn::Error> {
        let mut iter = self.errors.into_iter();
        let mut first = iter.next()?;
        for e in iter {
            first.combine(e);
        }
        Some(first)
    }
}

/// Levenshtein distance, for "did you mean" hints.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            let del = prev[j + 1] + 1;
            let ins = cur[j] + 1;
            cur.push(sub.min(del).min(ins));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The candidate closest to `name`, if it is close enough to be a plausible typo.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, c)| (*d, *c))
        .map(|(_, c)| c)
}
