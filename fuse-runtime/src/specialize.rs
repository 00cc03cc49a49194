//! What a launch's arguments decide about the variant it runs: the value of each of the spec's
//! specializations (aligned pointers, divisible integers, accesses proven in bounds, masks
//! proven true, uniform branches taken or skipped), the launch-time bounds proof behind two of
//! them (kept while a launch's inputs repeat), and the launch words of the host-computed
//! scalars. [`KernelSpec::proven_in_bounds`] and [`KernelSpec::proven_all_true`] report the proof.
//!
//! Layer: above `args`, `validate` and `spec`; imports those, `bounds`, `config`, `device` and
//! `error`.

use crate::args::{buffer_len, device_address, host_arg, launch_key, scalar_value, KernelArg};
use crate::bounds::{LaunchFacts, Proof};
use crate::config::{validate_consts_with, LaunchConfig};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::spec::{KernelInfo, KernelSpec};
use crate::validate::{validate_args, validate_grid};
use fuse_ir::{Kernel, Specialization};

/// The public `proven_*` methods of [`KernelSpec`]: per item of the kernel's list `$items`
/// (its accesses, its masks), the bit of that item in the launch's proof field `$bits`.
macro_rules! proven_per_item {
    ($($(#[$doc:meta])* $name:ident: $items:ident, $bits:ident;)*) => {
        impl KernelSpec {$(
            $(#[$doc])*
            pub fn $name(
                &self,
                device: &Device,
                config: LaunchConfig,
                consts: &[u64],
                args: &[KernelArg<'_>],
            ) -> Result<Vec<bool>> {
                let (proof, k) = self.proof_for(device, config, consts, args)?;
                Ok((0..k.$items().len()).map(|i| i < 64 && proof.$bits & (1 << i) != 0).collect())
            }
        )*}
    };
}

proven_per_item! {
    /// Per access (in [`fuse_ir::Kernel::accesses`] order: every load and store in program
    /// order), whether a launch with these const generics, grid and arguments runs it without its
    /// bounds check: whether the runtime proves, before launching, that every lane it touches lies
    /// inside its buffer (see docs/DESIGN.md, "Launch-time bounds proof"). The arguments are
    /// validated as [`launch`](crate::launch) validates them.
    proven_in_bounds: accesses, in_bounds;
    /// Per mask (in [`fuse_ir::Kernel::masks`] order: bool tiles assigned once, by an integer
    /// comparison or an `&`), whether a launch with these const generics, grid and arguments
    /// treats it as the constant `true`: whether the runtime proves, before launching, that it
    /// holds on every lane of every program (see docs/DESIGN.md, "Masks proven true"). The
    /// arguments are validated as [`launch`](crate::launch) validates them.
    proven_all_true: masks, all_true;
}

impl KernelSpec {
    /// The launch-time proof for a launch, its inputs validated as [`launch`](crate::launch)
    /// validates them.
    fn proof_for(
        &self,
        device: &Device,
        config: LaunchConfig,
        consts: &[u64],
        args: &[KernelArg<'_>],
    ) -> Result<(Proof, &Kernel)> {
        let info = self.info()?;
        let k = &info.kernel;
        validate_consts_with(k, &info.tile_lens, consts)?;
        validate_grid(config.grid, device)?;
        validate_args(k, &info.narrow_index, device, args)?;
        Ok((prove(info, consts, [config.grid.x, config.grid.y, config.grid.z], args), k))
    }
}

/// The value of each specialization for this launch (bit `i` for `specs[i]`, the first 64).
pub(crate) fn specialization_bits(
    specs: &[Specialization],
    info: &KernelInfo,
    consts: &[u64],
    grid: [u32; 3],
    args: &[KernelArg<'_>],
) -> u64 {
    let mut proof: Option<Proof> = None;
    let mut branches: Option<Vec<Option<bool>>> = None;
    let mut bits = 0u64;
    for (i, s) in specs.iter().enumerate().take(64) {
        let on = match *s {
            Specialization::Align16(p) => {
                args.get(p as usize).and_then(device_address).is_some_and(|a| a % 16 == 0)
            }
            Specialization::Div16(p) => scalar_value(args.get(p as usize)).is_some_and(|v| v % 16 == 0),
            Specialization::InBounds(a) => {
                let proof = *proof.get_or_insert_with(|| memo_proof(info, consts, grid, args));
                a < 64 && proof.in_bounds & (1 << a) != 0
            }
            Specialization::AllTrue(m) => {
                let proof = *proof.get_or_insert_with(|| memo_proof(info, consts, grid, args));
                m < 64 && proof.all_true & (1 << m) != 0
            }
            Specialization::BranchTaken(b) | Specialization::BranchSkipped(b) => {
                let values = branches.get_or_insert_with(|| branch_values(info, consts, args));
                values.get(b as usize).copied().flatten()
                    == Some(matches!(*s, Specialization::BranchTaken(_)))
            }
            // Set by `tensor_maps::tma_bits`, where this launch has the tensor map.
            Specialization::TensorBox(_) => false,
        };
        bits |= u64::from(on) << i;
    }
    bits
}

/// Each of [`fuse_ir::Kernel::uniform_branches`]' conditions for these arguments, where the host
/// can compute it.
fn branch_values(info: &KernelInfo, consts: &[u64], args: &[KernelArg<'_>]) -> Vec<Option<bool>> {
    let as_bool = |v| match v {
        fuse_ir::HostScalar::Bool(v) => Some(v),
        _ => None,
    };
    info.branches.iter().map(|p| p.eval(&|p| host_arg(args, p), consts).and_then(as_bool)).collect()
}

/// The launch word of one of [`fuse_ir::Kernel::host_scalars`] (its `fuse_host<i>` parameter):
/// the value for these arguments.
pub(crate) fn host_scalar_word(
    k: &Kernel,
    program: &fuse_ir::HostProgram,
    consts: &[u64],
    args: &[KernelArg<'_>],
) -> Result<u64> {
    // `host_scalars` keeps only programs the evaluator runs for any argument values (it refuses
    // by operation, not by value), so `None` means arguments that do not fit the parameters,
    // which `validate_args` rejected before.
    match program.eval(&|p| host_arg(args, p), consts) {
        Some(v) => Ok(v.launch_word()),
        None => Err(Error::InvalidLaunch(format!(
            "kernel `{}`: the host could not compute the scalar `{}` from this launch's arguments",
            k.name,
            k.var(program.var()).name
        ))),
    }
}

/// [`crate::bounds::BoundsPlan::prove`] over this launch's values.
fn prove(info: &KernelInfo, consts: &[u64], grid: [u32; 3], args: &[KernelArg<'_>]) -> Proof {
    let scalars: Vec<Option<i128>> = args.iter().map(|a| scalar_value(Some(a))).collect();
    let lens: Vec<Option<u64>> = args.iter().map(buffer_len).collect();
    info.bounds.prove(&LaunchFacts { consts, grid, scalars: &scalars, lens: &lens })
}

/// [`prove`] for this launch, reusing the last launch's answer when its inputs (const
/// generics, grid, integer scalars, buffer lengths) are the same.
fn memo_proof(info: &KernelInfo, consts: &[u64], grid: [u32; 3], args: &[KernelArg<'_>]) -> Proof {
    let key = launch_key(consts, grid, args, false);
    info.last_proof.get_or_compute(key, || prove(info, consts, grid, args))
}
