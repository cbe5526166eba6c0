// Fused multi-tensor optimizer steps: one launch updates every parameter of a
// group, instead of ~10 elementwise launches per parameter.
//
// Tensor lists arrive as device arrays of pointers (u64 addresses, one per
// tensor) plus element counts. The host cuts every tensor into chunks of
// `chunk` elements and passes a chunk table (chunk_tensor[c], chunk_begin[c]);
// blocks stride over chunks, threads over a chunk's elements. The host
// rebuilds the tables only when the parameter list changes.
//
// Parameters and gradients are T; optimizer state (momentum, exp_avg, ...) is
// AccT<T> (float for half parameters), and all arithmetic is in AccT<T>.
// Scalars come as double so one signature serves every dtype; per-step values
// (lr, bias corrections) are plain arguments, so nothing is read back to the host.
//
//   ember_multi_sgd_<dt>    torch.optim.SGD semantics: weight_decay, momentum,
//                           dampening, nesterov, maximize; `first` = 1 on the step
//                           that creates the momentum buffers (buf = g, no dampening).
//   ember_multi_adam_<dt>   Adam (decoupled = 0) and AdamW (decoupled = 1), amsgrad;
//                           bc1 = 1 - beta1**t, bc2_sqrt = sqrt(1 - beta2**t) from the host.
//   ember_multi_unscale_<dt> GradScaler's unscale: g *= inv (inv[0] rounded to the
//                           gradient's dtype first, as the CPU path), in place; a
//                           result that is inf or NaN sets *found = 1.  inv and found
//                           stay on the device, so nothing is read back.
#include "ember_common.cu"

__device__ __forceinline__ float m_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double m_sqrt(double x) { return sqrt(x); }

template <typename P>
__device__ __forceinline__ P* tensor_ptr(const u64* ptrs, int t) { return (P*)ptrs[t]; }

template <typename T>
__device__ void multi_sgd(const u64* params, const u64* grads, const u64* bufs, const i64* sizes,
                          const int* chunk_tensor, const i64* chunk_begin, i64 nchunks, i64 chunk,
                          double lr, double momentum, double dampening, double weight_decay,
                          int nesterov, int maximize, int first) {
  typedef typename AccT<T>::type A;
  const A lr_ = (A)lr, mom = (A)momentum, damp = (A)dampening, wd = (A)weight_decay;
  for (i64 c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const int t = chunk_tensor[c];
    const i64 b = chunk_begin[c];
    const i64 e = b + chunk < sizes[t] ? b + chunk : sizes[t];
    T* p = tensor_ptr<T>(params, t);
    const T* g = tensor_ptr<const T>(grads, t);
    A* buf = mom != A(0) ? tensor_ptr<A>(bufs, t) : (A*)0;
    for (i64 i = b + threadIdx.x; i < e; i += blockDim.x) {
      const A pv = ld(p[i]);
      A d = ld(g[i]);
      if (maximize) d = -d;
      if (wd != A(0)) d += wd * pv;
      if (buf) {
        const A m = first ? d : mom * buf[i] + (A(1) - damp) * d;
        buf[i] = m;
        d = nesterov ? d + mom * m : m;
      }
      p[i] = st<T>(pv - lr_ * d);
    }
  }
}

