// Indexing: gather / take along an axis, embedding, scatter-add, index_put.
//
// Tensors are viewed as contiguous (outer, n, inner) around the indexed axis;
// indices are int64. Negative indices wrap once (NumPy / torch); an index still
// outside [0, n) sets *bad = 1 and is skipped, so the host can raise after the
// stream syncs instead of the kernel faulting (the flag costs one word, and
// keeps a bad index from corrupting memory).
//
//   ember_gather_<dt>             out[o,j,i] = src[o, idx[o,j,i], i]   (take_along_axis / torch.gather)
//   ember_index_select_<dt>       out[o,j,i] = src[o, idx[j], i]       (take with an axis, x[:, idx])
//   ember_embedding_fwd_<dt>      out[j,:]   = weight[idx[j], :]       (index_select with outer = 1,
//                                 one warp-wide row copy per index)
//   ember_scatter_add_<dt>        out[o, idx[o,j,i], i] += src[o,j,i]  (atomicAdd, order-dependent rounding)
//   ember_index_add_<dt>          out[o, idx[j], i] += src[o,j,i]      (atomicAdd; embedding backward
//                                 with outer = 1 and skip_index = padding_idx)
//   ember_index_add_sorted_<dt>   deterministic index_add: the host sorts idx (stable argsort `perm`)
//                                 and passes segment starts; each (segment, column) is summed in
//                                 index order by one thread, then added once. Bitwise reproducible.
//   ember_index_put_<dt>          out[o, idx[j], i] = (or +=, if accumulate) values[o,j,i]
//                                 (duplicates without accumulate: one of the writes wins, as torch)
// skip_index: entries whose (wrapped) index equals it are not accumulated; pass -1
// (never equal to a wrapped, in-range index) to disable.
#include "ember_common.cu"

__device__ __forceinline__ bool fix_index(i64& k, i64 n, int* bad) {
  if (k < 0) k += n;
  if (k < 0 || k >= n) { atomicExch(bad, 1); return false; }
  return true;
}

template <typename T>
__device__ void gather(const T* __restrict__ src, const i64* __restrict__ idx, T* __restrict__ out,
                       i64 outer, i64 n_src, i64 n_idx, i64 inner, int* bad) {
  EMBER_GRID_LOOP(k, outer * n_idx * inner) {
    const i64 i = k % inner, o = k / (n_idx * inner);
    i64 s = idx[k];
    if (!fix_index(s, n_src, bad)) continue;
    out[k] = src[(o * n_src + s) * inner + i];
  }
}

template <typename T>
__device__ void index_select(const T* __restrict__ src, const i64* __restrict__ idx, T* __restrict__ out,
                             i64 outer, i64 n_src, i64 n_idx, i64 inner, int* bad) {
  EMBER_GRID_LOOP(k, outer * n_idx * inner) {
    const i64 i = k % inner, j = (k / inner) % n_idx, o = k / (n_idx * inner);
    i64 s = idx[j];
    if (!fix_index(s, n_src, bad)) continue;
    out[k] = src[(o * n_src + s) * inner + i];
  }
}

// A warp per looked-up row: the row copy is contiguous, and one index load
// serves `dim` elements instead of one.
template <typename T>
__device__ void embedding_fwd(const T* __restrict__ weight, const i64* __restrict__ idx, T* __restrict__ out,
                              i64 n_idx, i64 num_embeddings, i64 dim, int* bad) {
  const i64 lane = threadIdx.x & 31;
  const i64 warps = ((i64)gridDim.x * blockDim.x) >> 5;
  for (i64 j = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; j < n_idx; j += warps) {
    i64 s = idx[j];
    if (s < 0 || s >= num_embeddings) {  // torch does not wrap embedding indices
      if (lane == 0) atomicExch(bad, 1);
      continue;
    }
    const T* w = weight + s * dim;
    T* o = out + j * dim;
    for (i64 d = lane; d < dim; d += 32) o[d] = w[d];
  }
}

template <typename T>
__device__ void scatter_add(const T* __restrict__ src, const i64* __restrict__ idx, T* __restrict__ out,
                            i64 outer, i64 n_out, i64 n_idx, i64 inner, int* bad) {
  EMBER_GRID_LOOP(k, outer * n_idx * inner) {
    const i64 i = k % inner, o = k / (n_idx * inner);
    i64 d = idx[k];
    if (!fix_index(d, n_out, bad)) continue;
    atomic_add(out + (o * n_out + d) * inner + i, ld(src[k]));
  }
}

template <typename T>
__device__ void index_add(const T* __restrict__ src, const i64* __restrict__ idx, T* __restrict__ out,
                          i64 outer, i64 n_out, i64 n_idx, i64 inner, i64 skip_index, int* bad) {
  EMBER_GRID_LOOP(k, outer * n_idx * inner) {
    const i64 i = k % inner, j = (k / inner) % n_idx, o = k / (n_idx * inner);
    i64 d = idx[j];
    if (!fix_index(d, n_out, bad) || d == skip_index) continue;
    atomic_add(out + (o * n_out + d) * inner + i, ld(src[k]));
  }
}

