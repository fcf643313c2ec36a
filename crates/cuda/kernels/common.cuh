// Shared definitions for every monomorph CUDA kernel (compiled by NVRTC, no system headers).
typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;

#define MM_MAXD 8
#define MM_BLOCK 256

// Grid-stride loop over [0, n).
#define GRID_LOOP(i, n) \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (i64)(n); \
         i += (i64)blockDim.x * gridDim.x)

// Shapes and per-axis parameters of an n-d index mapping (passed by value).
struct Geom {
    i64 nd;
    i64 src[MM_MAXD];
    i64 dst[MM_MAXD];
    i64 p[MM_MAXD];
};

// Products rounded on their own (no FMA contraction), as the CPU backend computes them, so
// bandwidth-bound updates agree with it to the last bit.
__device__ __forceinline__ float mm_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mm_mul(double a, double b) { return __dmul_rn(a, b); }

template <typename T> __device__ __forceinline__ bool mm_isnan(T v) { return v != v; }

// Float -> integer conversion as Rust's `as` does it (saturating, NaN -> 0).
template <typename D> __device__ __forceinline__ D mm_from_f64(double v);
template <> __device__ __forceinline__ float mm_from_f64<float>(double v) { return (float)v; }
template <> __device__ __forceinline__ double mm_from_f64<double>(double v) { return v; }
template <> __device__ __forceinline__ int mm_from_f64<int>(double v) {
    if (v != v) return 0;
    if (v >= 2147483647.0) return 2147483647;
    if (v <= -2147483648.0) return (-2147483647 - 1);
    return (int)v;
}
template <> __device__ __forceinline__ i64 mm_from_f64<i64>(double v) {
    if (v != v) return 0;
    if (v >= 9223372036854775807.0) return 9223372036854775807LL;
    if (v <= -9223372036854775808.0) return (-9223372036854775807LL - 1);
    return (i64)v;
}

// scipy.ndimage boundary modes for integer sample positions: returns the index to read, or
// -1 for "use the constant". mode: 0 nearest, 1 reflect, 2 mirror, 3 wrap, 4 constant.
__device__ __forceinline__ i64 mm_border(i64 j, i64 n, int mode) {
    if (j >= 0 && j < n) return j;
    switch (mode) {
    case 0:
        return j < 0 ? 0 : n - 1;
    case 1: {
        i64 p = 2 * n;
        i64 m = j % p;
        if (m < 0) m += p;
        return m >= n ? p - 1 - m : m;
    }
    case 2: {
        if (n == 1) return 0;
        i64 p = 2 * n - 2;
        i64 m = j % p;
        if (m < 0) m += p;
        return m >= n ? p - m : m;
    }
    case 3: {
        i64 m = j % n;
        return m < 0 ? m + n : m;
    }
    default:
        return -1;
    }
}

// A slot of an output list for the calling thread, one atomic per warp: the threads of a warp
// that arrive together (the active mask) share one atomicAdd on `counter`, each taking the
// slot of its rank among them. Compactions whose every element qualifies (a flat background)
// would otherwise serialise one atomic per element on one address.
__device__ __forceinline__ unsigned long long mm_warp_slot(unsigned long long *counter) {
    const unsigned mask = __activemask();
    const int lane = threadIdx.x & 31;
    const int leader = __ffs(mask) - 1;
    unsigned long long base = 0;
    if (lane == leader) base = atomicAdd(counter, (unsigned long long)__popc(mask));
    base = __shfl_sync(mask, base, leader);
    return base + (unsigned long long)__popc(mask & ((1u << lane) - 1u));
}

// 16-byte element (complex<f64>) for dtype-agnostic kernels.
struct B16 { u64 lo, hi; };

#define MM_FLOATS(M) M(f32, float) M(f64, double)
#define MM_REALS(M) M(f32, float) M(f64, double) M(i32, int) M(i64, i64)
