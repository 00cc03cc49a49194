//! The persistent on-disk cache of compiled kernels (cubins).
//!
//! Compiling a kernel with NVRTC takes 65–400 ms; loading a cached cubin takes well under a millisecond.
//! This cache keeps one file per compiled kernel, named after its key:
//!
//! ```text
//! $FUSE_CACHE_DIR/<64 hex digits>.cubin        (else dirs::cache_dir()/fuse, ~/.cache/fuse on Linux)
//! $FUSE_CACHE_DIR/<64 hex digits>.tune         (an autotuning record: see `autotune`)
//! ```
//!
//! Both kinds of entry have the format below and the same checks; an autotuning record's payload
//! is a small JSON document, and its key is hashed from other fields under another domain tag,
//! so the kinds never share a key.
//!
//! # What makes an entry trustworthy
//! Triton's cache has been bitten by keys that were too weak (a cubin for sm_120 reused on sm_121 gave
//! garbled output) and by concurrent writers (torn files on NFS). Here:
//! - the **key** ([`DiskCache::key`]) is a SHA-256 over every input that changes the cubin: the full
//!   source *with* the runtime's `#define`s, the exact arch string, every compile option, the NVRTC
//!   version and the fuse-runtime version. Each field is length-prefixed, so no two different inputs can
//!   serialize to the same bytes.
//! - every **entry** carries a header (magic, format version, its own key, payload length, SHA-256 of the
//!   payload) and [`DiskCache::load`] checks all of it: a truncated, corrupted, foreign (another key's
//!   entry copied or renamed over this one) or garbage file is reported with `log::warn!`, removed, and
//!   treated as a miss. `load` never returns bytes whose checksum does not match.
//! - **writes are atomic**: [`DiskCache::store`] writes a uniquely named temporary file in the same
//!   directory, fsyncs it and renames it over the final name. Readers see either the old complete file or
//!   the new complete file, never a mix, however many threads or processes write the same key.
//! - the cache is **never fatal**: a missing directory is created, and an unwritable, full or otherwise
//!   failing directory only costs a warning (once per `DiskCache`); the caller keeps its in-memory result.
//!
//! # Entry format (version 1, all integers little-endian)
//! ```text
//! offset  size  field
//! 0       8     magic b"FUSECUBN"
//! 8       4     format version (u32) = 1
//! 12      4     key length in bytes (u32) = 64
//! 16      64    the key (ASCII lowercase hex)
//! 80      8     payload length (u64)
//! 88      32    SHA-256 of the payload
//! 120     n     payload (the cubin)
//! ```
//!
//! Bottom layer: imports nothing of the crate; the CUDA back end and the autotuner use it.
//!
//! [`DiskCache::key`]: crate::disk_cache::DiskCache::key
//! [`DiskCache::load`]: crate::disk_cache::DiskCache::load
//! [`DiskCache::store`]: crate::disk_cache::DiskCache::store

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use sha2::{Digest, Sha256};

/// First bytes of every entry.
const MAGIC: &[u8; 8] = b"FUSECUBN";
/// Bumped whenever the layout of an entry changes; entries of another version are misses.
const FORMAT_VERSION: u32 = 1;
/// A key is the lowercase hex of a SHA-256.
const KEY_LEN: usize = 64;
/// Bytes before the payload.
const HEADER_LEN: usize = 8 + 4 + 4 + KEY_LEN + 8 + 32;
/// Extension of cubin entry files.
const EXT: &str = "cubin";
/// Extension of autotuning records.
pub(crate) const TUNE_EXT: &str = "tune";
/// Prefix of temporary files (a leading dot keeps them apart from entries).
const TMP_PREFIX: &str = ".tmp-";
/// Files larger than this are not read (no cubin comes near it); they are treated as corrupt.
const MAX_ENTRY_LEN: u64 = 1 << 30;

