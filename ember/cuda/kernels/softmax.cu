// Softmax / log-softmax over the last (contiguous) axis, and fused
// cross-entropy with class indices.
//
// One block per row (blocks stride over rows); rows are `cols` contiguous
// values. The launcher moves a non-last softmax axis to the end first.
// Every row is max-subtracted, so exp never overflows, and fully masked
// (-inf) rows give NaN as in torch. Statistics are in AccT<T>.
//
//   ember_softmax_<dt>, ember_log_softmax_<dt>                  forward
//   ember_softmax_backward_<dt>       dx = y * (dy - sum(dy * y))
//   ember_log_softmax_backward_<dt>   dx = dy - exp(y) * sum(dy)
//   ember_cross_entropy_fwd_<dt>      per-row loss and the row's logsumexp
//   ember_cross_entropy_bwd_<dt>      dlogits from the saved logsumexp
// Cross-entropy with label smoothing eps over C classes (torch's definition):
//   loss = (1 - eps) * (lse - x[t]) + eps * (lse - mean_j x[j]),
// rows whose target == ignore_index get loss 0 and gradient 0; the launcher
// does the 'mean'/'sum' reduction (it knows the count of kept rows). A target
// outside [0, C) that is not ignore_index sets *bad = 1 for the host to raise.
#include "ember_common.cu"

template <typename A> __device__ __forceinline__ A m_exp(A x);
template <> __device__ __forceinline__ float m_exp<float>(float x) { return expf(x); }
template <> __device__ __forceinline__ double m_exp<double>(double x) { return exp(x); }
template <typename A> __device__ __forceinline__ A m_log(A x);
template <> __device__ __forceinline__ float m_log<float>(float x) { return logf(x); }
template <> __device__ __forceinline__ double m_log<double>(double x) { return log(x); }

template <typename A> __device__ __forceinline__ A neg_inf() { return -__int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double neg_inf<double>() { return -__longlong_as_double(0x7ff0000000000000ll); }

// (max, log-sum-exp) of one row, valid in every thread of the block.
template <typename T, typename A>
__device__ __forceinline__ void row_stats(const T* row, i64 cols, A* shm, A& mx, A& lse) {
  A m = neg_inf<A>();
  for (i64 j = threadIdx.x; j < cols; j += blockDim.x) m = nan_max(m, (A)ld(row[j]));
  m = block_reduce(m, MaxOp(), shm);
  A s = 0;
  for (i64 j = threadIdx.x; j < cols; j += blockDim.x) s += m_exp<A>((A)ld(row[j]) - m);
  s = block_reduce(s, SumOp(), shm);
  mx = m;
  lse = m + m_log<A>(s);
}

template <typename T, bool LOG>
__device__ void softmax_fwd(const T* __restrict__ x, T* __restrict__ y, i64 rows, i64 cols) {
  typedef typename AccT<T>::type A;
  __shared__ A shm[32];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    A mx, lse;
    row_stats<T, A>(xr, cols, shm, mx, lse);
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) {
      const A z = (A)ld(xr[j]) - lse;
      yr[j] = st<T>(LOG ? z : m_exp<A>(z));
    }
  }
}

template <typename T, bool LOG>
__device__ void softmax_bwd(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                            i64 rows, i64 cols) {
  typedef typename AccT<T>::type A;
  __shared__ A shm[32];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* yr = y + r * cols;
    const T* gr = dy + r * cols;
    T* xr = dx + r * cols;
    A s = 0;
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x)
      s += LOG ? (A)ld(gr[j]) : (A)ld(gr[j]) * (A)ld(yr[j]);
    s = block_reduce(s, SumOp(), shm);
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) {
      const A yv = ld(yr[j]), g = ld(gr[j]);
      xr[j] = st<T>(LOG ? g - m_exp<A>(yv) * s : yv * (g - s));
    }
  }
}

