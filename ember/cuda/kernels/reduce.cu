// Reductions: sum, mean, max, min, argmax, argmin.
//
// The launcher views the input as contiguous (outer, n, inner) with the reduced
// axis (or the flattened reduced axes) in the middle, and picks:
//   ember_<red>_<dt>_inner   inner == 1: each row of n contiguous values is
//                            reduced by one block (warp shuffles, then shared
//                            memory); blocks stride over rows.
//   ember_<red>_<dt>_outer   inner > 1: one thread per (outer, inner) column walks
//                            the n values; neighbouring threads read neighbouring
//                            addresses, so the loads coalesce without shared memory.
//   ember_<red>_<dt>_full_pass1 / _full_pass2   a whole-tensor reduction in two
//                            launches: pass 1 writes one accumulator-type partial
//                            per block, pass 2 (one block) folds them. No atomics,
//                            so the result is deterministic for a given grid.
// Sums accumulate in AccT<T>; mean divides by n in the accumulator type.
// max/min propagate NaN; argmax/argmin return the first NaN, else the first
// extreme (NumPy's rules) as int64.
#include "ember_common.cu"

template <typename A> __device__ __forceinline__ A ident_sum() { return A(0); }
template <typename A> __device__ __forceinline__ A ident_max() { return -__int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double ident_max<double>() { return -__longlong_as_double(0x7ff0000000000000ll); }
template <typename A> __device__ __forceinline__ A ident_min() { return -ident_max<A>(); }

// kind: 0 sum, 1 mean, 2 max, 3 min
template <int KIND, typename A> __device__ __forceinline__ A red_ident() {
  return KIND == 2 ? ident_max<A>() : KIND == 3 ? ident_min<A>() : ident_sum<A>();
}
template <int KIND, typename A> __device__ __forceinline__ A red_op(A a, A b) {
  return KIND == 2 ? nan_max(a, b) : KIND == 3 ? nan_min(a, b) : a + b;
}
template <int KIND> struct RedFunctor {
  template <typename A> __device__ __forceinline__ A operator()(A a, A b) const { return red_op<KIND>(a, b); }
};

template <int KIND, typename T>
__device__ void reduce_inner(const T* __restrict__ x, T* __restrict__ y, i64 rows, i64 n) {
  typedef typename AccT<T>::type A;
  __shared__ A shm[32];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * n;
    A acc = red_ident<KIND, A>();
    for (i64 j = threadIdx.x; j < n; j += blockDim.x) acc = red_op<KIND>(acc, (A)ld(row[j]));
    acc = block_reduce(acc, RedFunctor<KIND>(), shm);
    if (threadIdx.x == 0) y[r] = st<T>(KIND == 1 ? acc / (A)n : acc);
  }
}

template <int KIND, typename T>
__device__ void reduce_outer(const T* __restrict__ x, T* __restrict__ y, i64 outer, i64 n, i64 inner) {
  typedef typename AccT<T>::type A;
  EMBER_GRID_LOOP(c, outer * inner) {
    const i64 o = c / inner, i = c - o * inner;
    const T* p = x + o * n * inner + i;
    A acc = red_ident<KIND, A>();
    for (i64 j = 0; j < n; ++j) acc = red_op<KIND>(acc, (A)ld(p[j * inner]));
    y[c] = st<T>(KIND == 1 ? acc / (A)n : acc);
  }
}