template <typename T>
__device__ void multi_adam(const u64* params, const u64* grads, const u64* exp_avgs, const u64* exp_avg_sqs,
                           const u64* max_exp_avg_sqs, const i64* sizes, const int* chunk_tensor,
                           const i64* chunk_begin, i64 nchunks, i64 chunk, double lr, double beta1,
                           double beta2, double eps, double weight_decay, double bc1, double bc2_sqrt,
                           int decoupled, int amsgrad, int maximize) {
  typedef typename AccT<T>::type A;
  const A b1 = (A)beta1, b2 = (A)beta2, eps_ = (A)eps, wd = (A)weight_decay;
  const A step_size = (A)(lr / bc1), bc2s = (A)bc2_sqrt, decay = (A)(1.0 - lr * weight_decay);
  for (i64 c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const int t = chunk_tensor[c];
    const i64 b = chunk_begin[c];
    const i64 e = b + chunk < sizes[t] ? b + chunk : sizes[t];
    T* p = tensor_ptr<T>(params, t);
    const T* g = tensor_ptr<const T>(grads, t);
    A* m = tensor_ptr<A>(exp_avgs, t);
    A* v = tensor_ptr<A>(exp_avg_sqs, t);
    A* vmax = amsgrad ? tensor_ptr<A>(max_exp_avg_sqs, t) : (A*)0;
    for (i64 i = b + threadIdx.x; i < e; i += blockDim.x) {
      A pv = ld(p[i]);
      A gv = ld(g[i]);
      if (maximize) gv = -gv;
      if (wd != A(0)) {
        if (decoupled) pv *= decay;
        else gv += wd * pv;
      }
      const A mi = b1 * m[i] + (A(1) - b1) * gv;
      const A vi = b2 * v[i] + (A(1) - b2) * gv * gv;
      m[i] = mi;
      v[i] = vi;
      A vd = vi;
      if (vmax) {
        vd = vmax[i] > vi ? vmax[i] : vi;
        vmax[i] = vd;
      }
      p[i] = st<T>(pv - step_size * mi / (m_sqrt(vd) / bc2s + eps_));
    }
  }
}

template <typename T>
__device__ void multi_unscale(const u64* grads, const i64* sizes, const int* chunk_tensor,
                              const i64* chunk_begin, i64 nchunks, i64 chunk, const float* inv,
                              int* found) {
  typedef typename AccT<T>::type A;
  const A s = (A)ld(st<T>(inv[0]));
  for (i64 c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const int t = chunk_tensor[c];
    const i64 b = chunk_begin[c];
    const i64 e = b + chunk < sizes[t] ? b + chunk : sizes[t];
    T* g = tensor_ptr<T>(grads, t);
    bool bad = false;
    for (i64 i = b + threadIdx.x; i < e; i += blockDim.x) {
      const T r = st<T>((A)ld(g[i]) * s);
      g[i] = r;
      const A v = (A)ld(r);
      bad |= !(v - v == A(0));  // inf - inf and NaN - NaN are NaN
    }
    if (bad) atomicExch(found, 1);
  }
}

#define DEF_OPTIM(dt, T)                                                                            \
  extern "C" __global__ void ember_multi_sgd_##dt(const u64* params, const u64* grads, const u64* bufs, \
      const i64* sizes, const int* chunk_tensor, const i64* chunk_begin, i64 nchunks, i64 chunk,    \
      double lr, double momentum, double dampening, double weight_decay, int nesterov, int maximize, \
      int first) {                                                                                  \
    multi_sgd<T>(params, grads, bufs, sizes, chunk_tensor, chunk_begin, nchunks, chunk, lr, momentum, \
                 dampening, weight_decay, nesterov, maximize, first);                               \
  }                                                                                                 \
  extern "C" __global__ void ember_multi_adam_##dt(const u64* params, const u64* grads,             \
      const u64* exp_avgs, const u64* exp_avg_sqs, const u64* max_exp_avg_sqs, const i64* sizes,    \
      const int* chunk_tensor, const i64* chunk_begin, i64 nchunks, i64 chunk, double lr,           \
      double beta1, double beta2, double eps, double weight_decay, double bc1, double bc2_sqrt,      \
      int decoupled, int amsgrad, int maximize) {                                                   \
    multi_adam<T>(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, sizes, chunk_tensor,       \
                  chunk_begin, nchunks, chunk, lr, beta1, beta2, eps, weight_decay, bc1, bc2_sqrt,  \
                  decoupled, amsgrad, maximize);                                                    \
  }                                                                                                 \
  extern "C" __global__ void ember_multi_unscale_##dt(const u64* grads, const i64* sizes,           \
      const int* chunk_tensor, const i64* chunk_begin, i64 nchunks, i64 chunk, const float* inv,    \
      int* found) {                                                                                 \
    multi_unscale<T>(grads, sizes, chunk_tensor, chunk_begin, nchunks, chunk, inv, found);          \
  }
EMBER_FOR_FLOATS(DEF_OPTIM)
