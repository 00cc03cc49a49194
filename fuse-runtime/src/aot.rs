//! Compiling a [`KernelSpec`] without launching it: for an architecture with NVRTC alone
//! (ahead of time, cache warming, CI, ptxas reports), or on a device for every variant a launch
//! may pick.
//!
//! Layer: above the spec and the back ends; imports `spec`, `config`, `warps`, `cuda` and
//! `device`.

use crate::config::{
    describe_config, validate_consts, validate_num_stages, validate_num_warps, DEFAULT_NUM_STAGES,
};
use crate::cuda::nvrtc::{self, PtxasReport};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::spec::KernelSpec;

impl KernelSpec {
    /// Compiles the variant with every specialization = 1 (aligned pointers, divisible ints: what
    /// buffers from this runtime and multiple-of-16 sizes give) to a cubin for `arch` ("sm_90"),
    /// with NVRTC only: no GPU or driver needed (AOT, cache warming, CI). Uses and fills the
    /// in-process and on-disk caches.
    ///
    /// `consts` are the const generic values in declaration order; `num_warps` a power of two in
    /// `1..=32` (see [`default_num_warps`](crate::default_num_warps)); the pipeline stages are the
    /// default ([`KernelSpec::compile_for_arch_staged`] takes them).
    ///
    /// # Errors
    /// As [`KernelSpec::compile_for_arch_with`].
    pub fn compile_for_arch(&self, arch: &str, consts: &[u64], num_warps: u32) -> Result<Vec<u8>> {
        let all = vec![true; self.specializations().len()];
        self.compile_for_arch_with(arch, consts, num_warps, &all)
    }

    /// [`KernelSpec::compile_for_arch`] for given specialization values (one per entry of
    /// [`KernelSpec::specializations`]). Uses and fills the in-process and on-disk caches.
    ///
    /// # Errors
    /// * [`Error::InvalidArgument`] if `arch` is not of the form `sm_90` (`sm_`, 2 or 3 digits, an
    ///   optional `a` or `f`), or `spec_values` has the wrong length;
    /// * [`Error::InvalidKernel`] as for [`KernelSpec::kernel`];
    /// * [`Error::InvalidLaunch`] if `consts` does not fit the kernel (count, powers of two, tile
    ///   lengths of at most [`MAX_TILE_LEN`](crate::MAX_TILE_LEN)) or `num_warps` is not a power
    ///   of two in `1..=32`;
    /// * [`Error::LibraryNotFound`] if NVRTC cannot be loaded;
    /// * [`Error::Compile`] if NVRTC rejects the source (with its log), and [`Error::Cuda`] if
    ///   another NVRTC call fails or gives no cubin (an `arch` NVRTC does not know, say).
    pub fn compile_for_arch_with(
        &self,
        arch: &str,
        consts: &[u64],
        num_warps: u32,
        spec_values: &[bool],
    ) -> Result<Vec<u8>> {
        self.compile_for_arch_staged(arch, consts, num_warps, DEFAULT_NUM_STAGES, spec_values)
    }

    /// The source of one variant, after checking every argument that picks it.
    fn checked_source(
        &self,
        arch: &str,
        consts: &[u64],
        (num_warps, num_stages): (u32, u32),
        spec_values: &[bool],
    ) -> Result<String> {
        nvrtc::validate_arch(arch)?;
        let info = self.info()?;
        validate_consts(&info.kernel, consts)?;
        validate_num_warps(num_warps)?;
        validate_num_stages(num_stages)?;
        if spec_values.len() != self.specializations().len() {
            return Err(Error::InvalidArgument(format!(
                "kernel `{}` has {} specializations but {} values were given",
                self.name(),
                self.specializations().len(),
                spec_values.len()
            )));
        }
        Ok(self.full_source_staged(consts, num_warps, num_stages, spec_values))
    }

    /// Compiles (or fetches from the caches) and loads this kernel on `device` without launching,
    /// for every combination of specialization values, so that later launches with these consts
    /// and `num_warps` (default: [`default_num_warps`]) start at once. The first six
    /// specializations take both values and any further ones only 1 (at most 64 variants). A GPU
    /// launch without `num_warps` on a grid too small to fill the GPU may pick more warps than
    /// [`default_num_warps`] (see [`LaunchConfig`](crate::LaunchConfig)), a variant that this
    /// call with `None` does not compile. Compiles for the default pipeline stages
    /// ([`KernelSpec::compile_staged`] takes them). On the CPU only the arguments are checked.
    ///
    /// [`default_num_warps`]: crate::default_num_warps
    ///
    /// # Errors
    /// * [`Error::InvalidKernel`] as for [`KernelSpec::kernel`];
    /// * [`Error::InvalidLaunch`] if `consts` or `num_warps` does not fit, as for
    ///   [`KernelSpec::compile_for_arch_with`];
    /// * on a GPU, [`Error::LibraryNotFound`], [`Error::Compile`] or [`Error::Cuda`] if compiling
    ///   fails, [`Error::Cuda`] if the driver refuses to load the cubin, and
    ///   [`Error::InvalidLaunch`] if the kernel asks for more shared memory than the GPU gives a
    ///   block (docs/DESIGN.md, "Runtime conventions").
    pub fn compile(&self, device: &Device, consts: &[u64], num_warps: Option<u32>) -> Result<()> {
        self.compile_staged(device, consts, num_warps, None)
    }