/// The persistent cubin cache; see the [module docs](self).
///
/// The runtime compiles through the one [`DiskCache::from_env`] gives (read once per process).
///
/// ```
/// use fuse_runtime::disk_cache::DiskCache;
///
/// let cache = DiskCache::at(std::env::temp_dir().join(format!("fuse-doc-{}", std::process::id())));
/// let key = DiskCache::key("extern \"C\" __global__ void k() {}", "sm_90", &[], (13, 0));
/// assert_eq!(cache.load(&key), None);
/// cache.store(&key, b"the cubin");
/// assert_eq!(cache.load(&key).as_deref(), Some(&b"the cubin"[..]));
/// # std::fs::remove_dir_all(cache.dir()).unwrap();
/// ```
pub struct DiskCache {
    dir: PathBuf,
    /// Set after the first failed store, so that an unwritable directory warns once, not per kernel.
    store_warned: AtomicBool,
}

impl fmt::Debug for DiskCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DiskCache").field("dir", &self.dir).finish()
    }
}

impl Clone for DiskCache {
    fn clone(&self) -> Self {
        DiskCache::at(self.dir.clone())
    }
}

/// Why an entry was rejected.
#[derive(Debug)]
enum Invalid {
    TooShort(usize),
    Magic,
    Version(u32),
    KeyLen(u32),
    ForeignKey(String),
    Length { header: u64, actual: u64 },
    Checksum,
    TooLarge(u64),
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::TooShort(n) => {
                write!(f, "truncated: {n} bytes, shorter than the {HEADER_LEN}-byte header")
            }
            Invalid::Magic => write!(f, "not a fuse cache entry (bad magic)"),
            Invalid::Version(v) => write!(f, "entry format version {v}, expected {FORMAT_VERSION}"),
            Invalid::KeyLen(n) => write!(f, "bad key length {n} in header"),
            Invalid::ForeignKey(k) => write!(f, "entry belongs to another key ({k})"),
            Invalid::Length { header, actual } => {
                write!(f, "truncated or padded: header says {header} payload bytes, file has {actual}")
            }
            Invalid::Checksum => write!(f, "payload checksum mismatch (corrupt)"),
            Invalid::TooLarge(n) => write!(f, "file of {n} bytes is larger than any entry"),
        }
    }
}

impl DiskCache {
    /// The cache configured by the environment: `None` when `FUSE_CACHE` is `0`, `false` or `off`
    /// (any case); otherwise a cache in `$FUSE_CACHE_DIR` if set and non-empty, else in the platform
    /// cache directory (`dirs::cache_dir()/fuse`, i.e. `~/.cache/fuse` on Linux). `None` also when no
    /// directory can be determined (no `$FUSE_CACHE_DIR` and no home directory).
    pub fn from_env() -> Option<DiskCache> {
        if let Some(v) = std::env::var_os("FUSE_CACHE") {
            let v = v.to_string_lossy();
            let v = v.trim();
            if v == "0" || v.eq_ignore_ascii_case("false") || v.eq_ignore_ascii_case("off") {
                log::debug!("fuse disk cache disabled by FUSE_CACHE={v}");
                return None;
            }
        }
        if let Some(dir) = std::env::var_os("FUSE_CACHE_DIR") {
            if !dir.is_empty() {
                return Some(DiskCache::at(dir));
            }
        }
        match dirs::cache_dir() {
            Some(base) => Some(DiskCache::at(base.join("fuse"))),
            None => {
                log::warn!(
                    "fuse disk cache disabled: no platform cache directory; set FUSE_CACHE_DIR to enable it"
                );
                None
            }
        }
    }

