// A host emulation of the CUDA the emitter writes, for tests/emulated_cuda.rs: each thread of a
// block is a fiber (ucontext) on one OS thread, switched only where CUDA synchronises
// (`__syncthreads`, `__shfl_xor_sync`). Between two such points the fibers run one after another
// in an order that changes every round (seeded), so a missing barrier between a shared-memory
// write and another thread's read shows up as a wrong value in some order. It also checks what the
// hardware would leave undefined or hang on: every live thread of the block at the same
// `__syncthreads` (source line), all 32 lanes of a warp at the same shuffle with the full mask and
// the same lane offset, and no deadlock. Inline PTX (`asm`) is not emulated: kernels using the
// helpers that need it (half conversions, float-to-int casts, rand, erf) do not compile here,
// except where a test replaces the helpers (fuse_emu_mma.h: ldmatrix, mma.sync, cp.async) with
// emulations built on `fuse_emu_warp` below.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct fuse_emu_dim3 {
  unsigned int x, y, z;
};
static fuse_emu_dim3 threadIdx, blockIdx, gridDim, blockDim;

struct uint2 {
  unsigned int x, y;
};
struct uint4 {
  unsigned int x, y, z, w;
};
static inline uint2 make_uint2(unsigned int a, unsigned int b) { return uint2{a, b}; }
static inline uint4 make_uint4(unsigned int a, unsigned int b, unsigned int c, unsigned int d) {
  return uint4{a, b, c, d};
}
template <class T> static inline T __ldg(const T* p) { return *p; }
static inline float __int_as_float(int i) {
  float f;
  memcpy(&f, &i, 4);
  return f;
}
static inline float __uint_as_float(unsigned int i) {
  float f;
  memcpy(&f, &i, 4);
  return f;
}
static inline unsigned int __float_as_uint(float f) {
  unsigned int i;
  memcpy(&i, &f, 4);
  return i;
}
static inline int __float_as_int(float f) {
  int i;
  memcpy(&i, &f, 4);
  return i;
}
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * b) >> 32);
}
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp, unsigned long long v) {
  unsigned long long old = *p;  // one OS thread: atomic by construction
  if (old == cmp) *p = v;
  return old;
}

[[noreturn]] static void fuse_emu_fail(const char* what, int line) {
  fprintf(stderr, "fuse_emu: %s (source line %d, block %u,%u,%u)\n", what, line, blockIdx.x, blockIdx.y,
          blockIdx.z);
  fflush(stderr);
  _exit(3);
}

enum fuse_emu_state { FUSE_EMU_RUN, FUSE_EMU_SYNC, FUSE_EMU_SHFL, FUSE_EMU_WARP, FUSE_EMU_DONE };

// A warp-collective operation (ldmatrix, mma.sync): run once over the 32 lanes' arguments when
// the whole warp has reached it.
typedef void (*fuse_emu_warp_op)(void* const* lanes);

struct fuse_emu_fiber {
  ucontext_t ctx;
  fuse_emu_state state;
  int line;          // where it waits
  int shfl_offset;   // the lane offset of its shuffle
  unsigned int mask;
  unsigned long long in, out;  // a shuffle's value (bits) and result
  fuse_emu_warp_op op;         // a warp-collective operation's function and this lane's arguments
  void* args;
};

static ucontext_t fuse_emu_main;
static std::vector<fuse_emu_fiber> fuse_emu_fibers;
static int fuse_emu_current;
static std::function<void()>* fuse_emu_body;
static unsigned long long fuse_emu_rng = 1;
static long long fuse_emu_syncs, fuse_emu_shuffles;

static unsigned long long fuse_emu_next() {
  fuse_emu_rng ^= fuse_emu_rng << 13;
  fuse_emu_rng ^= fuse_emu_rng >> 7;
  fuse_emu_rng ^= fuse_emu_rng << 17;
  return fuse_emu_rng;
}

static void fuse_emu_yield(fuse_emu_state s, int line) {
  fuse_emu_fiber& f = fuse_emu_fibers[fuse_emu_current];
  f.state = s;
  f.line = line;
  swapcontext(&f.ctx, &fuse_emu_main);
}

static void fuse_emu_sync(int line) { fuse_emu_yield(FUSE_EMU_SYNC, line); }

template <class T> static T fuse_emu_shfl(unsigned int mask, T v, int offset, int line) {
  static_assert(sizeof(T) <= 8, "shuffled values are at most 8 bytes");
  fuse_emu_fiber& f = fuse_emu_fibers[fuse_emu_current];
  f.in = 0;
  memcpy(&f.in, &v, sizeof(T));
  f.mask = mask;
  f.shfl_offset = offset;
  fuse_emu_yield(FUSE_EMU_SHFL, line);
  T r;
  memcpy(&r, &fuse_emu_fibers[fuse_emu_current].out, sizeof(T));
  return r;
}

// Waits until every lane of the warp is at this operation (the same `op`, source line), which
// then runs once over their `args`.
static void fuse_emu_warp(fuse_emu_warp_op op, void* args, int line) {
  fuse_emu_fiber& f = fuse_emu_fibers[fuse_emu_current];
  f.op = op;
  f.args = args;
  fuse_emu_yield(FUSE_EMU_WARP, line);
}

#define __syncthreads() fuse_emu_sync(__LINE__)
#define __shfl_xor_sync(m, v, s) fuse_emu_shfl((m), (v), (s), __LINE__)

static void fuse_emu_entry() {
  (*fuse_emu_body)();
  fuse_emu_fibers[fuse_emu_current].state = FUSE_EMU_DONE;
  swapcontext(&fuse_emu_fibers[fuse_emu_current].ctx, &fuse_emu_main);
}

