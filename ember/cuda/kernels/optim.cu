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
//                           each tensor's step count t is a float on the device (`steps`,
//                           one address per tensor, already incremented by
//                           ember_multi_step_bump); bias_correction1 = 1 - beta1**t and
//                           sqrt(1 - beta2**t) are computed here in double precision,
//                           so no step count ever comes from (or goes to) the host.
//   ember_multi_step_bump   steps[i] += 1 for every tensor of an Adam launch.
//   ember_amp_update_scale  GradScaler.update's new scale and growth tracker, on the device.
// GradScaler's protocol for fused optimizers (torch's _fused_adam_ / _fused_sgd_):
// `found_inf` (a float on the device, or null) nonzero skips the whole launch, state,
// parameters and step counts alike, read by the kernel so the host never waits for it;
// `grad_scale` (a float on the device, or null) divides each gradient first, and the
// quotient, rounded to the gradient's dtype, is written back into the gradient and used.
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

// GradScaler found an inf/NaN gradient: the step is skipped on the device
__device__ __forceinline__ bool step_skipped(const float* found_inf) {
  return found_inf != 0 && *found_inf != 0.0f;
}

// the gradient divided by *grad_scale (when given), rounded to T and written back
template <typename T, typename A>
__device__ __forceinline__ A unscaled_grad(T* grad, i64 i, const float* grad_scale) {
  if (!grad_scale) return ld(grad[i]);
  const T g = st<T>(ld(grad[i]) / (A)(*grad_scale));
  grad[i] = g;
  return ld(g);
}

