// conv2d lowering (im2col / col2im) and 2-D max / average pooling, NCHW contiguous.
//
// conv2d = GEMM(weight (O, C*KH*KW), col (C*KH*KW, OH*OW)) per image, the GEMM
// through cuBLAS; these kernels only move data.
//   ember_im2col_<dt>   x (N, C, H, W) -> col (N, C*KH*KW, OH*OW), or (C*KH*KW, N, OH*OW)
//                       through its two strides; padding reads as 0
//   ember_col2im_<dt>   col -> dx (N, C, H, W), the adjoint of im2col. Written as a
//                       gather (each input pixel sums the columns that read it), so
//                       it needs no atomics, no zeroed output, and is deterministic.
//   Both launch one block per plane (grid-stride): im2col's planes are the N * C*KH*KW
//   rows of col, col2im's the N * C input planes.
// Pooling: the launcher computes OH / OW (ceil_mode included) and passes them.
//   ember_max_pool2d_fwd_<dt>  y and the int64 argmax (h * W + w within the plane);
//                              NaN wins, as in torch; dilation supported
//   ember_max_pool2d_bwd_<dt>  gather form again: a pixel sums dy of the windows
//                              whose argmax it is
//   ember_avg_pool2d_fwd_<dt> / _bwd_<dt>  count_include_pad and divisor_override
//                              (0 = none) as torch; windows clipped to the padded
//                              input count the padding, windows past it do not.
#include "ember_common.cu"

struct Conv2dGeom {
  i64 C, H, W, KH, KW, OH, OW;
  i64 sh, sw, ph, pw, dh, dw;
};

// im2col and col2im walk planes: blocks stride over (image, row) planes, the threads of
// a block over the positions of one plane.  A plane's coordinates come from 64-bit
// divisions once per plane; inside it the index math is 32-bit (a plane holds fewer
// than 2^31 values: the launcher checks), where one element used to cost eight 64-bit
// divisions, each a long software routine on the GPU.
#define EMBER_PLANE_LOOP(p, P) for (i64 p = blockIdx.x; p < (P); p += gridDim.x)
#define EMBER_IN_PLANE_LOOP(i, n) for (int i = (int)threadIdx.x; i < (n); i += (int)blockDim.x)

template <typename T>
__device__ void im2col(const T* __restrict__ x, T* __restrict__ col, i64 N, Conv2dGeom g,
                       i64 sn, i64 sr) {
  // Element (n, r, l) goes to col[n * sn + r * sr + l]: (sn, sr) = (K * L, L) is the
  // forward's (N, K, L) layout, (L, N * L) the weight gradient's (K, N, L), whose rows
  // span the whole batch.  Consecutive threads write consecutive l (coalesced stores).
  const int H = (int)g.H, W = (int)g.W, KH = (int)g.KH, KW = (int)g.KW, OW = (int)g.OW;
  const int L = (int)(g.OH * g.OW);
  const int sh = (int)g.sh, sw = (int)g.sw, ph = (int)g.ph, pw = (int)g.pw;
  const int dh = (int)g.dh, dw = (int)g.dw;
  const i64 K = g.C * KH * KW;
  EMBER_PLANE_LOOP(p, N * K) {
    const i64 n = p / K, r = p - n * K, c = r / (KH * KW);
    const int kk = (int)(r - c * KH * KW), kh = kk / KW, kw = kk - kh * KW;
    const T* __restrict__ xp = x + (n * g.C + c) * H * (i64)W;
    T* __restrict__ cp = col + n * sn + r * sr;
    EMBER_IN_PLANE_LOOP(l, L) {
      const int oh = l / OW, ow = l - oh * OW;
      const int h = oh * sh - ph + kh * dh, w = ow * sw - pw + kw * dw;
      cp[l] = (h >= 0 && h < H && w >= 0 && w < W) ? xp[h * W + w] : st<T>(0.0f);
    }
  }
}

