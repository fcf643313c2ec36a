// Element-wise real and complex arithmetic. Op codes follow monomorph_core::BinaryOp / UnaryOp.

template <typename T> __device__ __forceinline__ T mm_max(T a, T b) {
    // Rust's f32::max: NaN loses.
    if (a != a) return b;
    if (b != b) return a;
    return a > b ? a : b;
}
template <typename T> __device__ __forceinline__ T mm_min(T a, T b) {
    if (a != a) return b;
    if (b != b) return a;
    return a < b ? a : b;
}

template <typename T> __device__ __forceinline__ T mm_binop(int op, T a, T b) {
    switch (op) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return a / b;
    case 4: return mm_max(a, b);
    default: return mm_min(a, b);
    }
}

template <typename T> __device__ __forceinline__ T mm_unop(int op, T a) {
    switch (op) {
    case 0: return -a;
    case 1: return fabs(a);
    case 2: return sqrt(a);
    case 3: return a * a;
    case 4: return (T)1 / a;
    case 5: return exp(a);
    default: return log(a);
    }
}

// Complex products round each real product on its own (mm_mul: no FMA contraction), as the
// CPU backend's num-complex arithmetic does, so the two agree to the last bit.
#define MM_EW(n, T)                                                                        \
    extern "C" __global__ void ew_binary_##n(int op, const T *a, const T *b, T *o, i64 len) { \
        GRID_LOOP(i, len) o[i] = mm_binop<T>(op, a[i], b[i]);                              \
    }                                                                                      \
    extern "C" __global__ void ew_binary_assign_##n(int op, T *a, const T *b, i64 len) {   \
        GRID_LOOP(i, len) a[i] = mm_binop<T>(op, a[i], b[i]);                              \
    }                                                                                      \
    extern "C" __global__ void ew_scalar_##n(int op, T *a, T s, i64 len) {                 \
        GRID_LOOP(i, len) a[i] = mm_binop<T>(op, a[i], s);                                 \
    }                                                                                      \
    extern "C" __global__ void ew_unary_##n(int op, T *a, i64 len) {                       \
        GRID_LOOP(i, len) a[i] = mm_unop<T>(op, a[i]);                                     \
    }                                                                                      \
    extern "C" __global__ void ew_axpy_##n(T alpha, const T *x, T *y, i64 len) {           \
        GRID_LOOP(i, len) y[i] += mm_mul(alpha, x[i]);                                            \
    }                                                                                      \
    extern "C" __global__ void c_mul_conj_##n(const T *a, const T *b, T *o, i64 len) {     \
        GRID_LOOP(i, len) {                                                                \
            T ar = a[2 * i], ai = a[2 * i + 1], br = b[2 * i], bi = b[2 * i + 1];          \
            o[2 * i] = mm_mul(ar, br) + mm_mul(ai, bi);                                    \
            o[2 * i + 1] = mm_mul(ai, br) - mm_mul(ar, bi);                                \
        }                                                                                  \
    }                                                                                      \
    extern "C" __global__ void c_mul_##n(const T *a, const T *b, T *o, i64 len) {          \
        GRID_LOOP(i, len) {                                                                \
            T ar = a[2 * i], ai = a[2 * i + 1], br = b[2 * i], bi = b[2 * i + 1];          \
            o[2 * i] = mm_mul(ar, br) - mm_mul(ai, bi);                                    \
            o[2 * i + 1] = mm_mul(ar, bi) + mm_mul(ai, br);                                \
        }                                                                                  \
    }                                                                                      \
    extern "C" __global__ void c_scale_##n(T *a, T s, i64 len) {                           \
        GRID_LOOP(i, 2 * len) a[i] *= s;                                                   \
    }                                                                                      \
    extern "C" __global__ void c_norm_sq_##n(const T *s, T *d, i64 len) {                  \
        GRID_LOOP(i, len) {                                                                \
            T re = s[2 * i], im = s[2 * i + 1];                                            \
            d[i] = mm_mul(re, re) + mm_mul(im, im);                                        \
        }                                                                                  \
    }
MM_FLOATS(MM_EW)
