// Layer norm and batch norm, forward and backward.
//
// Statistics use Welford's algorithm per thread, merged across the block with
// Chan's pairwise formula: a one-pass E[x^2] - E[x]^2 loses every digit when
// |mean| >> std, which activations after a bias often are.
//
// Layer norm: x is (rows, cols) contiguous, normalised over cols; one block per row.
//   ember_layer_norm_fwd_<dt>         y, and per-row mean / rstd (AccT) for backward
//   ember_layer_norm_bwd_input_<dt>   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma
//   ember_layer_norm_bwd_params_<dt>  dgamma = sum_rows dy * xhat, dbeta = sum_rows dy
//                                     (one thread per column: coalesced, no atomics)
// Batch norm: x is (N, C, HW) contiguous (HW = product of spatial dims, 1 for
// BatchNorm1d on (N, C)); statistics per channel over N*HW values, one block per channel,
// or, for few channels of many values, S blocks per channel and a merge (_partial, per
// data type; _finish, which writes the parameter gradients, per parameter type too).
//   ember_batch_norm_stats_<dt>       mean, invstd and biased variance (AccT)
//   ember_batch_norm_update_running_<acc>_<dt>  running stats (the parameters' type) from
//                                     them, in place, with the unbiased variance
//   ember_batch_norm_apply_<dt>       y = (x - mean) * invstd * gamma + beta (also eval:
//                                     the launcher passes invstd from running_var)
//   ember_batch_norm_bwd_reduce_<dt>  per channel sum(dy), sum(dy * xhat); writes dgamma / dbeta
//   ember_batch_norm_bwd_input_<dt>   dx = gamma * invstd * (dy - sum_dy / M - xhat * sum_dy_xhat / M)
//   ember_batch_norm_{apply,bwd_reduce,bwd_input}_{f16,bf16}_p32: the same with float32
//                                     gamma / beta / dgamma / dbeta (mixed precision)
// gamma / beta / running stats may be null (affine=False, track_running_stats=False).
#include "ember_common.cu"

__device__ __forceinline__ float m_rsqrt(float x) { return rsqrtf(x); }
__device__ __forceinline__ double m_rsqrt(double x) { return rsqrt(x); }

template <typename A> struct Welford { A mean, m2, n; };

template <typename A>
__device__ __forceinline__ void welford_add(Welford<A>& w, A x) {
  w.n += A(1);
  const A d = x - w.mean;
  w.mean += d / w.n;
  w.m2 += d * (x - w.mean);
}

template <typename A>
__device__ __forceinline__ Welford<A> welford_merge(Welford<A> a, Welford<A> b) {
  if (b.n == A(0)) return a;
  if (a.n == A(0)) return b;
  Welford<A> r;
  r.n = a.n + b.n;
  const A d = b.mean - a.mean;
  const A fb = b.n / r.n;
  r.mean = a.mean + d * fb;
  r.m2 = a.m2 + b.m2 + d * d * a.n * fb;
  return r;
}

// Block-wide Welford merge; the result is valid in every thread.
template <typename A>
__device__ Welford<A> welford_block(Welford<A> w, Welford<A>* shm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  for (int off = 16; off > 0; off >>= 1) {
    Welford<A> o;
    o.mean = __shfl_down_sync(0xffffffffu, w.mean, off);
    o.m2 = __shfl_down_sync(0xffffffffu, w.m2, off);
    o.n = __shfl_down_sync(0xffffffffu, w.n, off);
    w = welford_merge(w, o);
  }
  __syncthreads();
  if (lane == 0) shm[warp] = w;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int k = 1; k < nwarps; ++k) w = welford_merge(w, shm[k]);
    shm[0] = w;
  }
  __syncthreads();
  return shm[0];
}

template <typename T>
__device__ void ln_fwd(const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
                       T* __restrict__ y, typename AccT<T>::type* __restrict__ mean_out,
                       typename AccT<T>::type* __restrict__ rstd_out, i64 rows, i64 cols, double eps) {
  typedef typename AccT<T>::type A;
  __shared__ Welford<A> shm[32];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    Welford<A> w = {A(0), A(0), A(0)};
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) welford_add(w, (A)ld(xr[j]));
    w = welford_block(w, shm);
    const A mean = w.mean;
    const A rstd = m_rsqrt(w.m2 / (A)cols + (A)eps);  // biased variance, as torch
    if (threadIdx.x == 0) { mean_out[r] = mean; rstd_out[r] = rstd; }
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) {
      A v = ((A)ld(xr[j]) - mean) * rstd;
      if (gamma) v *= (A)ld(gamma[j]);
      if (beta) v += (A)ld(beta[j]);
      y[r * cols + j] = st<T>(v);
    }
  }
}

