//! Tests of the persistent cubin cache (`fuse_runtime::disk_cache`). No GPU needed.
//!
//! Tests that need environment variables or several processes re-execute this test binary as a child
//! (`current_exe() --exact child_role --nocapture` with `FUSE_DISK_CACHE_TEST_ROLE` naming the role), so
//! no test ever mutates the environment of this process and nothing races on it.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use fuse_runtime::disk_cache::DiskCache;

const ROLE: &str = "FUSE_DISK_CACHE_TEST_ROLE";
const CHILD_TEST: &str = "child_role";

// ---------------------------------------------------------------------------------------------
// Helpers

/// A logger that keeps every warning, so tests can check that bad entries are reported.
struct Capture;
static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static LOGGER_INIT: Once = Once::new();

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record) {
        if r.level() <= log::Level::Warn {
            WARNINGS.lock().unwrap_or_else(|e| e.into_inner()).push(r.args().to_string());
        }
    }
    fn flush(&self) {}
}

fn capture_warnings() {
    LOGGER_INIT.call_once(|| {
        let _ = log::set_logger(&Capture);
        log::set_max_level(log::LevelFilter::Warn);
    });
}

/// Warnings logged so far that mention `needle` (tests run in parallel: filter by their own paths).
fn warnings_about(needle: &str) -> Vec<String> {
    WARNINGS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|w| w.contains(needle))
        .cloned()
        .collect()
}

fn key(n: u32) -> String {
    DiskCache::key(
        &format!("extern \"C\" __global__ void k{n}() {{}}"),
        "sm_90",
        &["-O3".to_string()],
        (13, 0),
    )
}

/// The file holding `key`'s entry (found by name, whatever the layout under the cache dir).
fn entry_file(dir: &Path, key: &str) -> PathBuf {
    fn walk(dir: &Path, key: &str, out: &mut Vec<PathBuf>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, key, out);
            } else if p.file_name().unwrap().to_string_lossy().starts_with(key) {
                out.push(p);
            }
        }
    }
    let mut found = Vec::new();
    walk(dir, key, &mut found);
    assert_eq!(
        found.len(),
        1,
        "expected exactly one entry file for {key} under {}: {found:?}",
        dir.display()
    );
    found.pop().unwrap()
}

/// Every file under `dir` (recursively).
fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// A payload that describes itself: 8 bytes seed, 8 bytes length, then a stream determined by the seed.
/// `check_payload` recomputes it, so a torn or mixed payload cannot pass.
fn make_payload(seed: u64, len: usize) -> Vec<u8> {
    assert!(len >= 16);
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&seed.to_le_bytes());
    v.extend_from_slice(&(len as u64).to_le_bytes());
    let mut x = seed ^ 0x9E37_79B9_7F4A_7C15;
    while v.len() < len {
        // splitmix64
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let take = (len - v.len()).min(8);
        v.extend_from_slice(&z.to_le_bytes()[..take]);
    }
    v
}

/// The seed of a payload made by `make_payload`, after checking every byte of it.
fn check_payload(bytes: &[u8]) -> u64 {
    assert!(bytes.len() >= 16, "payload of {} bytes", bytes.len());
    let seed = u64::from_le_bytes(bytes[0..8].try_into().unwrap());
    let len = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    assert_eq!(len as usize, bytes.len(), "payload length does not match its own header (torn)");
    assert!(make_payload(seed, bytes.len()) == bytes, "payload content is torn or mixed (seed {seed})");
    seed
}

/// Runs this test binary as a child in `role`, with `envs` set and `removed` unset; asserts it passed
/// and really ran the role (libtest exits 0 when the filter matches no test).
fn run_child(role: &str, envs: &[(&str, &std::ffi::OsStr)], removed: &[&str]) -> Output {
    let mut cmd = child_command(role, envs, removed);
    let out = cmd.output().expect("spawn child test process");
    check_child(role, &out);
    out
}

fn child_command(role: &str, envs: &[(&str, &std::ffi::OsStr)], removed: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"]).env(ROLE, role);
    for r in removed {
        cmd.env_remove(r);
    }
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd
}

