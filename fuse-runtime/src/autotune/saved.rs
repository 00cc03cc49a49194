//! Triton's `restore_value`: copies of the buffers an autotuned kernel writes in place, taken
//! before tuning and put back before every timed launch and before the real one, so that timing
//! a candidate never changes what the real launch computes.
//!
//! Imports `args`, `validate` (whose memory the buffers are), `device` and `error`; nothing else
//! of `autotune/`.

use crate::args::{ArgMemoryMut, BufferArgMut, KernelArg};
use crate::device::Device;
use crate::error::{drv, Error, Result};
use crate::validate::check_home;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

/// The saved contents of a launch's `restore` buffers (see the module docs of
/// [`crate::autotune`]). Made by [`crate::autotune::run`]; filled and read by the generated
/// launcher through [`Saved::save`] and [`Saved::restore`].
pub struct Saved {
    kernel: &'static str,
    copies: Vec<Copy>,
}

enum Copy {
    /// A device copy of `len` bytes (at least one byte is allocated).
    Device {
        bytes: CudaSlice<u8>,
        len: usize,
    },
    Host(Vec<u8>),
}

/// The writable buffer in `arg`, its byte length, or why it is not one.
fn buffer<'a, 'b>(kernel: &str, name: &str, arg: &'a mut KernelArg<'b>) -> Result<&'a mut BufferArgMut<'b>> {
    match arg {
        KernelArg::BufferMut(b) => Ok(b),
        other => Err(Error::InvalidArgument(format!(
            "kernel `{kernel}`: `restore` lists `{name}`, which must be a writable buffer, got {}",
            other.describe()
        ))),
    }
}

impl Saved {
    pub(crate) fn new(kernel: &'static str) -> Saved {
        Saved { kernel, copies: Vec::new() }
    }

    /// Copies each of `args` (named `names`, for errors; the kernel's `restore` buffers in order)
    /// aside: on the device's stream for GPU memory (ordered after every queued use of it).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an argument that is not a writable buffer,
    /// [`Error::WrongDevice`] for memory `device` cannot use, [`Error::Cuda`] when an allocation or
    /// copy fails.
    pub fn save(&mut self, device: &Device, names: &[&str], args: &mut [KernelArg<'_>]) -> Result<()> {
        self.copies.clear();
        for (i, arg) in args.iter_mut().enumerate() {
            let name = names.get(i).copied().unwrap_or("?");
            let b = buffer(self.kernel, name, arg)?;
            check_home(self.kernel, name, b.home, device)?;
            let len = b.len * b.dtype.size_bytes();
            let copy = match (&mut b.data, device.cuda_inner()) {
                (ArgMemoryMut::Host(h), _) => Copy::Host(h.to_vec()),
                (data, Some(cuda)) => {
                    cuda.capture.refuse_on_this_thread("save buffers for autotuning")?;
                    let mut bytes = cuda.stream.alloc_zeros::<u8>(len.max(1)).map_err(|e| {
                        Error::Cuda(format!(
                            "allocating {len} bytes to save `{name}` for autotuning: {}",
                            drv(e)
                        ))
                    })?;
                    {
                        let (dst, _dst_guard) = bytes.device_ptr_mut(&cuda.stream);
                        copy_on_stream(device, name, len, dst, data, Direction::FromBuffer)?;
                    }
                    Copy::Device { bytes, len }
                }
                (_, None) => {
                    return Err(Error::WrongDevice(format!(
                        "kernel `{}`: `{name}` is GPU memory but the launch is on the CPU",
                        self.kernel
                    )))
                }
            };
            self.copies.push(copy);
        }
        Ok(())
    }

    /// Puts the saved contents back into `args` (the same buffers, in the same order).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `args` are not the saved buffers' kinds and lengths, and as
    /// [`Saved::save`].
    pub fn restore(&self, device: &Device, names: &[&str], args: &mut [KernelArg<'_>]) -> Result<()> {
        if args.len() != self.copies.len() {
            return Err(Error::InvalidArgument(format!(
                "kernel `{}`: {} buffers were saved for autotuning but {} are restored",
                self.kernel,
                self.copies.len(),
                args.len()
            )));
        }
        for (i, (arg, copy)) in args.iter_mut().zip(&self.copies).enumerate() {
            let name = names.get(i).copied().unwrap_or("?");
            let b = buffer(self.kernel, name, arg)?;
            check_home(self.kernel, name, b.home, device)?;
            let len = b.len * b.dtype.size_bytes();
            let saved_len = match copy {
                Copy::Device { len, .. } => *len,
                Copy::Host(h) => h.len(),
            };
            if len != saved_len {
                return Err(Error::InvalidArgument(format!(
                    "kernel `{}`: `{name}` has {len} bytes but {saved_len} were saved",
                    self.kernel
                )));
            }
            match (copy, &mut b.data) {
                (Copy::Host(h), ArgMemoryMut::Host(dst)) => dst.copy_from_slice(h),
                (Copy::Device { bytes, .. }, data) if !matches!(data, ArgMemoryMut::Host(_)) => {
                    let cuda =
                        device.cuda_inner().ok_or_else(|| Error::WrongDevice("restore on the CPU".into()))?;
                    let (src, _src_guard) = bytes.device_ptr(&cuda.stream);
                    copy_on_stream(device, name, len, src, data, Direction::IntoBuffer)?;
                }
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "kernel `{}`: `{name}` moved between the host and a GPU since it was saved",
                        self.kernel
                    )))
                }
            }
        }
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    FromBuffer,
    IntoBuffer,
}

