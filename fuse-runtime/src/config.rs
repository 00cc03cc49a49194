//! What a launch is configured with: the [`Grid`], the [`LaunchConfig`] (warps and pipeline
//! stages per program) and their limits, and the checks of const generics, `num_warps` and
//! `num_stages` that every entry point (a launch, [`KernelSpec::compile`], the ahead-of-time
//! compiles) makes before anything runs.
//!
//! Bottom layer: imports only `error` (and the IR).
//!
//! [`KernelSpec::compile`]: crate::KernelSpec::compile

use crate::error::{Error, Result};
use fuse_ir::{Kernel, Len};

/// The grid: how many programs along x, y, z (each at least 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Grid {
    /// Programs along x (`program_id(0)`).
    pub x: u32,
    /// Programs along y (`program_id(1)`).
    pub y: u32,
    /// Programs along z (`program_id(2)`).
    pub z: u32,
}

impl Grid {
    /// A grid of `x * y * z` programs.
    pub const fn new(x: u32, y: u32, z: u32) -> Grid {
        Grid { x, y, z }
    }

    /// Programs in total.
    pub fn count(&self) -> u64 {
        u64::from(self.x) * u64::from(self.y) * u64::from(self.z)
    }
}

impl From<u32> for Grid {
    fn from(x: u32) -> Grid {
        Grid { x, y: 1, z: 1 }
    }
}

impl From<(u32, u32)> for Grid {
    fn from((x, y): (u32, u32)) -> Grid {
        Grid { x, y, z: 1 }
    }
}

impl From<(u32, u32, u32)> for Grid {
    fn from((x, y, z): (u32, u32, u32)) -> Grid {
        Grid { x, y, z }
    }
}

/// A 1-D grid from a `usize` count, refusing (never truncating) counts above `u32::MAX`.
impl TryFrom<usize> for Grid {
    type Error = Error;
    fn try_from(x: usize) -> Result<Grid> {
        u32::try_from(x).map(Grid::from).map_err(|_| {
            Error::InvalidLaunch(format!("a grid dimension must fit in u32 (at most {}), got {x}", u32::MAX))
        })
    }
}

/// A grid and, optionally, warps per program (default: [`crate::default_num_warps`], more for
/// grids too small to fill the GPU) and pipeline stages (default: [`DEFAULT_NUM_STAGES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// The programs to run.
    pub grid: Grid,
    /// Warps per program; `None` lets the runtime choose ([`crate::default_num_warps`]).
    pub num_warps: Option<u32>,
    /// Software-pipeline stages of the kernel's tensor-core loops; `None` is
    /// [`DEFAULT_NUM_STAGES`]. See [`LaunchConfig::num_stages`].
    pub num_stages: Option<u32>,
}

/// The pipeline stages of a launch that does not set [`LaunchConfig::num_stages`] (Triton's
/// default too).
pub const DEFAULT_NUM_STAGES: u32 = 3;

/// The most pipeline stages a launch may ask for.
pub const MAX_NUM_STAGES: u32 = 8;

impl LaunchConfig {
    /// `grid` with the default warps per program and pipeline stages.
    pub fn new(grid: impl Into<Grid>) -> LaunchConfig {
        LaunchConfig { grid: grid.into(), num_warps: None, num_stages: None }
    }

    /// Warps (of 32 threads) per program: a power of two in 1..=32.
    pub fn num_warps(mut self, n: u32) -> LaunchConfig {
        self.num_warps = Some(n);
        self
    }

    /// Software-pipeline stages (1..=[`MAX_NUM_STAGES`]; default [`DEFAULT_NUM_STAGES`]): how
    /// many tiles of a pipelined loop are in flight at once, each in its own shared-memory
    /// buffer. The kernel sees it as `FUSE_NUM_STAGES`; kernels without pipelined loops ignore
    /// it, but each value is still its own compiled variant (it is part of every cache key).
    pub fn num_stages(mut self, n: u32) -> LaunchConfig {
        self.num_stages = Some(n);
        self
    }

    /// The stages this config launches with: [`LaunchConfig::num_stages`] or the default.
    pub fn stages(&self) -> u32 {
        self.num_stages.unwrap_or(DEFAULT_NUM_STAGES)
    }
}

impl<G: Into<Grid>> From<G> for LaunchConfig {
    fn from(grid: G) -> LaunchConfig {
        LaunchConfig::new(grid)
    }
}

/// The largest tile a program may hold: a sane bound that keeps the CPU interpreter's tiles and
/// the GPU's registers finite.
pub const MAX_TILE_LEN: u64 = 1 << 24;

fn const_list(k: &Kernel) -> String {
    if k.consts.is_empty() {
        "none".into()
    } else {
        k.consts.join(", ")
    }
}

/// Const generic count, powers of two, and every tile length evaluating within [`MAX_TILE_LEN`].
pub(crate) fn validate_consts(k: &Kernel, consts: &[u64]) -> Result<()> {
    validate_consts_with(k, &k.tile_lens(), consts)
}

pub(crate) fn validate_consts_with(k: &Kernel, lens: &[Len], consts: &[u64]) -> Result<()> {
    if consts.len() != k.consts.len() {
        return Err(Error::InvalidLaunch(format!(
            "kernel `{}` has {} const generic(s) ({}) but {} value(s) were given",
            k.name,
            k.consts.len(),
            const_list(k),
            consts.len()
        )));
    }
    for (name, &v) in k.consts.iter().zip(consts) {
        if !v.is_power_of_two() {
            return Err(Error::InvalidLaunch(format!(
                "kernel `{}`: const generic {name} must be a power of two, got {v}",
                k.name
            )));
        }
    }
    for len in lens {
        match len.eval(consts) {
            Some(n) if n <= MAX_TILE_LEN => {}
            other => {
                let assigned: Vec<String> =
                    k.consts.iter().zip(consts).map(|(n, v)| format!("{n} = {v}")).collect();
                return Err(Error::InvalidLaunch(format!(
                    "kernel `{}`: tile length `{}` is {} with {}; tiles must be whole powers of two of at most {MAX_TILE_LEN} elements",
                    k.name,
                    len.display(&k.consts),
                    other.map_or("not a whole number".to_string(), |n| n.to_string()),
                    assigned.join(", ")
                )));
            }
        }
    }
    Ok(())
}

pub(crate) fn validate_num_warps(n: u32) -> Result<()> {
    if n.is_power_of_two() && n <= 32 {
        Ok(())
    } else {
        Err(Error::InvalidLaunch(format!("num_warps must be a power of two in 1..=32, got {n}")))
    }
}

pub(crate) fn validate_num_stages(n: u32) -> Result<()> {
    if (1..=MAX_NUM_STAGES).contains(&n) {
        Ok(())
    } else {
        Err(Error::InvalidLaunch(format!(
            "num_stages must be in 1..={MAX_NUM_STAGES} (pipeline stages of the kernel's loops; default \
             {DEFAULT_NUM_STAGES}), got {n}"
        )))
    }
}

/// `BLOCK = 128, num_warps = 4, num_stages = 3`: a compiled variant, as errors name it.
pub(crate) fn describe_config(k: &Kernel, consts: &[u64], num_warps: u32, num_stages: u32) -> String {
    let mut parts: Vec<String> = k.consts.iter().zip(consts).map(|(n, v)| format!("{n} = {v}")).collect();
    parts.push(format!("num_warps = {num_warps}"));
    parts.push(format!("num_stages = {num_stages}"));
    parts.join(", ")
}