fn check_child(role: &str, out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child role {role} failed ({}):\n{stdout}\n{stderr}", out.status);
    assert!(
        stdout.contains(&format!("ROLE-OK {role}")),
        "child role {role} did not run:\n{stdout}\n{stderr}"
    );
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

// ---------------------------------------------------------------------------------------------
// The child side: does nothing unless FUSE_DISK_CACHE_TEST_ROLE is set.

#[test]
fn child_role() {
    let Ok(role) = std::env::var(ROLE) else { return };
    match role.as_str() {
        "env-disabled" => {
            assert!(
                DiskCache::from_env().is_none(),
                "FUSE_CACHE={:?} must disable the cache",
                std::env::var("FUSE_CACHE")
            );
        }
        "env-enabled" => {
            assert!(
                DiskCache::from_env().is_some(),
                "FUSE_CACHE={:?} must not disable the cache",
                std::env::var("FUSE_CACHE")
            );
        }
        "env-dir" => {
            let want = PathBuf::from(std::env::var_os("EXPECT_DIR").unwrap());
            let c = DiskCache::from_env().expect("cache enabled");
            assert_eq!(c.dir(), want.as_path());
            let k = key(1);
            c.store(&k, b"cubin bytes");
            assert_eq!(c.load(&k).as_deref(), Some(&b"cubin bytes"[..]));
            entry_file(&want, &k);
        }
        "env-default-dir" => {
            // HOME and XDG_CACHE_HOME point into a temp dir, so this never touches the real cache.
            let c = DiskCache::from_env().expect("cache enabled");
            let xdg = PathBuf::from(std::env::var_os("XDG_CACHE_HOME").unwrap());
            if cfg!(target_os = "linux") {
                assert_eq!(c.dir(), xdg.join("fuse").as_path());
            } else {
                assert!(c.dir().ends_with("fuse"), "{}", c.dir().display());
            }
        }
        "env-dir-is-file" => {
            let c = DiskCache::from_env().expect("cache enabled");
            let k = key(2);
            c.store(&k, b"cubin bytes"); // must not panic
            assert_eq!(c.load(&k), None);
        }
        "multiproc-writer" => {
            let dir = PathBuf::from(std::env::var_os("CACHE_DIR").unwrap());
            let index: u64 = std::env::var("CHILD_INDEX").unwrap().parse().unwrap();
            let iterations: u64 = std::env::var("ITERATIONS").unwrap().parse().unwrap();
            let c = DiskCache::at(&dir);
            let k = key(777);
            for i in 0..iterations {
                let seed = (index << 32) | i;
                // 1–4 MiB, different per write, so a mix of two writes cannot have a consistent length.
                let len = (1 << 20) + ((seed.wrapping_mul(2_654_435_761) % (3 << 20)) as usize);
                c.store(&k, &make_payload(seed, len));
                if let Some(got) = c.load(&k) {
                    check_payload(&got);
                }
            }
        }
        other => panic!("unknown child role {other}"),
    }
    println!("ROLE-OK {role}");
}

// ---------------------------------------------------------------------------------------------
// Round trip and keys

#[test]
fn round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let c = DiskCache::at(tmp.path());
    assert_eq!(c.dir(), tmp.path());
    let k = key(0);
    assert_eq!(c.load(&k), None, "empty cache");

    let cubin = make_payload(42, 10_000);
    c.store(&k, &cubin);
    assert_eq!(c.load(&k), Some(cubin.clone()));
    assert_eq!(c.load(&k), Some(cubin), "a load does not consume the entry");

    // Overwriting replaces; a second instance on the same dir sees it.
    let newer = make_payload(43, 5_000);
    c.store(&k, &newer);
    assert_eq!(DiskCache::at(tmp.path()).load(&k), Some(newer));

    // Empty payloads are entries too.
    let k2 = key(1);
    c.store(&k2, &[]);
    assert_eq!(c.load(&k2), Some(Vec::new()));

    // Nothing but the two entries is left behind (no temporary files).
    let files = all_files(tmp.path());
    assert_eq!(files.len(), 2, "{files:?}");
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with(&k) || name.starts_with(&k2), "unexpected file {name}");
    }
}

#[test]
fn missing_dir_is_created() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a").join("b").join("fuse");
    let c = DiskCache::at(&dir);
    let k = key(3);
    assert_eq!(c.load(&k), None);
    c.store(&k, b"abc");
    assert!(dir.is_dir());
    assert_eq!(c.load(&k).as_deref(), Some(&b"abc"[..]));
}

