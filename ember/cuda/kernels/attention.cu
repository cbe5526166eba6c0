// Fused scaled-dot-product attention (flash attention): softmax(q k^T * scale + masks)
// (dropout) @ v without the (L, S) score matrix in memory.
//
//   ember_flash_fwd_<dt>_d<DM>   one block per (batch*head, tile of BR query rows): key
//                                and value tiles of BC rows pass through shared memory,
//                                the softmax is online (running max and sum per row); it
//                                writes the output and the row's logsumexp (float32)
//   ember_flash_bwd_delta_<dt>   delta[row] = dout[row] . out[row] (float32)
//   ember_flash_bwd_<dt>_d<DM>   one block per (batch*head, tile of BC key rows): recomputes
//                                the probabilities tile by tile from the logsumexp, keeps
//                                dK and dV of its keys in shared memory and adds dQ into a
//                                float32 buffer with atomics
// dt: f32, f16, bf16 (loads as float, accumulates in float, rounds once on store); DM is
// the largest head dimension of the instantiation (64 or 128; D and Dv may be smaller).
// Every array is read through four element strides (batch, head, row, feature), 0 where
// an axis broadcasts, so head views of a packed projection need no copy.  Masks (up to
// two, e.g. an attention mask and a key-padding mask): kind 0 none, 1 additive (dtype dt),
// 2 bool (nonzero = attend), 3 bool (nonzero = masked).  `causal` masks j > i (top left).
// Dropout (p > 0) keeps score (bh, i, j) when the float32 uniform of flat element
// e = (bh * L + i) * S + j of a Philox draw (random.cu's ember_uniform_f32 convention)
// under (seed, offset) is >= p; the forward stores (seed, offset) in `rng` (2 x int64 on
// the device) and the backward reads them there, so it regenerates the same mask with
// no host round trip.  A row whose every score is masked gives NaN, as the math path.
//
// Portable CUDA C: block-stride loops over the tile elements (any blockDim that is a
// multiple of 32, the host emulation runs 32) and grid-stride loops over the work items;
// static shared memory under 48 KiB per instantiation.
#include "ember_common.cu"

struct FlashGeom {
  i64 B, H, L, S, D, Dv;
  i64 sq[4], sk[4], sv[4], so[4], sdo[4], sm0[4], sm1[4];
  i64 kind0, kind1, causal;
  double scale, p;
  u64 seed, offset;
};

__device__ __forceinline__ float flash_ninf() { return -__int_as_float(0x7f800000); }
__device__ __forceinline__ float flash_nan() { return __int_as_float(0x7fffffff); }

// The additive value one mask contributes to score (b, h, i, j): 0, -inf or the float.
template <typename T>
__device__ __forceinline__ float flash_mask(const void* m, i64 kind, const i64* sm, i64 b, i64 h,
                                            i64 i, i64 j) {
  if (kind == 0) return 0.f;
  const i64 off = b * sm[0] + h * sm[1] + i * sm[2] + j * sm[3];
  if (kind == 1) return ld(((const T*)m)[off]);
  const bool set = ((const unsigned char*)m)[off] != 0;
  return (kind == 2 ? set : !set) ? 0.f : flash_ninf();
}

// Dropout's keep decision for score (bh, i, j).
__device__ __forceinline__ bool flash_keep(const FlashGeom& g, u64 seed, u64 offset, i64 bh, i64 i,
                                           i64 j) {
  const u64 e = ((u64)bh * (u64)g.L + (u64)i) * (u64)g.S + (u64)j;
  const U4 r = philox4x32_10(seed, offset, e >> 2);
  const u32 k = (u32)(e & 3u);
  const u32 w = k == 0 ? r.x : k == 1 ? r.y : k == 2 ? r.z : r.w;
  return u01_f(w) >= (float)g.p;
}

// scale * (q_i . k_j) + masks for an unmasked in-range (i, j), else -inf.
template <typename T, int DM>
__device__ __forceinline__ float flash_score(const FlashGeom& g, const void* m0, const void* m1,
                                             const float* qrow, const float* krow, i64 b, i64 h,
                                             i64 i, i64 j) {
  if (i >= g.L || j >= g.S || (g.causal && j > i)) return flash_ninf();
  float acc = 0.f;
  for (int d = 0; d < (int)g.D; ++d) acc += qrow[d] * krow[d];
  return acc * (float)g.scale + flash_mask<T>(m0, g.kind0, g.sm0, b, h, i, j) +
         flash_mask<T>(m1, g.kind1, g.sm1, b, h, i, j);
}

