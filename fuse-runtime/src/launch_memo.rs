//! The last launch's answer to a launch-time analysis (the bounds proof, the tensor maps),
//! reused while the inputs it depends on repeat: launches repeat their shapes, so each analysis
//! runs about once per shape instead of once per launch.
use crate::launch::{buffer_len, device_address, scalar_value, KernelArg};
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
    const MAX: usize = 48;

    /// The key of a launch, or `None` past [`LaunchKey::MAX`] words.
    pub(crate) fn new(
        consts: &[u64],
        grid: [u32; 3],
        args: &[KernelArg<'_>],
        addresses: bool,
    ) -> Option<Self> {
        let mut key = LaunchKey { words: [0; Self::MAX], len: 0 };
        let grid = grid.iter().map(|&g| u64::from(g));
        for word in consts.iter().copied().chain(grid) {
            key.push(word)?;
        }
        for a in args {
            // A scalar's bits (kinds are fixed per kernel), a buffer's length, 0 for an f32.
            key.push(scalar_value(Some(a)).map(|v| v as u64).or_else(|| buffer_len(a)).unwrap_or(0))?;
            if addresses {
                key.push(device_address(a).unwrap_or(0))?;
            }
        }
        Some(key)
    }

    fn push(&mut self, word: u64) -> Option<()> {
        *self.words.get_mut(self.len)? = word;
        self.len += 1;
        Some(())
    }

    fn words(&self) -> &[u64] {
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

    fn key(consts: &[u64], grid: [u32; 3], args: &[KernelArg<'_>], addresses: bool) -> Vec<u64> {
        LaunchKey::new(consts, grid, args, addresses).expect("fits").words().to_vec()
    }

    /// A device buffer argument of `len` f32 elements at `ptr` (never dereferenced here).
    fn device_buffer(ptr: u64, len: usize) -> KernelArg<'static> {
        KernelArg::Buffer(crate::launch::BufferArg {
            dtype: fuse_ir::DType::F32,
            len,
            home: crate::launch::Home::Host,
            data: crate::launch::Data::Cuda { ptr, keep: None },
        })
    }

    #[test]
    fn every_input_an_analysis_reads_changes_the_key() {
        let args = |n: i32, big: u64, x: f32| [KernelArg::I32(n), KernelArg::U64(big), KernelArg::F32(x)];
        let k0 = key(&[64, 32], [10, 1, 1], &args(7, 1 << 40, 1.5), false);
        assert_ne!(k0, key(&[64, 16], [10, 1, 1], &args(7, 1 << 40, 1.5), false), "a const generic");
        assert_ne!(k0, key(&[64, 32], [11, 1, 1], &args(7, 1 << 40, 1.5), false), "the grid");
        assert_ne!(k0, key(&[64, 32], [10, 1, 1], &args(8, 1 << 40, 1.5), false), "an i32");
        assert_ne!(k0, key(&[64, 32], [10, 1, 1], &args(7, 1, 1.5), false), "a u64");
        // A float scalar is read by no memoised analysis.
        assert_eq!(k0, key(&[64, 32], [10, 1, 1], &args(7, 1 << 40, -3.0), false));
        assert_eq!(key(&[], [1, 1, 1], &[KernelArg::I64(-1)], false), vec![1, 1, 1, u64::MAX]);
    }

    #[test]
    fn a_buffers_length_always_and_its_address_where_asked_change_the_key() {
        let (a, b, c) = (device_buffer(0x1000, 64), device_buffer(0x2000, 64), device_buffer(0x1000, 65));
        let k = |arg: &KernelArg<'_>, addresses| key(&[], [1, 1, 1], std::slice::from_ref(arg), addresses);
        assert_eq!(k(&a, false), k(&b, false), "the proof reads lengths only");
        assert_ne!(k(&a, true), k(&b, true), "a tensor map holds the address");
        assert_ne!(k(&a, false), k(&c, false));
        assert_ne!(k(&a, true), k(&c, true));
        assert_eq!(k(&a, true).len(), k(&a, false).len() + 1, "a word more per argument");
    }

    #[test]
    fn too_many_words_are_not_memoised() {
        let args: Vec<KernelArg<'_>> = (0..LaunchKey::MAX as i32).map(KernelArg::I32).collect();
        assert!(LaunchKey::new(&[], [1, 1, 1], &args, false).is_none());
        let runs = Cell::new(0);
        let memo = LastLaunch::new();
        for _ in 0..3 {
            memo.get_or_compute(LaunchKey::new(&[], [1, 1, 1], &args, false), || runs.set(runs.get() + 1));
        }
        assert_eq!(runs.get(), 3, "computed every time");
    }

    #[test]
    fn the_last_answer_is_reused_only_for_the_same_key() {
        let memo = LastLaunch::new();
        let runs = Cell::new(0);
        let at = |n: i32| {
            memo.get_or_compute(LaunchKey::new(&[], [1, 1, 1], &[KernelArg::I32(n)], false), || {
                runs.set(runs.get() + 1);
                n * 10
            })
        };
        assert_eq!((at(1), at(1), at(2), at(2), at(1)), (10, 10, 20, 20, 10));
        assert_eq!(runs.get(), 3, "one computation per change of key");
    }
}