#[test]
fn key_is_hex_sha256_and_deterministic() {
    let k = DiskCache::key("src", "sm_90", &["-O3".into()], (13, 0));
    assert_eq!(k.len(), 64);
    assert!(k.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{k}");
    assert_eq!(k, DiskCache::key("src", "sm_90", &["-O3".into()], (13, 0)));
}

#[test]
fn key_changes_with_each_input() {
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let src = "#define BLOCK 128\n#define FUSE_NUM_WARPS 4\nextern \"C\" __global__ void k() {}";
    let base = DiskCache::key(src, "sm_90", &s(&["--use_fast_math"]), (13, 0));
    let variants = [
        // source, including the runtime's defines
        DiskCache::key(&src.replace("BLOCK 128", "BLOCK 256"), "sm_90", &s(&["--use_fast_math"]), (13, 0)),
        DiskCache::key(&src.replace("WARPS 4", "WARPS 8"), "sm_90", &s(&["--use_fast_math"]), (13, 0)),
        DiskCache::key(
            &format!("#define FUSE_ALIGN16_x 1\n{src}"),
            "sm_90",
            &s(&["--use_fast_math"]),
            (13, 0),
        ),
        DiskCache::key(&format!("{src} "), "sm_90", &s(&["--use_fast_math"]), (13, 0)),
        // arch: the sm_120/sm_121 mix-up that garbled Triton's output
        DiskCache::key(src, "sm_120", &s(&["--use_fast_math"]), (13, 0)),
        DiskCache::key(src, "sm_121", &s(&["--use_fast_math"]), (13, 0)),
        DiskCache::key(src, "sm_90a", &s(&["--use_fast_math"]), (13, 0)),
        // options: value, presence, order, splitting
        DiskCache::key(src, "sm_90", &s(&[]), (13, 0)),
        DiskCache::key(src, "sm_90", &s(&["--use_fast_math", "-lineinfo"]), (13, 0)),
        DiskCache::key(src, "sm_90", &s(&["-lineinfo", "--use_fast_math"]), (13, 0)),
        DiskCache::key(src, "sm_90", &s(&["--use_fast_math -lineinfo"]), (13, 0)),
        DiskCache::key(src, "sm_90", &s(&["--use_fast_math", ""]), (13, 0)),
        // NVRTC version, both parts
        DiskCache::key(src, "sm_90", &s(&["--use_fast_math"]), (13, 1)),
        DiskCache::key(src, "sm_90", &s(&["--use_fast_math"]), (12, 0)),
        DiskCache::key(src, "sm_90", &s(&["--use_fast_math"]), (12, 9)),
    ];
    let mut seen = HashSet::new();
    assert!(seen.insert(base.clone()));
    for (i, v) in variants.iter().enumerate() {
        assert!(seen.insert(v.clone()), "variant {i} collides with the base or an earlier variant");
    }

    // Fields cannot run together: moving bytes across a field boundary changes the key.
    assert_ne!(DiskCache::key("ab", "c", &[], (13, 0)), DiskCache::key("a", "bc", &[], (13, 0)));
    assert_ne!(
        DiskCache::key("a", "sm_90", &s(&["ab"]), (13, 0)),
        DiskCache::key("a", "sm_90", &s(&["a", "b"]), (13, 0))
    );
    assert_ne!(
        DiskCache::key("a", "sm_90", &s(&["a", ""]), (13, 0)),
        DiskCache::key("a", "sm_90", &s(&["", "a"]), (13, 0))
    );
    assert_ne!(
        DiskCache::key("", "sm_90", &s(&["x"]), (13, 0)),
        DiskCache::key("x", "sm_90", &s(&[""]), (13, 0))
    );
    assert_ne!(DiskCache::key("a", "sm_90", &[], (1, 30)), DiskCache::key("a", "sm_90", &[], (13, 0)));
}

// ---------------------------------------------------------------------------------------------
// Bad entries

/// Stores a valid entry for `k` and returns its file.
fn stored(c: &DiskCache, k: &str, payload: &[u8]) -> PathBuf {
    c.store(k, payload);
    assert_eq!(c.load(k).as_deref(), Some(payload));
    entry_file(c.dir(), k)
}

#[test]
fn corrupt_payload_byte_is_detected_and_removed() {
    capture_warnings();
    let tmp = tempfile::tempdir().unwrap();
    let c = DiskCache::at(tmp.path());
    let k = key(10);
    let payload = make_payload(1, 4096);
    let file = stored(&c, &k, &payload);

    for at in [0usize, 1, 2000, 4095] {
        let mut bytes = fs::read(&file).unwrap();
        let len = bytes.len();
        bytes[len - payload.len() + at] ^= 0x01;
        fs::write(&file, &bytes).unwrap();
        assert_eq!(c.load(&k), None, "flipped payload byte {at}");
        assert!(!file.exists(), "a corrupt entry is removed");
        // The cache recovers: the caller recompiles and stores again.
        assert_eq!(stored(&c, &k, &payload), file);
    }

    // A flipped bit in the header (here: inside the stored checksum, the last header byte) too.
    let mut bytes = fs::read(&file).unwrap();
    let header_end = bytes.len() - payload.len();
    bytes[header_end - 1] ^= 0x80;
    fs::write(&file, &bytes).unwrap();
    assert_eq!(c.load(&k), None);
    assert!(!file.exists());

    let dir = tmp.path().display().to_string();
    assert!(warnings_about(&dir).len() >= 5, "each discarded entry is logged: {:?}", warnings_about(&dir));
}

#[test]
fn truncated_file_is_a_miss() {
    capture_warnings();
    let tmp = tempfile::tempdir().unwrap();
    let c = DiskCache::at(tmp.path());
    let k = key(11);
    let payload = make_payload(2, 10_000);
    let file = stored(&c, &k, &payload);
    let full = fs::read(&file).unwrap();
    let header = full.len() - payload.len();
    for cut in [full.len() - 1, header + payload.len() / 2, header + 1, header, header - 1, 50, 8, 3, 0] {
        fs::write(&file, &full[..cut]).unwrap();
        assert_eq!(c.load(&k), None, "truncated to {cut} bytes");
        assert!(!file.exists(), "truncated entry ({cut} bytes) removed");
    }
    // Trailing bytes after a valid entry are just as wrong.
    let mut padded = full.clone();
    padded.push(0);
    fs::write(&file, &padded).unwrap();
    assert_eq!(c.load(&k), None, "padded entry");
    assert!(!warnings_about(&tmp.path().display().to_string()).is_empty());
}

#[test]
fn foreign_entry_is_a_miss() {
    let tmp = tempfile::tempdir().unwrap();
    let c = DiskCache::at(tmp.path());
    let (k1, k2) = (key(12), key(13));
    let f1 = stored(&c, &k1, b"cubin of k1");
    let f2 = stored(&c, &k2, b"cubin of k2");
    // A valid entry of k2 under k1's name (copied, or renamed by hand) must not be served for k1.
    fs::copy(&f2, &f1).unwrap();
    assert_eq!(c.load(&k1), None);
    assert!(!f1.exists(), "the foreign entry is removed");
    assert_eq!(c.load(&k2).as_deref(), Some(&b"cubin of k2"[..]), "the real k2 entry is untouched");
    fs::rename(&f2, &f1).unwrap();
    assert_eq!(c.load(&k1), None);
    assert_eq!(c.load(&k2), None);
}

#[test]
fn garbage_file_is_a_miss() {
    let tmp = tempfile::tempdir().unwrap();
    let c = DiskCache::at(tmp.path());
    let k = key(14);
    let file = stored(&c, &k, b"cubin");
    let valid = fs::read(&file).unwrap();

    let mut wrong_version = valid.clone();
    wrong_version[8] ^= 0xFF; // first byte of the format version
    let mut wrong_magic = valid.clone();
    wrong_magic[0] = b'X';
    let garbage: Vec<Vec<u8>> = vec![
        b"\x7fELF this is not a cache entry".to_vec(),
        make_payload(99, 100_000),
        vec![0u8; 4096],
        wrong_version,
        wrong_magic,
    ];
    for (i, g) in garbage.iter().enumerate() {
        fs::write(&file, g).unwrap();
        assert_eq!(c.load(&k), None, "garbage {i}");
        assert!(!file.exists(), "garbage {i} removed");
    }

    // A directory where the entry should be: a miss, no panic, and store does not panic either.
    fs::create_dir(&file).unwrap();
    assert_eq!(c.load(&k), None);
    c.store(&k, b"cubin");
}

#[test]
fn malformed_keys_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let inner = tmp.path().join("cache");
    let c = DiskCache::at(&inner);
    for k in ["", "../escape", "/etc/passwd", "ABCDEF", &key(0).to_uppercase(), &key(0)[..63]] {
        c.store(k, b"x");
        assert_eq!(c.load(k), None);
    }
    assert_eq!(all_files(tmp.path()), Vec::<PathBuf>::new(), "nothing written for malformed keys");
}