template <typename T, int DM, int BR, int BC>
__device__ void flash_fwd(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          const void* m0, const void* m1, T* __restrict__ o, float* __restrict__ lse,
                          i64* rng, const FlashGeom& g) {
  __shared__ float Qs[BR][DM];
  __shared__ float KVs[BC][DM + 1];
  __shared__ float Ss[BR][BC + 1];
  __shared__ float Os[BR][DM];
  __shared__ float Ms[BR], Ls[BR], As[BR];
  const int tid = threadIdx.x, nt = blockDim.x;
  const int D = (int)g.D, Dv = (int)g.Dv;
  const i64 L = g.L, S = g.S;
  const bool drop = g.p > 0.0;
  const float rscale = g.p < 1.0 ? (float)(1.0 / (1.0 - g.p)) : 0.f;
  if (rng && blockIdx.x == 0 && tid == 0) {
    rng[0] = (i64)g.seed;
    rng[1] = (i64)g.offset;
  }
  const i64 ntiles = (L + BR - 1) / BR, items = g.B * g.H * ntiles;
  for (i64 item = blockIdx.x; item < items; item += gridDim.x) {
    const i64 bh = item / ntiles, i0 = (item % ntiles) * BR, b = bh / g.H, h = bh % g.H;
    const T* qb = q + b * g.sq[0] + h * g.sq[1];
    const T* kb = k + b * g.sk[0] + h * g.sk[1];
    const T* vb = v + b * g.sv[0] + h * g.sv[1];
    __syncthreads();  // the previous item is written out
    for (int x = tid; x < BR * D; x += nt) {
      const int r = x / D, d = x % D;
      Qs[r][d] = i0 + r < L ? ld(qb[(i0 + r) * g.sq[2] + d * g.sq[3]]) : 0.f;
    }
    for (int x = tid; x < BR * Dv; x += nt) Os[x / Dv][x % Dv] = 0.f;
    for (int r = tid; r < BR; r += nt) {
      Ms[r] = flash_ninf();
      Ls[r] = 0.f;
    }
    const i64 jend = g.causal ? min(S, i0 + BR) : S;
    for (i64 j0 = 0; j0 < jend; j0 += BC) {
      __syncthreads();  // Q loaded; the previous value tile is consumed
      for (int x = tid; x < BC * D; x += nt) {
        const int c = x / D, d = x % D;
        KVs[c][d] = j0 + c < S ? ld(kb[(j0 + c) * g.sk[2] + d * g.sk[3]]) : 0.f;
      }
      __syncthreads();
      for (int x = tid; x < BR * BC; x += nt) {
        const int r = x / BC, c = x % BC;
        Ss[r][c] = flash_score<T, DM>(g, m0, m1, Qs[r], KVs[c], b, h, i0 + r, j0 + c);
      }
      __syncthreads();
      for (int r = tid; r < BR; r += nt) {  // online softmax: rescale, exponentiate, drop
        const float m_old = Ms[r];
        float mx = m_old;
        for (int c = 0; c < BC; ++c) mx = Ss[r][c] > mx ? Ss[r][c] : mx;
        const bool none = mx == flash_ninf();
        float sum = 0.f;
        for (int c = 0; c < BC; ++c) {
          float pr = none ? 0.f : expf(Ss[r][c] - mx);
          sum += pr;
          if (drop && pr != 0.f) pr = flash_keep(g, g.seed, g.offset, bh, i0 + r, j0 + c) ? pr * rscale : 0.f;
          Ss[r][c] = pr;
        }
        const float alpha = none ? 1.f : expf(m_old - mx);
        Ms[r] = mx;
        Ls[r] = Ls[r] * alpha + sum;
        As[r] = alpha;
      }
      __syncthreads();  // the key tile is no longer read: the value tile replaces it
      for (int x = tid; x < BC * Dv; x += nt) {
        const int c = x / Dv, d = x % Dv;
        KVs[c][d] = j0 + c < S ? ld(vb[(j0 + c) * g.sv[2] + d * g.sv[3]]) : 0.f;
      }
      __syncthreads();
      for (int x = tid; x < BR * Dv; x += nt) {
        const int r = x / Dv, d = x % Dv;
        float acc = Os[r][d] * As[r];
        for (int c = 0; c < BC; ++c) acc += Ss[r][c] * KVs[c][d];
        Os[r][d] = acc;
      }
    }
    __syncthreads();
    T* ob = o + b * g.so[0] + h * g.so[1];
    for (int x = tid; x < BR * Dv; x += nt) {
      const int r = x / Dv, d = x % Dv;
      if (i0 + r < L) ob[(i0 + r) * g.so[2] + d * g.so[3]] = st<T>(Ls[r] > 0.f ? Os[r][d] / Ls[r] : flash_nan());
    }
    for (int r = tid; r < BR; r += nt)
      if (i0 + r < L) lse[bh * L + i0 + r] = Ls[r] > 0.f ? Ms[r] + logf(Ls[r]) : flash_nan();
  }
}

