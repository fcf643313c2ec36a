// Memory: fills by element size, casts between real types.

extern "C" __global__ void fill_b1(unsigned char *a, unsigned char v, i64 n) {
    GRID_LOOP(i, n) a[i] = v;
}
extern "C" __global__ void fill_b4(u32 *a, u32 v, i64 n) {
    GRID_LOOP(i, n) a[i] = v;
}
extern "C" __global__ void fill_b8(u64 *a, u64 v, i64 n) {
    GRID_LOOP(i, n) a[i] = v;
}
extern "C" __global__ void fill_b16(u64 *a, u64 lo, u64 hi, i64 n) {
    GRID_LOOP(i, n) {
        a[2 * i] = lo;
        a[2 * i + 1] = hi;
    }
}

#define MM_CAST(sn, st, dn, dt)                                                          \
    extern "C" __global__ void cast_##sn##_##dn(const st *s, dt *d, i64 n) {             \
        GRID_LOOP(i, n) d[i] = mm_from_f64<dt>((double)s[i]);                            \
    }
#define MM_CAST_FROM(sn, st) \
    MM_CAST(sn, st, f32, float) MM_CAST(sn, st, f64, double) MM_CAST(sn, st, i32, int) MM_CAST(sn, st, i64, i64)
MM_REALS(MM_CAST_FROM)

// Gather by flat index: d[i] = s[idx[i]] (indices checked on the host).
#define MM_GATHER(n, T)                                                                   \
    extern "C" __global__ void gather_##n(const T *s, const i64 *idx, T *d, i64 count) { \
        GRID_LOOP(i, count) d[i] = s[idx[i]];                                             \
    }
MM_GATHER(b1, unsigned char)
MM_GATHER(b4, u32)
MM_GATHER(b8, u64)
MM_GATHER(b16, B16)