template <typename T>
__device__ void ln_bwd_input(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ gamma,
                             const typename AccT<T>::type* __restrict__ mean,
                             const typename AccT<T>::type* __restrict__ rstd, T* __restrict__ dx,
                             i64 rows, i64 cols) {
  typedef typename AccT<T>::type A;
  __shared__ A shm[32];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    const T* gr = dy + r * cols;
    const A mu = mean[r], rs = rstd[r];
    A s1 = 0, s2 = 0;
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) {
      const A g = (A)ld(gr[j]) * (gamma ? (A)ld(gamma[j]) : A(1));
      s1 += g;
      s2 += g * ((A)ld(xr[j]) - mu) * rs;
    }
    s1 = block_reduce(s1, SumOp(), shm) / (A)cols;
    s2 = block_reduce(s2, SumOp(), shm) / (A)cols;
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) {
      const A g = (A)ld(gr[j]) * (gamma ? (A)ld(gamma[j]) : A(1));
      const A xhat = ((A)ld(xr[j]) - mu) * rs;
      dx[r * cols + j] = st<T>(rs * (g - s1 - xhat * s2));
    }
  }
}

template <typename T>
__device__ void ln_bwd_params(const T* __restrict__ dy, const T* __restrict__ x,
                              const typename AccT<T>::type* __restrict__ mean,
                              const typename AccT<T>::type* __restrict__ rstd, T* __restrict__ dgamma,
                              T* __restrict__ dbeta, i64 rows, i64 cols) {
  typedef typename AccT<T>::type A;
  EMBER_GRID_LOOP(j, cols) {
    A sg = 0, sb = 0;
    for (i64 r = 0; r < rows; ++r) {
      const A g = ld(dy[r * cols + j]);
      sg += g * ((A)ld(x[r * cols + j]) - mean[r]) * rstd[r];
      sb += g;
    }
    if (dgamma) dgamma[j] = st<T>(sg);
    if (dbeta) dbeta[j] = st<T>(sb);
  }
}

// ---- batch norm ----------------------------------------------------------------
// A block-stride walk over the elements of one channel from element `start`, keeping
// the sample n and the spatial position s with additions: one division per thread
// instead of one 64-bit division (a long software routine on the GPU) per element.  The
// caller bounds it by its element count (HW must then be positive).
struct SampleWalk {
  i64 n, s, dn, ds, HW;
  __device__ __forceinline__ SampleWalk(i64 start, i64 step, i64 HW_) : HW(HW_) {
    n = start / HW;
    s = start - n * HW;
    dn = step / HW;
    ds = step - dn * HW;
  }
  __device__ __forceinline__ void next() {
    n += dn;
    s += ds;
    if (s >= HW) { s -= HW; ++n; }
  }
};

// This thread's share of elements [lo, hi) of channel c (element m is sample m / HW,
// position m % HW), walked by the block: the Welford state of x, or the sums of dy and
// dy * xhat.  The one-block-per-channel kernels take [0, N*HW), the split ones a part.
template <typename T>
__device__ __forceinline__ Welford<typename AccT<T>::type> bn_welford_range(
    const T* __restrict__ x, i64 c, i64 C, i64 HW, i64 lo, i64 hi) {
  typedef typename AccT<T>::type A;
  Welford<A> w = {A(0), A(0), A(0)};
  i64 m = lo + threadIdx.x;
  if (m < hi)
    for (SampleWalk it(m, blockDim.x, HW); m < hi; m += blockDim.x, it.next())
      welford_add(w, (A)ld(x[(it.n * C + c) * HW + it.s]));
  return w;
}

