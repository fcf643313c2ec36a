// Neighbourhood filters with scipy.ndimage semantics, and peak-candidate compaction.
// Border modes: 0 nearest, 1 reflect, 2 mirror, 3 wrap, 4 constant (cval).

// One separable pass of maximum_filter1d along an axis (window [c - size/2, c + size - size/2 - 1]).
template <typename T>
__device__ void mm_maxf1d(const T *s, T *d, i64 total, i64 len, i64 stride, i64 size, int mode,
                          T cval) {
    GRID_LOOP(i, total) {
        const i64 c = (i / stride) % len;
        const i64 base = i - c * stride;
        const i64 lo = c - size / 2;
        T m = cval;
        bool have = false;
        for (i64 j = lo; j < lo + size; ++j) {
            const i64 jj = mm_border(j, len, mode);
            const T v = jj < 0 ? cval : s[base + jj * stride];
            if (!have || v > m) { m = v; have = true; }
        }
        d[i] = m;
    }
}

// maximum_filter1d in O(1) per element whatever the size (van Herk / Gil-Werman), one thread
// per line: adjacent threads take adjacent lines, so reads along a strided axis coalesce.
// Extended coordinate e in [0, E), E = len + size - 1, reads x(e) = s[border(e - size/2)];
// blocks of `size` samples start at e = 0. Output c covers e in [c, c + size - 1]:
// out(c) = max(h(c), g(c + size - 1)), g the running max from its block's start, h the
// running max to its block's end. Pass 1 stores g(c + size - 1) in d[c]; pass 2 walks back,
// folding h in. Reads src twice and dst twice: the same traffic at size 3 and at size 21.
template <typename T>
__device__ __forceinline__ T mm_maxf_read(const T *s, i64 base, i64 stride, i64 len, i64 j,
                                          int mode, T cval) {
    const i64 jj = mm_border(j, len, mode);
    return jj < 0 ? cval : s[base + jj * stride];
}

template <typename T>
__device__ void mm_maxf1d_vh(const T *s, T *d, i64 lines, i64 len, i64 stride, i64 size,
                             int mode, T cval) {
    const i64 lo = size / 2;
    const i64 ext = len + size - 1;
    GRID_LOOP(line, lines) {
        const i64 base = (line / stride) * len * stride + line % stride;
        T g = cval;
        for (i64 e = 0; e < ext; ++e) {
            const T v = mm_maxf_read(s, base, stride, len, e - lo, mode, cval);
            g = (e % size == 0 || v > g) ? v : g;
            if (e >= size - 1) d[base + (e - size + 1) * stride] = g;
        }
        T h = cval;
        for (i64 e = ext - 1; e >= 0; --e) {
            const T v = mm_maxf_read(s, base, stride, len, e - lo, mode, cval);
            h = ((e + 1) % size == 0 || e == ext - 1 || v > h) ? v : h;
            if (e < len) {
                const T gv = d[base + e * stride];
                d[base + e * stride] = h > gv ? h : gv;
            }
        }
    }
}

// Footprint maximum: offs holds noffs rows of nd signed offsets (footprint index - centre).
template <typename T>
__device__ void mm_maxfp(const T *s, T *d, Geom g, const i64 *offs, i64 noffs, int mode, T cval,
                         i64 total) {
    GRID_LOOP(i, total) {
        i64 c[MM_MAXD];
        i64 rem = i;
        for (i64 k = g.nd - 1; k >= 0; --k) {
            c[k] = rem % g.src[k];
            rem /= g.src[k];
        }
        T m = cval;
        bool have = false;
        for (i64 f = 0; f < noffs; ++f) {
            i64 sidx = 0;
            bool outside = false;
            for (i64 k = 0; k < g.nd; ++k) {
                const i64 jj = mm_border(c[k] + offs[f * g.nd + k], g.src[k], mode);
                if (jj < 0) { outside = true; break; }
                sidx = sidx * g.src[k] + jj;
            }
            const T v = outside ? cval : s[sidx];
            if (!have || v > m) { m = v; have = true; }
        }
        d[i] = m;
    }
}

