//! Element types a [`Buffer`](crate::Buffer) can hold.
//!
//! Bottom layer: imports nothing of the crate.

use fuse_ir::DType;

mod sealed {
    pub trait Sealed {}
}

/// A buffer element: `f32`, `half::f16`, `half::bf16`, `i32`, `i64`, `u32`, `u64`, `u8`, `i8`.
///
/// Sealed: the runtime relies on every element being plain old data whose every bit pattern is a
/// valid value (so device memory and the CPU interpreter's byte views may hold anything).
pub trait Element:
    sealed::Sealed
    + Copy
    + Send
    + Sync
    + Default
    + std::fmt::Debug
    + PartialEq
    + 'static
    + cudarc::driver::DeviceRepr
    + cudarc::driver::ValidAsZeroBits
{
    /// The IR dtype of this element.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
        }
    )*};
}

element! {
    f32 => F32,
    half::f16 => F16,
    half::bf16 => BF16,
    i32 => I32,
    i64 => I64,
    u32 => U32,
    u64 => U64,
    u8 => U8,
    i8 => I8,
}

/// The float element types, `f32`, `half::f16` and `half::bf16`: the bound `T: Float` of a
/// generic `#[fused_kernel]`, whose launcher picks the instantiation for `T` with [`Float::select`].
///
/// Sealed (every `Float` is an [`Element`]).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a float element type: a kernel's `T: Float` type parameter is f32, f16 or bf16",
    label = "the kernel is instantiated only for f32, f16 and bf16",
    note = "the type parameter is `{Self}` here, given at the launch (`k::launch::<{Self}, ..>`) or taken from the buffers' element type"
)]
pub trait Float: Element {
    /// The argument for `Self`: `f32` for `f32`, `f16` for `half::f16`, `bf16` for `half::bf16`
    /// (how a generic kernel's launcher picks its instantiation's `KernelSpec`; resolved at
    /// compile time).
    fn select<X>(f32: X, f16: X, bf16: X) -> X;
}

/// The half-precision element types, `half::f16` and `half::bf16`: the bound `T: Half` of a
/// generic `#[fused_kernel]` (every `Half` is a [`Float`]).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a half-precision element type: a kernel's `T: Half` type parameter is f16 or bf16",
    label = "the kernel is instantiated only for f16 and bf16",
    note = "the type parameter is `{Self}` here, given at the launch (`k::launch::<{Self}, ..>`) or taken from the buffers' element type"
)]
pub trait Half: Float {
    /// The argument for `Self`: `f16` for `half::f16`, `bf16` for `half::bf16`.
    fn select_half<X>(f16: X, bf16: X) -> X;
}

impl Float for f32 {
    #[inline(always)]
    fn select<X>(f32: X, _f16: X, _bf16: X) -> X {
        f32
    }
}

impl Float for half::f16 {
    #[inline(always)]
    fn select<X>(_f32: X, f16: X, _bf16: X) -> X {
        f16
    }
}

impl Float for half::bf16 {
    #[inline(always)]
    fn select<X>(_f32: X, _f16: X, bf16: X) -> X {
        bf16
    }
}

impl Half for half::f16 {
    #[inline(always)]
    fn select_half<X>(f16: X, _bf16: X) -> X {
        f16
    }
}

impl Half for half::bf16 {
    #[inline(always)]
    fn select_half<X>(_f16: X, bf16: X) -> X {
        bf16
    }
}

/// Views elements as their native bytes.
pub(crate) fn as_bytes<T: Element>(v: &[T]) -> &[u8] {
    // SAFETY: every `Element` is plain old data without padding; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// Views elements as their native bytes, mutably.
pub(crate) fn as_bytes_mut<T: Element>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as above, and every bit pattern is a valid `Element` (sealed set of ints and floats).
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_the_ir() {
        fn check<T: Element>() {
            assert_eq!(std::mem::size_of::<T>(), T::DTYPE.size_bytes(), "{}", T::DTYPE);
        }
        check::<f32>();
        check::<half::f16>();
        check::<half::bf16>();
        check::<i32>();
        check::<i64>();
        check::<u32>();
        check::<u64>();
        check::<u8>();
        check::<i8>();
    }

    #[test]
    fn float_and_half_select_their_own_argument() {
        fn pick_float<T: Float>() -> DType {
            T::select(DType::F32, DType::F16, DType::BF16)
        }
        fn pick_half<T: Half>() -> DType {
            T::select_half(DType::F16, DType::BF16)
        }
        for (got, want) in [
            (pick_float::<f32>(), f32::DTYPE),
            (pick_float::<half::f16>(), half::f16::DTYPE),
            (pick_float::<half::bf16>(), half::bf16::DTYPE),
            (pick_half::<half::f16>(), half::f16::DTYPE),
            (pick_half::<half::bf16>(), half::bf16::DTYPE),
        ] {
            assert_eq!(got, want);
        }
    }
}
