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
use cudarc::driver::sys;
use fuse_ir::DType;

/// The bytes of a panel's row in the emitted copy (`PANEL_BYTES` of the emitter's `tma.rs`).
const PANEL_BYTES: u64 = 128;

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
}

/// The map's parameters: `(dims, row pitch in bytes, box, swizzle)`, or `None` where the launch
/// does not allow one (see the module docs).
fn geometry(v: &BoxValues) -> Option<([u64; 2], u64, [u32; 2], sys::CUtensorMapSwizzle)> {
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
    let pitch = u64::try_from(v.stride).ok()?.checked_mul(esz)?;
    let (rows, cols) = (u64::try_from(v.row_end).ok()?, u64::try_from(v.col_end).ok()?);
    let fits = v.ptr % 16 == 0
        && pitch % 16 == 0
        && pitch < (1 << 40)
        && (1..=1 << 32).contains(&rows)
        && (1..=1 << 32).contains(&cols)
        && (1..=256).contains(&v.height)
        && row_bytes % panel == 0;
    // The farthest element the map reaches: (rows - 1, cols - 1).
    let last = (rows - 1).checked_mul(u64::try_from(v.stride).ok()?)?.checked_add(cols - 1)?;
    (fits && last < v.len).then_some(([cols, rows], pitch, [(panel / esz) as u32, v.height as u32], swizzle))
}

/// The tensor map for `v`, or `None` where the launch does not allow one or the driver refuses it.
pub(crate) fn encode(v: &BoxValues) -> Option<sys::CUtensorMap> {
    let (dims, pitch, boxes, swizzle) = geometry(v)?;
    let data_type = match v.elem {
        DType::F16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        DType::BF16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        _ => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
    };
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    let strides = [pitch];
    let element_strides = [1u32, 1];
    // SAFETY: every pointer is to a live local of the size the call reads (rank 2: two dims, one
    // stride, two box sizes, two element strides); the driver only writes `map`.
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            data_type,
            2,
            v.ptr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    (r == sys::CUresult::CUDA_SUCCESS).then_some(map)
}

#[cfg(test)]
mod tests {
    use super::{geometry, BoxValues};
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
        }
    }

    #[test]
    fn a_matmul_operand_gets_128_byte_panels() {
        let g = geometry(&matmul_a(1000, 4096)).expect("a map");
        assert_eq!(g.0, [4096, 1000]);
        assert_eq!(g.1, 8192);
        assert_eq!(g.2, [64, 128]);
        assert_eq!(g.3, Swizzle::CU_TENSOR_MAP_SWIZZLE_128B);
        // A [64, 32] f16 box: 64-byte rows.
        let narrow = BoxValues { width: 32, ..matmul_a(1000, 4096) };
        assert_eq!(geometry(&narrow).unwrap().3, Swizzle::CU_TENSOR_MAP_SWIZZLE_64B);
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
        // Empty bounds.
        assert!(geometry(&BoxValues { row_end: 0, ..matmul_a(64, 4096) }).is_none());
    }
}
