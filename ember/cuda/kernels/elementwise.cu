// Elementwise unary and binary ops.
//
// Per op and dtype three (binary: four) kernels, chosen by the launcher:
//   ember_<op>_<dt>_contig   all operands contiguous, same shape: 128-bit loads
//                            when every pointer is 16-byte aligned, scalar tail.
//   ember_<op>_<dt>_strided  any shape/strides up to 8 dims (broadcast = stride 0,
//                            negative strides allowed), strides in elements.
//   ember_<op>_<dt>_scalar   (binary only) tensor op scalar, or scalar op tensor
//                            when `swap` is set; the scalar is passed as double so
//                            one signature serves every dtype.
// Arithmetic is done in AccT<T> (float for half types), as the CPU loops do.
// ember_cast_<src>_<dst>: dtype conversion of a contiguous array, rounded once to
// nearest even (float64 -> 16-bit is left to CuPy: via float it would round twice).
#include "ember_common.cu"

// Shape and per-operand strides, passed by value (kernel parameter space, no
// device allocation per launch). Operand 0 is the output.
struct StridedArgs {
  int ndim;
  i64 shape[EMBER_MAX_DIMS];
  i64 strides[3][EMBER_MAX_DIMS];
};

// ---- scalar math, overloaded for float and double ----------------------------
__device__ __forceinline__ float m_exp(float x) { return expf(x); }
__device__ __forceinline__ double m_exp(double x) { return exp(x); }
__device__ __forceinline__ float m_log(float x) { return logf(x); }
__device__ __forceinline__ double m_log(double x) { return log(x); }
__device__ __forceinline__ float m_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double m_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float m_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double m_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float m_erf(float x) { return erff(x); }
__device__ __forceinline__ double m_erf(double x) { return erf(x); }
__device__ __forceinline__ float m_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double m_pow(double a, double b) { return pow(a, b); }
__device__ __forceinline__ float m_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double m_abs(double x) { return fabs(x); }

// ---- op functors: A is the accumulator type ---------------------------------
#define UNARY(name, expr) \
  struct Op_##name { template <typename A> __device__ __forceinline__ A operator()(A x) const { return (expr); } };
UNARY(neg, -x)
UNARY(abs, m_abs(x))
UNARY(exp, m_exp(x))
UNARY(log, m_log(x))
UNARY(sqrt, m_sqrt(x))
UNARY(tanh, m_tanh(x))
// sigmoid via exp(-|x|) so neither tail overflows.
UNARY(sigmoid, (x >= A(0) ? A(1) / (A(1) + m_exp(-x)) : m_exp(x) / (A(1) + m_exp(x))))
// relu keeps NaN (x > 0 is false for NaN, so test x < 0 instead).
UNARY(relu, (x < A(0) ? A(0) : x))
// Exact (erf) GELU, torch's default.
UNARY(gelu, (A(0.5) * x * (A(1) + m_erf(x * A(0.70710678118654752440)))))
// GELU, tanh approximation (approximate='tanh').
UNARY(gelu_tanh, (A(0.5) * x * (A(1) + m_tanh(A(0.79788456080286535588) * (x + A(0.044715) * x * x * x)))))
UNARY(silu, (x >= A(0) ? x / (A(1) + m_exp(-x)) : x * m_exp(x) / (A(1) + m_exp(x))))
#undef UNARY

#define BINARY(name, expr) \
  struct Op_##name { template <typename A> __device__ __forceinline__ A operator()(A a, A b) const { return (expr); } };
BINARY(add, a + b)
BINARY(sub, a - b)
BINARY(mul, a * b)
BINARY(div, a / b)
BINARY(maximum, nan_max(a, b))
BINARY(minimum, nan_min(a, b))
BINARY(pow, m_pow(a, b))
#undef BINARY

// ---- launch-shape-independent bodies ----------------------------------------
// 16 bytes of T: one 128-bit transaction per thread per iteration.
template <typename T> struct __align__(16) Vec16 { T v[16 / sizeof(T)]; };

__device__ __forceinline__ bool aligned16(const void* p) { return ((u64)p & 15u) == 0; }

