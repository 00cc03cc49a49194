//! Element types a [`Buffer`](crate::Buffer) can hold.

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
}