    /// A cache in `dir` (created on the first store).
    pub fn at(dir: impl Into<PathBuf>) -> DiskCache {
        DiskCache { dir: dir.into(), store_warned: AtomicBool::new(false) }
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cache key of a compilation: lowercase hex SHA-256 over the full source (the runtime's
    /// `#define`s included), the arch (e.g. `sm_90`, `sm_90a`: the exact string), the compile options in
    /// order, the NVRTC version and the fuse-runtime version. Every field is length-prefixed (and the
    /// option list count-prefixed), so fields cannot run together.
    pub fn key(source: &str, arch: &str, options: &[String], nvrtc_version: (i32, i32)) -> String {
        fn field(h: &mut Sha256, bytes: &[u8]) {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        }
        let mut h = Sha256::new();
        field(&mut h, b"fuse-kernel-cache-key");
        h.update(FORMAT_VERSION.to_le_bytes());
        field(&mut h, env!("CARGO_PKG_VERSION").as_bytes());
        field(&mut h, source.as_bytes());
        field(&mut h, arch.as_bytes());
        h.update((options.len() as u64).to_le_bytes());
        for o in options {
            field(&mut h, o.as_bytes());
        }
        h.update(nvrtc_version.0.to_le_bytes());
        h.update(nvrtc_version.1.to_le_bytes());
        format!("{:x}", h.finalize())
    }

    /// The path of the entry for `key` (a key is 64 lowercase hex digits; anything else has no path, so
    /// no key can name a file outside the cache directory).
    fn entry_path(&self, key: &str, ext: &str) -> Option<PathBuf> {
        if is_valid_key(key) {
            Some(self.dir.join(format!("{key}.{ext}")))
        } else {
            None
        }
    }

    /// The cubin stored under `key`, if a valid entry exists. A missing entry is a silent miss; a
    /// corrupt, truncated, foreign or garbage file is logged with `log::warn!`, removed if possible, and
    /// is a miss too (the caller recompiles). Never panics; never returns bytes failing the checksum.
    pub fn load(&self, key: &str) -> Option<Vec<u8>> {
        self.load_ext(key, EXT)
    }

    /// [`DiskCache::load`] of an entry of another kind (`TUNE_EXT`).
    pub(crate) fn load_ext(&self, key: &str, ext: &str) -> Option<Vec<u8>> {
        let Some(path) = self.entry_path(key, ext) else {
            log::warn!("fuse disk cache: refusing malformed key {key:?}");
            return None;
        };
        let mut file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Err(e) => {
                log::warn!("fuse disk cache: cannot open {}: {e}", path.display());
                return None;
            }
        };
        let mut bytes = Vec::new();
        if let Ok(meta) = file.metadata() {
            if !meta.is_file() {
                log::warn!("fuse disk cache: {} is not a regular file; ignoring it", path.display());
                return None;
            }
            if meta.len() > MAX_ENTRY_LEN {
                self.reject(&path, &file, Invalid::TooLarge(meta.len()));
                return None;
            }
            bytes.reserve_exact(meta.len() as usize);
        }
        if let Err(e) = (&mut file).take(MAX_ENTRY_LEN + 1).read_to_end(&mut bytes) {
            log::warn!("fuse disk cache: cannot read {}: {e}", path.display());
            return None;
        }
        match parse_entry(&bytes, key) {
            Ok(payload_start) => {
                bytes.drain(..payload_start);
                Some(bytes)
            }
            Err(why) => {
                self.reject(&path, &file, why);
                None
            }
        }
    }

    /// Warns about an invalid entry and removes it, unless the name now points at another file (a
    /// concurrent store replaced it since we opened it: that newer file is left alone).
    fn reject(&self, path: &Path, opened: &File, why: Invalid) {
        log::warn!("fuse disk cache: discarding {}: {why}", path.display());
        if !still_same_file(path, opened) {
            return;
        }
        match fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => log::warn!("fuse disk cache: cannot remove {}: {e}", path.display()),
        }
    }

    /// Stores `cubin` under `key` atomically (temporary file in the cache directory, fsync, rename over
    /// the final name; then the directory is fsynced where the platform allows). Creates a missing
    /// directory. Any failure (read-only or full disk, the directory path being a file, ...) is logged
    /// (a warning the first time, debug after) and otherwise ignored.
    pub fn store(&self, key: &str, cubin: &[u8]) {
        self.store_ext(key, EXT, cubin)
    }

    /// [`DiskCache::store`] of an entry of another kind (`TUNE_EXT`).
    pub(crate) fn store_ext(&self, key: &str, ext: &str, cubin: &[u8]) {
        if let Err(e) = self.try_store(key, ext, cubin) {
            if !self.store_warned.swap(true, Ordering::Relaxed) {
                log::warn!(
                    "fuse disk cache: cannot store a kernel in {}: {e} (kernels will be recompiled in \
                     later processes; set FUSE_CACHE_DIR to a writable directory or FUSE_CACHE=0)",
                    self.dir.display()
                );
            } else {
                log::debug!("fuse disk cache: cannot store {key} in {}: {e}", self.dir.display());
            }
        }
    }