    /// [`KernelSpec::compile`] for `num_stages` pipeline stages (`None`:
    /// [`DEFAULT_NUM_STAGES`](crate::DEFAULT_NUM_STAGES), what a launch without
    /// [`LaunchConfig::num_stages`](crate::LaunchConfig::num_stages) uses).
    ///
    /// # Errors
    /// As [`KernelSpec::compile`], and [`Error::InvalidLaunch`] if `num_stages` is outside
    /// `1..=8`.
    pub fn compile_staged(
        &self,
        device: &Device,
        consts: &[u64],
        num_warps: Option<u32>,
        num_stages: Option<u32>,
    ) -> Result<()> {
        let info = self.info()?;
        validate_consts(&info.kernel, consts)?;
        let num_warps = num_warps.unwrap_or_else(|| info.default_num_warps(consts));
        validate_num_warps(num_warps)?;
        let num_stages = num_stages.unwrap_or(DEFAULT_NUM_STAGES);
        validate_num_stages(num_stages)?;
        let Some(cuda) = device.cuda_inner() else { return Ok(()) };
        let n = self.specializations().len().min(6); // 64 variants at most; the rest stay 1
        for bits in 0u32..(1 << n) {
            let values: Vec<bool> =
                (0..self.specializations().len()).map(|i| i >= n || bits & (1 << i) != 0).collect();
            let source = self.full_source_staged(consts, num_warps, num_stages, &values);
            let loaded = cuda.load_source(self.name(), &info.kernel, &source)?;
            if let Err(t) = loaded.smem {
                let config = describe_config(&info.kernel, consts, num_warps, num_stages);
                return Err(t.error(self.name(), &config, &cuda.description()));
            }
        }
        Ok(())
    }
}

/// The public entry points that compile one variant for an architecture with NVRTC alone: each
/// takes the variant's `arch`, const generics, warps, stages and specialization values, checks
/// them (`checked_source`) and hands the kernel's name and the source to its body.
macro_rules! one_variant_for_arch {
    ($($(#[$doc:meta])* fn $name:ident -> $ret:ty = |$kernel:ident, $source:ident, $arch:ident| $body:expr;)*) => {
        impl KernelSpec {$(
            $(#[$doc])*
            pub fn $name(
                &self,
                arch: &str,
                consts: &[u64],
                num_warps: u32,
                num_stages: u32,
                spec_values: &[bool],
            ) -> Result<$ret> {
                let $source = self.checked_source(arch, consts, (num_warps, num_stages), spec_values)?;
                let ($kernel, $arch) = (self.name(), arch);
                $body
            }
        )*}
    };
}

one_variant_for_arch! {
    /// [`KernelSpec::compile_for_arch_with`] for `num_stages` pipeline stages (1..=8; the
    /// methods without it use [`DEFAULT_NUM_STAGES`](crate::DEFAULT_NUM_STAGES)).
    ///
    /// # Errors
    /// As [`KernelSpec::compile_for_arch_with`], and [`Error::InvalidLaunch`] if `num_stages`
    /// is outside `1..=8`.
    fn compile_for_arch_staged -> Vec<u8> = |kernel, source, arch| {
        crate::cuda::cubin(kernel, &source, arch).map(|c| c.to_vec())
    };
    /// What ptxas reports for the variant [`KernelSpec::compile_for_arch_staged`] compiles:
    /// registers, spills, stack, and whether it serialised the wgmma instructions. Compiles afresh
    /// with `--ptxas-options=-v` (no caches; NVRTC only, no GPU needed), for tests and reports
    /// such as "no spills in this kernel".
    ///
    /// # Errors
    /// As [`KernelSpec::compile_for_arch_staged`].
    fn ptxas_report -> PtxasReport = |kernel, source, arch| {
        let (_, log) = nvrtc::compile_capped(kernel, &source, arch, &["--ptxas-options=-v"])?;
        Ok(PtxasReport::parse(&log))
    };
}