// scipy laplace: per axis (in f64) x[c]*(-2) + (x[c-1] + x[c+1]), cast, summed in T.
template <typename T>
__device__ void mm_laplace(const T *s, T *d, Geom g, int mode, double cval, i64 total) {
    GRID_LOOP(i, total) {
        i64 c[MM_MAXD];
        i64 rem = i;
        for (i64 k = g.nd - 1; k >= 0; --k) {
            c[k] = rem % g.src[k];
            rem /= g.src[k];
        }
        i64 strides[MM_MAXD];
        i64 stride = 1;
        for (i64 k = g.nd - 1; k >= 0; --k) {
            strides[k] = stride;
            stride *= g.src[k];
        }
        T acc = (T)0;
        for (i64 k = 0; k < g.nd; ++k) {
            const i64 len = g.src[k], st = strides[k];
            const i64 base = i - c[k] * st;
            const i64 jl = mm_border(c[k] - 1, len, mode);
            const i64 jh = mm_border(c[k] + 1, len, mode);
            const double vl = jl < 0 ? cval : (double)s[base + jl * st];
            const double vh = jh < 0 ? cval : (double)s[base + jh * st];
            const double t = (double)s[i] * -2.0 + (vl + vh) * 1.0;
            if (k == 0) acc = (T)t; else acc += (T)t;
        }
        d[i] = acc;
    }
}

template <typename T>
__device__ void mm_peaks(const T *s, const T *f, T thr, Geom g, i64 total,
                         unsigned long long *counter, i64 *oidx, T *oval, i64 cap) {
    GRID_LOOP(i, total) {
        const T v = s[i];
        if (!(v == f[i] && v > thr)) continue;
        i64 rem = i;
        bool inside = true;
        for (i64 k = g.nd - 1; k >= 0; --k) {
            const i64 c = rem % g.src[k];
            rem /= g.src[k];
            if (c < g.p[k] || c >= g.src[k] - g.p[k]) inside = false;
        }
        if (!inside) continue;
        const unsigned long long pos = atomicAdd(counter, 1ULL);
        if ((i64)pos < cap) {
            oidx[pos] = i;
            oval[pos] = v;
        }
    }
}

#define MM_FI(n, T)                                                                         \
    extern "C" __global__ void maxf1d_##n(const T *s, T *d, i64 total, i64 len, i64 stride,  \
                                          i64 size, int mode, T cval) {                     \
        mm_maxf1d<T>(s, d, total, len, stride, size, mode, cval);                            \
    }                                                                                       \
    extern "C" __global__ void maxf1d_vh_##n(const T *s, T *d, i64 lines, i64 len,           \
                                             i64 stride, i64 size, int mode, T cval) {      \
        mm_maxf1d_vh<T>(s, d, lines, len, stride, size, mode, cval);                         \
    }                                                                                       \
    extern "C" __global__ void maxfp_##n(const T *s, T *d, Geom g, const i64 *offs,          \
                                         i64 noffs, int mode, T cval, i64 total) {          \
        mm_maxfp<T>(s, d, g, offs, noffs, mode, cval, total);                                \
    }                                                                                       \
    extern "C" __global__ void peaks_##n(const T *s, const T *f, T thr, Geom g, i64 total,   \
                                         unsigned long long *counter, i64 *oidx, T *oval,   \
                                         i64 cap) {                                         \
        mm_peaks<T>(s, f, thr, g, total, counter, oidx, oval, cap);                          \
    }
MM_REALS(MM_FI)

#define MM_LAP(n, T)                                                                        \
    extern "C" __global__ void laplace_##n(const T *s, T *d, Geom g, int mode, double cval,  \
                                           i64 total) {                                     \
        mm_laplace<T>(s, d, g, mode, cval, total);                                           \
    }
MM_FLOATS(MM_LAP)
