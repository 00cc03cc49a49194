//! Finding `libnvrtc` and `libcuda` before cudarc touches them.
//!
//! cudarc loads both libraries lazily *by name* (`libnvrtc.so`, `libnvrtc.so.13`, `libnvrtc.so.12`,
//! ..., `libcuda.so`, `libcuda.so.1`), which searches only the OS loader path, and it panics when
//! the name is not found. So before the first cudarc call we:
//!
//! 1. ask cudarc's own probe (`is_culib_present`, which does not panic) whether the loader already
//!    finds the library by name;
//! 2. otherwise look in the usual places (below) and `dlopen` the first file that loads, by its full
//!    path, with `RTLD_GLOBAL`, keeping the handle for the life of the process. glibc's `dlopen` by
//!    name first matches already loaded objects by their `SONAME` (`libnvrtc.so.13`), so cudarc's
//!    later by-name load finds exactly that library; we check this with the probe again;
//! 3. otherwise return [`Error::LibraryNotFound`] listing every place searched and what to install.
//!
//! Places searched for NVRTC: `$CUDA_HOME`, `$CUDA_PATH`, `$CUDA_ROOT`, `$CUDA_TOOLKIT_ROOT_DIR`
//! (`lib64`, `lib`, `targets/<arch>-linux/lib`), `/usr/local/cuda`, `/usr/local/cuda-*`, `/opt/cuda`,
//! and the `nvidia/cu13/lib`, `nvidia/cuda_nvrtc/lib`, `nvidia/cu12/lib` folders of pip wheels in
//! every Python `site-packages` we can compute without running Python: `$VIRTUAL_ENV`,
//! `$CONDA_PREFIX`, `$PYTHONPATH`, the prefixes of the `bin` folders on `$PATH`,
//! `~/.local/lib/python3*`, `$PYENV_ROOT`/`~/.pyenv/versions/*`, `/usr/lib/python3*`,
//! `/usr/local/lib/python3*`, `/opt/conda`. For the driver: `/usr/lib/x86_64-linux-gnu`,
//! `/usr/lib64`, `/usr/local/nvidia/lib64`, `/usr/lib/wsl/lib`, `/run/opengl-driver/lib`,
//! `/usr/local/cuda/compat` (never the toolkit's `stubs`).
//!
//! Overrides: `FUSE_NVRTC_PATH` / `FUSE_LIBCUDA_PATH` — a file or a folder (or several, separated
//! by `:`). When set, *only* those places are searched (not even the loader path), which also lets
//! tests simulate a machine without the library (`FUSE_NVRTC_PATH=/nonexistent`).
//!
//! Imports only `error`.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Which library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lib {
    Nvrtc,
    Driver,
}

impl Lib {
    fn display(self) -> &'static str {
        match self {
            Lib::Nvrtc => "NVRTC (libnvrtc, the CUDA run-time compiler)",
            Lib::Driver => "the CUDA driver library (libcuda)",
        }
    }

    pub(crate) fn env_var(self) -> &'static str {
        match self {
            Lib::Nvrtc => "FUSE_NVRTC_PATH",
            Lib::Driver => "FUSE_LIBCUDA_PATH",
        }
    }

    /// File names to try in a folder; their SONAMEs are among the names cudarc loads.
    fn file_names(self) -> &'static [&'static str] {
        match self {
            Lib::Nvrtc => &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"],
            Lib::Driver => &["libcuda.so.1", "libcuda.so"],
        }
    }

    fn hint(self) -> String {
        match self {
            Lib::Nvrtc => "NVRTC compiles the kernels; no GPU is needed for it. Install it with \
                `pip install nvidia-cuda-nvrtc` (CUDA 13; `nvidia-cuda-nvrtc-cu12` for CUDA 12) or a CUDA \
                toolkit (then set CUDA_HOME if it is not in /usr/local/cuda), or point FUSE_NVRTC_PATH at \
                libnvrtc.so.* or the folder holding it. To run without CUDA use Device::cpu()."
                .to_string(),
            Lib::Driver => "libcuda comes with the NVIDIA driver, not with the toolkit or pip: install the \
                driver (`nvidia-smi` should work); in a container, start it with the NVIDIA container \
                toolkit (`--gpus all`); or point FUSE_LIBCUDA_PATH at libcuda.so.1 or its folder. To run \
                without a GPU use Device::cpu()."
                .to_string(),
        }
    }

    /// Does a by-name load succeed, as cudarc's would? The names are the Linux ones among cudarc's
    /// candidates (`get_lib_name_candidates`). Not cudarc's own `is_culib_present`: that exists
    /// only with cudarc's dynamic loading, and a build that links the libraries instead (candle's
    /// CUDA backend turns on cudarc's `dynamic-linking` for the whole graph) has no such function;
    /// there the libraries are already loaded and the by-name load finds them by SONAME.
    fn cudarc_finds_it(self) -> bool {
        let names: &[&str] = match self {
            Lib::Nvrtc => &[
                "libnvrtc.so",
                "libnvrtc.so.13",
                "libnvrtc.so.12",
                "libnvrtc.so.11",
                "libnvrtc.so.10",
                "libnvrtc.so.9",
                "libnvrtc.so.1",
            ],
            Lib::Driver => &["libcuda.so", "libcuda.so.13", "libcuda.so.12", "libcuda.so.1"],
        };
        // SAFETY: this only tries `dlopen` by name and closes again.
        names.iter().any(|n| unsafe { libloading::Library::new(*n) }.is_ok())
    }
}

