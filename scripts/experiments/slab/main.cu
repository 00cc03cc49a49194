// A/B harness for hand-edited emitted kernels (see mkslab.py): correctness against float64,
// then alternating timing rounds, inputs rotated over 4 sets (64 MiB+, past the L2).
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstring>
#include <string>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1); } } while (0)
// The flush as a kernel (the bench's fill kernel, torch's zero_): every line it writes stays
// dirty in the L2, as under do_bench.
__global__ void fill_kernel(float* p, long long n, float v) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) p[i] = v;
}
typedef void (*runner)(const float*, float*, const float*, const float*, int, int, int, float, unsigned long long*);
#define DECL(n) extern "C" void run_##n(const float*, float*, const float*, const float*, int, int, int, float, unsigned long long*);
VARIANTS(DECL)
struct V { const char* name; runner f; };
#define ENTRY(n) {#n, run_##n},
// torch.compile's LayerNorm kernel (a Triton cubin from inductor_cubin.py), when $INDUCTOR_DIR
// names its folder: (x, w, b, y, xnumel, r0_numel, scratch pointers), its own grid.
static CUfunction ind_fn; static unsigned ind_grid, ind_threads, ind_shared;
static void run_inductor(const float* x, float* y, const float* w, const float* b, int, int n_rows, int n_cols, float, unsigned long long*) {
  void* xp = (void*)x; void* wp = (void*)w; void* bp = (void*)b; void* yp = (void*)y; void* nul = nullptr;
  int xn = n_rows, rn = n_cols;
  void* params[] = {&xp, &wp, &bp, &yp, &xn, &rn, &nul, &nul};
  CUresult r = cuLaunchKernel(ind_fn, ind_grid, 1, 1, ind_threads, 1, 1, ind_shared, 0, params, nullptr);
  if (r != CUDA_SUCCESS) { printf("cuLaunchKernel %d\n", (int)r); exit(1); }
}
static std::vector<V> vs = { VARIANTS(ENTRY) };
int main(int argc, char** argv) {
  // LayerNorm of R x C f32 (C from argv, 256 by default; R * C = 4M elements, 16 MiB)
  const int C = argc > 1 ? atoi(argv[1]) : 256, R = (1 << 22) / C, SETS = 4; const size_t n = (size_t)R * C;
  std::vector<float> hx(n * SETS), hw(C), hb(C), hy(n);
  srand(1234);
  for (auto& v : hx) v = (rand() / (float)RAND_MAX) * 4.f - 2.f;
  for (auto& v : hw) v = (rand() / (float)RAND_MAX) + 0.5f;
  for (auto& v : hb) v = (rand() / (float)RAND_MAX) - 0.5f;
  float *x, *y, *w, *b; unsigned long long* err;
  CK(cudaMalloc(&x, n * SETS * 4)); CK(cudaMalloc(&y, n * SETS * 4)); CK(cudaMalloc(&w, C * 4)); CK(cudaMalloc(&b, C * 4)); CK(cudaMalloc(&err, 8));
  CK(cudaMemcpy(x, hx.data(), n * SETS * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(w, hw.data(), C * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(b, hb.data(), C * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(err, 0, 8));
  std::vector<double> ref(n);
  for (int r = 0; r < R; ++r) {
    double m = 0, v = 0; for (int c = 0; c < C; ++c) m += hx[(size_t)r * C + c]; m /= C;
    for (int c = 0; c < C; ++c) { double d = hx[(size_t)r * C + c] - m; v += d * d; } v /= C;
    double rs = 1 / sqrt(v + 1e-5);
    for (int c = 0; c < C; ++c) ref[(size_t)r * C + c] = (hx[(size_t)r * C + c] - m) * rs * hw[c] + hb[c];
  }
  if (const char* dir = getenv("INDUCTOR_DIR")) {
    char name[256]; FILE* m = fopen((std::string(dir) + "/inductor_ln.meta").c_str(), "r");
    if (m && fscanf(m, "%255s %u %u %u", name, &ind_grid, &ind_threads, &ind_shared) == 4) {
      CUmodule mod; CUresult r = cuModuleLoad(&mod, (std::string(dir) + "/inductor_ln.cubin").c_str());
      if (r == CUDA_SUCCESS) r = cuModuleGetFunction(&ind_fn, mod, name);
      if (r == CUDA_SUCCESS && ind_shared > 48 * 1024) r = cuFuncSetAttribute(ind_fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, ind_shared);
      if (r == CUDA_SUCCESS) { vs.push_back({"inductor", run_inductor}); printf("inductor kernel %s: grid %u x %u threads, %u B shared\n", name, ind_grid, ind_threads, ind_shared); }
      else printf("inductor cubin: CUresult %d\n", (int)r);
    } else printf("inductor meta unreadable\n");
  }
  int nv = (int)vs.size();
  for (int i = 0; i < nv; ++i) {
    CK(cudaMemset(y, 0xff, n * 4));  // NaN poison
    vs[i].f(x, y, w, b, C, R, C, 1e-5f, err);
    CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(hy.data(), y, n * 4, cudaMemcpyDeviceToHost));
    double num = 0, den = 0; size_t bad = 0;
    for (size_t k = 0; k < n; ++k) { if (!std::isfinite(hy[k])) ++bad; double d = hy[k] - ref[k]; num += d * d; den += ref[k] * ref[k]; }
    printf("check %-12s rel l2 %.3e non-finite %zu %s\n", vs[i].name, sqrt(num / den), bad, (bad == 0 && sqrt(num / den) < 1e-5) ? "ok" : "FAIL");
  }
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  const int ITER = 400, ROUNDS = 7;
  std::vector<std::vector<float>> t(nv + 1);
  for (int rd = 0; rd < ROUNDS; ++rd) {
    for (int i = 0; i <= nv; ++i) {
      for (int it = 0; it < 20; ++it) { int s = it % SETS; if (i < nv) vs[i].f(x + s * n, y + s * n, w, b, C, R, C, 1e-5f, err); else CK(cudaMemcpyAsync(y + s * n, x + s * n, n * 4, cudaMemcpyDeviceToDevice)); }
      CK(cudaEventRecord(e0));
      for (int it = 0; it < ITER; ++it) { int s = it % SETS; if (i < nv) vs[i].f(x + s * n, y + s * n, w, b, C, R, C, 1e-5f, err); else CK(cudaMemcpyAsync(y + s * n, x + s * n, n * 4, cudaMemcpyDeviceToDevice)); }
      CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); CK(cudaGetLastError());
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); t[i].push_back(ms / ITER);
    }
  }
  // per call, after writing 256 MiB (do_bench's L2 flush), median of 300 calls; the flush by
  // cudaMemsetAsync, then by a kernel
  char* fl; CK(cudaMalloc(&fl, 256 << 20));
  // mode 2 ("warm-code"): after the memset, the same kernel once on other rows (a separate 16 MiB;
  // all R rows, as Inductor's kernel is specialised to them), so its code is in the caches but
  // the timed call's data is not.
  const int RW = R; float *xw, *yw; CK(cudaMalloc(&xw, (size_t)RW * C * 4)); CK(cudaMalloc(&yw, (size_t)RW * C * 4));
  CK(cudaMemcpy(xw, x, (size_t)RW * C * 4, cudaMemcpyDeviceToDevice));
  std::vector<cudaEvent_t> ev(2 * 300); for (auto& evi : ev) CK(cudaEventCreate(&evi));
  for (int flush_kernel = 0; flush_kernel < 3; ++flush_kernel) {
  std::vector<std::vector<float>> pc(nv + 1);
  for (int rd = 0; rd < 3; ++rd) for (int i = 0; i <= nv; ++i) {
    for (int it = 0; it < 100; ++it) {
      if (flush_kernel == 1) fill_kernel<<<132 * 16, 256>>>((float*)fl, (256 << 20) / 4, (float)it); else CK(cudaMemsetAsync(fl, it & 0xff, 256 << 20));
      if (flush_kernel == 2) { if (i < nv) vs[i].f(xw, yw, w, b, C, RW, C, 1e-5f, err); else CK(cudaMemcpyAsync(yw, xw, (size_t)RW * C * 4, cudaMemcpyDeviceToDevice)); }
      CK(cudaEventRecord(ev[2 * it]));
      if (i < nv) vs[i].f(x, y, w, b, C, R, C, 1e-5f, err); else CK(cudaMemcpyAsync(y, x, n * 4, cudaMemcpyDeviceToDevice));
      CK(cudaEventRecord(ev[2 * it + 1]));
    }
    CK(cudaDeviceSynchronize()); CK(cudaGetLastError());
    for (int it = 0; it < 100; ++it) { float ms; CK(cudaEventElapsedTime(&ms, ev[2 * it], ev[2 * it + 1])); pc[i].push_back(ms); }
  }
  for (int i = 0; i <= nv; ++i) {
    std::sort(pc[i].begin(), pc[i].end());
    printf("percall %s %-12s median %.4f ms  p10 %.4f  p90 %.4f\n", flush_kernel == 1 ? "kernel-flush" : flush_kernel == 2 ? "warm-code" : "memset-flush", i < nv ? vs[i].name : "copy_d2d", pc[i][pc[i].size() / 2], pc[i][pc[i].size() / 10], pc[i][pc[i].size() * 9 / 10]);
  }
  }
  for (int i = 0; i <= nv; ++i) {
    std::sort(t[i].begin(), t[i].end());
    printf("time %-12s median %.4f ms  min %.4f  max %.4f\n", i < nv ? vs[i].name : "copy_d2d", t[i][ROUNDS / 2], t[i][0], t[i][ROUNDS - 1]);
  }
  unsigned long long he; CK(cudaMemcpy(&he, err, 8, cudaMemcpyDeviceToHost)); printf("fuse_err %llu\n", he);
}
