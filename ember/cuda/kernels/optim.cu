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
//                           dampening, nesterov, maximize; `first_step` = 1 on the step
//                           that creates the momentum buffers (buf = grad, no dampening).
//   ember_multi_adam_<dt>   Adam (decoupled_weight_decay = 0) and AdamW (= 1), amsgrad;
//                           bias_correction1 = 1 - beta1**t and bias_correction2_sqrt =
//                           sqrt(1 - beta2**t) from the host (t: the tensors' step count).
// The names are torch.optim's; ember/optim/reference.py is the plain specification.
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
__device__ void multi_sgd(const u64* params, const u64* grads, const u64* momentum_buffers,
                          const i64* sizes, const int* chunk_tensor, const i64* chunk_begin,
                          i64 nchunks, i64 chunk, double lr, double momentum, double dampening,
                          double weight_decay, int nesterov, int maximize, int first_step) {
  typedef typename AccT<T>::type A;
  const A lr_ = (A)lr, momentum_ = (A)momentum, dampening_ = (A)dampening;
  const A weight_decay_ = (A)weight_decay;
  for (i64 c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const int t = chunk_tensor[c];
    const i64 b = chunk_begin[c];
    const i64 e = b + chunk < sizes[t] ? b + chunk : sizes[t];
    T* param = tensor_ptr<T>(params, t);
    const T* grad = tensor_ptr<const T>(grads, t);
    A* momentum_buffer = momentum_ != A(0) ? tensor_ptr<A>(momentum_buffers, t) : (A*)0;
    for (i64 i = b + threadIdx.x; i < e; i += blockDim.x) {
      const A p = ld(param[i]);
      A d_p = ld(grad[i]);
      if (maximize) d_p = -d_p;
      if (weight_decay_ != A(0)) d_p += weight_decay_ * p;
      if (momentum_buffer) {
        const A buf = first_step ? d_p : momentum_ * momentum_buffer[i] + (A(1) - dampening_) * d_p;
        momentum_buffer[i] = buf;
        d_p = nesterov ? d_p + momentum_ * buf : buf;
      }
      param[i] = st<T>(p - lr_ * d_p);
    }
  }
}

template <typename T>
__device__ void multi_adam(const u64* params, const u64* grads, const u64* exp_avgs,
                           const u64* exp_avg_sqs, const u64* max_exp_avg_sqs, const i64* sizes,
                           const int* chunk_tensor, const i64* chunk_begin, i64 nchunks, i64 chunk,
                           double lr, double beta1, double beta2, double eps, double weight_decay,
                           double bias_correction1, double bias_correction2_sqrt,
                           int decoupled_weight_decay, int amsgrad, int maximize) {
  typedef typename AccT<T>::type A;
  const A beta1_ = (A)beta1, beta2_ = (A)beta2, eps_ = (A)eps, weight_decay_ = (A)weight_decay;
  const A step_size = (A)(lr / bias_correction1);
  const A bias_correction2_sqrt_ = (A)bias_correction2_sqrt;
  const A param_decay = (A)(1.0 - lr * weight_decay);   // AdamW: param *= 1 - lr * weight_decay
  for (i64 c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const int t = chunk_tensor[c];
    const i64 b = chunk_begin[c];
    const i64 e = b + chunk < sizes[t] ? b + chunk : sizes[t];
    T* param = tensor_ptr<T>(params, t);
    const T* grad = tensor_ptr<const T>(grads, t);
    A* exp_avg = tensor_ptr<A>(exp_avgs, t);
    A* exp_avg_sq = tensor_ptr<A>(exp_avg_sqs, t);
    A* max_exp_avg_sq = amsgrad ? tensor_ptr<A>(max_exp_avg_sqs, t) : (A*)0;
    for (i64 i = b + threadIdx.x; i < e; i += blockDim.x) {
      A p = ld(param[i]);
      A g = ld(grad[i]);
      if (maximize) g = -g;
      if (weight_decay_ != A(0)) {
        if (decoupled_weight_decay) p *= param_decay;
        else g += weight_decay_ * p;
      }
      const A m = beta1_ * exp_avg[i] + (A(1) - beta1_) * g;
      const A v = beta2_ * exp_avg_sq[i] + (A(1) - beta2_) * g * g;
      exp_avg[i] = m;
      exp_avg_sq[i] = v;
      A v_used = v;
      if (max_exp_avg_sq) {
        v_used = max_exp_avg_sq[i] > v ? max_exp_avg_sq[i] : v;
        max_exp_avg_sq[i] = v_used;
      }
      const A denom = m_sqrt(v_used) / bias_correction2_sqrt_ + eps_;
      param[i] = st<T>(p - step_size * m / denom);
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
  extern "C" __global__ void ember_multi_sgd_##dt(const u64* params, const u64* grads,              \
      const u64* momentum_buffers, const i64* sizes, const int* chunk_tensor, const i64* chunk_begin, \
      i64 nchunks, i64 chunk, double lr, double momentum, double dampening, double weight_decay,    \
      int nesterov, int maximize, int first_step) {                                                 \
    multi_sgd<T>(params, grads, momentum_buffers, sizes, chunk_tensor, chunk_begin, nchunks, chunk, \
                 lr, momentum, dampening, weight_decay, nesterov, maximize, first_step);            \
  }                                                                                                 \
  extern "C" __global__ void ember_multi_adam_##dt(const u64* params, const u64* grads,             \
      const u64* exp_avgs, const u64* exp_avg_sqs, const u64* max_exp_avg_sqs, const i64* sizes,    \
      const int* chunk_tensor, const i64* chunk_begin, i64 nchunks, i64 chunk, double lr,           \
      double beta1, double beta2, double eps, double weight_decay, double bias_correction1,         \
      double bias_correction2_sqrt, int decoupled_weight_decay, int amsgrad, int maximize) {        \
    multi_adam<T>(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, sizes, chunk_tensor,       \
                  chunk_begin, nchunks, chunk, lr, beta1, beta2, eps, weight_decay, bias_correction1, \
                  bias_correction2_sqrt, decoupled_weight_decay, amsgrad, maximize);                \
  }                                                                                                 \
  extern "C" __global__ void ember_multi_unscale_##dt(const u64* grads, const i64* sizes,           \
      const int* chunk_tensor, const i64* chunk_begin, i64 nchunks, i64 chunk, const float* inv,    \
      int* found) {                                                                                 \
    multi_unscale<T>(grads, sizes, chunk_tensor, chunk_begin, nchunks, chunk, inv, found);          \
  }
EMBER_FOR_FLOATS(DEF_OPTIM)
