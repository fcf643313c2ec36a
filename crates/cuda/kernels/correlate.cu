// Fused template-matching kernels.

// 1 / (s n) of pytme's norm_scores from C(f, m) and C(f^2, m) (already scaled).
__device__ __forceinline__ double mm_inv_den(double c1, double c2, double n, double eps) {
    const double e1 = c1 / n;
    const double e2 = c2 / n;
    double v = e2 - e1 * e1;
    double s = sqrt(v > 0.0 ? v : 0.0);
    if (s < eps) s = 1.0;
    return 1.0 / (s * n);
}

// Flat index on the FFT grid g.src of output voxel i (output shape g.dst), read through the
// window (x + p) mod fast, with p = shift already reduced into [0, fast).
__device__ __forceinline__ i64 mm_window_index(const Geom &g, i64 i) {
    i64 rem = i, q = 0, st = 1;
    for (i64 k = g.nd - 1; k >= 0; --k) {
        const i64 x = rem % g.dst[k];
        rem /= g.dst[k];
        q += ((x + g.p[k]) % g.src[k]) * st;
        st *= g.src[k];
    }
    return q;
}

// Moments (core's `host::moments_add`): a scaled score v adds round(v) (half to even) when
// |v| <= 2^62, else the flag 2^100 (also for NaN), to a 128-bit sum stored as [low, high].
__device__ __forceinline__ void mm_moment_add(i64 *w, double v) {
    i64 lo, hi;
    if (fabs(v) <= 4611686018427387904.0) {
        lo = __double2ll_rn(v);
        hi = lo < 0 ? -1 : 0;
    } else {
        lo = 0;
        hi = 1LL << 36;
    }
    const u64 old = (u64)w[0];
    const u64 sum = old + (u64)lo;
    w[0] = (i64)sum;
    w[1] = (i64)((u64)w[1] + (u64)hi + (sum < old ? 1ull : 0ull));
}

// norm: 0 scaled (scale * c), 1 denominator (scale * c * inv_den[x]), 2 local (FLC).
// mom (4 words per output voxel) is updated when has_mom: sum of s * m1 and of s^2 * m2.
// Each block writes its sum of s^2 to partial[blockIdx.x]; `ssum_add` adds them in block
// order (no float atomics: the sum, hence sigma for --false-positives, is the same bits on
// every run).
template <typename T, typename I>
__device__ void mm_score_max(const T *corr, const T *c1, const T *c2, const T *inv_den, Geom g,
                             int norm, T scale, double n, double eps, T *best, I *bi, I index,
                             i64 total, double *partial, int has_mom, i64 *mom, double m1,
                             double m2) {
    __shared__ double sh[MM_BLOCK];
    double acc = 0.0;
    const double sc = (double)scale;
    GRID_LOOP(i, total) {
        const i64 q = mm_window_index(g, i);
        T s;
        if (norm == 0) s = corr[q] * scale;
        else if (norm == 1) s = corr[q] * scale * inv_den[i];
        else s = (T)((double)corr[q] * sc * mm_inv_den((double)c1[q] * sc, (double)c2[q] * sc, n, eps));
        acc += (double)mm_mul(s, s);
        if (has_mom) {
            const double v = (double)s;
            mm_moment_add(mom + 4 * i, v * m1);
            mm_moment_add(mom + 4 * i + 2, v * v * m2);
        }
        if (s > best[i]) {
            best[i] = s;
            bi[i] = index;
        }
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int st = MM_BLOCK / 2; st > 0; st >>= 1) {
        if (threadIdx.x < st) sh[threadIdx.x] += sh[threadIdx.x + st];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = sh[0];
}

// ssum[0] += the nblocks partials of one score pass, in a fixed order (one block).
extern "C" __global__ void ssum_add(const double *partial, i64 nblocks, double *ssum) {
    __shared__ double sh[MM_BLOCK];
    double acc = 0.0;
    for (i64 k = threadIdx.x; k < nblocks; k += blockDim.x) acc += partial[k];
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int st = MM_BLOCK / 2; st > 0; st >>= 1) {
        if (threadIdx.x < st) sh[threadIdx.x] += sh[threadIdx.x + st];
        __syncthreads();
    }
    if (threadIdx.x == 0) ssum[0] += sh[0];
}

