//! With `FUSE_NVRTC_PATH` pointing nowhere, NVRTC is "missing": every entry point returns
//! `Error::LibraryNotFound` listing where it looked and what to install, and nothing panics.
//! (Its own test binary: the environment is read once per process.)
mod common;

use fuse_runtime::Error;

#[test]
fn missing_nvrtc_is_a_clear_error() {
    std::env::set_var("FUSE_NVRTC_PATH", "/nonexistent/fuse-nvrtc");
    let e = fuse_runtime::nvrtc_version().unwrap_err();
    let Error::LibraryNotFound { library, searched, hint } = &e else {
        panic!("expected LibraryNotFound, got {e}")
    };
    assert!(library.contains("NVRTC"), "{library}");
    assert_eq!(searched, &vec!["/nonexistent/fuse-nvrtc (from FUSE_NVRTC_PATH; does not exist)".to_string()]);
    assert!(hint.contains("pip install nvidia-cuda-nvrtc") && hint.contains("CUDA toolkit"), "{hint}");
    let msg = e.to_string();
    assert!(msg.contains("searched:\n  - /nonexistent/fuse-nvrtc"), "{msg}");

    let e = common::add_one_spec().compile_for_arch("sm_90", &[1024], 4).unwrap_err();
    assert!(matches!(e, Error::LibraryNotFound { .. }), "{e}");
    println!("{e}");
}
