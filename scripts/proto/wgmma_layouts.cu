// Prototype (issue 18): checks wgmma descriptors over fuse's swizzled shared layouts
// (rows of more than 64 halves split into [h, 64] panels) against a host reference.
// nvcc -gencode=arch=compute_90a,code=sm_90a wgmma_layouts.cu -o wg && ./wg
#include <cstdio>
#include <cstdlib>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <vector>
#include <cmath>

__device__ __forceinline__ int swz(int r, int c, int w) {
  const int cpr = w / 8;
  const int per = cpr >= 8 ? 1 : 8 / cpr;
  const int span = cpr >= 8 ? 8 : cpr;
  return r * w + (((c / 8) ^ ((r / per) % span)) * 8) + (c % 8);
}
// [h, w] row-major 16-bit matrix; rows wider than 64 in panels of [h, 64].
__device__ __forceinline__ int pswz(int r, int c, int w, int h) {
  return w > 64 ? (c / 64) * (h * 64) + swz(r, c % 64, 64) : swz(r, c, w);
}
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
__device__ __forceinline__ unsigned long long desc(unsigned addr, unsigned lbo, unsigned sbo, unsigned mode) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3FFF) << 32) | ((unsigned long long)mode << 62);
}
__device__ __forceinline__ int mode_of(int sw) { return sw == 128 ? 1 : sw == 64 ? 2 : 3; }

#define WG_FENCE() asm volatile("wgmma.fence.sync.aligned;" ::: "memory")
#define WG_COMMIT() asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory")
#define WG_WAIT0() asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory")

template <int N, bool BF, int TB> struct Wg;
#include "wg_gen.h"

template <int MI, int K, int N, bool BF, bool KMAJOR_B, bool SWAP>
__global__ void kern(const unsigned short* A, const unsigned short* B, float* D) {
  extern __shared__ __align__(1024) unsigned short xs[];
  const int M = 64 * MI;
  unsigned short* sa = xs;
  unsigned short* sb = xs + M * K;
  const int tid = threadIdx.x;
  for (int i = tid; i < M * K; i += 128) sa[pswz(i / K, i % K, K, M)] = A[i];
  if (KMAJOR_B) {  // B given as [N, K]
    for (int i = tid; i < N * K; i += 128) sb[pswz(i / K, i % K, K, N)] = B[i];
  } else {  // B given as [K, N]
    for (int i = tid; i < N * K; i += 128) sb[pswz(i / N, i % N, N, K)] = B[i];
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  float d[MI][N / 2];
  for (int mi = 0; mi < MI; ++mi)
    for (int i = 0; i < N / 2; ++i) d[mi][i] = 0.f;
  const int pa = K > 64 ? 64 : K, swa = pa * 2;
  const int pb = KMAJOR_B ? pa : (N > 64 ? 64 : N), swb = pb * 2;
  WG_FENCE();
#pragma unroll
  for (int ks = 0; ks < K / 16; ++ks) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int k0 = ks * 16;
      unsigned aa = smem_addr(sa + (k0 / pa) * (M * pa) + mi * 64 * pa + (k0 % pa));
      unsigned long long da = desc(aa, 16, 8 * swa, mode_of(swa));
      unsigned long long db;
      if (KMAJOR_B) {
        unsigned ba = smem_addr(sb + (k0 / pb) * (N * pb) + (k0 % pb));
        db = desc(ba, 16, 8 * swb, mode_of(swb));
      } else {
        unsigned ba = smem_addr(sb + k0 * pb);
        unsigned lbo = K * pb * 2, sbo = 8 * swb;
        db = SWAP ? desc(ba, sbo, lbo, mode_of(swb)) : desc(ba, lbo, sbo, mode_of(swb));
      }
      Wg<N, BF, KMAJOR_B ? 0 : 1>::mma(d[mi], da, db);
    }
  }
  WG_COMMIT();
  WG_WAIT0();
  const int w = tid / 32, l = tid % 32;
  for (int mi = 0; mi < MI; ++mi)
    for (int i = 0; i < N / 2; ++i) {
      int row = mi * 64 + w * 16 + l / 4 + 8 * ((i >> 1) & 1);
      int col = (i / 4) * 8 + 2 * (l % 4) + (i & 1);
      D[row * N + col] = d[mi][i];
    }
}