template <typename T, typename Op>
__device__ void unary_contig(const T* __restrict__ x, T* __restrict__ y, i64 n) {
  typedef typename AccT<T>::type A;
  const int V = 16 / sizeof(T);
  Op op;
  // Uniform across the grid, so no divergence: either everyone vectorises or nobody.
  const i64 nvec = (aligned16(x) && aligned16(y)) ? n / V : 0;
  const Vec16<T>* xv = (const Vec16<T>*)x;
  Vec16<T>* yv = (Vec16<T>*)y;
  EMBER_GRID_LOOP(i, nvec) {
    Vec16<T> a = xv[i], r;
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = st<T>(op((A)ld(a.v[k])));
    yv[i] = r;
  }
  EMBER_GRID_LOOP(j, n - nvec * V) {
    const i64 i = nvec * V + j;
    y[i] = st<T>(op((A)ld(x[i])));
  }
}

template <typename T, typename Op>
__device__ void binary_contig(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, i64 n) {
  typedef typename AccT<T>::type A;
  const int V = 16 / sizeof(T);
  Op op;
  const i64 nvec = (aligned16(a) && aligned16(b) && aligned16(y)) ? n / V : 0;
  const Vec16<T>* av = (const Vec16<T>*)a;
  const Vec16<T>* bv = (const Vec16<T>*)b;
  Vec16<T>* yv = (Vec16<T>*)y;
  EMBER_GRID_LOOP(i, nvec) {
    Vec16<T> p = av[i], q = bv[i], r;
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = st<T>(op((A)ld(p.v[k]), (A)ld(q.v[k])));
    yv[i] = r;
  }
  EMBER_GRID_LOOP(j, n - nvec * V) {
    const i64 i = nvec * V + j;
    y[i] = st<T>(op((A)ld(a[i]), (A)ld(b[i])));
  }
}

// Element offsets of the linear index `i` (row-major over shape) in up to three
// operands. Innermost dimension first: the common fast-varying case divides once.
// I is the index type: unsigned 32-bit whenever the element count fits (64-bit
// division is a long software routine on the GPU, 32-bit a short one), else i64.
template <int NOPS, typename I>
__device__ __forceinline__ void strided_offsets(const StridedArgs& s, I i, i64* off) {
#pragma unroll
  for (int k = 0; k < NOPS; ++k) off[k] = 0;
  for (int d = s.ndim - 1; d >= 0; --d) {
    const I sz = (I)s.shape[d];
    const I q = i / sz, r = i - q * sz;
#pragma unroll
    for (int k = 0; k < NOPS; ++k) off[k] += (i64)r * s.strides[k][d];
    i = q;
  }
}

template <typename I, typename T, typename Op>
__device__ __forceinline__ void unary_strided_loop(const T* x, T* y, i64 n, const StridedArgs& s) {
  typedef typename AccT<T>::type A;
  Op op;
  EMBER_GRID_LOOP_T(I, i, n) {
    i64 off[2];
    strided_offsets<2, I>(s, i, off);
    y[off[0]] = st<T>(op((A)ld(x[off[1]])));
  }
}

template <typename I, typename T, typename Op>
__device__ __forceinline__ void binary_strided_loop(const T* a, const T* b, T* y, i64 n,
                                                    const StridedArgs& s) {
  typedef typename AccT<T>::type A;
  Op op;
  EMBER_GRID_LOOP_T(I, i, n) {
    i64 off[3];
    strided_offsets<3, I>(s, i, off);
    y[off[0]] = st<T>(op((A)ld(a[off[1]]), (A)ld(b[off[2]])));
  }
}

template <typename T, typename Op>
__device__ void unary_strided(const T* x, T* y, i64 n, const StridedArgs& s) {
  if (n <= 0x7fffffff) unary_strided_loop<unsigned, T, Op>(x, y, n, s);
  else unary_strided_loop<i64, T, Op>(x, y, n, s);
}

template <typename T, typename Op>
__device__ void binary_strided(const T* a, const T* b, T* y, i64 n, const StridedArgs& s) {
  if (n <= 0x7fffffff) binary_strided_loop<unsigned, T, Op>(a, b, y, n, s);
  else binary_strided_loop<i64, T, Op>(a, b, y, n, s);
}

