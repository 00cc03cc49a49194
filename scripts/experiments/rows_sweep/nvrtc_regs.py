#!/usr/bin/env python3
"""Compiles fuse sources (.cu, as `spec.full_source` writes them) with NVRTC through ctypes, as the
runtime does (-default-device --std=c++17 --fmad=true, sm_90), and prints ptxas's registers and
spills: a local look at variants before a device call. Usage: nvrtc_regs.py LIBNVRTC FILE.cu...
(`MINB=N` adds a minimum of N blocks a multiprocessor to the one-argument __launch_bounds__: on
sources from before session 22's FUSE_LAUNCH_BOUNDS, and on today's only where the one-warp cap is
off. Unlike the runtime, this compiles one-warp variants with the cap even where it spills.)"""
import ctypes, os, re, sys

lib = ctypes.CDLL(sys.argv[1])
for path in sys.argv[2:]:
    src = open(path).read()
    minb = os.environ.get("MINB")
    if minb:
        src = src.replace("__launch_bounds__(FUSE_THREADS)", f"__launch_bounds__(FUSE_THREADS, {minb})")
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"k.cu", 0, None, None) == 0
    opts = [b"-default-device", b"--std=c++17", b"--fmad=true", b"--gpu-architecture=sm_90", b"--ptxas-options=-v"]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    text = log.value.decode()
    regs = re.findall(r"Used (\d+) registers", text)
    spill = re.findall(r"(\d+) bytes spill stores", text)
    print(f"{os.path.basename(path)}: rc {rc} regs {regs} spill {spill}")
    if os.environ.get("CUBIN"):
        lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetCUBIN(prog, buf)
        open(path[:-3] + (f"_minb{minb}" if minb else "") + ".cubin", "wb").write(buf.raw)