#define MM_SMU(n, T, in, I)                                                                 \
    extern "C" __global__ void score_max_##n##_##in(                                        \
        const T *corr, const T *c1, const T *c2, const T *inv_den, Geom g, int norm, T scale,\
        double nn, double eps, T *best, I *bi, I index, i64 total, double *partial,         \
        int has_mom, i64 *mom, double m1, double m2) {                                      \
        mm_score_max<T, I>(corr, c1, c2, inv_den, g, norm, scale, nn, eps, best, bi, index,  \
                           total, partial, has_mom, mom, m1, m2);                           \
    }
#define MM_SMU_I(n, T) MM_SMU(n, T, i32, int) MM_SMU(n, T, i64, i64)
MM_FLOATS(MM_SMU_I)

#define MM_INVDEN(n, T)                                                                     \
    extern "C" __global__ void inverse_denominator_##n(const T *c1, const T *c2, Geom g,     \
                                                       double sc, double nn, double eps,    \
                                                       T *out, i64 total) {                 \
        GRID_LOOP(i, total) {                                                               \
            const i64 q = mm_window_index(g, i);                                            \
            out[i] = (T)mm_inv_den((double)c1[q] * sc, (double)c2[q] * sc, nn, eps);        \
        }                                                                                   \
    }
MM_FLOATS(MM_INVDEN)

// A window of src (shape w.src) placed at the front of dst (shape w.dst): dst[j] =
// ext(src)[start + j] for j < len, 0 beyond. ext: 0 periodic with period w.per (zero where the
// period exceeds src), 1 numpy symmetric.
struct Win {
    i64 nd;
    i64 src[MM_MAXD];
    i64 dst[MM_MAXD];
    i64 start[MM_MAXD];
    i64 len[MM_MAXD];
    i64 per[MM_MAXD];
};

#define MM_GATHER_WIN(n, T)                                                                 \
    extern "C" __global__ void gather_window_##n(const T *s, T *d, Win w, int ext,           \
                                                 i64 total) {                               \
        GRID_LOOP(i, total) {                                                               \
            i64 rem = i, off = 0, st = 1;                                                   \
            bool zero = false;                                                              \
            for (i64 k = w.nd - 1; k >= 0; --k) {                                           \
                const i64 j = rem % w.dst[k];                                               \
                rem /= w.dst[k];                                                            \
                const i64 sn = w.src[k];                                                    \
                i64 q = 0;                                                                  \
                if (j >= w.len[k]) {                                                        \
                    zero = true;                                                            \
                } else if (ext == 0) {                                                      \
                    q = (w.start[k] + j) % w.per[k];                                        \
                    if (q < 0) q += w.per[k];                                               \
                    if (q >= sn) zero = true;                                               \
                } else {                                                                    \
                    q = (w.start[k] + j) % (2 * sn);                                        \
                    if (q < 0) q += 2 * sn;                                                 \
                    if (q >= sn) q = 2 * sn - 1 - q;                                        \
                }                                                                           \
                off += q * st;                                                              \
                st *= sn;                                                                   \
            }                                                                               \
            d[i] = zero ? (T)0 : s[off];                                                    \
        }                                                                                   \
    }
MM_FLOATS(MM_GATHER_WIN)

// dst[offset + j] = src[j] (g.src = block shape, g.dst = destination shape, g.p = offset).
#define MM_INSERT(n, E)                                                                     \
    extern "C" __global__ void insert_block_##n(const E *s, E *d, Geom g, i64 total) {       \
        GRID_LOOP(i, total) {                                                               \
            i64 rem = i, off = 0, st = 1;                                                   \
            for (i64 k = g.nd - 1; k >= 0; --k) {                                           \
                const i64 j = rem % g.src[k];                                               \
                rem /= g.src[k];                                                            \
                off += (j + g.p[k]) * st;                                                   \
                st *= g.dst[k];                                                             \
            }                                                                               \
            d[off] = s[i];                                                                  \
        }                                                                                   \
    }
MM_INSERT(b1, unsigned char)
MM_INSERT(b4, u32)
MM_INSERT(b8, u64)
MM_INSERT(b16, B16)

// pytme's MCC (Padfield masked NCC), two passes without a host round trip: pass 1 writes
// per-block maxima of the denominator and of the overlap, reduce_partials2 reduces them once,
// pass 2 scores.
template <typename T>
__device__ __forceinline__ void mm_mcc_terms(i64 i, const T *c_fm, const T *c_tt,
                                             const T *c_f2m, const T *c_tt2, const T *c_tm,
                                             double sc, double ep, double &ov, double &fm,
                                             double &tt, double &den) {
    ov = fmax((double)c_tm[i] * sc, ep);
    fm = (double)c_fm[i] * sc;
    tt = (double)c_tt[i] * sc;
    const double fix = fmax((double)c_f2m[i] * sc - fm * fm / ov, 0.0);
    const double mov = fmax((double)c_tt2[i] * sc - tt * tt / ov, 0.0);
    den = sqrt(fix * mov);
}

