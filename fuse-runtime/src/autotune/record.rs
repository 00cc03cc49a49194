//! Autotuning winners on disk, beside the cubins (`disk_cache.rs`: same directory, same entry
//! format and checks, extension `.tune`), so a later process takes the winner without timing.
//!
//! The key hashes everything the winner depends on: the device's name and arch, the kernel's
//! name and CUDA source, the candidate list, the key values, the NVRTC version and the fuse
//! version. The payload is a small JSON document naming the winner by its values (not only its
//! index), checked against the candidates on load. A corrupt or unreadable entry is logged and
//! ignored (the cache removes what fails its checksum) and the fresh tuning rewrites it.
//!
//! Imports `disk_cache`, `spec`, `cuda` (the process's disk cache, NVRTC's version) and, in
//! `autotune/`, `tuning.rs`.

use super::tuning::{Candidate, Tuning};
use crate::disk_cache::{DiskCache, TUNE_EXT};
use crate::spec::KernelSpec;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// One kernel, device and key's entry.
pub(super) struct Record<'c> {
    cache: &'c DiskCache,
    key: String,
    candidates: &'static [Candidate],
    kernel: String,
    device: String,
}

impl Record<'static> {
    /// The entry in the process's disk cache; `None` when the disk cache is off.
    pub(super) fn new(
        tuning: &Tuning,
        spec: &KernelSpec,
        device: &str,
        arch: &str,
        key: &[u64],
    ) -> Option<Self> {
        let cache = crate::cuda::disk_cache()?;
        let nvrtc = crate::cuda::nvrtc::version().unwrap_or((0, 0));
        Some(Record::in_cache(cache, tuning.candidates, spec, device, arch, key, nvrtc))
    }
}

