// Shared prelude of ember's CUDA kernels.
//
// Conventions (all files in this folder):
//  * Compiled at run time by NVRTC (CuPy RawModule). Every kernel is an
//    `extern "C" __global__` function named ember_<op>_<dtype>[_<variant>], so the
//    names ember looks up are plain, unmangled symbols: no name expressions, and a
//    missing instantiation is a missing symbol the test can see in the PTX.
//    Kernels are written once as templates (__device__) and stamped out per dtype
//    by small EMBER_FOR_* macros.
//  * dtype suffixes: f32 float, f64 double, f16 __half, bf16 __nv_bfloat16.
//    Half types are storage only: every op loads them as float and rounds once
//    on store. float64 accumulates in double, everything else in float.
//  * Element counts, offsets and strides are 64-bit (i64): tensors over 2**31
//    elements are normal on an 80 GB device.
//  * Loops are grid-stride, so any grid size is correct; the launcher picks the
//    grid for occupancy, not for coverage.
//  * Block-reducing kernels need blockDim.x a multiple of 32 and <= 1024.
//  * No host code and no host headers: NVRTC has no C/C++ standard library.
//    The only includes are cuda_fp16.h / cuda_bf16.h (nvcc finds them; CuPy
//    gives NVRTC its copy). Define EMBER_NO_HALF_HEADERS to use the
//    self-contained fallback below instead.
//  * The loader (ember.cuda.kernel_source) pastes this file in place of the
//    #include line, so CuPy's source-keyed kernel cache sees every change.
#ifndef EMBER_COMMON_CU
#define EMBER_COMMON_CU

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;

#define EMBER_MAX_DIMS 8

#if defined(EMBER_HOST_EMULATION)
// Tests compile the kernels as host C++ (tests/cuda_host/prelude.h supplies emu_*).
struct f16 { unsigned short x; };
struct bf16 { unsigned short x; };
__device__ __forceinline__ float ember_h2f(f16 h) { return emu_h2f(h.x); }
__device__ __forceinline__ f16 ember_f2h(float f) { f16 h; h.x = emu_f2h(f); return h; }
#elif !defined(EMBER_NO_HALF_HEADERS)
#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef __half f16;
typedef __nv_bfloat16 bf16;
__device__ __forceinline__ float ember_h2f(f16 x) { return __half2float(x); }
__device__ __forceinline__ f16 ember_f2h(float x) { return __float2half_rn(x); }
__device__ __forceinline__ float ember_b2f(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ bf16 ember_f2b(float x) { return __float2bfloat16_rn(x); }
__device__ __forceinline__ unsigned short ember_h_bits(f16 x) { return __half_as_ushort(x); }
__device__ __forceinline__ f16 ember_h_from_bits(unsigned short b) { return __ushort_as_half(b); }
__device__ __forceinline__ unsigned short ember_b_bits(bf16 x) { return __bfloat16_as_ushort(x); }
__device__ __forceinline__ bf16 ember_b_from_bits(unsigned short b) { return __ushort_as_bfloat16(b); }
#else
// Fallback: 16-bit storage structs with the same layout; conversions in PTX
// (half) and bit arithmetic (bfloat16, round to nearest even, NaN kept quiet).
struct __align__(2) f16 { unsigned short x; };
struct __align__(2) bf16 { unsigned short x; };
__device__ __forceinline__ float ember_h2f(f16 h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.x)); return f;
}
__device__ __forceinline__ f16 ember_f2h(float f) {
  f16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.x) : "f"(f)); return h;
}
#endif
#if defined(EMBER_NO_HALF_HEADERS) || defined(EMBER_HOST_EMULATION)
__device__ __forceinline__ float ember_b2f(bf16 b) { return __uint_as_float(((u32)b.x) << 16); }
__device__ __forceinline__ bf16 ember_f2b(float f) {
  u32 u = __float_as_uint(f);
  bf16 b;
  if ((u & 0x7fffffffu) > 0x7f800000u) { b.x = (unsigned short)((u >> 16) | 0x40u); return b; }
  u += 0x7fffu + ((u >> 16) & 1u);
  b.x = (unsigned short)(u >> 16);
  return b;
}
__device__ __forceinline__ unsigned short ember_h_bits(f16 x) { return x.x; }
__device__ __forceinline__ f16 ember_h_from_bits(unsigned short b) { f16 h; h.x = b; return h; }
__device__ __forceinline__ unsigned short ember_b_bits(bf16 x) { return x.x; }
__device__ __forceinline__ bf16 ember_b_from_bits(unsigned short b) { bf16 h; h.x = b; return h; }
#endif

// Accumulator type: double for double, float for everything narrower.
template <typename T> struct AccT { typedef float type; };
template <> struct AccT<double> { typedef double type; };

__device__ __forceinline__ float ld(float x) { return x; }
__device__ __forceinline__ double ld(double x) { return x; }
__device__ __forceinline__ float ld(f16 x) { return ember_h2f(x); }
__device__ __forceinline__ float ld(bf16 x) { return ember_b2f(x); }

template <typename T> __device__ __forceinline__ T st(float x);
template <typename T> __device__ __forceinline__ T st(double x);
template <> __device__ __forceinline__ float st<float>(float x) { return x; }
template <> __device__ __forceinline__ float st<float>(double x) { return (float)x; }
template <> __device__ __forceinline__ double st<double>(double x) { return x; }
template <> __device__ __forceinline__ double st<double>(float x) { return (double)x; }
template <> __device__ __forceinline__ f16 st<f16>(float x) { return ember_f2h(x); }
template <> __device__ __forceinline__ f16 st<f16>(double x) { return ember_f2h((float)x); }
template <> __device__ __forceinline__ bf16 st<bf16>(float x) { return ember_f2b(x); }
template <> __device__ __forceinline__ bf16 st<bf16>(double x) { return ember_f2b((float)x); }