    fn try_store(&self, key: &str, ext: &str, cubin: &[u8]) -> io::Result<()> {
        let path = self
            .entry_path(key, ext)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("malformed key {key:?}")))?;
        if cubin.len() as u64 > MAX_ENTRY_LEN - HEADER_LEN as u64 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "cubin too large to cache"));
        }
        fs::create_dir_all(&self.dir)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(&format!("{TMP_PREFIX}{key}-"))
            .suffix(".part")
            .tempfile_in(&self.dir)?;
        {
            let f = tmp.as_file_mut();
            f.write_all(&header(key, cubin))?;
            f.write_all(cubin)?;
            f.sync_all()?;
        }
        // On failure the temporary file is deleted when the error's NamedTempFile drops.
        tmp.persist(&path).map_err(|e| e.error)?;
        sync_dir(&self.dir);
        Ok(())
    }
}

/// The header of the entry of `key` holding `payload`.
fn header(key: &str, payload: &[u8]) -> Vec<u8> {
    debug_assert_eq!(key.len(), KEY_LEN);
    let mut h = Vec::with_capacity(HEADER_LEN);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    h.extend_from_slice(&(KEY_LEN as u32).to_le_bytes());
    h.extend_from_slice(key.as_bytes());
    h.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    h.extend_from_slice(&Sha256::digest(payload));
    debug_assert_eq!(h.len(), HEADER_LEN);
    h
}

/// Checks a whole entry file against `key`; returns the offset of the payload.
fn parse_entry(bytes: &[u8], key: &str) -> Result<usize, Invalid> {
    if bytes.len() < HEADER_LEN {
        // A short file of the right magic is a truncated entry; anything else is garbage.
        return Err(if bytes.len() >= 8 && &bytes[..8] != MAGIC {
            Invalid::Magic
        } else {
            Invalid::TooShort(bytes.len())
        });
    }
    if &bytes[0..8] != MAGIC {
        return Err(Invalid::Magic);
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    if version != FORMAT_VERSION {
        return Err(Invalid::Version(version));
    }
    let key_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap());
    if key_len as usize != KEY_LEN {
        return Err(Invalid::KeyLen(key_len));
    }
    let stored_key = &bytes[16..16 + KEY_LEN];
    if stored_key != key.as_bytes() {
        return Err(Invalid::ForeignKey(String::from_utf8_lossy(stored_key).into_owned()));
    }
    let mut at = 16 + KEY_LEN;
    let len = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    at += 8;
    let sum = &bytes[at..at + 32];
    at += 32;
    let actual = (bytes.len() - at) as u64;
    if len != actual {
        return Err(Invalid::Length { header: len, actual });
    }
    if Sha256::digest(&bytes[at..]).as_slice() != sum {
        return Err(Invalid::Checksum);
    }
    Ok(at)
}

fn is_valid_key(key: &str) -> bool {
    key.len() == KEY_LEN && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Whether `path` still names the file `opened` was opened from (unix: same device and inode).
#[cfg(unix)]
fn still_same_file(path: &Path, opened: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (fs::symlink_metadata(path), opened.metadata()) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn still_same_file(_path: &Path, _opened: &File) -> bool {
    true
}

/// Makes a rename in `dir` durable (unix); best effort.
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout() {
        let key = DiskCache::key("x", "sm_90", &[], (13, 0));
        let h = header(&key, b"abc");
        assert_eq!(h.len(), HEADER_LEN);
        assert_eq!(HEADER_LEN, 120);
        let mut entry = h.clone();
        entry.extend_from_slice(b"abc");
        assert_eq!(parse_entry(&entry, &key).unwrap(), HEADER_LEN);
    }

    #[test]
    fn keys_are_hex_and_validated() {
        let key = DiskCache::key("x", "sm_90", &[], (13, 0));
        assert!(is_valid_key(&key));
        assert!(!is_valid_key("../../etc/passwd"));
        assert!(!is_valid_key(&key.to_uppercase()));
        assert!(!is_valid_key(&key[1..]));
    }
}
