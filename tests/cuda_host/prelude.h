// Host emulation of ember's CUDA kernels, for tests (tests/cuda_host_kernels.py):
// the .cu files compile as host C++ with this header force-included, and every
// kernel runs as ONE thread of ONE block, so a grid-stride loop (EMBER_GRID_LOOP)
// visits every index in order.  That runs the kernels whose threads never
// cooperate (im2col, col2im, pooling, casts, batch-norm apply...) with their real
// index arithmetic; kernels that reduce across a block (shared memory, warp
// shuffles) need blockDim >= 32 and abort here if called.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <memory>
#include <cstdlib>
#include <cstring>

#define EMBER_HOST_EMULATION 1
#define __device__
#define __global__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) alignas(n)

struct emu_dim3 { unsigned x, y, z; };
static emu_dim3 blockIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
static thread_local emu_dim3 threadIdx = {0, 0, 0};

// Two ways to run a launch (tests/cuda_host_kernels.py):
//  * sequential: once per (block, thread), one after the other (emu_set_thread) -- for
//    kernels whose threads never cooperate;
//  * cooperative: blocks one after another, each block's threads as real OS threads
//    (emu_begin_block, then emu_thread in each), so __syncthreads is a barrier, the
//    static __shared__ arrays are the block's shared memory, and warp shuffles go
//    through a shared slot array between two barriers.
static std::unique_ptr<std::barrier<>> emu_bar;
extern "C" void emu_set_thread(unsigned block, unsigned thread, unsigned nblocks,
                               unsigned nthreads) {
  blockIdx.x = block; threadIdx.x = thread; gridDim.x = nblocks; blockDim.x = nthreads;
  emu_bar.reset(new std::barrier<>(1));
}
extern "C" void emu_begin_block(unsigned block, unsigned nblocks, unsigned nthreads) {
  blockIdx.x = block; gridDim.x = nblocks; blockDim.x = nthreads;
  emu_bar.reset(new std::barrier<>(nthreads));
}
extern "C" void emu_thread(unsigned thread) { threadIdx.x = thread; }

static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
static inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
static inline void sincospif(float x, float* s, float* c) {
  *s = (float)std::sin(M_PI * (double)x); *c = (float)std::cos(M_PI * (double)x);
}
using std::erf; using std::exp; using std::log; using std::sqrt; using std::tanh; using std::pow;

// float16 <-> float32 through GCC's _Float16 (IEEE binary16, round to nearest even)
static inline float emu_h2f(unsigned short b) { _Float16 h; std::memcpy(&h, &b, 2); return (float)h; }
static inline unsigned short emu_f2h(float f) {
  _Float16 h = (_Float16)f; unsigned short b; std::memcpy(&b, &h, 2); return b;
}

static inline void __syncthreads() { emu_bar->arrive_and_wait(); }

// every thread of the block takes part (the kernels' reductions are block-uniform)
template <typename T> static inline T __shfl_down_sync(unsigned, T v, int off) {
  static unsigned char slots[1024][sizeof(T)];
  std::memcpy(slots[threadIdx.x], &v, sizeof(T));
  __syncthreads();
  T r = v;                        // lanes past the warp keep their own value, as CUDA's
  if ((threadIdx.x & 31u) + (unsigned)off < 32u && threadIdx.x + off < blockDim.x)
    std::memcpy(&r, slots[threadIdx.x + off], sizeof(T));
  __syncthreads();
  return r;
}

// atomics under one process-wide lock (threads of a block run concurrently)
#include <mutex>
static std::mutex emu_atomic_lock;
template <typename T> static inline T atomicAdd(T* p, T v) {
  std::lock_guard<std::mutex> g(emu_atomic_lock); T o = *p; *p = o + v; return o;
}
template <typename T> static inline T atomicExch(T* p, T v) {
  std::lock_guard<std::mutex> g(emu_atomic_lock); T o = *p; *p = v; return o;
}
template <typename T> static inline T atomicCAS(T* p, T cmp, T v) {
  std::lock_guard<std::mutex> g(emu_atomic_lock); T o = *p; if (o == cmp) *p = v; return o;
}

// CUDA's overloaded integer / float min and max, and sincospi
template <typename A, typename B> static inline auto min(A a, B b) -> decltype(a + b) { return b < a ? b : a; }
template <typename A, typename B> static inline auto max(A a, B b) -> decltype(a + b) { return a < b ? b : a; }
static inline void sincospi(double x, double* s, double* c) { *s = std::sin(M_PI * x); *c = std::cos(M_PI * x); }
