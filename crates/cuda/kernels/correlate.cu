// Fused template-matching kernels.

#define MM_RMAX(n, T, in, I)                                                                \
    extern "C" __global__ void running_max_##n##_##in(const T *s, T *best, I *bi, I index,   \
                                                      i64 len) {                            \
        GRID_LOOP(i, len) {                                                                 \
            T v = s[i];                                                                     \
            if (v > best[i]) {                                                              \
                best[i] = v;                                                                \
                bi[i] = index;                                                              \
            }                                                                               \
        }                                                                                   \
    }
#define MM_RMAX_I(n, T) MM_RMAX(n, T, i32, int) MM_RMAX(n, T, i64, i64)
MM_FLOATS(MM_RMAX_I)