// loss and lse are in the accumulator type (float, or double for float64):
// they feed a reduction, and lse is only reused by the backward kernel.
template <typename T>
__device__ void ce_fwd(const T* __restrict__ x, const i64* __restrict__ target,
                       typename AccT<T>::type* __restrict__ loss, typename AccT<T>::type* __restrict__ lse_out,
                       i64 rows, i64 cols, i64 ignore_index, double smoothing, int* bad) {
  typedef typename AccT<T>::type A;
  __shared__ A shm[32];
  const A eps = (A)smoothing;
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    const i64 t = target[r];
    A mx, lse;
    row_stats<T, A>(xr, cols, shm, mx, lse);
    A sx = 0;
    if (eps != A(0)) {
      for (i64 j = threadIdx.x; j < cols; j += blockDim.x) sx += (A)ld(xr[j]);
      sx = block_reduce(sx, SumOp(), shm);
    }
    if (threadIdx.x == 0) {
      lse_out[r] = lse;
      if (t == ignore_index) {
        loss[r] = 0;
      } else if (t < 0 || t >= cols) {
        atomicExch(bad, 1);
        loss[r] = neg_inf<A>() * A(0);  // NaN: never a silently plausible loss
      } else {
        const A nll = lse - (A)ld(xr[t]);
        loss[r] = (A(1) - eps) * nll + eps * (lse - sx / (A)cols);
      }
    }
  }
}

// grad: dL/dloss[r] at grad[r * grad_stride] (stride 0: one scalar for 'mean'
// or 'sum', already divided by the kept-row count for 'mean').
template <typename T>
__device__ void ce_bwd(const T* __restrict__ x, const i64* __restrict__ target,
                       const typename AccT<T>::type* __restrict__ lse, const typename AccT<T>::type* __restrict__ grad,
                       i64 grad_stride, T* __restrict__ dx, i64 rows, i64 cols, i64 ignore_index,
                       double smoothing) {
  typedef typename AccT<T>::type A;
  const A eps = (A)smoothing;
  const A off = eps / (A)cols;
  EMBER_GRID_LOOP(k, rows * cols) {
    const i64 r = k / cols, j = k - r * cols;
    const i64 t = target[r];
    if (t == ignore_index || t < 0 || t >= cols) { dx[k] = st<T>(A(0)); continue; }
    const A g = grad[r * grad_stride];
    const A p = m_exp<A>((A)ld(x[k]) - lse[r]);
    dx[k] = st<T>(g * (p - off - (j == t ? A(1) - eps : A(0))));
  }
}

#define DEF_SOFTMAX(dt, T)                                                                          \
  extern "C" __global__ void ember_softmax_##dt(const T* x, T* y, i64 rows, i64 cols) {             \
    softmax_fwd<T, false>(x, y, rows, cols);                                                        \
  }                                                                                                 \
  extern "C" __global__ void ember_log_softmax_##dt(const T* x, T* y, i64 rows, i64 cols) {         \
    softmax_fwd<T, true>(x, y, rows, cols);                                                         \
  }                                                                                                 \
  extern "C" __global__ void ember_softmax_backward_##dt(const T* y, const T* dy, T* dx, i64 rows, i64 cols) { \
    softmax_bwd<T, false>(y, dy, dx, rows, cols);                                                   \
  }                                                                                                 \
  extern "C" __global__ void ember_log_softmax_backward_##dt(const T* y, const T* dy, T* dx, i64 rows,     \
                                                            i64 cols) {                             \
    softmax_bwd<T, true>(y, dy, dx, rows, cols);                                                    \
  }                                                                                                 \
  extern "C" __global__ void ember_cross_entropy_fwd_##dt(const T* x, const i64* target,            \
      AccT<T>::type* loss, AccT<T>::type* lse, i64 rows, i64 cols, i64 ignore_index,                \
      double smoothing, int* bad) {                                                                 \
    ce_fwd<T>(x, target, loss, lse, rows, cols, ignore_index, smoothing, bad);                      \
  }                                                                                                 \
  extern "C" __global__ void ember_cross_entropy_bwd_##dt(const T* x, const i64* target,            \
      const AccT<T>::type* lse, const AccT<T>::type* grad, i64 grad_stride, T* dx, i64 rows,        \
      i64 cols, i64 ignore_index, double smoothing) {                                               \
    ce_bwd<T>(x, target, lse, grad, grad_stride, dx, rows, cols, ignore_index, smoothing);          \
  }
EMBER_FOR_FLOATS(DEF_SOFTMAX)
