// Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11).
//
// Every output element e is a pure function of (seed, offset, e): block i of
// four 32-bit words is philox(key = seed, counter = (i, offset)). So results do
// not depend on the grid, and a generator advances by bumping `offset` once per
// call (by 1 is enough: each call owns the counter space (*, offset)); no state
// lives on the device.
//
//   ember_uniform_<f32|f64>   out = low + (high - low) * u,  u in [0, 1)
//   ember_normal_<f32|f64>    Box-Muller: out = mean + std * z
//   ember_dropout_<dt>        y = x * mask / (1 - p), mask = (u >= p); the uint8
//                             mask (may be null) is kept for backward
//   ember_dropout_backward_<dt>  dx = dy * mask * scale
// float32 uses 24 random bits per uniform (4 per Philox call); float64 uses 53
// (two words per value, 2 per call).
#include "ember_common.cu"

// U4, philox4x32_10, u01_f and u01_d are in ember_common.cu (attention.cu's dropout
// draws from the same stream).

// Box-Muller on (u1, u2) in [0, 1): 1 - u1 is in (0, 1], so log is finite.
__device__ __forceinline__ void box_muller_f(float u1, float u2, float& z0, float& z1) {
  const float r = sqrtf(-2.0f * logf(1.0f - u1));
  float s, c;
  sincospif(2.0f * u2, &s, &c);
  z0 = r * c;
  z1 = r * s;
}
__device__ __forceinline__ void box_muller_d(double u1, double u2, double& z0, double& z1) {
  const double r = sqrt(-2.0 * log(1.0 - u1));
  double s, c;
  sincospi(2.0 * u2, &s, &c);
  z0 = r * c;
  z1 = r * s;
}

extern "C" __global__ void ember_uniform_f32(float* out, i64 n, u64 seed, u64 offset, double low, double high) {
  const float lo = (float)low, span = (float)(high - low);
  EMBER_GRID_LOOP(b, (n + 3) / 4) {
    const U4 r = philox4x32_10(seed, offset, (u64)b);
    const u32 w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (b * 4 + k < n) out[b * 4 + k] = lo + span * u01_f(w[k]);
  }
}

extern "C" __global__ void ember_uniform_f64(double* out, i64 n, u64 seed, u64 offset, double low, double high) {
  EMBER_GRID_LOOP(b, (n + 1) / 2) {
    const U4 r = philox4x32_10(seed, offset, (u64)b);
    out[b * 2] = low + (high - low) * u01_d(r.x, r.y);
    if (b * 2 + 1 < n) out[b * 2 + 1] = low + (high - low) * u01_d(r.z, r.w);
  }
}

extern "C" __global__ void ember_normal_f32(float* out, i64 n, u64 seed, u64 offset, double mean, double std) {
  const float m = (float)mean, sd = (float)std;
  EMBER_GRID_LOOP(b, (n + 3) / 4) {
    const U4 r = philox4x32_10(seed, offset, (u64)b);
    float z[4];
    box_muller_f(u01_f(r.x), u01_f(r.y), z[0], z[1]);
    box_muller_f(u01_f(r.z), u01_f(r.w), z[2], z[3]);
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (b * 4 + k < n) out[b * 4 + k] = m + sd * z[k];
  }
}

extern "C" __global__ void ember_normal_f64(double* out, i64 n, u64 seed, u64 offset, double mean, double std) {
  EMBER_GRID_LOOP(b, (n + 1) / 2) {
    const U4 r = philox4x32_10(seed, offset, (u64)b);
    double z0, z1;
    box_muller_d(u01_d(r.x, r.y), u01_d(r.z, r.w), z0, z1);
    out[b * 2] = mean + std * z0;
    if (b * 2 + 1 < n) out[b * 2 + 1] = mean + std * z1;
  }
}

// The keep decision uses a float32 uniform for every dtype, so one seed gives
// the same mask whatever the dtype.
template <typename T>
__device__ void dropout(const T* __restrict__ x, T* __restrict__ y, unsigned char* __restrict__ mask, i64 n,
                        double p, u64 seed, u64 offset) {
  typedef typename AccT<T>::type A;
  const float pf = (float)p;
  const A scale = p < 1.0 ? (A)(1.0 / (1.0 - p)) : A(0);
  EMBER_GRID_LOOP(b, (n + 3) / 4) {
    const U4 r = philox4x32_10(seed, offset, (u64)b);
    const u32 w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const i64 e = b * 4 + k;
      if (e < n) {
        const bool keep = u01_f(w[k]) >= pf;
        y[e] = st<T>(keep ? (A)ld(x[e]) * scale : A(0));
        if (mask) mask[e] = keep;
      }
    }
  }
}

template <typename T>
__device__ void dropout_backward(const T* __restrict__ dy, const unsigned char* __restrict__ mask,
                                 T* __restrict__ dx, i64 n, double scale) {
  typedef typename AccT<T>::type A;
  EMBER_GRID_LOOP(e, n) dx[e] = st<T>(mask[e] ? (A)ld(dy[e]) * (A)scale : A(0));
}

#define DEF_DROPOUT(dt, T)                                                                          \
  extern "C" __global__ void ember_dropout_##dt(const T* x, T* y, unsigned char* mask, i64 n, double p, \
                                                u64 seed, u64 offset) {                             \
    dropout<T>(x, y, mask, n, p, seed, offset);                                                     \
  }                                                                                                 \
  extern "C" __global__ void ember_dropout_backward_##dt(const T* dy, const unsigned char* mask, T* dx, \
                                                         i64 n, double scale) {                     \
    dropout_backward<T>(dy, mask, dx, n, scale);                                                    \
  }
EMBER_FOR_FLOATS(DEF_DROPOUT)