template <typename T>
__device__ __forceinline__ void bn_dy_sums_range(const T* __restrict__ dy, const T* __restrict__ x,
                                                 typename AccT<T>::type mu, typename AccT<T>::type is,
                                                 i64 c, i64 C, i64 HW, i64 lo, i64 hi,
                                                 typename AccT<T>::type& s1,
                                                 typename AccT<T>::type& s2) {
  typedef typename AccT<T>::type A;
  s1 = A(0);
  s2 = A(0);
  i64 m = lo + threadIdx.x;
  if (m < hi)
    for (SampleWalk it(m, blockDim.x, HW); m < hi; m += blockDim.x, it.next()) {
      const i64 idx = (it.n * C + c) * HW + it.s;
      const A g = ld(dy[idx]);
      s1 += g;
      s2 += g * ((A)ld(x[idx]) - mu) * is;
    }
}

// One channel's statistics from its merged Welford state: mean, 1/sqrt(var + eps) and
// the biased variance var (all three are what the forward saves).
template <typename A>
__device__ __forceinline__ void bn_stats_store(Welford<A> w, i64 c, i64 M, A* mean_out,
                                               A* invstd_out, A* var_out, double eps) {
  const A var = w.m2 / (A)M;
  mean_out[c] = w.mean;
  invstd_out[c] = m_rsqrt(var + (A)eps);
  var_out[c] = var;
}

template <typename T>
__device__ void bn_stats(const T* __restrict__ x, typename AccT<T>::type* __restrict__ mean_out,
                         typename AccT<T>::type* __restrict__ invstd_out,
                         typename AccT<T>::type* __restrict__ var_out, i64 N, i64 C, i64 HW, double eps) {
  typedef typename AccT<T>::type A;
  __shared__ Welford<A> shm[32];
  const i64 M = N * HW;
  for (i64 c = blockIdx.x; c < C; c += gridDim.x) {
    const Welford<A> w = welford_block(bn_welford_range(x, c, C, HW, 0, M), shm);
    if (threadIdx.x == 0) bn_stats_store<A>(w, c, M, mean_out, invstd_out, var_out, eps);
  }
}

// The batch-norm kernels below take the parameters (gamma, beta and their gradients) in
// P: T itself, or float for 16-bit data (PyTorch's mixed batch norm: float16 / bfloat16
// activations with float32 weights, as autocast and .half() models give them).
// A grid-stride loop over the elements of an (outer, C, HW) array that keeps each
// element's channel with additions: the divisions happen once per thread, not twice
// per element (64-bit division is a long software routine on the GPU).
struct ChannelWalk {
  i64 k, step, s, c, ds, dc, HW, C;
  __device__ __forceinline__ ChannelWalk(i64 C_, i64 HW_) : HW(HW_), C(C_) {
    k = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    step = (i64)gridDim.x * blockDim.x;
    s = k % HW;
    c = (k / HW) % C;
    ds = step % HW;
    dc = (step / HW) % C;
  }
  __device__ __forceinline__ void next() {
    k += step;
    s += ds;
    const i64 carry = s >= HW ? 1 : 0;
    s -= carry * HW;
    c += dc + carry;                // < 2C: one wrap at most
    if (c >= C) c -= C;
  }
};

template <typename T, typename P>
__device__ void bn_apply(const T* __restrict__ x, const typename AccT<T>::type* __restrict__ mean,
                         const typename AccT<T>::type* __restrict__ invstd, const P* __restrict__ gamma,
                         const P* __restrict__ beta, T* __restrict__ y, i64 N, i64 C, i64 HW) {
  typedef typename AccT<T>::type A;
  const i64 total = N * C * HW;
  for (ChannelWalk it(C, HW); it.k < total; it.next()) {
    const i64 k = it.k, c = it.c;
    A v = ((A)ld(x[k]) - mean[c]) * invstd[c];
    if (gamma) v *= (A)ld(gamma[c]);
    if (beta) v += (A)ld(beta[c]);
    y[k] = st<T>(v);
  }
}

template <typename T, typename P>
__device__ void bn_bwd_reduce(const T* __restrict__ dy, const T* __restrict__ x,
                              const typename AccT<T>::type* __restrict__ mean,
                              const typename AccT<T>::type* __restrict__ invstd,
                              typename AccT<T>::type* __restrict__ sum_dy,
                              typename AccT<T>::type* __restrict__ sum_dy_xhat, P* __restrict__ dgamma,
                              P* __restrict__ dbeta, i64 N, i64 C, i64 HW) {
  typedef typename AccT<T>::type A;
  __shared__ A shm[32];
  for (i64 c = blockIdx.x; c < C; c += gridDim.x) {
    A s1, s2;
    bn_dy_sums_range(dy, x, mean[c], invstd[c], c, C, HW, 0, N * HW, s1, s2);
    s1 = block_reduce(s1, SumOp(), shm);
    s2 = block_reduce(s2, SumOp(), shm);
    if (threadIdx.x == 0) {
      sum_dy[c] = s1;
      sum_dy_xhat[c] = s2;
      if (dgamma) dgamma[c] = st<P>(s2);
      if (dbeta) dbeta[c] = st<P>(s1);
    }
  }
}