template <int KIND, typename T>
__device__ void reduce_full_pass1(const T* __restrict__ x, typename AccT<T>::type* __restrict__ partial, i64 n) {
  typedef typename AccT<T>::type A;
  __shared__ A shm[32];
  A acc = red_ident<KIND, A>();
  EMBER_GRID_LOOP(i, n) acc = red_op<KIND>(acc, (A)ld(x[i]));
  acc = block_reduce(acc, RedFunctor<KIND>(), shm);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// Launch with one block. `n` is the element count of the original tensor (for mean).
template <int KIND, typename T>
__device__ void reduce_full_pass2(const typename AccT<T>::type* __restrict__ partial, T* __restrict__ y,
                                  i64 nparts, i64 n) {
  typedef typename AccT<T>::type A;
  __shared__ A shm[32];
  A acc = red_ident<KIND, A>();
  for (i64 j = threadIdx.x; j < nparts; j += blockDim.x) acc = red_op<KIND>(acc, partial[j]);
  acc = block_reduce(acc, RedFunctor<KIND>(), shm);
  if (threadIdx.x == 0) y[0] = st<T>(KIND == 1 ? acc / (A)n : acc);
}

// ---- argmax / argmin ---------------------------------------------------------
// (value, index) pairs; `better` encodes NumPy's tie and NaN rules so the fold
// is associative and the result independent of the thread layout.
template <bool IS_MAX, typename A>
__device__ __forceinline__ bool arg_better(A v, i64 i, A w, i64 j) {
  const bool vn = v != v, wn = w != w;
  if (vn || wn) return vn && (!wn || i < j);
  if (v == w) return i < j;
  return IS_MAX ? v > w : v < w;
}

template <bool IS_MAX, typename T>
__device__ void arg_inner(const T* __restrict__ x, i64* __restrict__ y, i64 rows, i64 n) {
  typedef typename AccT<T>::type A;
  __shared__ A sv[32];
  __shared__ i64 si[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * n;
    A bv = IS_MAX ? ident_max<A>() : ident_min<A>();
    i64 bi = n;  // "no index yet": loses every tie
    for (i64 j = threadIdx.x; j < n; j += blockDim.x) {
      const A v = ld(row[j]);
      if (arg_better<IS_MAX>(v, j, bv, bi)) { bv = v; bi = j; }
    }
    for (int off = 16; off > 0; off >>= 1) {
      const A ov = __shfl_down_sync(0xffffffffu, bv, off);
      const i64 oi = __shfl_down_sync(0xffffffffu, bi, off);
      if (arg_better<IS_MAX>(ov, oi, bv, bi)) { bv = ov; bi = oi; }
    }
    __syncthreads();
    if (lane == 0) { sv[warp] = bv; si[warp] = bi; }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int k = 1; k < nwarps; ++k)
        if (arg_better<IS_MAX>(sv[k], si[k], bv, bi)) { bv = sv[k]; bi = si[k]; }
      y[r] = bi < n ? bi : 0;
    }
  }
}

template <bool IS_MAX, typename T>
__device__ void arg_outer(const T* __restrict__ x, i64* __restrict__ y, i64 outer, i64 n, i64 inner) {
  typedef typename AccT<T>::type A;
  EMBER_GRID_LOOP(c, outer * inner) {
    const i64 o = c / inner, i = c - o * inner;
    const T* p = x + o * n * inner + i;
    A bv = IS_MAX ? ident_max<A>() : ident_min<A>();
    i64 bi = n;
    for (i64 j = 0; j < n; ++j) {
      const A v = ld(p[j * inner]);
      if (arg_better<IS_MAX>(v, j, bv, bi)) { bv = v; bi = j; }
    }
    y[c] = bi < n ? bi : 0;
  }
}

#define DEF_RED(name, KIND, dt, T)                                                                   \
  extern "C" __global__ void ember_##name##_##dt##_inner(const T* x, T* y, i64 rows, i64 n) {        \
    reduce_inner<KIND, T>(x, y, rows, n);                                                            \
  }                                                                                                  \
  extern "C" __global__ void ember_##name##_##dt##_outer(const T* x, T* y, i64 outer, i64 n, i64 inner) { \
    reduce_outer<KIND, T>(x, y, outer, n, inner);                                                    \
  }                                                                                                  \
  extern "C" __global__ void ember_##name##_##dt##_full_pass1(const T* x, AccT<T>::type* partial, i64 n) { \
    reduce_full_pass1<KIND, T>(x, partial, n);                                                       \
  }                                                                                                  \
  extern "C" __global__ void ember_##name##_##dt##_full_pass2(const AccT<T>::type* partial, T* y,   \
                                                               i64 nparts, i64 n) {                  \
    reduce_full_pass2<KIND, T>(partial, y, nparts, n);                                               \
  }
#define DEF_ARG(name, IS_MAX, dt, T)                                                                 \
  extern "C" __global__ void ember_##name##_##dt##_inner(const T* x, i64* y, i64 rows, i64 n) {      \
    arg_inner<IS_MAX, T>(x, y, rows, n);                                                             \
  }                                                                                                  \
  extern "C" __global__ void ember_##name##_##dt##_outer(const T* x, i64* y, i64 outer, i64 n, i64 inner) { \
    arg_outer<IS_MAX, T>(x, y, outer, n, inner);                                                     \
  }
#define DEF_ALL(dt, T) DEF_RED(sum, 0, dt, T) DEF_RED(mean, 1, dt, T) DEF_RED(max, 2, dt, T) \
                       DEF_RED(min, 3, dt, T) DEF_ARG(argmax, true, dt, T) DEF_ARG(argmin, false, dt, T)
EMBER_FOR_FLOATS(DEF_ALL)
