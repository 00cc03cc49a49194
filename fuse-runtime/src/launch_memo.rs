//! The last launch's answer to a launch-time analysis (the bounds proof, the tensor maps),
//! reused while the inputs it depends on repeat: launches repeat their shapes, so each analysis
//! runs about once per shape instead of once per launch.
//!
//! Bottom layer: imports nothing of the crate. The words of a launch's key come from its
//! arguments in `args.rs` ([`launch_key`](crate::args::launch_key)).

use std::sync::Mutex;

/// What an analysis reads of a launch, as 64-bit words: the const generics, the grid, each
/// integer scalar's bits, each buffer's length and, where the analysis depends on them, each
/// device buffer's address. The kinds of the arguments are fixed per kernel, so the words alone
/// tell two launches apart. Float scalars are left out: no memoised analysis reads them.
pub(crate) struct LaunchKey {
    words: [u64; LaunchKey::MAX],
    len: usize,
}

impl LaunchKey {
    /// Words at most; a launch with more is not memoised (it is analysed every time).
    pub(crate) const MAX: usize = 48;

    /// The key of a launch: its const generics, its grid, then `arg_words` (what the analysis
    /// reads of the arguments); `None` past [`LaunchKey::MAX`] words.
    pub(crate) fn new(
        consts: &[u64],
        grid: [u32; 3],
        arg_words: impl IntoIterator<Item = u64>,
    ) -> Option<Self> {
        let mut key = LaunchKey { words: [0; Self::MAX], len: 0 };
        let grid = grid.iter().map(|&g| u64::from(g));
        for word in consts.iter().copied().chain(grid).chain(arg_words) {
            key.push(word)?;
        }
        Some(key)
    }

    fn push(&mut self, word: u64) -> Option<()> {
        *self.words.get_mut(self.len)? = word;
        self.len += 1;
        Some(())
    }

    pub(crate) fn words(&self) -> &[u64] {
        &self.words[..self.len]
    }
}

/// One analysis's last launch: its key and its answer.
pub(crate) struct LastLaunch<T> {
    last: Mutex<Option<(Vec<u64>, T)>>,
}

impl<T: Clone> LastLaunch<T> {
    pub(crate) fn new() -> Self {
        LastLaunch { last: Mutex::new(None) }
    }

    /// The last answer if `key` is the last launch's, else `compute()`, kept for the next
    /// launch. Without a key (too many words) or with the lock poisoned, it just computes.
    pub(crate) fn get_or_compute(&self, key: Option<LaunchKey>, compute: impl FnOnce() -> T) -> T {
        let Some(key) = key else { return compute() };
        if let Ok(last) = self.last.lock() {
            if let Some((words, value)) = last.as_ref() {
                if words.as_slice() == key.words() {
                    return value.clone();
                }
            }
        }
        let value = compute();
        if let Ok(mut last) = self.last.lock() {
            match last.as_mut() {
                Some((words, kept)) => {
                    words.clear();
                    words.extend_from_slice(key.words());
                    *kept = value.clone();
                }
                None => *last = Some((key.words().to_vec(), value.clone())),
            }
        }
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn too_many_words_are_not_memoised() {
        let words = || (0..LaunchKey::MAX as u64).map(|i| i * 3);
        assert!(LaunchKey::new(&[], [1, 1, 1], words()).is_none());
        let runs = Cell::new(0);
        let memo = LastLaunch::new();
        for _ in 0..3 {
            memo.get_or_compute(LaunchKey::new(&[], [1, 1, 1], words()), || runs.set(runs.get() + 1));
        }
        assert_eq!(runs.get(), 3, "computed every time");
    }

    #[test]
    fn the_last_answer_is_reused_only_for_the_same_key() {
        let memo = LastLaunch::new();
        let runs = Cell::new(0);
        let at = |n: i32| {
            memo.get_or_compute(LaunchKey::new(&[], [1, 1, 1], [n as u64]), || {
                runs.set(runs.get() + 1);
                n * 10
            })
        };
        assert_eq!((at(1), at(1), at(2), at(2), at(1)), (10, 10, 20, 20, 10));
        assert_eq!(runs.get(), 3, "one computation per change of key");
    }
}