template <typename T, typename Op>
__device__ void binary_scalar(const T* __restrict__ a, double s, T* __restrict__ y, i64 n, int swap) {
  typedef typename AccT<T>::type A;
  Op op;
  const A sv = (A)s;
  if (swap) {
    EMBER_GRID_LOOP(i, n) y[i] = st<T>(op(sv, (A)ld(a[i])));
  } else {
    EMBER_GRID_LOOP(i, n) y[i] = st<T>(op((A)ld(a[i]), sv));
  }
}

// ---- extern "C" entry points -------------------------------------------------
#define DEF_UNARY_DT(op, dt, T)                                                              \
  extern "C" __global__ void ember_##op##_##dt##_contig(const T* x, T* y, i64 n) {           \
    unary_contig<T, Op_##op>(x, y, n);                                                       \
  }                                                                                          \
  extern "C" __global__ void ember_##op##_##dt##_strided(const T* x, T* y, i64 n, StridedArgs s) { \
    unary_strided<T, Op_##op>(x, y, n, s);                                                   \
  }
#define DEF_BINARY_DT(op, dt, T)                                                             \
  extern "C" __global__ void ember_##op##_##dt##_contig(const T* a, const T* b, T* y, i64 n) { \
    binary_contig<T, Op_##op>(a, b, y, n);                                                   \
  }                                                                                          \
  extern "C" __global__ void ember_##op##_##dt##_strided(const T* a, const T* b, T* y, i64 n, \
                                                          StridedArgs s) {                   \
    binary_strided<T, Op_##op>(a, b, y, n, s);                                               \
  }                                                                                          \
  extern "C" __global__ void ember_##op##_##dt##_scalar(const T* a, double s, T* y, i64 n, int swap) { \
    binary_scalar<T, Op_##op>(a, s, y, n, swap);                                             \
  }

#define DEF_UNARY(op) DEF_UNARY_DT(op, f32, float) DEF_UNARY_DT(op, f64, double) \
                      DEF_UNARY_DT(op, f16, f16) DEF_UNARY_DT(op, bf16, bf16)
#define DEF_BINARY(op) DEF_BINARY_DT(op, f32, float) DEF_BINARY_DT(op, f64, double) \
                       DEF_BINARY_DT(op, f16, f16) DEF_BINARY_DT(op, bf16, bf16)

// Keep these lists in step with ember/cuda/__init__.py (the test checks both ways).
DEF_UNARY(neg) DEF_UNARY(abs) DEF_UNARY(exp) DEF_UNARY(log) DEF_UNARY(sqrt)
DEF_UNARY(tanh) DEF_UNARY(sigmoid) DEF_UNARY(relu) DEF_UNARY(gelu) DEF_UNARY(gelu_tanh) DEF_UNARY(silu)
DEF_BINARY(add) DEF_BINARY(sub) DEF_BINARY(mul) DEF_BINARY(div) DEF_BINARY(maximum) DEF_BINARY(minimum)
DEF_BINARY(pow)

// ---- dtype casts (contiguous) ---------------------------------------------------
// Widening a 16-bit type to float is exact, so every cast here rounds at most once.
template <typename S, typename D>
__device__ void cast_contig(const S* __restrict__ x, D* __restrict__ y, i64 n) {
  EMBER_GRID_LOOP(i, n) y[i] = st<D>(ld(x[i]));
}
#define DEF_CAST(sd, S, dd, D)                                                               \
  extern "C" __global__ void ember_cast_##sd##_##dd(const S* x, D* y, i64 n) {               \
    cast_contig<S, D>(x, y, n);                                                              \
  }
// Keep in step with CASTS in ember/cuda/__init__.py.
DEF_CAST(f32, float, f64, double) DEF_CAST(f32, float, f16, f16) DEF_CAST(f32, float, bf16, bf16)
DEF_CAST(f64, double, f32, float)
DEF_CAST(f16, f16, f32, float) DEF_CAST(f16, f16, f64, double) DEF_CAST(f16, f16, bf16, bf16)
DEF_CAST(bf16, bf16, f32, float) DEF_CAST(bf16, bf16, f64, double) DEF_CAST(bf16, bf16, f16, f16)