/// Makes sure cudarc will find `lib`; memoised per process (the environment is read once).
pub(crate) fn ensure(lib: Lib) -> Result<()> {
    static NVRTC: OnceLock<Result<()>> = OnceLock::new();
    static DRIVER: OnceLock<Result<()>> = OnceLock::new();
    let cell = match lib {
        Lib::Nvrtc => &NVRTC,
        Lib::Driver => &DRIVER,
    };
    cell.get_or_init(|| {
        let overrides = std::env::var_os(lib.env_var()).map(|v| v.to_string_lossy().into_owned());
        locate(lib, overrides.as_deref(), || candidate_dirs(lib))
    })
    .clone()
}

/// Handles of libraries we opened by full path; never closed.
fn keep(lib: libloading::Library) {
    static KEPT: Mutex<Vec<libloading::Library>> = Mutex::new(Vec::new());
    KEPT.lock().unwrap_or_else(|p| p.into_inner()).push(lib);
}

/// The search itself. `overrides` (the env var) replaces everything else when set; `dirs` (the
/// candidate folders, which takes directory listings to build) is only called when needed.
pub(crate) fn locate(lib: Lib, overrides: Option<&str>, dirs: impl FnOnce() -> Vec<PathBuf>) -> Result<()> {
    let mut searched: Vec<String> = Vec::new();
    let places: Vec<PathBuf> = match overrides {
        Some(list) => {
            let places: Vec<PathBuf> =
                std::env::split_paths(list).filter(|p| !p.as_os_str().is_empty()).collect();
            if places.is_empty() {
                searched.push(format!("{} is set but empty", lib.env_var()));
            }
            places
        }
        None => {
            if lib.cudarc_finds_it() {
                return Ok(());
            }
            searched.push(format!(
                "the OS loader path (LD_LIBRARY_PATH, ldconfig cache) by the names cudarc loads, e.g. {}",
                lib.file_names().join(", ")
            ));
            dirs()
        }
    };
    for place in places {
        let files: Vec<PathBuf> = if place.is_dir() {
            lib.file_names().iter().map(|n| place.join(n)).filter(|p| p.exists()).collect()
        } else if place.exists() {
            vec![place.clone()]
        } else {
            vec![]
        };
        if files.is_empty() {
            searched.push(if overrides.is_some() {
                format!(
                    "{} (from {}; {})",
                    place.display(),
                    lib.env_var(),
                    if place.exists() { "no library in it" } else { "does not exist" }
                )
            } else {
                format!("{}", place.display())
            });
            continue;
        }
        for file in files {
            match open_global(&file) {
                Ok(handle) => {
                    if lib.cudarc_finds_it() {
                        log::debug!("fuse: loaded {} from {}", lib.display(), file.display());
                        keep(handle);
                        return Ok(());
                    }
                    searched.push(format!(
                        "{} (loaded, but its SONAME is not a name cudarc loads; add its folder to LD_LIBRARY_PATH)",
                        file.display()
                    ));
                    keep(handle);
                }
                Err(e) => searched.push(format!("{} (failed to load: {e})", file.display())),
            }
        }
    }
    Err(Error::LibraryNotFound { library: lib.display().to_string(), searched, hint: lib.hint() })
}

#[cfg(unix)]
fn open_global(path: &Path) -> std::result::Result<libloading::Library, libloading::Error> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    // SAFETY: loading a CUDA library runs its initialisers, which is what cudarc would do too.
    unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }.map(Into::into)
}

#[cfg(not(unix))]
fn open_global(path: &Path) -> std::result::Result<libloading::Library, libloading::Error> {
    // SAFETY: as above.
    unsafe { libloading::Library::new(path) }
}

/// Sub-folders of the CUDA toolkit roots holding libraries.
fn toolkit_lib_dirs(root: &Path, out: &mut Vec<PathBuf>) {
    out.push(root.join("lib64"));
    out.push(root.join("lib"));
    out.push(root.join(format!("targets/{}-linux/lib", std::env::consts::ARCH)));
}

/// Entries of `dir` whose names start with `prefix`, sorted newest-looking first (descending).
fn glob_prefix(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
            .map(|e| e.path())
            .collect(),
        Err(_) => Vec::new(),
    };
    out.sort();
    out.reverse();
    out
}

