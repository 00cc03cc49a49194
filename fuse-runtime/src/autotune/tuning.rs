//! What an autotuned kernel declares ([`Tuning`]: its [`Candidate`]s and key), how a key value
//! becomes a word ([`KeyValue`]), and what the tuner asks of the generated launcher ([`Step`]).
//!
//! Near the bottom of `autotune/`: imports only `error` and `autotune/saved.rs` (the buffers a
//! [`Step`] saves and restores); `bench.rs`, `record.rs` and `autotune/mod.rs` import it.

use super::saved::Saved;
use crate::error::Error;

/// One candidate configuration, as the runtime sees it: the const generics in declaration order
/// and the launch's warps and stages (`None`: the runtime's default).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Candidate {
    /// The const generics' values, in the kernel's declaration order.
    pub consts: &'static [u64],
    /// Warps per program; `None` takes [`crate::default_num_warps`].
    pub num_warps: Option<u32>,
    /// Pipeline stages; `None` takes [`crate::DEFAULT_NUM_STAGES`].
    pub num_stages: Option<u32>,
}

impl Candidate {
    /// A candidate (constructible in a `static`).
    pub const fn new(consts: &'static [u64], num_warps: Option<u32>, num_stages: Option<u32>) -> Candidate {
        Candidate { consts, num_warps, num_stages }
    }

    /// `BLOCK = 1024, num_warps = 4, num_stages = default`.
    pub(super) fn describe(&self, const_names: &[String]) -> String {
        let mut parts: Vec<String> =
            const_names.iter().zip(self.consts).map(|(n, v)| format!("{n} = {v}")).collect();
        let opt = |v: Option<u32>| v.map_or("default".to_string(), |v| v.to_string());
        parts.push(format!("num_warps = {}", opt(self.num_warps)));
        parts.push(format!("num_stages = {}", opt(self.num_stages)));
        parts.join(", ")
    }
}

/// What an autotuned kernel's attribute declared: the candidates, the key parameters' names (for
/// the logs) and whether some buffers are restored around timing runs.
#[derive(Debug)]
pub struct Tuning {
    pub(super) candidates: &'static [Candidate],
    pub(super) key_names: &'static [&'static str],
    pub(super) restores: bool,
}

impl Tuning {
    /// Constructible in a `static`.
    pub const fn new(
        candidates: &'static [Candidate],
        key_names: &'static [&'static str],
        restores: bool,
    ) -> Tuning {
        Tuning { candidates, key_names, restores }
    }

    /// The candidates, in the attribute's order.
    pub fn candidates(&self) -> &'static [Candidate] {
        self.candidates
    }
}

/// What [`run`](super::run) asks the generated launcher to do.
pub enum Step<'a> {
    /// Launch candidate `i` over the launch's arguments.
    Launch(usize),
    /// Save the `restore` buffers into the given [`Saved`] (before tuning).
    Save(&'a mut Saved),
    /// Put the saved contents back (before each timed run and before the real launch).
    Restore(&'a Saved),
}

/// A key parameter's value as the tuner keys it: integers by value, `f32` by its bits.
pub trait KeyValue: Copy {
    /// The value as one 64-bit word (signed integers sign-extended).
    fn key_word(self) -> u64;
}

impl KeyValue for i32 {
    fn key_word(self) -> u64 {
        i64::from(self) as u64
    }
}
impl KeyValue for i64 {
    fn key_word(self) -> u64 {
        self as u64
    }
}
impl KeyValue for u32 {
    fn key_word(self) -> u64 {
        u64::from(self)
    }
}
impl KeyValue for u64 {
    fn key_word(self) -> u64 {
        self
    }
}
impl KeyValue for f32 {
    fn key_word(self) -> u64 {
        u64::from(self.to_bits())
    }
}

/// The error for a [`Step::Launch`] index the launcher has no candidate for (never expected:
/// [`run`](super::run) only asks for candidates of its [`Tuning`]).
pub fn no_such_config(i: usize) -> Error {
    Error::InvalidArgument(format!("autotune: no candidate configuration #{i}"))
}
