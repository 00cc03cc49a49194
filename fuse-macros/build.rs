//! Finds, once per build, the tools some unit tests need, so that where one is missing those tests
//! are reported as ignored, with the reason, instead of passing without checking anything:
//! * `fuse_nvrtc`: NVRTC loads the way the tests load it (cudarc opens `libnvrtc` by name, so
//!   through the loader's search path: `LD_LIBRARY_PATH`, where the `nvidia-cuda-nvrtc` wheel's
//!   `nvidia/cu13/lib` goes, then the system's);
//! * `fuse_cxx`: a C++17 compiler (`$CXX`, else `g++`) compiles a program.
//!
//! Under CI (`CI=true` or `CI=1`) both are set whatever is found: there a missing tool fails its
//! tests.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(fuse_nvrtc)");
    println!("cargo::rustc-check-cfg=cfg(fuse_cxx)");
    println!("cargo::rerun-if-changed=build.rs");
    for var in ["LD_LIBRARY_PATH", "CXX", "CI"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    if ci || nvrtc_loads() {
        println!("cargo::rustc-cfg=fuse_nvrtc");
    }
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR for build scripts");
    if ci || cxx17_compiles(Path::new(&out_dir)) {
        println!("cargo::rustc-cfg=fuse_cxx");
    }
}

/// Whether one of the names cudarc tries for NVRTC (CUDA 13, `cudarc::get_lib_name_candidates`)
/// opens.
#[cfg(unix)]
fn nvrtc_loads() -> bool {
    use std::ffi::{c_char, c_int, c_void, CString};
    extern "C" {
        fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
        fn dlclose(handle: *mut c_void) -> c_int;
    }
    // RTLD_LAZY | RTLD_LOCAL, as libloading opens it.
    const RTLD_LAZY: c_int = 1;
    let (prefix, suffix) = (std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    let stems = ["nvrtc", "nvrtc64", "nvrtc64_13", "nvrtc64_130", "nvrtc64_130_0", "nvrtc64_10"];
    let stems = stems.into_iter().chain(["nvrtc64_11", "nvrtc64_12", "nvrtc64_9"]);
    let plain = stems.map(|s| format!("{prefix}{s}{suffix}"));
    let versioned = ["13", "12", "11", "10", "9", "1"].map(|v| format!("{prefix}nvrtc{suffix}.{v}"));
    plain.chain(versioned).any(|name| {
        let name = CString::new(name).expect("library names have no NUL");
        // SAFETY: dlopen of a library by name; a library found is closed again at once (NVRTC's
        // initialisers only set up its own state).
        unsafe {
            let handle = dlopen(name.as_ptr(), RTLD_LAZY);
            if handle.is_null() {
                return false;
            }
            dlclose(handle);
            true
        }
    })
}

#[cfg(not(unix))]
fn nvrtc_loads() -> bool {
    false
}

/// Whether `$CXX` (else `g++`) compiles a C++17 program.
fn cxx17_compiles(out_dir: &Path) -> bool {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".to_string());
    let src = out_dir.join("cxx17_probe.cpp");
    let exe = out_dir.join("cxx17_probe");
    let program = "#include <set>\nint main() { std::set<int> s{1}; if (auto it = s.find(1); it != s.end()) return 0; return 1; }\n";
    if std::fs::write(&src, program).is_err() {
        return false;
    }
    Command::new(&cxx)
        .args(["-std=c++17", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .is_ok_and(|o| o.status.success())
}