// ---------------------------------------------------------------------------------------------
// Unwritable directories

#[test]
fn dir_that_is_a_file_degrades() {
    let tmp = tempfile::tempdir().unwrap();
    let not_a_dir = tmp.path().join("cache-file");
    fs::write(&not_a_dir, b"i am a file").unwrap();
    for dir in [not_a_dir.clone(), not_a_dir.join("below")] {
        let c = DiskCache::at(&dir);
        let k = key(20);
        c.store(&k, b"cubin"); // must not panic
        c.store(&k, b"cubin"); // nor the second time (warning only once)
        assert_eq!(c.load(&k), None);
    }
    assert_eq!(fs::read(&not_a_dir).unwrap(), b"i am a file", "the file is untouched");
}

#[cfg(unix)]
#[test]
fn read_only_dir_degrades() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ro");
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o555)).unwrap();
    // Root (common in CI containers) ignores the mode bits: check whether they actually stop writes.
    let probe = dir.join("probe");
    let enforced = fs::write(&probe, b"").is_err();
    let _ = fs::remove_file(&probe);
    if enforced {
        let c = DiskCache::at(&dir);
        let k = key(21);
        c.store(&k, b"cubin"); // must not panic
        assert_eq!(c.load(&k), None);
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0, "nothing left in the read-only dir");
        // A missing dir below a read-only one cannot be created: same outcome.
        let c = DiskCache::at(dir.join("sub"));
        c.store(&k, b"cubin");
        assert_eq!(c.load(&k), None);
    } else {
        eprintln!(
            "read_only_dir_degrades: running with privileges that ignore chmod 0o555; the unwritable \
             case is covered by dir_that_is_a_file_degrades and env_dir_that_is_a_file"
        );
    }
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Environment (each case in a child process, so nothing mutates this process's environment)

#[test]
fn fuse_cache_off_disables() {
    for v in ["0", "false", "off", "OFF", "False", " 0 "] {
        run_child("env-disabled", &[("FUSE_CACHE", os(v)), ("FUSE_CACHE_DIR", os("/tmp/x"))], &[]);
    }
    let tmp = tempfile::tempdir().unwrap();
    for v in ["1", "on", "true"] {
        run_child("env-enabled", &[("FUSE_CACHE", os(v)), ("FUSE_CACHE_DIR", tmp.path().as_os_str())], &[]);
    }
    run_child("env-enabled", &[("FUSE_CACHE_DIR", tmp.path().as_os_str())], &["FUSE_CACHE"]);
}

#[test]
fn fuse_cache_dir_is_honoured() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("my-cache");
    run_child(
        "env-dir",
        &[("FUSE_CACHE_DIR", dir.as_os_str()), ("EXPECT_DIR", dir.as_os_str())],
        &["FUSE_CACHE"],
    );
    // The entry is on disk where asked, and readable from this process too.
    assert_eq!(DiskCache::at(&dir).load(&key(1)).as_deref(), Some(&b"cubin bytes"[..]));
}