template <typename T>
__device__ void multi_sgd(const u64* params, const u64* grads, const u64* momentum_buffers,
                          const i64* sizes, const int* chunk_tensor, const i64* chunk_begin,
                          i64 nchunks, i64 chunk, double lr, double momentum, double dampening,
                          double weight_decay, int nesterov, int maximize, int first_step,
                          const float* grad_scale, const float* found_inf) {
  typedef typename AccT<T>::type A;
  if (step_skipped(found_inf)) return;
  const A lr_ = (A)lr, momentum_ = (A)momentum, dampening_ = (A)dampening;
  const A weight_decay_ = (A)weight_decay;
  for (i64 c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const int t = chunk_tensor[c];
    const i64 b = chunk_begin[c];
    const i64 e = b + chunk < sizes[t] ? b + chunk : sizes[t];
    T* param = tensor_ptr<T>(params, t);
    T* grad = tensor_ptr<T>(grads, t);
    A* momentum_buffer = momentum_ != A(0) ? tensor_ptr<A>(momentum_buffers, t) : (A*)0;
    for (i64 i = b + threadIdx.x; i < e; i += blockDim.x) {
      const A p = ld(param[i]);
      A d_p = unscaled_grad<T, A>(grad, i, grad_scale);
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
                           const u64* exp_avg_sqs, const u64* max_exp_avg_sqs, const u64* steps,
                           const i64* sizes, const int* chunk_tensor, const i64* chunk_begin,
                           i64 nchunks, i64 chunk, double lr, double beta1, double beta2,
                           double eps, double weight_decay, int decoupled_weight_decay,
                           int amsgrad, int maximize, const float* grad_scale,
                           const float* found_inf) {
  typedef typename AccT<T>::type A;
  if (step_skipped(found_inf)) return;
  const A beta2_ = (A)beta2, eps_ = (A)eps, weight_decay_ = (A)weight_decay;
  // 1 - beta in double, then rounded (a float 1 - 0.999f is off by 1e-5), and exp_avg
  // as torch's two-sided lerp(exp_avg, g, 1 - beta1), as the CPU kernels
  const A lerp_weight = (A)(1.0 - beta1), one_minus_beta2 = (A)(1.0 - beta2);
  const bool lerp_from_start = lerp_weight < A(0.5) && lerp_weight > A(-0.5);
  const A param_decay = (A)(1.0 - lr * weight_decay);   // AdamW: param *= 1 - lr * weight_decay
  for (i64 c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const int t = chunk_tensor[c];
    const i64 b = chunk_begin[c];
    const i64 e = b + chunk < sizes[t] ? b + chunk : sizes[t];
    T* param = tensor_ptr<T>(params, t);
    T* grad = tensor_ptr<T>(grads, t);
    // the bias corrections of this tensor's step count, in double (torch's Python code)
    const double step = (double)*tensor_ptr<const float>(steps, t);
    const A step_size = (A)(lr / (1.0 - pow(beta1, step)));
    const A bias_correction2_sqrt_ = (A)sqrt(1.0 - pow(beta2, step));
    A* exp_avg = tensor_ptr<A>(exp_avgs, t);
    A* exp_avg_sq = tensor_ptr<A>(exp_avg_sqs, t);
    A* max_exp_avg_sq = amsgrad ? tensor_ptr<A>(max_exp_avg_sqs, t) : (A*)0;
    for (i64 i = b + threadIdx.x; i < e; i += blockDim.x) {
      A p = ld(param[i]);
      A g = unscaled_grad<T, A>(grad, i, grad_scale);
      if (maximize) g = -g;
      if (weight_decay_ != A(0)) {
        if (decoupled_weight_decay) p *= param_decay;
        else g += weight_decay_ * p;
      }
      const A m0 = exp_avg[i];
      const A m = lerp_from_start ? m0 + lerp_weight * (g - m0)
                                  : g - (g - m0) * (A(1) - lerp_weight);
      const A v = exp_avg_sq[i] * beta2_ + one_minus_beta2 * g * g;
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

// steps[i] += 1 for the n step counts of an Adam launch (before it), unless skipped
extern "C" __global__ void ember_multi_step_bump(const u64* steps, i64 n, const float* found_inf) {
  if (step_skipped(found_inf)) return;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
    *tensor_ptr<float>(steps, (int)i) += 1.0f;
}

// GradScaler.update on the device (torch's _amp_update_scale_), one thread: after a
// step with *found_inf set, scale *= backoff_factor and the tracker restarts; else the
// tracker counts the clean step and, at growth_interval, scale *= growth_factor (kept
// when the product overflows) and restarts.  The products in double, rounded to float.
extern "C" __global__ void ember_amp_update_scale(float* scale, int* growth_tracker,
                                                  const float* found_inf, double growth_factor,
                                                  double backoff_factor, i64 growth_interval) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  if (*found_inf != 0.0f) {
    *scale = (float)((double)*scale * backoff_factor);
    *growth_tracker = 0;
    return;
  }
  const int successful = *growth_tracker + 1;
  if ((i64)successful == growth_interval) {
    const float grown = (float)((double)*scale * growth_factor);
    if (grown - grown == 0.0f) *scale = grown;   // finite
    *growth_tracker = 0;
  } else {
    *growth_tracker = successful;
  }
}

#define DEF_OPTIM(dt, T)                                                                            \
  extern "C" __global__ void ember_multi_sgd_##dt(const u64* params, const u64* grads,              \
      const u64* momentum_buffers, const i64* sizes, const int* chunk_tensor, const i64* chunk_begin, \
      i64 nchunks, i64 chunk, double lr, double momentum, double dampening, double weight_decay,    \
      int nesterov, int maximize, int first_step, const float* grad_scale, const float* found_inf) { \
    multi_sgd<T>(params, grads, momentum_buffers, sizes, chunk_tensor, chunk_begin, nchunks, chunk, \
                 lr, momentum, dampening, weight_decay, nesterov, maximize, first_step, grad_scale, \
                 found_inf);                                                                        \
  }                                                                                                 \
  extern "C" __global__ void ember_multi_adam_##dt(const u64* params, const u64* grads,             \
      const u64* exp_avgs, const u64* exp_avg_sqs, const u64* max_exp_avg_sqs, const u64* steps,    \
      const i64* sizes, const int* chunk_tensor, const i64* chunk_begin, i64 nchunks, i64 chunk,    \
      double lr, double beta1, double beta2, double eps, double weight_decay,                       \
      int decoupled_weight_decay, int amsgrad, int maximize, const float* grad_scale,               \
      const float* found_inf) {                                                                     \
    multi_adam<T>(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, sizes,              \
                  chunk_tensor, chunk_begin, nchunks, chunk, lr, beta1, beta2, eps, weight_decay,   \
                  decoupled_weight_decay, amsgrad, maximize, grad_scale, found_inf);                \
  }                                                                                                 \
  extern "C" __global__ void ember_multi_unscale_##dt(const u64* grads, const i64* sizes,           \
      const int* chunk_tensor, const i64* chunk_begin, i64 nchunks, i64 chunk, const float* inv,    \
      int* found) {                                                                                 \
    multi_unscale<T>(grads, sizes, chunk_tensor, chunk_begin, nchunks, chunk, inv, found);          \
  }
EMBER_FOR_FLOATS(DEF_OPTIM)