__device__ __forceinline__ void mm_block_max2(double a, double b, double *out_a, double *out_b) {
    __shared__ double sa[MM_BLOCK];
    __shared__ double sb[MM_BLOCK];
    sa[threadIdx.x] = a;
    sb[threadIdx.x] = b;
    __syncthreads();
    for (int s = MM_BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            sa[threadIdx.x] = fmax(sa[threadIdx.x], sa[threadIdx.x + s]);
            sb[threadIdx.x] = fmax(sb[threadIdx.x], sb[threadIdx.x + s]);
        }
        __syncthreads();
    }
    *out_a = sa[0];
    *out_b = sb[0];
    __syncthreads();
}

#define MM_MCC(n, T)                                                                        \
    extern "C" __global__ void mcc_pass1_##n(const T *c_fm, const T *c_tt, const T *c_f2m,   \
                                             const T *c_tt2, const T *c_tm, double sc,      \
                                             double ep, i64 len, double *pmax) {            \
        double md = 0.0, mo = -1.0 / 0.0;                                                   \
        GRID_LOOP(i, len) {                                                                 \
            double ov, fm, tt, den;                                                         \
            mm_mcc_terms<T>(i, c_fm, c_tt, c_f2m, c_tt2, c_tm, sc, ep, ov, fm, tt, den);    \
            md = fmax(md, den);                                                             \
            mo = fmax(mo, ov);                                                              \
        }                                                                                   \
        double a, b;                                                                        \
        mm_block_max2(md, mo, &a, &b);                                                      \
        if (threadIdx.x == 0) {                                                             \
            pmax[blockIdx.x] = a;                                                           \
            pmax[gridDim.x + blockIdx.x] = b;                                               \
        }                                                                                   \
    }                                                                                       \
    extern "C" __global__ void mcc_pass2_##n(T *c_ft, const T *c_fm, const T *c_tt,          \
                                             const T *c_f2m, const T *c_tt2, const T *c_tm, \
                                             double sc, double ep, double ratio, i64 len,   \
                                             const double *pmax, i64 nblocks) {             \
        /* Both maxima, reduced once by reduce_partials2 (op 1) after pass 1. */            \
        const double max_den = pmax[2 * nblocks], max_ov = pmax[2 * nblocks + 1];           \
        GRID_LOOP(i, len) {                                                                 \
            double ov, fm, tt, den;                                                         \
            mm_mcc_terms<T>(i, c_fm, c_tt, c_f2m, c_tt2, c_tm, sc, ep, ov, fm, tt, den);    \
            if (ov < ratio * max_ov) {                                                      \
                c_ft[i] = (T)0;                                                             \
                continue;                                                                   \
            }                                                                               \
            const double num = (double)c_ft[i] * sc - fm * tt / ov;                         \
            if (den < 1e3 * ep * max_den) den = 1.0;                                        \
            c_ft[i] = (T)fmin(fmax(num / den, -1.0), 1.0);                                  \
        }                                                                                   \
    }
MM_FLOATS(MM_MCC)

// The matching loop's spectrum products after the pruned forward transform, in one pass that
// reads the spectrum once: o_q = f_q * conj(x) for q < nf (1 or 2; the unused pointers of
// nf = 1 are not touched). Rounded as c_mul_conj (mm_mul, no FMA), i.e. as the CPU backend.
template <typename T>
__device__ __forceinline__ void mm_mul_conj_at(const T *f, T *o, i64 i, T xr, T xi) {
    const T fr = f[2 * i], fi = f[2 * i + 1];
    o[2 * i] = mm_mul(fr, xr) + mm_mul(fi, xi);
    o[2 * i + 1] = mm_mul(fi, xr) - mm_mul(fr, xi);
}

#define MM_SPECMUL(n, T)                                                                    \
    extern "C" __global__ void spectrum_mul_conj_##n(const T *x, const T *f0, T *o0,         \
                                                     const T *f1, T *o1, int nf, i64 len) { \
        GRID_LOOP(i, len) {                                                                 \
            const T xr = x[2 * i], xi = x[2 * i + 1];                                       \
            mm_mul_conj_at<T>(f0, o0, i, xr, xi);                                           \
            if (nf > 1) mm_mul_conj_at<T>(f1, o1, i, xr, xi);                               \
        }                                                                                   \
    }