impl<'c> Record<'c> {
    pub(super) fn in_cache(
        cache: &'c DiskCache,
        candidates: &'static [Candidate],
        spec: &KernelSpec,
        device: &str,
        arch: &str,
        key: &[u64],
        nvrtc: (i32, i32),
    ) -> Record<'c> {
        fn field(h: &mut Sha256, bytes: &[u8]) {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        }
        let opt = |v: Option<u32>| v.map_or(u64::MAX, u64::from);
        let mut h = Sha256::new();
        field(&mut h, b"fuse-autotune-record");
        h.update(1u32.to_le_bytes()); // bumped when the payload changes meaning
        field(&mut h, env!("CARGO_PKG_VERSION").as_bytes());
        field(&mut h, device.as_bytes());
        field(&mut h, arch.as_bytes());
        field(&mut h, spec.name().as_bytes());
        field(&mut h, spec.source().as_bytes());
        h.update((candidates.len() as u64).to_le_bytes());
        for c in candidates {
            h.update((c.consts.len() as u64).to_le_bytes());
            c.consts.iter().for_each(|v| h.update(v.to_le_bytes()));
            h.update(opt(c.num_warps).to_le_bytes());
            h.update(opt(c.num_stages).to_le_bytes());
        }
        h.update((key.len() as u64).to_le_bytes());
        key.iter().for_each(|v| h.update(v.to_le_bytes()));
        h.update(nvrtc.0.to_le_bytes());
        h.update(nvrtc.1.to_le_bytes());
        Record {
            cache,
            key: format!("{:x}", h.finalize()),
            candidates,
            kernel: spec.name().to_string(),
            device: device.to_string(),
        }
    }

    /// The stored winner's index, if a valid entry names one of the candidates.
    pub(super) fn load(&self) -> Option<usize> {
        let bytes = self.cache.load_ext(&self.key, TUNE_EXT)?;
        match self.decode(&bytes) {
            Ok(i) => Some(i),
            Err(why) => {
                log::warn!(
                    "fuse autotune: ignoring the disk record {} of `{}`: {why}; tuning again",
                    self.key,
                    self.kernel
                );
                None
            }
        }
    }

    /// Stores candidate `winner` (timed at `ms`), replacing any entry atomically.
    pub(super) fn store(&self, winner: usize, ms: f64) {
        let Some(c) = self.candidates.get(winner) else { return };
        let doc = json!({
            "kernel": self.kernel,
            "device": self.device,
            "consts": c.consts,
            "num_warps": c.num_warps,
            "num_stages": c.num_stages,
            "ms": ms,
        });
        self.cache.store_ext(&self.key, TUNE_EXT, doc.to_string().as_bytes());
    }

    fn decode(&self, bytes: &[u8]) -> Result<usize, String> {
        let doc: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
        if doc["kernel"] != self.kernel.as_str() || doc["device"] != self.device.as_str() {
            return Err(format!("it is for {} on {}", doc["kernel"], doc["device"]));
        }
        let consts: Option<Vec<u64>> =
            doc["consts"].as_array().and_then(|a| a.iter().map(Value::as_u64).collect());
        let opt = |v: &Value| -> Result<Option<u32>, String> {
            match v {
                Value::Null => Ok(None),
                v => v.as_u64().and_then(|v| u32::try_from(v).ok()).map(Some).ok_or(format!("bad value {v}")),
            }
        };
        let (warps, stages) = (opt(&doc["num_warps"])?, opt(&doc["num_stages"])?);
        let consts = consts.ok_or("no const generics")?;
        self.candidates
            .iter()
            .position(|c| c.consts == consts.as_slice() && c.num_warps == warps && c.num_stages == stages)
            .ok_or_else(|| "its winner is not among the candidates".to_string())
    }

    #[cfg(test)]
    fn path(&self) -> std::path::PathBuf {
        self.cache.dir().join(format!("{}.{TUNE_EXT}", self.key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuse_ir::{DType, Kernel, Param, ParamKind};

    static CANDIDATES: [Candidate; 3] = [
        Candidate::new(&[256], Some(2), None),
        Candidate::new(&[1024], Some(4), Some(3)),
        Candidate::new(&[1024], Some(8), Some(3)),
    ];

    fn spec(source: &'static str) -> &'static KernelSpec {
        let k = Kernel {
            name: "k".into(),
            consts: vec!["BLOCK".into()],
            params: vec![Param { name: "n".into(), kind: ParamKind::Scalar(DType::I32) }],
            vars: vec![],
            body: vec![],
        };
        let json: &'static str = Box::leak(k.to_json().into_boxed_str());
        Box::leak(Box::new(KernelSpec::new("k", source, json, &[])))
    }

    fn cache(tag: &str) -> DiskCache {
        let dir = std::env::temp_dir().join(format!("fuse-tune-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        DiskCache::at(dir)
    }

    fn record<'c>(c: &'c DiskCache, s: &KernelSpec, device: &str, key: &[u64]) -> Record<'c> {
        Record::in_cache(c, &CANDIDATES, s, device, "sm_90", key, (13, 0))
    }

    #[test]
    fn a_winner_round_trips() {
        let c = cache("round-trip");
        let s = spec("// a");
        let r = record(&c, s, "NVIDIA H100", &[1024, 7]);
        assert_eq!(r.load(), None, "an empty cache is a miss");
        r.store(2, 0.125);
        assert_eq!(r.load(), Some(2));
        // Another process's record for the same inputs is the same entry.
        assert_eq!(record(&c, s, "NVIDIA H100", &[1024, 7]).load(), Some(2));
        r.store(1, 0.1);
        assert_eq!(r.load(), Some(1), "a store replaces the entry");
        let _ = std::fs::remove_dir_all(c.dir());
    }

    #[test]
    fn another_key_device_source_or_candidate_list_misses() {
        let c = cache("misses");
        let s = spec("// b");
        record(&c, s, "NVIDIA H100", &[1024]).store(0, 1.0);
        assert_eq!(record(&c, s, "NVIDIA H100", &[1024]).load(), Some(0));
        assert_eq!(record(&c, s, "NVIDIA H100", &[2048]).load(), None, "key");
        assert_eq!(record(&c, s, "NVIDIA H100", &[]).load(), None, "no key");
        assert_eq!(record(&c, s, "NVIDIA H200", &[1024]).load(), None, "device");
        assert_eq!(record(&c, spec("// b changed"), "NVIDIA H100", &[1024]).load(), None, "source");
        let other = Record::in_cache(&c, &CANDIDATES, s, "NVIDIA H100", "sm_100", &[1024], (13, 0));
        assert_eq!(other.load(), None, "arch");
        let other = Record::in_cache(&c, &CANDIDATES, s, "NVIDIA H100", "sm_90", &[1024], (12, 9));
        assert_eq!(other.load(), None, "NVRTC version");
        static FEWER: [Candidate; 1] = [Candidate::new(&[256], Some(2), None)];
        let other = Record::in_cache(&c, &FEWER, s, "NVIDIA H100", "sm_90", &[1024], (13, 0));
        assert_eq!(other.load(), None, "candidate list");
        let _ = std::fs::remove_dir_all(c.dir());
    }

    #[test]
    fn corrupt_or_stale_entries_are_ignored_and_rewritten() {
        let c = cache("corrupt");
        let s = spec("// c");
        let r = record(&c, s, "NVIDIA H100", &[1]);
        r.store(1, 0.5);
        // A flipped byte fails the cache's checksum: a miss, and the file is removed.
        let mut bytes = std::fs::read(r.path()).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x20;
        std::fs::write(r.path(), &bytes).unwrap();
        assert_eq!(r.load(), None);
        assert!(!r.path().exists(), "the corrupt entry was removed");
        // A valid entry whose payload is not a record of ours (garbage JSON, another winner).
        c.store_ext(&r.key, TUNE_EXT, b"{not json");
        assert_eq!(r.load(), None);
        let stale = json!({"kernel": "k", "device": "NVIDIA H100", "consts": [512], "num_warps": 2, "num_stages": null});
        c.store_ext(&r.key, TUNE_EXT, stale.to_string().as_bytes());
        assert_eq!(r.load(), None, "a winner not among the candidates");
        let foreign = json!({"kernel": "other", "device": "NVIDIA H100", "consts": [256], "num_warps": 2, "num_stages": null});
        c.store_ext(&r.key, TUNE_EXT, foreign.to_string().as_bytes());
        assert_eq!(r.load(), None, "another kernel's record");
        // The tuning that follows rewrites it.
        r.store(0, 0.25);
        assert_eq!(r.load(), Some(0));
        // Defaults (`None`) round-trip as null.
        let _ = std::fs::remove_dir_all(c.dir());
    }

    #[test]
    fn cubin_and_tuning_entries_do_not_meet() {
        let c = cache("kinds");
        let s = spec("// d");
        let r = record(&c, s, "NVIDIA H100", &[3]);
        r.store(0, 1.0);
        assert_eq!(c.load(&r.key), None, "a tuning record is not a cubin");
        let _ = std::fs::remove_dir_all(c.dir());
    }
}
