// Reductions: per-block f64 partials (one launch for all rows; the host adds the partials
// in block order, so results are deterministic), and min/max/argmax partials ignoring NaN.

// mode: 0 sum, 1 sum of squares, 2 dot with b, 3 count of non-finite values,
//       4 sum of (a - c)^2.
template <typename T>
__device__ void mm_reduce_rows(int mode, const T *a, const T *b, double c, i64 n, i64 bpr, i64 row0,
                               double *partial) {
    __shared__ double sh[MM_BLOCK];
    const i64 row = row0 + blockIdx.y;
    const T *ar = a + row * n;
    const T *br = b + row * n;
    double acc = 0.0;
    for (i64 i = (i64)blockIdx.x * MM_BLOCK + threadIdx.x; i < n; i += bpr * MM_BLOCK) {
        double v = (double)ar[i];
        if (mode == 0) acc += v;
        else if (mode == 1) acc += v * v;
        else if (mode == 2) acc += v * (double)br[i];
        else if (mode == 3) acc += (v - v == 0.0) ? 0.0 : 1.0;
        else acc += (v - c) * (v - c);
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = MM_BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[row * bpr + blockIdx.x] = sh[0];
}

// Best of two (index, value) candidates: NaN and index -1 lose, ties go to the lower index.
template <typename T>
__device__ __forceinline__ void mm_pick(int want_max, i64 &bi, T &bv, i64 ci, T cv) {
    if (ci < 0) return;
    if (bi < 0) { bi = ci; bv = cv; return; }
    bool better = want_max ? (cv > bv) : (cv < bv);
    if (better || (cv == bv && ci < bi)) { bi = ci; bv = cv; }
}

template <typename T>
__device__ void mm_extreme(int want_max, const T *a, i64 n, i64 *oi, T *ov) {
    __shared__ i64 si[MM_BLOCK];
    __shared__ T sv[MM_BLOCK];
    i64 bi = -1;
    T bv = (T)0;
    GRID_LOOP(i, n) {
        T v = a[i];
        if (mm_isnan(v)) continue;
        if (bi < 0 || (want_max ? (v > bv) : (v < bv))) { bi = i; bv = v; }
    }
    si[threadIdx.x] = bi;
    sv[threadIdx.x] = bv;
    __syncthreads();
    for (int s = MM_BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            i64 xi = si[threadIdx.x];
            T xv = sv[threadIdx.x];
            mm_pick(want_max, xi, xv, si[threadIdx.x + s], sv[threadIdx.x + s]);
            si[threadIdx.x] = xi;
            sv[threadIdx.x] = xv;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        oi[blockIdx.x] = si[0];
        ov[blockIdx.x] = sv[0];
    }
}

#define MM_RED(n, T)                                                                        \
    extern "C" __global__ void reduce_rows_##n(int mode, const T *a, const T *b, double c,   \
                                               i64 len, i64 bpr, i64 row0, double *partial) {\
        mm_reduce_rows<T>(mode, a, b, c, len, bpr, row0, partial);                              \
    }                                                                                       \
    extern "C" __global__ void extreme_##n(int want_max, const T *a, i64 len, i64 *oi,       \
                                           T *ov) {                                         \
        mm_extreme<T>(want_max, a, len, oi, ov);                                             \
    }
MM_REALS(MM_RED)

// top_k for k > 1: a radix select (8-bit digits, most significant first) on a composite key,
// then a compaction of the few elements at or above the selected prefix; the host sorts them.
// Composite key: the value's order-preserving key (`vbits` bits: a larger value has a larger
// key, -0 has +0's key, NaN takes no part), then `ibits` bits of n - 1 - i (an earlier index
// ranks higher), so every element has its own key and ties are broken by index as the CPU
// does. A pass knows the top `known` bits (`vpre`: those of the value key, `ipre`: those of
// the index key once the value key is complete). The host side and its model are in
// ops/reduce/topk.rs.
__device__ __forceinline__ u64 mm_key(float v) {
    const u32 b = __float_as_uint(v == 0.0f ? 0.0f : v);
    return (u64)((b & 0x80000000u) ? ~b : (b | 0x80000000u));
}
__device__ __forceinline__ u64 mm_key(double v) {
    const u64 b = (u64)__double_as_longlong(v == 0.0 ? 0.0 : v);
    return (b >> 63) ? ~b : (b | (1ULL << 63));
}
__device__ __forceinline__ u64 mm_key(int v) { return (u64)((u32)v ^ 0x80000000u); }
__device__ __forceinline__ u64 mm_key(i64 v) { return (u64)v ^ (1ULL << 63); }

