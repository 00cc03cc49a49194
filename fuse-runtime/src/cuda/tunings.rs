//! A GPU's autotuning winners, kept on its device so that they live as long as it does (a device
//! made by `Device::from_cudarc` starts with none). The autotuner (`autotune/`, a layer above)
//! reads and fills them; this store knows kernels only by their spec's address.
//!
//! Imports only the bottom layer (`util`).

use crate::util::lock;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, RwLock};

/// Per kernel spec (its address: specs are statics), per key, the index of the winning candidate.
#[derive(Default)]
pub(crate) struct Tunings {
    winners: RwLock<HashMap<usize, HashMap<Vec<u64>, usize>>>,
    /// Held while tuning: timings of two kernels at once would measure each other.
    tuning: Mutex<()>,
}

impl Tunings {
    /// The winner for the spec at address `spec` and `key`, if one was recorded.
    pub(crate) fn get(&self, spec: usize, key: &[u64]) -> Option<usize> {
        let winners = self.winners.read().unwrap_or_else(|p| p.into_inner());
        winners.get(&spec)?.get(key).copied()
    }

    /// Records `winner` for the spec at address `spec` and `key`.
    pub(crate) fn insert(&self, spec: usize, key: &[u64], winner: usize) {
        let mut winners = self.winners.write().unwrap_or_else(|p| p.into_inner());
        winners.entry(spec).or_default().insert(key.to_vec(), winner);
    }

    /// The device's tuning lock: one kernel is timed at a time.
    pub(crate) fn one_at_a_time(&self) -> MutexGuard<'_, ()> {
        lock(&self.tuning)
    }
}