// The output position whose window puts a tap on input position i, given
// t = i + pad - tap * dilation, or -1 when none does: the gather form of the backward
// passes, which keeps them deterministic and free of atomics.
__device__ __forceinline__ int tap_out(int t, int stride, int out) {
  if (t < 0) return -1;
  int o = t;
  if (stride != 1) {
    o = t / stride;
    if (o * stride != t) return -1;
  }
  return o < out ? o : -1;
}

// The pooling kernels' form, in index type I (int where the sizes allow, else i64)
template <typename I>
__device__ __forceinline__ I window_out(I i, I pad, I k, I dil, I stride, I out) {
  const I t = i + pad - k * dil;
  if (t < 0) return -1;
  const I o = t / stride;
  return (o * stride == t && o < out) ? o : -1;
}

// (plane, row, col) of element k of planes of R x Cc, divided in index type I: the
// pooling kernels run with I = int whenever the element count fits (64-bit division
// is a long software routine on the GPU, 32-bit a short one).
template <typename I>
__device__ __forceinline__ void plane_row_col(i64 k64, i64 R, i64 Cc, i64& p, i64& r, i64& c) {
  const I k = (I)k64, q = k / (I)Cc, q2 = q / (I)R;
  c = k - q * (I)Cc;
  r = q - q2 * (I)R;
  p = q2;
}

// Run body<I, T>(args...) with I = int when the input and output plane stacks of g both
// have fewer than 2^31 elements (every index, row, column and tap then fits), else i64.
__device__ __forceinline__ bool fits_int(const Conv2dGeom& g) {
  return g.C * g.H * g.W <= 0x7fffffff && g.C * g.OH * g.OW <= 0x7fffffff &&
         g.H + g.ph <= 0x7fffffff && g.W + g.pw <= 0x7fffffff;
}
#define EMBER_BY_INDEX_WIDTH(body, g, ...)                                      \
  do {                                                                          \
    if (fits_int(g)) body<int, T>(__VA_ARGS__);                                 \
    else body<i64, T>(__VA_ARGS__);                                             \
  } while (0)

template <typename T>
__device__ void col2im(const T* __restrict__ col, T* __restrict__ dx, i64 N, Conv2dGeom g) {
  typedef typename AccT<T>::type A;
  const int H = (int)g.H, W = (int)g.W, KH = (int)g.KH, KW = (int)g.KW;
  const int OH = (int)g.OH, OW = (int)g.OW, L = OH * OW;
  const int sh = (int)g.sh, sw = (int)g.sw, ph = (int)g.ph, pw = (int)g.pw;
  const int dh = (int)g.dh, dw = (int)g.dw;
  const i64 K = g.C * KH * KW;
  EMBER_PLANE_LOOP(p, N * g.C) {
    const i64 n = p / g.C, c = p - n * g.C;
    const T* __restrict__ cb = col + (n * K + c * KH * KW) * L;   // rows (c, kh, kw) of image n
    T* __restrict__ dp = dx + p * H * (i64)W;
    EMBER_IN_PLANE_LOOP(i, H * W) {
      const int h = i / W, w = i - h * W;
      A acc = 0;
      for (int kh = 0; kh < KH; ++kh) {
        const int oh = tap_out(h + ph - kh * dh, sh, OH);
        if (oh < 0) continue;
        for (int kw = 0; kw < KW; ++kw) {
          const int ow = tap_out(w + pw - kw * dw, sw, OW);
          if (ow < 0) continue;
          acc += (A)ld(cb[(i64)(kh * KW + kw) * L + oh * OW + ow]);
        }
      }
      dp[i] = st<T>(acc);
    }
  }
}