#[test]
fn default_dir_is_platform_cache_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let xdg = tmp.path().join("xdg-cache");
    run_child(
        "env-default-dir",
        &[("XDG_CACHE_HOME", xdg.as_os_str()), ("HOME", tmp.path().as_os_str())],
        &["FUSE_CACHE", "FUSE_CACHE_DIR"],
    );
    // An empty FUSE_CACHE_DIR counts as unset.
    run_child(
        "env-default-dir",
        &[("XDG_CACHE_HOME", xdg.as_os_str()), ("HOME", tmp.path().as_os_str()), ("FUSE_CACHE_DIR", os(""))],
        &["FUSE_CACHE"],
    );
}

#[test]
fn env_dir_that_is_a_file() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("regular-file");
    fs::write(&file, b"x").unwrap();
    run_child("env-dir-is-file", &[("FUSE_CACHE_DIR", file.as_os_str())], &["FUSE_CACHE"]);
    assert_eq!(fs::read(&file).unwrap(), b"x");
}

// ---------------------------------------------------------------------------------------------
// Concurrency

#[test]
fn concurrent_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Arc::new(tmp.path().to_path_buf());
    let shared = key(100);
    const THREADS: u64 = 8;
    const ITERS: u64 = 150;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let dir = dir.clone();
            let shared = shared.clone();
            std::thread::spawn(move || {
                // Each thread its own DiskCache (as separate runtimes would have) and one private key.
                let c = DiskCache::at(dir.as_path());
                let own = key(200 + t as u32);
                let mut shared_hits = 0;
                for i in 0..ITERS {
                    let seed = (t << 32) | i;
                    let len = 16 + (seed.wrapping_mul(2_654_435_761) % 60_000) as usize;
                    let p = make_payload(seed, len);
                    if i % 2 == 0 {
                        c.store(&shared, &p);
                    } else {
                        c.store(&own, &p);
                        // Nobody else writes this key: the load is exactly what was just stored.
                        assert_eq!(c.load(&own).as_deref(), Some(&p[..]), "thread {t} iteration {i}");
                    }
                    if let Some(got) = c.load(&shared) {
                        let s = check_payload(&got);
                        assert!(
                            s >> 32 < THREADS && (s & 0xFFFF_FFFF) % 2 == 0,
                            "seed {s:#x} was never stored under the shared key"
                        );
                        shared_hits += 1;
                    }
                }
                shared_hits
            })
        })
        .collect();
    let hits: u64 = handles.into_iter().map(|h| h.join().expect("a thread panicked")).sum();
    assert!(hits > 0);
    // Every thread stored the shared key before its first load of it, so after the first store no load
    // may miss (a rename replaces the entry atomically; there is never a moment without one).
    #[cfg(unix)]
    assert_eq!(hits, THREADS * ITERS, "a load of the shared key missed while entries existed");
    // No temporary files survive.
    let files = all_files(&dir);
    assert_eq!(files.len(), 1 + THREADS as usize, "{files:?}");
}