// Runs `body` as every thread of every block of the grid, blocks one after another.
static void fuse_emu_launch(unsigned int gx, unsigned int gy, unsigned int gz, int threads,
                            unsigned long long seed, std::function<void()> body) {
  const size_t stack = 1 << 20;
  fuse_emu_rng = seed * 0x9E3779B97F4A7C15ull + 1;
  fuse_emu_body = &body;
  gridDim = {gx, gy, gz};
  blockDim = {(unsigned int)threads, 1, 1};
  fuse_emu_fibers.assign(threads, fuse_emu_fiber{});
  std::vector<char*> stacks(threads);
  for (int t = 0; t < threads; ++t) {
    void* m = mmap(nullptr, stack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) fuse_emu_fail("mmap of a fiber stack failed", 0);
    stacks[t] = (char*)m;
  }
  std::vector<int> order(threads);
  for (unsigned int bz = 0; bz < gz; ++bz)
    for (unsigned int by = 0; by < gy; ++by)
      for (unsigned int bx = 0; bx < gx; ++bx) {
        blockIdx = {bx, by, bz};
        for (int t = 0; t < threads; ++t) {
          fuse_emu_fiber& f = fuse_emu_fibers[t];
          f.state = FUSE_EMU_RUN;
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = stacks[t];
          f.ctx.uc_stack.ss_size = stack;
          f.ctx.uc_link = nullptr;
          makecontext(&f.ctx, fuse_emu_entry, 0);
        }
        for (;;) {
          // One round: every runnable thread runs to its next synchronisation, in a fresh order
          // (forward, backward or shuffled).
          for (int t = 0; t < threads; ++t) order[t] = t;
          const unsigned long long how = fuse_emu_next() % 3;
          if (how == 1) {
            for (int t = 0; t < threads; ++t) order[t] = threads - 1 - t;
          } else if (how == 2) {
            for (int t = threads - 1; t > 0; --t) {
              const int u = (int)(fuse_emu_next() % (unsigned long long)(t + 1));
              const int x = order[t];
              order[t] = order[u];
              order[u] = x;
            }
          }
          for (int t : order) {
            if (fuse_emu_fibers[t].state != FUSE_EMU_RUN) continue;
            fuse_emu_current = t;
            threadIdx = {(unsigned int)t, 0, 0};
            swapcontext(&fuse_emu_main, &fuse_emu_fibers[t].ctx);
          }
          // Everyone waits or is done. Complete warps at one shuffle exchange.
          bool any = false;
          for (int w = 0; w * 32 < threads; ++w) {
            fuse_emu_fiber* lane = &fuse_emu_fibers[w * 32];
            int at = 0;
            for (int l = 0; l < 32; ++l) at += lane[l].state == FUSE_EMU_SHFL;
            if (at == 0) continue;
            for (int l = 0; l < 32; ++l) {
              if (lane[l].state != FUSE_EMU_SHFL) fuse_emu_fail("a shuffle that not every lane of its warp reached", lane[0].line);
              if (lane[l].line != lane[0].line) fuse_emu_fail("lanes of a warp at different shuffles", lane[l].line);
              if (lane[l].mask != 0xffffffffu) fuse_emu_fail("a shuffle without the full member mask", lane[l].line);
              if (lane[l].shfl_offset != lane[0].shfl_offset) fuse_emu_fail("lanes of a warp shuffle by different offsets", lane[l].line);
              if (lane[l].shfl_offset < 0 || lane[l].shfl_offset > 31) fuse_emu_fail("a shuffle offset outside 0..31", lane[l].line);
            }
            for (int l = 0; l < 32; ++l) lane[l].out = lane[l ^ lane[l].shfl_offset].in;
            for (int l = 0; l < 32; ++l) lane[l].state = FUSE_EMU_RUN;
            ++fuse_emu_shuffles;
            any = true;
          }
          // Complete warps at one warp-collective operation.
          for (int w = 0; w * 32 < threads; ++w) {
            fuse_emu_fiber* lane = &fuse_emu_fibers[w * 32];
            int at = 0;
            for (int l = 0; l < 32; ++l) at += lane[l].state == FUSE_EMU_WARP;
            if (at == 0) continue;
            void* args[32];
            for (int l = 0; l < 32; ++l) {
              if (lane[l].state != FUSE_EMU_WARP) fuse_emu_fail("a warp-collective operation that not every lane of its warp reached", lane[0].line);
              if (lane[l].line != lane[0].line || lane[l].op != lane[0].op) fuse_emu_fail("lanes of a warp at different warp-collective operations", lane[l].line);
              args[l] = lane[l].args;
            }
            lane[0].op(args);
            for (int l = 0; l < 32; ++l) lane[l].state = FUSE_EMU_RUN;
            ++fuse_emu_shuffles;
            any = true;
          }
          if (any) continue;
          int done = 0, sync = 0, line = -1;
          for (int t = 0; t < threads; ++t) {
            const fuse_emu_fiber& f = fuse_emu_fibers[t];
            if (f.state == FUSE_EMU_DONE) ++done;
            if (f.state == FUSE_EMU_SYNC) {
              if (line >= 0 && f.line != line) fuse_emu_fail("threads of a block at different __syncthreads", f.line);
              line = f.line;
              ++sync;
            }
          }
          if (done == threads) break;
          if (sync == threads) {
            for (int t = 0; t < threads; ++t) fuse_emu_fibers[t].state = FUSE_EMU_RUN;
            ++fuse_emu_syncs;
            continue;
          }
          if (sync > 0) fuse_emu_fail("__syncthreads not reached by every thread (some exited)", line);
          fuse_emu_fail("deadlock: threads wait at a shuffle their whole warp does not reach", -1);
        }
      }
  for (int t = 0; t < threads; ++t) munmap(stacks[t], stack);
}