// Pool geometry reuses Conv2dGeom with C = N * C planes folded (launcher passes N*C).
template <typename I, typename T>
__device__ __forceinline__ void max_pool_fwd_loop(const T* __restrict__ x, T* __restrict__ y,
                                                  i64* __restrict__ argmax, const Conv2dGeom& g) {
  typedef typename AccT<T>::type A;
  EMBER_GRID_LOOP(k, g.C * g.OH * g.OW) {
    i64 p, oh, ow;
    plane_row_col<I>(k, g.OH, g.OW, p, oh, ow);
    const T* plane = x + p * g.H * g.W;
    A best = -__int_as_float(0x7f800000);
    i64 bi = -1;
    for (i64 kh = 0; kh < g.KH; ++kh) {
      const i64 h = oh * g.sh - g.ph + kh * g.dh;
      if (h < 0 || h >= g.H) continue;
      for (i64 kw = 0; kw < g.KW; ++kw) {
        const i64 w = ow * g.sw - g.pw + kw * g.dw;
        if (w < 0 || w >= g.W) continue;
        const A v = ld(plane[h * g.W + w]);
        // First maximum wins; a NaN beats everything and stops the search.
        if (bi < 0 || v > best || v != v) { best = v; bi = h * g.W + w; if (v != v) goto done; }
      }
    }
  done:
    y[k] = st<T>(best);
    if (argmax) argmax[k] = bi;
  }
}

template <typename T>
__device__ void max_pool_fwd(const T* __restrict__ x, T* __restrict__ y, i64* __restrict__ argmax, Conv2dGeom g) {
  EMBER_BY_INDEX_WIDTH(max_pool_fwd_loop, g, x, y, argmax, g);
}

template <typename I, typename T>
__device__ __forceinline__ void max_pool_bwd_loop(const T* __restrict__ dy, const i64* __restrict__ argmax,
                                                  T* __restrict__ dx, const Conv2dGeom& g) {
  typedef typename AccT<T>::type A;
  EMBER_GRID_LOOP(k, g.C * g.H * g.W) {
    i64 p, h, w;
    plane_row_col<I>(k, g.H, g.W, p, h, w);
    const i64 me = h * g.W + w, base = p * g.OH * g.OW;
    A acc = 0;
    for (i64 kh = 0; kh < g.KH; ++kh) {
      const i64 oh = window_out<I>(h, g.ph, kh, g.dh, g.sh, g.OH);
      if (oh < 0) continue;
      for (i64 kw = 0; kw < g.KW; ++kw) {
        const i64 ow = window_out<I>(w, g.pw, kw, g.dw, g.sw, g.OW);
        if (ow < 0) continue;
        const i64 o = base + oh * g.OW + ow;
        if (argmax[o] == me) acc += (A)ld(dy[o]);
      }
    }
    dx[k] = st<T>(acc);
  }
}

template <typename T>
__device__ void max_pool_bwd(const T* __restrict__ dy, const i64* __restrict__ argmax, T* __restrict__ dx,
                             Conv2dGeom g) {
  EMBER_BY_INDEX_WIDTH(max_pool_bwd_loop, g, dy, argmax, dx, g);
}

// Divisor of window (oh, ow), torch's avg_pool2d rule.
__device__ __forceinline__ i64 avg_divisor(const Conv2dGeom& g, i64 oh, i64 ow, int count_include_pad,
                                           i64 divisor_override) {
  if (divisor_override) return divisor_override;
  i64 h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
  i64 h1 = min(h0 + g.KH, g.H + g.ph), w1 = min(w0 + g.KW, g.W + g.pw);
  if (count_include_pad) return (h1 - h0) * (w1 - w0);
  h0 = max(h0, (i64)0); w0 = max(w0, (i64)0);
  h1 = min(h1, g.H); w1 = min(w1, g.W);
  return (h1 - h0) * (w1 - w0);
}

template <typename I, typename T>
__device__ __forceinline__ void avg_pool_fwd_loop(const T* __restrict__ x, T* __restrict__ y, const Conv2dGeom& g,
                                                  int count_include_pad, i64 divisor_override) {
  typedef typename AccT<T>::type A;
  EMBER_GRID_LOOP(k, g.C * g.OH * g.OW) {
    i64 p, oh, ow;
    plane_row_col<I>(k, g.OH, g.OW, p, oh, ow);
    const T* plane = x + p * g.H * g.W;
    const i64 h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    A acc = 0;
    for (i64 h = max(h0, (i64)0); h < min(h0 + g.KH, g.H); ++h)
      for (i64 w = max(w0, (i64)0); w < min(w0 + g.KW, g.W); ++w) acc += (A)ld(plane[h * g.W + w]);
    y[k] = st<T>(acc / (A)avg_divisor(g, oh, ow, count_include_pad, divisor_override));
  }
}