#[test]
fn concurrent_processes_never_tear() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cache");
    let k = key(777);
    const CHILDREN: u64 = 4;
    let mut children: Vec<_> = (0..CHILDREN)
        .map(|i| {
            child_command(
                "multiproc-writer",
                &[
                    ("CACHE_DIR", dir.as_os_str()),
                    ("CHILD_INDEX", os(&i.to_string())),
                    ("ITERATIONS", os("12")),
                ],
                &[],
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn writer")
        })
        .collect();

    let c = DiskCache::at(&dir);
    let (mut hits, mut misses_after_hit, mut seeds) = (0u64, 0u64, HashSet::new());
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut running = true;
    while running {
        running = false;
        for ch in children.iter_mut() {
            if ch.try_wait().unwrap().is_none() {
                running = true;
            }
        }
        assert!(Instant::now() < deadline, "writers did not finish in time");
        match c.load(&k) {
            Some(got) => {
                let s = check_payload(&got);
                assert!(s >> 32 < CHILDREN && (s & 0xFFFF_FFFF) < 12, "unknown seed {s:#x}");
                seeds.insert(s);
                hits += 1;
            }
            None if hits > 0 => misses_after_hit += 1,
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    for ch in children {
        check_child("multiproc-writer", &ch.wait_with_output().unwrap());
    }
    // After all writers are done the entry is one of theirs, complete.
    let last = c.load(&k).expect("an entry exists after the writers finish");
    check_payload(&last);
    hits += 1;
    eprintln!("concurrent_processes_never_tear: {hits} good loads, {} distinct payloads seen", seeds.len());
    // Once an entry exists, renames keep one in place at every moment: a load never misses.
    #[cfg(unix)]
    assert_eq!(misses_after_hit, 0, "loads missed while an entry existed");
    let _ = misses_after_hit;
    let files = all_files(&dir);
    assert_eq!(files.len(), 1, "temporary files left behind: {files:?}");
}