// sorted_idx[m] = idx[perm[m]]; seg_start has nseg + 1 entries, the last being
// n_idx.  A segment whose index is outside [0, n_out) is skipped: the op that
// made the indices reports them later (deferred checks), so they can get here.
template <typename T>
__device__ void index_add_sorted(const T* __restrict__ src, const i64* __restrict__ sorted_idx,
                                 const i64* __restrict__ perm, const i64* __restrict__ seg_start, i64 nseg,
                                 T* __restrict__ out, i64 outer, i64 n_out, i64 n_idx, i64 inner,
                                 i64 skip_index) {
  typedef typename AccT<T>::type A;
  EMBER_GRID_LOOP(k, outer * nseg * inner) {
    const i64 i = k % inner, s = (k / inner) % nseg, o = k / (nseg * inner);
    const i64 b = seg_start[s], e = seg_start[s + 1];
    const i64 d = sorted_idx[b];
    if (d == skip_index || d < 0 || d >= n_out) continue;
    A acc = 0;
    for (i64 m = b; m < e; ++m) acc += (A)ld(src[(o * n_idx + perm[m]) * inner + i]);
    T* p = out + (o * n_out + d) * inner + i;
    *p = st<T>((A)ld(*p) + acc);  // segments own distinct rows: no race
  }
}

template <typename T>
__device__ void index_put(T* __restrict__ out, const i64* __restrict__ idx, const T* __restrict__ values,
                          i64 outer, i64 n_out, i64 n_idx, i64 inner, int accumulate, int* bad) {
  EMBER_GRID_LOOP(k, outer * n_idx * inner) {
    const i64 i = k % inner, j = (k / inner) % n_idx, o = k / (n_idx * inner);
    i64 d = idx[j];
    if (!fix_index(d, n_out, bad)) continue;
    T* p = out + (o * n_out + d) * inner + i;
    if (accumulate) atomic_add(p, ld(values[k]));
    else *p = values[k];
  }
}

#define DEF_INDEX(dt, T)                                                                            \
  extern "C" __global__ void ember_gather_##dt(const T* src, const i64* idx, T* out, i64 outer,     \
      i64 n_src, i64 n_idx, i64 inner, int* bad) {                                                  \
    gather<T>(src, idx, out, outer, n_src, n_idx, inner, bad);                                      \
  }                                                                                                 \
  extern "C" __global__ void ember_index_select_##dt(const T* src, const i64* idx, T* out, i64 outer, \
      i64 n_src, i64 n_idx, i64 inner, int* bad) {                                                  \
    index_select<T>(src, idx, out, outer, n_src, n_idx, inner, bad);                                \
  }                                                                                                 \
  extern "C" __global__ void ember_embedding_fwd_##dt(const T* weight, const i64* idx, T* out,      \
      i64 n_idx, i64 num_embeddings, i64 dim, int* bad) {                                           \
    embedding_fwd<T>(weight, idx, out, n_idx, num_embeddings, dim, bad);                            \
  }                                                                                                 \
  extern "C" __global__ void ember_scatter_add_##dt(const T* src, const i64* idx, T* out, i64 outer, \
      i64 n_out, i64 n_idx, i64 inner, int* bad) {                                                  \
    scatter_add<T>(src, idx, out, outer, n_out, n_idx, inner, bad);                                 \
  }                                                                                                 \
  extern "C" __global__ void ember_index_add_##dt(const T* src, const i64* idx, T* out, i64 outer,  \
      i64 n_out, i64 n_idx, i64 inner, i64 skip_index, int* bad) {                                  \
    index_add<T>(src, idx, out, outer, n_out, n_idx, inner, skip_index, bad);                       \
  }                                                                                                 \
  extern "C" __global__ void ember_index_add_sorted_##dt(const T* src, const i64* sorted_idx,       \
      const i64* perm, const i64* seg_start, i64 nseg, T* out, i64 outer, i64 n_out, i64 n_idx,     \
      i64 inner, i64 skip_index) {                                                                  \
    index_add_sorted<T>(src, sorted_idx, perm, seg_start, nseg, out, outer, n_out, n_idx, inner,    \
                        skip_index);                                                                \
  }                                                                                                 \
  extern "C" __global__ void ember_index_put_##dt(T* out, const i64* idx, const T* values, i64 outer, \
      i64 n_out, i64 n_idx, i64 inner, int accumulate, int* bad) {                                  \
    index_put<T>(out, idx, values, outer, n_out, n_idx, inner, accumulate, bad);                    \
  }
EMBER_FOR_FLOATS(DEF_INDEX)