// Whether the composite key's top `known` bits equal (cmp 0) or are at least (cmp 1) the prefix.
__device__ __forceinline__ bool mm_topk_match(u64 vk, u64 ik, int vbits, int ibits, int known,
                                              u64 vpre, u64 ipre, int at_least) {
    if (known == 0) return true;
    if (known <= vbits) {
        const u64 top = vk >> (vbits - known);
        return at_least ? top >= vpre : top == vpre;
    }
    const u64 itop = ik >> (ibits - (known - vbits));
    if (at_least) return vk > vpre || (vk == vpre && itop >= ipre);
    return vk == vpre && itop == ipre;
}

// Histogram of the next digit among the non-NaN elements matching the prefix.
template <typename T>
__device__ void mm_topk_hist(const T *a, i64 n, int vbits, int ibits, int known, u64 vpre,
                             u64 ipre, u64 *hist) {
    __shared__ u32 sh[256];
    for (int t = threadIdx.x; t < 256; t += blockDim.x) sh[t] = 0;
    __syncthreads();
    GRID_LOOP(i, n) {
        const T v = a[i];
        if (mm_isnan(v)) continue;
        const u64 vk = mm_key(v);
        const u64 ik = (u64)(n - 1 - i);
        if (!mm_topk_match(vk, ik, vbits, ibits, known, vpre, ipre, 0)) continue;
        const u32 digit = known < vbits ? (u32)((vk >> (vbits - known - 8)) & 0xFF)
                                        : (u32)((ik >> (ibits - (known - vbits) - 8)) & 0xFF);
        // One shared atomic per distinct digit of the warp (most elements share the first
        // digits: without this, a warp's 32 adds on one bin serialise).
        const unsigned peers = __match_any_sync(__activemask(), digit);
        if ((int)(threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&sh[digit], (u32)__popc(peers));
    }
    __syncthreads();
    for (int t = threadIdx.x; t < 256; t += blockDim.x)
        if (sh[t]) atomicAdd(&hist[t], (u64)sh[t]);
}

// Every non-NaN element whose composite key's top `known` bits are at least the prefix.
template <typename T>
__device__ void mm_topk_select(const T *a, i64 n, int vbits, int ibits, int known, u64 vpre,
                               u64 ipre, unsigned long long *counter, i64 *oidx, T *oval,
                               i64 cap) {
    GRID_LOOP(i, n) {
        const T v = a[i];
        if (mm_isnan(v)) continue;
        if (!mm_topk_match(mm_key(v), (u64)(n - 1 - i), vbits, ibits, known, vpre, ipre, 1))
            continue;
        const unsigned long long pos = mm_warp_slot(counter);
        if ((i64)pos < cap) {
            oidx[pos] = i;
            oval[pos] = v;
        }
    }
}

#define MM_TOPK(n, T)                                                                       \
    extern "C" __global__ void topk_hist_##n(const T *a, i64 len, int vbits, int ibits,      \
                                             int known, u64 vpre, u64 ipre, u64 *hist) {    \
        mm_topk_hist<T>(a, len, vbits, ibits, known, vpre, ipre, hist);                      \
    }                                                                                       \
    extern "C" __global__ void topk_select_##n(const T *a, i64 len, int vbits, int ibits,    \
                                               int known, u64 vpre, u64 ipre,               \
                                               unsigned long long *counter, i64 *oidx,      \
                                               T *oval, i64 cap) {                          \
        mm_topk_select<T>(a, len, vbits, ibits, known, vpre, ipre, counter, oidx, oval, cap);\
    }
MM_REALS(MM_TOPK)