/// `site-packages`/`dist-packages` folders under a Python prefix (`<prefix>/lib/python3*/...`).
fn site_packages_of_prefix(prefix: &Path, out: &mut Vec<PathBuf>) {
    for lib in ["lib", "lib64"] {
        for py in glob_prefix(&prefix.join(lib), "python3") {
            out.push(py.join("site-packages"));
            out.push(py.join("dist-packages"));
        }
    }
}

/// Every Python package folder we can compute without running Python.
fn python_package_dirs() -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = Vec::new();
    let mut direct: Vec<PathBuf> = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(v) = std::env::var_os(var) {
            prefixes.push(PathBuf::from(v));
        }
    }
    if let Some(pp) = std::env::var_os("PYTHONPATH") {
        direct.extend(std::env::split_paths(&pp));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.file_name().is_some_and(|n| n == "bin") && dir.join("python3").exists() {
                if let Some(prefix) = dir.parent() {
                    prefixes.push(prefix.to_path_buf());
                }
            }
        }
    }
    let home = dirs::home_dir();
    if let Some(home) = &home {
        prefixes.push(home.join(".local"));
    }
    let pyenv_root =
        std::env::var_os("PYENV_ROOT").map(PathBuf::from).or_else(|| home.as_ref().map(|h| h.join(".pyenv")));
    if let Some(root) = pyenv_root {
        prefixes.extend(glob_prefix(&root.join("versions"), ""));
    }
    for p in ["/usr", "/usr/local", "/opt/conda"] {
        prefixes.push(PathBuf::from(p));
    }
    prefixes.extend(glob_prefix(Path::new("/opt"), "").into_iter().map(|p| p.join(".venv")));
    let mut out = direct;
    for prefix in &prefixes {
        site_packages_of_prefix(prefix, &mut out);
    }
    out.push(PathBuf::from("/usr/lib/python3/dist-packages"));
    out.retain(|p| p.is_dir());
    out
}

/// The folders searched (beyond the loader path) for `lib`, in order, deduplicated, existing only.
pub(crate) fn candidate_dirs(lib: Lib) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    match lib {
        Lib::Nvrtc => {
            for var in ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CUDA_TOOLKIT_ROOT_DIR"] {
                if let Some(v) = std::env::var_os(var) {
                    toolkit_lib_dirs(Path::new(&v), &mut out);
                }
            }
            toolkit_lib_dirs(Path::new("/usr/local/cuda"), &mut out);
            for root in glob_prefix(Path::new("/usr/local"), "cuda-") {
                toolkit_lib_dirs(&root, &mut out);
            }
            toolkit_lib_dirs(Path::new("/opt/cuda"), &mut out);
            if let Some(conda) = std::env::var_os("CONDA_PREFIX") {
                out.push(PathBuf::from(conda).join("lib"));
            }
            for site in python_package_dirs() {
                for sub in ["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib", "nvidia/cu12/lib"] {
                    out.push(site.join(sub));
                }
            }
        }
        Lib::Driver => {
            for d in [
                "/usr/lib/x86_64-linux-gnu",
                "/usr/lib/aarch64-linux-gnu",
                "/usr/lib64",
                "/usr/lib",
                "/usr/local/nvidia/lib64",
                "/usr/local/nvidia/lib",
                "/usr/lib/wsl/lib",
                "/run/opengl-driver/lib",
                "/usr/local/cuda/compat",
            ] {
                out.push(PathBuf::from(d));
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| p.is_dir() && seen.insert(p.clone()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn override_to_nothing_lists_the_places_and_the_hint() {
        let err = locate(Lib::Nvrtc, Some("/nonexistent/fuse-a:/nonexistent/fuse-b"), Vec::new).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::LibraryNotFound { .. }));
        assert!(msg.contains("/nonexistent/fuse-a (from FUSE_NVRTC_PATH; does not exist)"), "{msg}");
        assert!(msg.contains("/nonexistent/fuse-b"), "{msg}");
        assert!(msg.contains("pip install nvidia-cuda-nvrtc"), "{msg}");
        let err = locate(Lib::Driver, Some("/nonexistent/x"), Vec::new).unwrap_err().to_string();
        assert!(err.contains("NVIDIA driver") && err.contains("FUSE_LIBCUDA_PATH"), "{err}");
    }

    #[test]
    fn a_folder_without_the_library_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let msg = locate(Lib::Nvrtc, Some(dir.path().to_str().unwrap()), Vec::new).unwrap_err().to_string();
        assert!(msg.contains("no library in it"), "{msg}");
    }

    #[test]
    fn a_file_that_is_not_a_library_fails_to_load_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("libnvrtc.so.13");
        std::fs::write(&f, b"not an ELF file").unwrap();
        let msg = locate(Lib::Nvrtc, Some(dir.path().to_str().unwrap()), Vec::new).unwrap_err().to_string();
        assert!(msg.contains("failed to load"), "{msg}");
    }
}
