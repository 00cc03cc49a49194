//! The divisibility facts of `analysis/affine.rs` as preprocessor conditions: const generics and
//! `FUSE_DIV16_<p>` facts are known to the preprocessor only.
use crate::emit_cuda::analysis::affine::{Div, Term};

impl Term {
    /// `div16_macros[p]`: the `FUSE_DIV16_` macro of integer param `p` (the name the runtime defines).
    fn c_expr(&self, const_names: &[String], div16_macros: &[String]) -> String {
        let mut f: Vec<String> = Vec::new();
        if self.log2 > 0 || (self.consts.is_empty() && self.div16.is_empty()) {
            f.push(format!("{}", 1u64 << self.log2));
        }
        f.extend(self.consts.iter().map(|&c| const_names[c as usize].clone()));
        f.extend(
            self.div16.iter().map(|&(p, l)| format!("({} ? {} : 1)", div16_macros[p as usize], 1u32 << l)),
        );
        if f.len() == 1 {
            f.pop().unwrap()
        } else {
            format!("({})", f.join(" * "))
        }
    }
}

impl Div {
    /// A preprocessor condition for "the value is a multiple of `m`", a power-of-two macro or
    /// number known to be at most `2^max_log2`, and the integer params whose `FUSE_DIV16_` fact it
    /// reads. The min of powers of two is a multiple of `m` exactly when every term is, and terms of
    /// at least `2^max_log2` always are.
    pub fn multiple_of(
        &self,
        m: &str,
        max_log2: u8,
        const_names: &[String],
        div16_macros: &[String],
    ) -> (String, Vec<u32>) {
        let kept: Vec<&Term> = self.terms.iter().filter(|t| t.log2 < max_log2).collect();
        let mut read: Vec<u32> = kept.iter().flat_map(|t| t.div16.iter().map(|&(p, _)| p)).collect();
        read.sort_unstable();
        read.dedup();
        let conds: Vec<String> =
            kept.iter().map(|t| format!("{} % {m} == 0", t.c_expr(const_names, div16_macros))).collect();
        let cond = if conds.is_empty() { "1".into() } else { format!("({})", conds.join(" && ")) };
        (cond, read)
    }
}