template <typename T>
__device__ void flash_bwd_delta(const T* __restrict__ o, const T* __restrict__ dout,
                                float* __restrict__ delta, const FlashGeom& g) {
  EMBER_GRID_LOOP(row, g.B * g.H * g.L) {
    const i64 bh = row / g.L, i = row % g.L, b = bh / g.H, h = bh % g.H;
    const T* orow = o + b * g.so[0] + h * g.so[1] + i * g.so[2];
    const T* grow = dout + b * g.sdo[0] + h * g.sdo[1] + i * g.sdo[2];
    float acc = 0.f;
    for (i64 d = 0; d < g.Dv; ++d) acc += ld(orow[d * g.so[3]]) * ld(grow[d * g.sdo[3]]);
    delta[row] = acc;
  }
}

template <typename T, int DM, int BR, int BC>
__device__ void flash_bwd(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          const void* m0, const void* m1, const T* __restrict__ dout,
                          const float* __restrict__ lse, const float* __restrict__ delta,
                          const i64* rng, float* __restrict__ dq, T* __restrict__ dk,
                          T* __restrict__ dv, const FlashGeom& g) {
  __shared__ float Ks[BC][DM + 1], Vs[BC][DM + 1], dKs[BC][DM], dVs[BC][DM];
  __shared__ float Qs[BR][DM + 1], dOs[BR][DM + 1];
  __shared__ float Ps[BR][BC + 1], dSs[BR][BC + 1];
  __shared__ float lse_s[BR], dl_s[BR];
  const int tid = threadIdx.x, nt = blockDim.x;
  const int D = (int)g.D, Dv = (int)g.Dv;
  const i64 L = g.L, S = g.S;
  const float scale = (float)g.scale;
  const bool drop = g.p > 0.0;
  const float rscale = g.p < 1.0 ? (float)(1.0 / (1.0 - g.p)) : 0.f;
  const u64 seed = drop ? (u64)rng[0] : 0, offset = drop ? (u64)rng[1] : 0;
  const i64 ntiles = (S + BC - 1) / BC, items = g.B * g.H * ntiles;
  for (i64 item = blockIdx.x; item < items; item += gridDim.x) {
    const i64 bh = item / ntiles, j0 = (item % ntiles) * BC, b = bh / g.H, h = bh % g.H;
    const T* qb = q + b * g.sq[0] + h * g.sq[1];
    const T* kb = k + b * g.sk[0] + h * g.sk[1];
    const T* vb = v + b * g.sv[0] + h * g.sv[1];
    const T* gb = dout + b * g.sdo[0] + h * g.sdo[1];
    __syncthreads();  // the previous item is written out
    for (int x = tid; x < BC * D; x += nt) {
      const int c = x / D, d = x % D;
      Ks[c][d] = j0 + c < S ? ld(kb[(j0 + c) * g.sk[2] + d * g.sk[3]]) : 0.f;
      dKs[c][d] = 0.f;
    }
    for (int x = tid; x < BC * Dv; x += nt) {
      const int c = x / Dv, d = x % Dv;
      Vs[c][d] = j0 + c < S ? ld(vb[(j0 + c) * g.sv[2] + d * g.sv[3]]) : 0.f;
      dVs[c][d] = 0.f;
    }
    for (i64 i0 = g.causal ? (j0 / BR) * BR : 0; i0 < L; i0 += BR) {
      __syncthreads();  // the previous query tile is consumed
      for (int x = tid; x < BR * D; x += nt) {
        const int r = x / D, d = x % D;
        Qs[r][d] = i0 + r < L ? ld(qb[(i0 + r) * g.sq[2] + d * g.sq[3]]) : 0.f;
      }
      for (int x = tid; x < BR * Dv; x += nt) {
        const int r = x / Dv, d = x % Dv;
        dOs[r][d] = i0 + r < L ? ld(gb[(i0 + r) * g.sdo[2] + d * g.sdo[3]]) : 0.f;
      }
      for (int r = tid; r < BR; r += nt) {
        lse_s[r] = i0 + r < L ? lse[bh * L + i0 + r] : 0.f;
        dl_s[r] = i0 + r < L ? delta[bh * L + i0 + r] : 0.f;
      }
      __syncthreads();
      for (int x = tid; x < BR * BC; x += nt) {
        const int r = x / BC, c = x % BC;
        const float s = flash_score<T, DM>(g, m0, m1, Qs[r], Ks[c], b, h, i0 + r, j0 + c);
        float pr = 0.f, ds = 0.f;
        if (s != flash_ninf()) {
          pr = expf(s - lse_s[r]);
          float dp = 0.f;
          for (int d = 0; d < Dv; ++d) dp += dOs[r][d] * Vs[c][d];
          if (drop) {
            const float z = flash_keep(g, seed, offset, bh, i0 + r, j0 + c) ? rscale : 0.f;
            ds = pr * (dp * z - dl_s[r]);
            pr *= z;
          } else {
            ds = pr * (dp - dl_s[r]);
          }
        }
        Ps[r][c] = pr;
        dSs[r][c] = ds;
      }
      __syncthreads();
      for (int x = tid; x < BC * Dv; x += nt) {
        const int c = x / Dv, d = x % Dv;
        float acc = 0.f;
        for (int r = 0; r < BR; ++r) acc += Ps[r][c] * dOs[r][d];
        dVs[c][d] += acc;
      }
      for (int x = tid; x < BC * D; x += nt) {
        const int c = x / D, d = x % D;
        float acc = 0.f;
        for (int r = 0; r < BR; ++r) acc += dSs[r][c] * Qs[r][d];
        dKs[c][d] += acc;
      }
      for (int x = tid; x < BR * D; x += nt) {
        const int r = x / D, d = x % D;
        if (i0 + r >= L) continue;
        float acc = 0.f;
        for (int c = 0; c < BC; ++c) acc += dSs[r][c] * Ks[c][d];
        atomicAdd(dq + (bh * L + i0 + r) * D + d, acc * scale);
      }
    }
    __syncthreads();
    for (int x = tid; x < BC * D; x += nt) {
      const int c = x / D, d = x % D;
      if (j0 + c < S) dk[(bh * S + j0 + c) * D + d] = st<T>(dKs[c][d] * scale);
    }
    for (int x = tid; x < BC * Dv; x += nt) {
      const int c = x / Dv, d = x % Dv;
      if (j0 + c < S) dv[(bh * S + j0 + c) * Dv + d] = st<T>(dVs[c][d]);
    }
  }
}

