/* attention_cpu.h: fused float32 attention for one (batch, head) pair at a time, forward
 * and first-order backward, on ember's AVX-512 GEMM (f32_gemm.h) and the softmax row
 * primitives of nn_simd.h.  attention.pyx runs the pairs in one OpenMP region.
 *
 * Per pair, everything stays in the caches between the steps:
 *   forward   P = softmax(scale * Q K^T + bias) (rows), O = P V
 *   backward  dV = P^T dO, dP = dO V^T (+ gP), dS = P * (dP - rowsum(dP * P)),
 *             dQ = scale * dS K, dK = scale * dS^T Q
 * The formulas, the order of the operations and the primitives are those of the unfused
 * path (gemm.pyx's batched products around softmax.pyx's row kernels), so where that path
 * runs the same kernel per block (N and K above 16), the numbers are the same.
 *
 * Operands are described by em_att_mat: a base pointer, byte strides over the batch axes
 * (0 where an operand broadcasts) and the element strides of its last two axes.  P, dS
 * and gP are C-contiguous (L, S) per pair; O, dQ, dK, dV have unit column strides.  dS
 * may be absent (not asked for: the bias needs no gradient); it then lives in a per-thread
 * scratch, and the backward never writes the (L, S) gradients to memory.
 */
#ifndef EM_ATTENTION_CPU_H
#define EM_ATTENTION_CPU_H

#include <stddef.h>
#include <string.h>

#include "f32_gemm.h"
#include "nn_simd.h"

enum { EM_ATT_MAXB = 16 };

/* which operand: forward Q K V BIAS O P, backward adds GO GP DS DQ DK DV */
enum { EM_ATT_Q, EM_ATT_K, EM_ATT_V, EM_ATT_BIAS, EM_ATT_O, EM_ATT_P, EM_ATT_GO, EM_ATT_GP,
       EM_ATT_DS, EM_ATT_DQ, EM_ATT_DK, EM_ATT_DV, EM_ATT_NOPS };

typedef struct {
    char *ptr;                      /* NULL: the operand is absent */
    ptrdiff_t bs[EM_ATT_MAXB];      /* batch strides, bytes */
    ptrdiff_t rs, cs;               /* strides of the last two axes, elements */
} em_att_mat;

typedef struct {
    ptrdiff_t nb, L, S, D, Dv;      /* batch axes; query/key lengths; head dims of q/k, v */
    ptrdiff_t bshape[EM_ATT_MAXB];
    float scale;
    em_att_mat m[EM_ATT_NOPS];
} em_att_args;

/* operand w of pair t (row-major over the batch shape); NULL when absent */
static inline float *em_att_at(const em_att_args *a, int w, ptrdiff_t t) {
    const em_att_mat *m = &a->m[w];
    if (m->ptr == NULL)
        return NULL;
    ptrdiff_t off = 0;
    for (ptrdiff_t d = a->nb - 1; d >= 0; d--) {
        ptrdiff_t n = a->bshape[d];
        off += (t % n) * m->bs[d];
        t /= n;
    }
    return (float *)(m->ptr + off);
}