// Split reductions.  One block per channel leaves most of the GPU idle when there are
// few channels of many elements (a CNN's first layers: 64 channels of N*112*112), and
// one block cannot keep enough loads in flight to stream a channel fast.  Then each
// channel's M = N*HW elements are cut into S contiguous parts, one block per (channel,
// part) writes a partial result, and a second kernel merges each channel's S partials
// in part order, so the result does not depend on scheduling.
__device__ __forceinline__ void bn_part(i64 M, i64 S, i64 p, i64& lo, i64& hi) {
  const i64 len = (M + S - 1) / S;
  lo = p * len;
  hi = lo + len < M ? lo + len : M;
}

// partial[3 * (c * S + p) + {0, 1, 2}] = Welford (mean, m2, n) of part p of channel c
template <typename T>
__device__ void bn_stats_partial(const T* __restrict__ x, typename AccT<T>::type* __restrict__ partial,
                                 i64 N, i64 C, i64 HW, i64 S) {
  typedef typename AccT<T>::type A;
  __shared__ Welford<A> shm[32];
  const i64 M = N * HW;
  for (i64 b = blockIdx.x; b < C * S; b += gridDim.x) {
    const i64 c = b / S;
    i64 lo, hi;
    bn_part(M, S, b - c * S, lo, hi);
    const Welford<A> w = welford_block(bn_welford_range(x, c, C, HW, lo, hi), shm);
    if (threadIdx.x == 0) {
      partial[3 * b] = w.mean;
      partial[3 * b + 1] = w.m2;
      partial[3 * b + 2] = w.n;
    }
  }
}

template <typename T>
__device__ void bn_stats_finish(const typename AccT<T>::type* __restrict__ partial,
                                typename AccT<T>::type* __restrict__ mean_out,
                                typename AccT<T>::type* __restrict__ invstd_out,
                                typename AccT<T>::type* __restrict__ var_out, i64 N, i64 C, i64 HW,
                                i64 S, double eps) {
  typedef typename AccT<T>::type A;
  EMBER_GRID_LOOP(c, C) {
    Welford<A> w = {A(0), A(0), A(0)};
    for (i64 p = 0; p < S; ++p) {
      const A* q = partial + 3 * (c * S + p);
      const Welford<A> o = {q[0], q[1], q[2]};
      w = welford_merge(w, o);
    }
    bn_stats_store<A>(w, c, N * HW, mean_out, invstd_out, var_out, eps);
  }
}

// running = (1 - momentum) * running + momentum * batch statistic, in double as on the
// CPU, the variance entering unbiased (var_scale = M / (M - 1), NaN for M = 1 as in
// PyTorch); stats is the forward's (3, C) array (mean, 1/std, biased variance) and the
// running arrays have the parameters' type R.
template <typename A, typename R>
__device__ void bn_update_running(const A* __restrict__ stats, R* __restrict__ running_mean,
                                  R* __restrict__ running_var, i64 C, double momentum,
                                  double var_scale) {
  EMBER_GRID_LOOP(c, C) {
    running_mean[c] = st<R>((1.0 - momentum) * (double)ld(running_mean[c]) +
                            momentum * (double)stats[c]);
    running_var[c] = st<R>((1.0 - momentum) * (double)ld(running_var[c]) +
                           momentum * ((double)stats[2 * C + c] * var_scale));
  }
}