/// Copies `len` bytes between the saved copy at `copy` and the GPU buffer `data` on the device's
/// stream (taking cudarc memory's pointer there, so cudarc orders the copy with its other users).
fn copy_on_stream(
    device: &Device,
    name: &str,
    len: usize,
    copy: u64,
    data: &mut ArgMemoryMut<'_>,
    dir: Direction,
) -> Result<()> {
    let cuda = device.cuda_inner().ok_or_else(|| Error::WrongDevice("a GPU copy on the CPU".into()))?;
    if len == 0 {
        return Ok(());
    }
    let (ptr, _guard) = match data {
        ArgMemoryMut::Cuda { ptr, .. } => (*ptr, None),
        ArgMemoryMut::Cudarc(m) if dir == Direction::IntoBuffer => {
            let (p, g) = m.write_ptr(&cuda.stream);
            (p, Some(g))
        }
        ArgMemoryMut::Cudarc(m) => {
            let (p, g) = m.read_ptr(&cuda.stream);
            (p, Some(g))
        }
        ArgMemoryMut::Host(_) => return Err(Error::WrongDevice(format!("`{name}` is host memory"))),
    };
    let (dst, src) = if dir == Direction::IntoBuffer { (ptr, copy) } else { (copy, ptr) };
    cuda.ctx.bind_to_thread().map_err(|e| Error::Cuda(drv(e)))?;
    // SAFETY: both addresses hold at least `len` bytes: the buffer's view (its elements times
    // their size, checked against the saved length) and the copy allocated for it; they are
    // distinct allocations, and the copy is ordered on the device's stream.
    unsafe { cudarc::driver::result::memcpy_dtod_async(dst, src, len, cuda.stream.cu_stream()) }
        .map_err(|e| Error::Cuda(format!("copying `{name}` ({len} bytes) for autotuning: {}", drv(e))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::DeviceWrite;

    #[test]
    fn host_buffers_are_put_back() {
        let d = Device::cpu();
        let (mut a, mut b) = (vec![1.0f32, 2.0, 3.0], vec![7i32; 5]);
        let mut saved = Saved::new("k");
        saved.save(&d, &["a", "b"], &mut [a.kernel_arg_mut(), b.kernel_arg_mut()]).unwrap();
        a.iter_mut().for_each(|v| *v = -1.0);
        b[4] = 0;
        saved.restore(&d, &["a", "b"], &mut [a.kernel_arg_mut(), b.kernel_arg_mut()]).unwrap();
        assert_eq!((a, b), (vec![1.0, 2.0, 3.0], vec![7; 5]));
    }

    #[test]
    fn mismatches_are_errors() {
        let d = Device::cpu();
        let mut a = vec![1.0f32; 4];
        let mut saved = Saved::new("k");
        let e = saved.save(&d, &["n"], &mut [KernelArg::I32(3)]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("`n`"), "{e}");
        saved.save(&d, &["a"], &mut [a.kernel_arg_mut()]).unwrap();
        let mut shorter = vec![1.0f32; 3];
        let e = saved.restore(&d, &["a"], &mut [shorter.kernel_arg_mut()]).unwrap_err();
        assert!(e.to_string().contains("12 bytes but 16 were saved"), "{e}");
        let e = saved.restore(&d, &[], &mut []).unwrap_err();
        assert!(e.to_string().contains("1 buffers were saved"), "{e}");
    }
}