static float h2f(unsigned short h, bool bf) {
  if (bf) { unsigned u = (unsigned)h << 16; float f; memcpy(&f, &u, 4); return f; }
  __half x; memcpy(&x, &h, 2); return __half2float(x);
}
static unsigned short f2h(float f, bool bf) {
  if (bf) { __nv_bfloat16 b = __float2bfloat16(f); unsigned short u; memcpy(&u, &b, 2); return u; }
  __half x = __float2half(f); unsigned short u; memcpy(&u, &x, 2); return u;
}

template <int MI, int K, int N, bool BF, bool KMAJOR_B, bool SWAP>
int run(const char* name) {
  const int M = 64 * MI;
  std::vector<unsigned short> a(M * K), b(K * N);
  std::vector<float> fa(M * K), fb(K * N), d(M * N);
  srand(M * 131 + K * 7 + N);
  for (int i = 0; i < M * K; ++i) { a[i] = f2h((rand() % 2001 - 1000) / 500.f, BF); fa[i] = h2f(a[i], BF); }
  for (int i = 0; i < K * N; ++i) { b[i] = f2h((rand() % 2001 - 1000) / 500.f, BF); fb[i] = h2f(b[i], BF); }
  unsigned short *da, *db; float* dd;
  cudaMalloc(&da, a.size() * 2); cudaMalloc(&db, b.size() * 2); cudaMalloc(&dd, d.size() * 4);
  cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice);
  cudaMemset(dd, 0xff, d.size() * 4);
  int smem = (M * K + K * N) * 2;
  cudaFuncSetAttribute(kern<MI, K, N, BF, KMAJOR_B, SWAP>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  kern<MI, K, N, BF, KMAJOR_B, SWAP><<<1, 128, smem>>>(da, db, dd);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) { printf("%-40s CUDA error %s\n", name, cudaGetErrorString(e)); exit(1); }
  cudaMemcpy(d.data(), dd, d.size() * 4, cudaMemcpyDeviceToHost);
  double worst = 0; int bad = 0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += (double)fa[m * K + k] * (KMAJOR_B ? fb[n * K + k] : fb[k * N + n]);
      double err = fabs(s - d[m * N + n]);
      if (!(err <= 1e-3 * (1 + fabs(s)))) ++bad;
      if (err > worst || err != err) worst = err;
    }
  printf("%-40s %s (bad %d of %d, worst %.3g)\n", name, bad ? "FAIL" : "PASS", bad, M * N, worst);
  cudaFree(da); cudaFree(db); cudaFree(dd);
  return bad != 0;
}

int main() {
  int f = 0;
  f += run<1, 64, 64, false, false, false>("f16 K64 N64 B[K,N]");
  f += run<1, 64, 128, false, false, false>("f16 K64 N128 B[K,N]");
  f += run<2, 32, 256, false, false, false>("f16 MI2 K32 N256 B[K,N]");
  f += run<1, 128, 32, false, false, false>("f16 K128 N32 B[K,N] (SW64)");
  f += run<1, 16, 16, false, false, false>("f16 K16 N16 B[K,N] (SW32)");
  f += run<1, 64, 128, false, true, false>("f16 K64 N128 B[N,K]");
  f += run<1, 128, 64, false, true, false>("f16 K128 N64 B[N,K]");
  f += run<1, 32, 128, true, true, false>("bf16 K32 N128 B[N,K] (SW64)");
  f += run<2, 128, 128, true, false, false>("bf16 MI2 K128 N128 B[K,N]");
  printf("%d failing\n", f);
  return 0;
}
