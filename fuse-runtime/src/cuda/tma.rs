//! Tensor maps for the TMA copies of pipelined `dot` operands ([`fuse_ir::TensorBox`],
//! `FUSE_TMA_<k>`): what a launch must satisfy for one, and its encoding through the driver.
//!
//! The emitted copy reads the box in panels of at most 128 bytes per row, each written to shared
//! memory in the swizzle the MMAs read (128-, 64- or 32-byte rows: TMA's matching swizzle), and
//! reads zeros outside `row_end` rows and `col_end` columns, as the load's mask does. A map is
//! made only where that is the load itself: both box starts never negative, the stride, bounds
//! and the box's sizes within TMA's limits, the buffer 16-byte aligned with 16-byte row pitch, and
//! every element the map can reach inside the buffer. Otherwise the launch takes the `cp.async`
//! path, which checks each access.
//!
//! Imports nothing of the crate: the launch (`tensor_maps.rs`) hands it each box's values.
use cudarc::driver::sys;
use fuse_ir::DType;

/// The bytes of a panel's row in the emitted copy (`PANEL_BYTES` of the emitter's `tma.rs`).
const PANEL_BYTES: u64 = 128;

/// The largest extent of a map's dimension here: the kernel passes coordinates as `int`.
const COORD_MAX: u64 = i32::MAX as u64;

/// The scalar term of a box load's offset, for one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Base {
    /// None.
    Zero,
    /// The same number of elements in every program: moved into the map's address.
    Fixed(i128),
    /// `index * pitch` with `index` in `least..=most` over the launch: the map's third dimension.
    Index { pitch: i128, least: i128, most: i128 },
}

/// A box load's values for one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BoxValues {
    /// The buffer's device address and length in elements.
    pub(crate) ptr: u64,
    pub(crate) len: u64,
    pub(crate) elem: DType,
    /// Elements per row, the mask's bounds (rows, columns) and the box's `[H, W]`.
    pub(crate) stride: i128,
    pub(crate) row_end: i128,
    pub(crate) col_end: i128,
    pub(crate) height: u64,
    pub(crate) width: u64,
    /// The least row and column any program's box starts at.
    pub(crate) least_row: i128,
    pub(crate) least_col: i128,
    pub(crate) base: Base,
}

/// A map's parameters: rank 2 or 3 (`dims`, `pitches` in bytes past the first dimension), the
/// global address, the box and the swizzle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Geometry {
    rank: u32,
    dims: [u64; 3],
    pitches: [u64; 2],
    address: u64,
    boxes: [u32; 3],
    swizzle: sys::CUtensorMapSwizzle,
}

/// The map for `v`, or `None` where the launch does not allow one (see the module docs).
fn geometry(v: &BoxValues) -> Option<Geometry> {
    let esz = v.elem.size_bytes() as u64;
    if !matches!(v.elem, DType::F16 | DType::BF16 | DType::I8) || v.least_row < 0 || v.least_col < 0 {
        return None;
    }
    let row_bytes = v.width * esz;
    let panel = row_bytes.min(PANEL_BYTES);
    let swizzle = match panel {
        128 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        64 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
        32 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
        16 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
        _ => return None,
    };
    let stride = u64::try_from(v.stride).ok()?;
    let pitch = stride.checked_mul(esz)?;
    let (rows, cols) = (u64::try_from(v.row_end).ok()?, u64::try_from(v.col_end).ok()?);
    let fits = pitch % 16 == 0
        && pitch < (1 << 40)
        && (1..=COORD_MAX).contains(&rows)
        && (1..=COORD_MAX).contains(&cols)
        && (1..=256).contains(&v.height)
        && row_bytes % panel == 0;
    if !fits {
        return None;
    }
    // The farthest element of one (row, column) plane: (rows - 1, cols - 1).
    let plane = (rows - 1).checked_mul(stride)?.checked_add(cols - 1)?;
    let boxes = [(panel / esz) as u32, v.height as u32, 1];
    let (rank, dims, pitches, address, last) = match v.base {
        Base::Zero => (2, [cols, rows, 1], [pitch, 0], v.ptr, plane),
        Base::Fixed(b) => {
            let b = u64::try_from(b).ok()?;
            (2, [cols, rows, 1], [pitch, 0], v.ptr.checked_add(b.checked_mul(esz)?)?, b.checked_add(plane)?)
        }
        Base::Index { pitch: p, least, most } => {
            let (p, most) = (u64::try_from(p).ok()?, u64::try_from(most).ok()?);
            let planes = most.checked_add(1)?;
            let ok = least >= 0
                && p.checked_mul(esz)? % 16 == 0
                && p.checked_mul(esz)? < (1 << 40)
                && planes <= COORD_MAX;
            if !ok {
                return None;
            }
            (3, [cols, rows, planes], [pitch, p * esz], v.ptr, most.checked_mul(p)?.checked_add(plane)?)
        }
    };
    (address % 16 == 0 && last < v.len).then_some(Geometry { rank, dims, pitches, address, boxes, swizzle })
}

