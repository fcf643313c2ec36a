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