/* forward of pair t; -1 when a GEMM found no memory (the caller reruns the unfused path) */
static int em_att_forward(const em_att_args *a, ptrdiff_t t) {
    const ptrdiff_t L = a->L, S = a->S, D = a->D, Dv = a->Dv;
    const em_att_mat *mq = &a->m[EM_ATT_Q], *mk = &a->m[EM_ATT_K], *mv = &a->m[EM_ATT_V];
    const em_att_mat *mb = &a->m[EM_ATT_BIAS], *mo = &a->m[EM_ATT_O];
    const float *q = em_att_at(a, EM_ATT_Q, t), *k = em_att_at(a, EM_ATT_K, t);
    const float *v = em_att_at(a, EM_ATT_V, t), *b = em_att_at(a, EM_ATT_BIAS, t);
    float *o = em_att_at(a, EM_ATT_O, t), *p = em_att_at(a, EM_ATT_P, t);
    /* scores: scale * Q K^T, the scale applied as the GEMM stores them */
    if (em_f32_gemm(L, S, D, q, mq->rs, mq->cs, k, mk->cs, mk->rs, p, S, a->scale, NULL))
        return -1;
    for (ptrdiff_t i = 0; i < L; i++) {
        float *r = p + i * S;
        if (b != NULL) {            /* the bias added to the scaled scores, rounded once */
            const float *br = b + i * mb->rs;
            if (mb->cs == 1) {
                for (ptrdiff_t j = 0; j < S; j++)
                    r[j] += br[j];
            } else {
                for (ptrdiff_t j = 0; j < S; j++)
                    r[j] += br[j * mb->cs];
            }
        }
        /* softmax.pyx's row: max-shifted exp and its sum, then times 1 / sum */
        float m = em_max_f32(r, S);
        float s = em_expsum_f32(r, r, m, S);
        em_axpb_f32(r, r, 1.0f / s, 0.0f, S);
    }
    return em_f32_gemm(L, Dv, S, p, S, 1, v, mv->rs, mv->cs, o, mo->rs, 1.0f, NULL) ? -1 : 0;
}

/* backward of pair t; -1 when a GEMM found no memory.  Without a dS operand, dS lives in
 * `scratch` (L * S floats, the calling thread's) and stays in the caches. */
static int em_att_backward(const em_att_args *a, ptrdiff_t t, float *scratch) {
    const ptrdiff_t L = a->L, S = a->S, D = a->D, Dv = a->Dv;
    const em_att_mat *mq = &a->m[EM_ATT_Q], *mk = &a->m[EM_ATT_K], *mv = &a->m[EM_ATT_V];
    const em_att_mat *mg = &a->m[EM_ATT_GO], *mdq = &a->m[EM_ATT_DQ];
    const em_att_mat *mdk = &a->m[EM_ATT_DK], *mdv = &a->m[EM_ATT_DV];
    const float *q = em_att_at(a, EM_ATT_Q, t), *k = em_att_at(a, EM_ATT_K, t);
    const float *v = em_att_at(a, EM_ATT_V, t), *p = em_att_at(a, EM_ATT_P, t);
    const float *go = em_att_at(a, EM_ATT_GO, t), *gp = em_att_at(a, EM_ATT_GP, t);
    float *ds = a->m[EM_ATT_DS].ptr != NULL ? em_att_at(a, EM_ATT_DS, t) : scratch;
    float *dq = em_att_at(a, EM_ATT_DQ, t);
    float *dk = em_att_at(a, EM_ATT_DK, t), *dv = em_att_at(a, EM_ATT_DV, t);
    if (go == NULL) {
        for (ptrdiff_t j = 0; j < S; j++)
            memset(dv + j * mdv->rs, 0, (size_t)Dv * sizeof(float));
        memset(ds, 0, (size_t)(L * S) * sizeof(float));
    } else {
        /* dV = P^T dO; dP = dO V^T (into dS, which the softmax backward then overwrites) */
        if (em_f32_gemm(S, Dv, L, p, 1, S, go, mg->rs, mg->cs, dv, mdv->rs, 1.0f, NULL))
            return -1;
        if (em_f32_gemm(L, S, Dv, go, mg->rs, mg->cs, v, mv->cs, mv->rs, ds, S, 1.0f, NULL))
            return -1;
    }
    if (gp != NULL) {
        for (ptrdiff_t i = 0; i < L * S; i++)
            ds[i] += gp[i];
    }
    for (ptrdiff_t i = 0; i < L; i++) {    /* softmax.pyx's row backward, in place */
        float *r = ds + i * S;
        const float *pr = p + i * S;
        em_sm_bwd_f32(r, r, pr, (float)em_dot_f32(r, pr, S), S);
    }
    if (em_f32_gemm(L, D, S, ds, S, 1, k, mk->rs, mk->cs, dq, mdq->rs, a->scale, NULL))
        return -1;
    return em_f32_gemm(S, D, L, ds, 1, S, q, mq->rs, mq->cs, dk, mdk->rs, a->scale, NULL)
        ? -1 : 0;
}

#endif