/// The tensor map for `v`, or `None` where the launch does not allow one or the driver refuses it.
pub(crate) fn encode(v: &BoxValues) -> Option<sys::CUtensorMap> {
    let g = geometry(v)?;
    let data_type = match v.elem {
        DType::F16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        DType::BF16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        _ => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
    };
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    let element_strides = [1u32; 3];
    // SAFETY: every pointer is to a live local at least as long as the call reads for `rank`
    // (rank dims, rank - 1 pitches, rank box sizes and element strides); the driver only writes
    // `map`.
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            data_type,
            g.rank,
            g.address as *mut std::ffi::c_void,
            g.dims.as_ptr(),
            g.pitches.as_ptr(),
            g.boxes.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            g.swizzle,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    (r == sys::CUresult::CUDA_SUCCESS).then_some(map)
}

#[cfg(test)]
mod tests {
    use super::{geometry, Base, BoxValues};
    use cudarc::driver::sys::CUtensorMapSwizzle as Swizzle;
    use fuse_ir::DType;

    fn matmul_a(m: i128, k: i128) -> BoxValues {
        BoxValues {
            ptr: 1 << 20,
            len: (m * k) as u64,
            elem: DType::F16,
            stride: k,
            row_end: m,
            col_end: k,
            height: 128,
            width: 64,
            least_row: 0,
            least_col: 0,
            base: Base::Zero,
        }
    }

    #[test]
    fn a_matmul_operand_gets_128_byte_panels() {
        let g = geometry(&matmul_a(1000, 4096)).expect("a map");
        assert_eq!((g.rank, g.dims, g.pitches[0]), (2, [4096, 1000, 1], 8192));
        assert_eq!(g.boxes, [64, 128, 1]);
        assert_eq!(g.swizzle, Swizzle::CU_TENSOR_MAP_SWIZZLE_128B);
        // A [64, 32] f16 box: 64-byte rows.
        let narrow = BoxValues { width: 32, ..matmul_a(1000, 4096) };
        assert_eq!(geometry(&narrow).unwrap().swizzle, Swizzle::CU_TENSOR_MAP_SWIZZLE_64B);
        // A fixed base moves the address; an index by program is the third dimension (attention's
        // kv head: 8 heads of 1000 x 128).
        let fixed = BoxValues { base: Base::Fixed(4096 * 8), len: 1008 * 4096, ..matmul_a(1000, 4096) };
        assert!(
            geometry(&BoxValues { len: 1008 * 4096 - 1, ..fixed }).is_none(),
            "the last row past the buffer"
        );
        assert_eq!(geometry(&fixed).unwrap().address, (1 << 20) + 2 * 4096 * 8);
        let heads = BoxValues {
            len: 8 * 1000 * 128,
            stride: 128,
            row_end: 1000,
            col_end: 128,
            width: 128,
            base: Base::Index { pitch: 1000 * 128, least: 0, most: 7 },
            ..matmul_a(1000, 4096)
        };
        let g = geometry(&heads).expect("a map");
        assert_eq!((g.rank, g.dims, g.pitches), (3, [128, 1000, 8], [256, 256_000]));
        assert!(geometry(&BoxValues { base: Base::Index { pitch: 1000 * 128, least: 0, most: 8 }, ..heads })
            .is_none());
        assert!(geometry(&BoxValues {
            base: Base::Index { pitch: 1000 * 128, least: -1, most: 7 },
            ..heads
        })
        .is_none());
    }

    #[test]
    fn no_map_where_the_launch_does_not_allow_one() {
        // A row pitch that is not a multiple of 16 bytes (k = 1001 halves).
        assert!(geometry(&matmul_a(64, 1001)).is_none());
        // A buffer shorter than the rows and columns the mask lets through.
        assert!(geometry(&BoxValues { len: 64 * 4096 - 1, ..matmul_a(64, 4096) }).is_none());
        // A box that may start at a negative row or column (TMA would read zeros there).
        assert!(geometry(&BoxValues { least_row: -1, ..matmul_a(64, 4096) }).is_none());
        assert!(geometry(&BoxValues { least_col: -128, ..matmul_a(64, 4096) }).is_none());
        // A misaligned buffer, a box taller than TMA's 256 rows, a float type it does not lay out.
        assert!(geometry(&BoxValues { ptr: (1 << 20) + 8, ..matmul_a(64, 4096) }).is_none());
        assert!(geometry(&BoxValues { height: 512, ..matmul_a(1024, 4096) }).is_none());
        assert!(geometry(&BoxValues { elem: DType::F32, ..matmul_a(64, 4096) }).is_none());
        // Empty bounds, and rows past what an `int` coordinate reaches.
        assert!(geometry(&BoxValues { row_end: 0, ..matmul_a(64, 4096) }).is_none());
        let tall = BoxValues { stride: 8, col_end: 8, width: 8, len: 1 << 40, ..matmul_a(1 << 31, 8) };
        assert!(geometry(&tall).is_none());
        assert!(geometry(&BoxValues { row_end: (1 << 31) - 1, ..tall }).is_some());
    }
}