template <typename T>
__device__ void avg_pool_fwd(const T* __restrict__ x, T* __restrict__ y, Conv2dGeom g, int count_include_pad,
                             i64 divisor_override) {
  EMBER_BY_INDEX_WIDTH(avg_pool_fwd_loop, g, x, y, g, count_include_pad, divisor_override);
}

template <typename I, typename T>
__device__ __forceinline__ void avg_pool_bwd_loop(const T* __restrict__ dy, T* __restrict__ dx, const Conv2dGeom& g,
                                                  int count_include_pad, i64 divisor_override) {
  typedef typename AccT<T>::type A;
  EMBER_GRID_LOOP(k, g.C * g.H * g.W) {
    i64 p, h, w;
    plane_row_col<I>(k, g.H, g.W, p, h, w);
    const i64 base = p * g.OH * g.OW;
    A acc = 0;
    for (i64 kh = 0; kh < g.KH; ++kh) {
      const i64 oh = window_out<I>(h, g.ph, kh, 1, g.sh, g.OH);   // pooling: no dilation
      if (oh < 0) continue;
      for (i64 kw = 0; kw < g.KW; ++kw) {
        const i64 ow = window_out<I>(w, g.pw, kw, 1, g.sw, g.OW);
        if (ow < 0) continue;
        acc += (A)ld(dy[base + oh * g.OW + ow]) /
               (A)avg_divisor(g, oh, ow, count_include_pad, divisor_override);
      }
    }
    dx[k] = st<T>(acc);
  }
}

template <typename T>
__device__ void avg_pool_bwd(const T* __restrict__ dy, T* __restrict__ dx, Conv2dGeom g, int count_include_pad,
                             i64 divisor_override) {
  EMBER_BY_INDEX_WIDTH(avg_pool_bwd_loop, g, dy, dx, g, count_include_pad, divisor_override);
}

#define DEF_POOL_CONV(dt, T)                                                                        \
  extern "C" __global__ void ember_im2col_##dt(const T* x, T* col, i64 N, Conv2dGeom g, i64 sn, i64 sr) { \
    im2col<T>(x, col, N, g, sn, sr);                                                                \
  }                                                                                                 \
  extern "C" __global__ void ember_col2im_##dt(const T* col, T* dx, i64 N, Conv2dGeom g) { col2im<T>(col, dx, N, g); } \
  extern "C" __global__ void ember_max_pool2d_fwd_##dt(const T* x, T* y, i64* argmax, Conv2dGeom g) { \
    max_pool_fwd<T>(x, y, argmax, g);                                                               \
  }                                                                                                 \
  extern "C" __global__ void ember_max_pool2d_bwd_##dt(const T* dy, const i64* argmax, T* dx, Conv2dGeom g) { \
    max_pool_bwd<T>(dy, argmax, dx, g);                                                             \
  }                                                                                                 \
  extern "C" __global__ void ember_avg_pool2d_fwd_##dt(const T* x, T* y, Conv2dGeom g, int count_include_pad, \
                                                       i64 divisor_override) {                      \
    avg_pool_fwd<T>(x, y, g, count_include_pad, divisor_override);                                  \
  }                                                                                                 \
  extern "C" __global__ void ember_avg_pool2d_bwd_##dt(const T* dy, T* dx, Conv2dGeom g, int count_include_pad, \
                                                       i64 divisor_override) {                      \
    avg_pool_bwd<T>(dy, dx, g, count_include_pad, divisor_override);                                \
  }
EMBER_FOR_FLOATS(DEF_POOL_CONV)