// partial[2 * (c * S + p) + {0, 1}] = sum(dy), sum(dy * xhat) over part p of channel c
template <typename T>
__device__ void bn_bwd_reduce_partial(const T* __restrict__ dy, const T* __restrict__ x,
                                      const typename AccT<T>::type* __restrict__ mean,
                                      const typename AccT<T>::type* __restrict__ invstd,
                                      typename AccT<T>::type* __restrict__ partial, i64 N, i64 C,
                                      i64 HW, i64 S) {
  typedef typename AccT<T>::type A;
  __shared__ A shm[32];
  const i64 M = N * HW;
  for (i64 b = blockIdx.x; b < C * S; b += gridDim.x) {
    const i64 c = b / S;
    i64 lo, hi;
    bn_part(M, S, b - c * S, lo, hi);
    A s1, s2;
    bn_dy_sums_range(dy, x, mean[c], invstd[c], c, C, HW, lo, hi, s1, s2);
    s1 = block_reduce(s1, SumOp(), shm);
    s2 = block_reduce(s2, SumOp(), shm);
    if (threadIdx.x == 0) {
      partial[2 * b] = s1;
      partial[2 * b + 1] = s2;
    }
  }
}

template <typename T, typename P>
__device__ void bn_bwd_reduce_finish(const typename AccT<T>::type* __restrict__ partial,
                                     typename AccT<T>::type* __restrict__ sum_dy,
                                     typename AccT<T>::type* __restrict__ sum_dy_xhat,
                                     P* __restrict__ dgamma, P* __restrict__ dbeta, i64 C, i64 S) {
  typedef typename AccT<T>::type A;
  EMBER_GRID_LOOP(c, C) {
    A s1 = 0, s2 = 0;
    for (i64 p = 0; p < S; ++p) {
      s1 += partial[2 * (c * S + p)];
      s2 += partial[2 * (c * S + p) + 1];
    }
    sum_dy[c] = s1;
    sum_dy_xhat[c] = s2;
    if (dgamma) dgamma[c] = st<P>(s2);
    if (dbeta) dbeta[c] = st<P>(s1);
  }
}

template <typename T, typename P>
__device__ void bn_bwd_input(const T* __restrict__ dy, const T* __restrict__ x,
                             const typename AccT<T>::type* __restrict__ mean,
                             const typename AccT<T>::type* __restrict__ invstd, const P* __restrict__ gamma,
                             const typename AccT<T>::type* __restrict__ sum_dy,
                             const typename AccT<T>::type* __restrict__ sum_dy_xhat, T* __restrict__ dx,
                             i64 N, i64 C, i64 HW) {
  typedef typename AccT<T>::type A;
  const A invM = A(1) / (A)(N * HW);
  const i64 total = N * C * HW;
  for (ChannelWalk it(C, HW); it.k < total; it.next()) {
    const i64 k = it.k, c = it.c;
    const A is = invstd[c];
    const A xhat = ((A)ld(x[k]) - mean[c]) * is;
    const A gm = gamma ? (A)ld(gamma[c]) : A(1);
    dx[k] = st<T>(gm * is * ((A)ld(dy[k]) - sum_dy[c] * invM - xhat * sum_dy_xhat[c] * invM));
  }
}

#define DEF_NORM(dt, T)                                                                             \
  extern "C" __global__ void ember_layer_norm_fwd_##dt(const T* x, const T* gamma, const T* beta, T* y, \
      AccT<T>::type* mean, AccT<T>::type* rstd, i64 rows, i64 cols, double eps) {                   \
    ln_fwd<T>(x, gamma, beta, y, mean, rstd, rows, cols, eps);                                      \
  }                                                                                                 \
  extern "C" __global__ void ember_layer_norm_bwd_input_##dt(const T* dy, const T* x, const T* gamma, \
      const AccT<T>::type* mean, const AccT<T>::type* rstd, T* dx, i64 rows, i64 cols) {            \
    ln_bwd_input<T>(dy, x, gamma, mean, rstd, dx, rows, cols);                                      \
  }                                                                                                 \
  extern "C" __global__ void ember_layer_norm_bwd_params_##dt(const T* dy, const T* x,              \
      const AccT<T>::type* mean, const AccT<T>::type* rstd, T* dgamma, T* dbeta, i64 rows, i64 cols) { \
    ln_bwd_params<T>(dy, x, mean, rstd, dgamma, dbeta, rows, cols);                                 \
  }                                                                                                 \
  extern "C" __global__ void ember_batch_norm_stats_##dt(const T* x, AccT<T>::type* mean,           \
      AccT<T>::type* invstd, AccT<T>::type* var, i64 N, i64 C, i64 HW, double eps) {                \
    bn_stats<T>(x, mean, invstd, var, N, C, HW, eps);                                               \
  }                                                                                                 \
  extern "C" __global__ void ember_batch_norm_stats_partial_##dt(const T* x, AccT<T>::type* partial, \
      i64 N, i64 C, i64 HW, i64 S) {                                                                \
    bn_stats_partial<T>(x, partial, N, C, HW, S);                                                   \
  }                                                                                                 \
  extern "C" __global__ void ember_batch_norm_stats_finish_##dt(const AccT<T>::type* partial,       \
      AccT<T>::type* mean, AccT<T>::type* invstd, AccT<T>::type* var, i64 N, i64 C, i64 HW, i64 S,  \
      double eps) {                                                                                 \
    bn_stats_finish<T>(partial, mean, invstd, var, N, C, HW, S, eps);                               \
  }                                                                                                 \
  extern "C" __global__ void ember_batch_norm_bwd_reduce_partial_##dt(const T* dy, const T* x,      \
      const AccT<T>::type* mean, const AccT<T>::type* invstd, AccT<T>::type* partial, i64 N, i64 C, \
      i64 HW, i64 S) {                                                                              \
    bn_bwd_reduce_partial<T>(dy, x, mean, invstd, partial, N, C, HW, S);                            \
  }                                                                                                 \
  DEF_BN_PARAMS(dt, T, T)