// Tile shapes per head-dimension bound: (BR, BC) forward, (BR, BC) backward, each within
// 48 KiB of static shared memory.
#define DEF_FLASH_D(dt, T, DM, FBR, FBC, BBR, BBC)                                                  \
  extern "C" __global__ void ember_flash_fwd_##dt##_d##DM(const T* q, const T* k, const T* v,      \
                                                         const void* m0, const void* m1, T* o,     \
                                                         float* lse, i64* rng, FlashGeom g) {      \
    flash_fwd<T, DM, FBR, FBC>(q, k, v, m0, m1, o, lse, rng, g);                                    \
  }                                                                                                 \
  extern "C" __global__ void ember_flash_bwd_##dt##_d##DM(                                          \
      const T* q, const T* k, const T* v, const void* m0, const void* m1, const T* dout,           \
      const float* lse, const float* delta, const i64* rng, float* dq, T* dk, T* dv, FlashGeom g) { \
    flash_bwd<T, DM, BBR, BBC>(q, k, v, m0, m1, dout, lse, delta, rng, dq, dk, dv, g);              \
  }
#define DEF_FLASH(dt, T)                                                                            \
  DEF_FLASH_D(dt, T, 64, 32, 32, 16, 32)                                                            \
  DEF_FLASH_D(dt, T, 128, 32, 16, 8, 16)                                                            \
  extern "C" __global__ void ember_flash_bwd_delta_##dt(const T* o, const T* dout, float* delta,   \
                                                        FlashGeom g) {                              \
    flash_bwd_delta<T>(o, dout, delta, g);                                                          \
  }
DEF_FLASH(f32, float)
DEF_FLASH(f16, f16)
DEF_FLASH(bf16, bf16)
