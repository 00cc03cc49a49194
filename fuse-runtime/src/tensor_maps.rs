//! The tensor maps of a launch on Hopper, one per [`Specialization::TensorBox`] of the spec: the
//! host evaluates each box load's scalars (stride, mask bounds, base pitch), the bounds analysis
//! its ranges, and `cuda/tma.rs` encodes the map or declines (then that load copies with
//! `cp.async`). The last launch's maps are reused while its inputs, the buffers' addresses among
//! them, repeat.
//!
//! Layer: above `args`, `spec` and the CUDA back end; imports `args`, `bounds`, `spec` and
//! `cuda::tma`.

use crate::args::{
    buffer_len, launch_key, scalar_value, ArgMemory, ArgMemoryMut, BufferArg, BufferArgMut, KernelArg,
};
use crate::bounds::LaunchFacts;
use crate::cuda::tma::{self, Base, BoxValues};
use crate::spec::{BoxPrograms, KernelInfo, TensorMaps};
use fuse_ir::{DType, Specialization};

/// One tensor map per [`Specialization::TensorBox`] of the kernel (zeros where unused), and the
/// accesses whose map this launch encoded (`enabled`: the device compiles for `sm_90a` and
/// `FUSE_TMA` is not 0); see `cuda/tma.rs`. The last launch's maps are reused while
/// its inputs, the buffers' addresses among them, repeat.
pub(crate) fn tensor_maps(
    info: &KernelInfo,
    enabled: bool,
    consts: &[u64],
    grid: [u32; 3],
    args: &[KernelArg<'_>],
) -> TensorMaps {
    if !enabled || info.tensor_boxes.is_empty() {
        return (
            vec![cudarc::driver::sys::CUtensorMap { opaque: [0; 16] }; info.tensor_boxes.len()],
            Vec::new(),
        );
    }
    let key = launch_key(consts, grid, args, true);
    info.last_tensor_maps.get_or_compute(key, || encode_tensor_maps(info, consts, grid, args))
}

/// [`tensor_maps`] for this launch, computed.
fn encode_tensor_maps(
    info: &KernelInfo,
    consts: &[u64],
    grid: [u32; 3],
    args: &[KernelArg<'_>],
) -> TensorMaps {
    let mut maps = vec![cudarc::driver::sys::CUtensorMap { opaque: [0; 16] }; info.tensor_boxes.len()];
    let mut on = Vec::new();
    let scalars: Vec<Option<i128>> = args.iter().map(|a| scalar_value(Some(a))).collect();
    let lens: Vec<Option<u64>> = args.iter().map(buffer_len).collect();
    let facts = LaunchFacts { consts, grid, scalars: &scalars, lens: &lens };
    let param = |p: u32| scalar_value(args.get(p as usize)).map(fuse_ir::HostScalar::Int);
    for (slot, (access, b, programs)) in maps.iter_mut().zip(&info.tensor_boxes) {
        let (ptr, len, elem) = match args.get(b.param as usize) {
            Some(KernelArg::Buffer(BufferArg { data: ArgMemory::Cuda { ptr, .. }, len, dtype, .. }))
            | Some(KernelArg::BufferMut(BufferArgMut {
                data: ArgMemoryMut::Cuda { ptr, .. },
                len,
                dtype,
                ..
            })) => (*ptr, *len as u64, *dtype),
            _ => continue,
        };
        let Some(programs) = programs else { continue };
        let Some(values) = box_values(info, (*access, b, programs), (ptr, len, elem), &param, &facts) else {
            continue;
        };
        if let Some(map) = tma::encode(&values) {
            *slot = map;
            on.push(*access);
        }
    }
    (maps, on)
}

/// A box load's values for this launch ([`BoxValues`]): its scalars from
/// the host programs, its tiles' (and the base index's) ranges from the bounds analysis.
fn box_values(
    info: &KernelInfo,
    (access, b, programs): (u32, &fuse_ir::TensorBox, &BoxPrograms),
    (ptr, len, elem): (u64, u64, DType),
    param: &dyn Fn(u32) -> Option<fuse_ir::HostScalar>,
    facts: &LaunchFacts<'_>,
) -> Option<BoxValues> {
    let value = |p: &fuse_ir::HostProgram| match p.eval(param, facts.consts)? {
        fuse_ir::HostScalar::Int(v) => Some(v),
        _ => None,
    };
    // The offset itself among the ranges: an offset that may wrap around has none.
    let mut vars = vec![b.rows, b.cols, programs.offset];
    vars.extend(b.base_index);
    let ranges = info.bounds.launch_ranges(access as usize, &vars, facts)?;
    let (rows, cols) = (ranges[0], ranges[1]);
    let end = |p: &Option<fuse_ir::HostProgram>, (_, most): (i128, i128)| match p {
        Some(p) => value(p),
        None => Some(most + 1),
    };
    // The product of the base's host factors: the base itself, or the pitch of its index.
    let product = programs.base_pitch.iter().try_fold(1i128, |acc, p| acc.checked_mul(value(p)?))?;
    let base = match (b.base_index, programs.base_pitch.is_empty()) {
        (None, true) => Base::Zero,
        (None, false) => Base::Fixed(product),
        (Some(_), _) => Base::Index { pitch: product, least: ranges[3].0, most: ranges[3].1 },
    };
    Some(BoxValues {
        ptr,
        len,
        elem,
        stride: value(&programs.stride)?,
        row_end: end(&programs.row_end, rows)?,
        col_end: end(&programs.col_end, cols)?,
        height: b.height.eval(facts.consts)?,
        width: b.width.eval(facts.consts)?,
        least_row: rows.0,
        least_col: cols.0,
        base,
    })
}

/// The bits of the [`Specialization::TensorBox`] entries whose map [`tensor_maps`] encoded.
pub(crate) fn tma_bits(specs: &[Specialization], on: &[u32]) -> u64 {
    specs.iter().enumerate().take(64).fold(0, |bits, (i, s)| match s {
        Specialization::TensorBox(a) if on.contains(a) => bits | 1 << i,
        _ => bits,
    })
}