// name suffix, data type T, parameter type P
#define DEF_BN_PARAMS(sfx, T, P)                                                                    \
  extern "C" __global__ void ember_batch_norm_apply_##sfx(const T* x, const AccT<T>::type* mean,    \
      const AccT<T>::type* invstd, const P* gamma, const P* beta, T* y, i64 N, i64 C, i64 HW) {     \
    bn_apply<T, P>(x, mean, invstd, gamma, beta, y, N, C, HW);                                      \
  }                                                                                                 \
  extern "C" __global__ void ember_batch_norm_bwd_reduce_##sfx(const T* dy, const T* x,             \
      const AccT<T>::type* mean, const AccT<T>::type* invstd, AccT<T>::type* sum_dy,                \
      AccT<T>::type* sum_dy_xhat, P* dgamma, P* dbeta, i64 N, i64 C, i64 HW) {                      \
    bn_bwd_reduce<T, P>(dy, x, mean, invstd, sum_dy, sum_dy_xhat, dgamma, dbeta, N, C, HW);         \
  }                                                                                                 \
  extern "C" __global__ void ember_batch_norm_bwd_reduce_finish_##sfx(const AccT<T>::type* partial, \
      AccT<T>::type* sum_dy, AccT<T>::type* sum_dy_xhat, P* dgamma, P* dbeta, i64 C, i64 S) {       \
    bn_bwd_reduce_finish<T, P>(partial, sum_dy, sum_dy_xhat, dgamma, dbeta, C, S);                  \
  }                                                                                                 \
  extern "C" __global__ void ember_batch_norm_bwd_input_##sfx(const T* dy, const T* x,              \
      const AccT<T>::type* mean, const AccT<T>::type* invstd, const P* gamma,                       \
      const AccT<T>::type* sum_dy, const AccT<T>::type* sum_dy_xhat, T* dx, i64 N, i64 C, i64 HW) { \
    bn_bwd_input<T, P>(dy, x, mean, invstd, gamma, sum_dy, sum_dy_xhat, dx, N, C, HW);              \
  }
EMBER_FOR_FLOATS(DEF_NORM)
// statistics accumulator suffix / type A, running statistics suffix / type R
#define DEF_BN_RUNNING(asfx, A, rsfx, R)                                                            \
  extern "C" __global__ void ember_batch_norm_update_running_##asfx##_##rsfx(const A* stats,      \
      R* running_mean, R* running_var, i64 C, double momentum, double var_scale) {                  \
    bn_update_running<A, R>(stats, running_mean, running_var, C, momentum, var_scale);              \
  }
#define DEF_BN_RUNNING_ACC(rsfx, R) DEF_BN_RUNNING(f32, float, rsfx, R) DEF_BN_RUNNING(f64, double, rsfx, R)
EMBER_FOR_FLOATS(DEF_BN_RUNNING_ACC)
DEF_BN_PARAMS(f16_p32, f16, float)
DEF_BN_PARAMS(bf16_p32, bf16, float)