// Grid-stride loop over [0, n) in index type I (unsigned 32-bit needs n < 2^31: i plus
// the grid's stride then stays below 2^32), and the usual 64-bit one.
#define EMBER_GRID_LOOP_T(I, i, n)                                              \
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (I)(n);            \
       i += (I)gridDim.x * blockDim.x)
#define EMBER_GRID_LOOP(i, n) EMBER_GRID_LOOP_T(i64, i, n)

// Stamp a kernel-defining macro out once per floating dtype.
#define EMBER_FOR_FLOATS(M) M(f32, float) M(f64, double) M(f16, f16) M(bf16, bf16)
#define EMBER_FOR_F32_F64(M) M(f32, float) M(f64, double)

// NaN-propagating max/min (NumPy's maximum/minimum, torch's max/amax).
template <typename A> __device__ __forceinline__ A nan_max(A a, A b) { return (a != a || a > b) ? a : b; }
template <typename A> __device__ __forceinline__ A nan_min(A a, A b) { return (a != a || a < b) ? a : b; }

// Block-wide reductions. Results are valid in every thread. `shm` must hold 32
// values; it is reused, so callers back-to-back need no extra sync.
struct SumOp { template <typename A> __device__ __forceinline__ A operator()(A a, A b) const { return a + b; } };
struct MaxOp { template <typename A> __device__ __forceinline__ A operator()(A a, A b) const { return nan_max(a, b); } };
struct MinOp { template <typename A> __device__ __forceinline__ A operator()(A a, A b) const { return nan_min(a, b); } };

template <typename A, typename Op>
__device__ __forceinline__ A warp_reduce(A v, Op op) {
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, off));
  return v;
}

template <typename A, typename Op>
__device__ __forceinline__ A block_reduce(A v, Op op, A* shm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
  v = warp_reduce(v, op);
  __syncthreads();  // shm may still be read by a previous reduction
  if (lane == 0) shm[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    // At most 32 partials: a serial pass in one thread costs less than a second
    // shuffle round that would need an identity value per op.
    A r = shm[0];
    for (int k = 1; k < nwarps; ++k) r = op(r, shm[k]);
    shm[0] = r;
  }
  __syncthreads();
  return shm[0];
}

// Atomic add for 16-bit types by compare-and-swap on the containing 32-bit
// word: works on every architecture and in the header-less fallback.
__device__ __forceinline__ void atomic_add_16(unsigned short* addr, float v, bool is_bf16) {
  u32* base = (u32*)((u64)addr & ~(u64)3);
  const u32 shift = ((u64)addr & 2) ? 16u : 0u;
  u32 old = *base, assumed;
  do {
    assumed = old;
    unsigned short bits = (unsigned short)((assumed >> shift) & 0xffffu);
    float cur = is_bf16 ? ember_b2f(ember_b_from_bits(bits)) : ember_h2f(ember_h_from_bits(bits));
    unsigned short nb = is_bf16 ? ember_b_bits(ember_f2b(cur + v)) : ember_h_bits(ember_f2h(cur + v));
    u32 repl = (assumed & ~(0xffffu << shift)) | ((u32)nb << shift);
    old = atomicCAS(base, assumed, repl);
  } while (old != assumed);
}
__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(f16* p, float v) { atomic_add_16((unsigned short*)p, v, false); }
__device__ __forceinline__ void atomic_add(bf16* p, float v) { atomic_add_16((unsigned short*)p, v, true); }

// Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11); random.cu
// documents the (seed, offset, block) convention, which attention.cu's dropout shares.
struct U4 { u32 x, y, z, w; };

__device__ __forceinline__ U4 philox_round(U4 c, u32 k0, u32 k1) {
  const u32 M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  const u32 hi0 = __umulhi(M0, c.x), lo0 = M0 * c.x;
  const u32 hi1 = __umulhi(M1, c.z), lo1 = M1 * c.z;
  U4 r;
  r.x = hi1 ^ c.y ^ k0;
  r.y = lo1;
  r.z = hi0 ^ c.w ^ k1;
  r.w = lo0;
  return r;
}

__device__ __forceinline__ U4 philox4x32_10(u64 seed, u64 offset, u64 block) {
  U4 c;
  c.x = (u32)block;
  c.y = (u32)(block >> 32);
  c.z = (u32)offset;
  c.w = (u32)(offset >> 32);
  u32 k0 = (u32)seed, k1 = (u32)(seed >> 32);
  const u32 W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;  // golden ratio, sqrt(3) - 1
#pragma unroll
  for (int r = 0; r < 9; ++r) {
    c = philox_round(c, k0, k1);
    k0 += W0;
    k1 += W1;
  }
  return philox_round(c, k0, k1);
}

// [0, 1) with the top 24 / 53 bits, so 1.0 is never produced.
__device__ __forceinline__ float u01_f(u32 a) { return (float)(a >> 8) * 5.9604644775390625e-08f; }
__device__ __forceinline__ double u01_d(u32 a, u32 b) {
  return (double)(((u64)(a >> 5) << 26) | (u64)(b >> 6)) * 1.1102230246251565e-16;
}

#endif  // EMBER_COMMON_CU