MM_FLOATS(MM_SPECMUL)

// pytme's standardisation of a rotated template on the device (core's
// Correlate::standardize_masked), in two launches with no host round trip. Pass 1: per-block
// f64 partials of s1 = sum p and s2 = sum t*p, p = t*m rounded to T (p = t without a mask).
// reduce_partials2 adds the partials once, in a fixed order (deterministic). Pass 2: every
// block derives mean and 1/sigma from those two sums as the host does, and writes t = (t - mean) * (1/sigma) * m, or zeros when the
// template is constant inside the mask.
__device__ __forceinline__ void mm_block_sum2(double a, double b, double *out_a, double *out_b) {
    __shared__ double sa[MM_BLOCK];
    __shared__ double sb[MM_BLOCK];
    sa[threadIdx.x] = a;
    sb[threadIdx.x] = b;
    __syncthreads();
    for (int s = MM_BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            sa[threadIdx.x] += sa[threadIdx.x + s];
            sb[threadIdx.x] += sb[threadIdx.x + s];
        }
        __syncthreads();
    }
    *out_a = sa[0];
    *out_b = sb[0];
    __syncthreads();
}

// The two per-block partial lists of a two-pass kernel (partial[0, nb) and partial[nb, 2nb))
// reduced once, in a fixed order, into partial[2nb] and partial[2nb + 1], for every block of
// the second pass to read: op 0 sums (standardisation), op 1 takes maxima (MCC; the first
// list's maximum starts at 0, the second's at -inf). One block of MM_BLOCK threads: the same
// order every block of the second pass used when each re-reduced all the partials itself.
extern "C" __global__ void reduce_partials2(double *partial, i64 nb, int op) {
    double a = 0.0, b = op ? -1.0 / 0.0 : 0.0;
    for (i64 k = threadIdx.x; k < nb; k += blockDim.x) {
        if (op) {
            a = fmax(a, partial[k]);
            b = fmax(b, partial[nb + k]);
        } else {
            a += partial[k];
            b += partial[nb + k];
        }
    }
    double ra, rb;
    if (op) mm_block_max2(a, b, &ra, &rb);
    else mm_block_sum2(a, b, &ra, &rb);
    if (threadIdx.x == 0) {
        partial[2 * nb] = ra;
        partial[2 * nb + 1] = rb;
    }
}

#define MM_STD(n, T)                                                                        \
    extern "C" __global__ void std_sums_##n(const T *t, const T *m, int has_mask, i64 len,   \
                                            double *partial) {                              \
        double s1 = 0.0, s2 = 0.0;                                                          \
        GRID_LOOP(i, len) {                                                                 \
            const T p = has_mask ? mm_mul(t[i], m[i]) : t[i];                               \
            s1 += (double)p;                                                                \
            s2 += mm_mul((double)t[i], (double)p);                                          \
        }                                                                                   \
        double a, b;                                                                        \
        mm_block_sum2(s1, s2, &a, &b);                                                      \
        if (threadIdx.x == 0) {                                                             \
            partial[blockIdx.x] = a;                                                        \
            partial[gridDim.x + blockIdx.x] = b;                                            \
        }                                                                                   \
    }                                                                                       \
    extern "C" __global__ void std_apply_##n(T *t, const T *m, int has_mask, i64 len,        \
                                             double nn, const double *partial,              \
                                             i64 nblocks) {                                 \
        /* Both sums, reduced once by reduce_partials2 (op 0) after pass 1. */              \
        const double s1 = partial[2 * nblocks], s2 = partial[2 * nblocks + 1];              \
        const double mean = s1 / nn;                                                        \
        const double e2 = s2 / nn;                                                          \
        /* Rust's f64::max: NaN gives 0 (fmax returns the non-NaN operand). */              \
        const double var = fmax(e2 - mm_mul(mean, mean), 0.0);                              \
        const bool flat = var != var || var <= mm_mul(1e-12, fabs(e2)) || isinf(var);       \
        const T mt = (T)mean;                                                               \
        const T inv = (T)(1.0 / sqrt(var));                                                 \
        GRID_LOOP(i, len) {                                                                 \
            if (flat) {                                                                     \
                t[i] = (T)0;                                                                \
                continue;                                                                   \
            }                                                                               \
            T v = mm_mul(t[i] - mt, inv);                                                   \
            if (has_mask) v = mm_mul(v, m[i]);                                              \
            t[i] = v;                                                                       \
        }                                                                                   \
    }
MM_FLOATS(MM_STD)
