// Neighbourhood filters with scipy.ndimage semantics, and peak-candidate compaction.
// Border modes: 0 nearest, 1 reflect, 2 mirror, 3 wrap, 4 constant (cval).

// The separable max filter reproduces the CPU backend's van Herk / Gil-Werman passes
// (crates/cpu/src/ops/filter.rs) exactly, NaN and -0 included. In extended coordinates
// e in [0, len + size - 1) (e reads source position e - size/2 through the border rule), the
// line is cut into segments of `size` samples starting at e = 0; output c covers
// [c, c + size - 1] and is vmax(h(c), g(c + size - 1)), where g(e) folds forward from e's
// segment start (g = vmax(g, x)) and h(e) folds backward from e's segment end (h = vmax(x, h)).
// vmax(a, b) = b > a ? b : a is the CPU's, operands in the CPU's order: with `>` alone a NaN
// survives or is dropped depending on where it sits, as on the CPU. Three kernels compute this
// same value: `maxf1d` per output (small windows), `maxf1d_tile` per shared-memory tile (van
// Herk, O(1) per element), `maxf1d_vh` per line (van Herk for windows too large for a tile).
template <typename T> __device__ __forceinline__ T mm_vmax(T a, T b) { return b > a ? b : a; }

// Extended sample at source position j of the line starting at `base`, by the border rule.
template <typename T>
__device__ __forceinline__ T mm_maxf_read(const T *s, i64 base, i64 stride, i64 len, i64 j,
                                          int mode, T cval) {
    const i64 jj = mm_border(j, len, mode);
    return jj < 0 ? cval : s[base + jj * stride];
}

// One output per thread: h(c) from its segment's end down to c, g(c + size - 1) from its
// segment's start; at most 2 * size reads (through the cache), for small windows.
template <typename T>
__device__ void mm_maxf1d(const T *s, T *d, i64 total, i64 len, i64 stride, i64 size, int mode,
                          T cval) {
    const i64 lo = size / 2;
    // 32-bit division where every operand fits (512^3 does): 64-bit division is emulated.
    const bool narrow = total <= 0x7fffffffLL && size <= 0x7fffffffLL;
    GRID_LOOP(i, total) {
        i64 c, hend, gs;
        if (narrow) {
            c = ((u32)i / (u32)stride) % (u32)len;
            hend = (i64)((u32)c / (u32)size + 1) * size - 1;
            gs = (i64)((u32)(c + size - 1) / (u32)size) * size;
        } else {
            c = (i / stride) % len;
            hend = (c / size + 1) * size - 1;
            gs = ((c + size - 1) / size) * size;
        }
        const i64 base = i - c * stride;
        T h = mm_maxf_read(s, base, stride, len, hend - lo, mode, cval);
        for (i64 e = hend - 1; e >= c; --e)
            h = mm_vmax(mm_maxf_read(s, base, stride, len, e - lo, mode, cval), h);
        T g = mm_maxf_read(s, base, stride, len, gs - lo, mode, cval);
        for (i64 e = gs + 1; e <= c + size - 1; ++e)
            g = mm_vmax(g, mm_maxf_read(s, base, stride, len, e - lo, mode, cval));
        d[i] = mm_vmax(h, g);
    }
}

// Van Herk in shared-memory tiles. A tile is MM_VH_W lines (line l starts at
// (l / stride) * len * stride + l % stride) by `chunk` outputs c0 .. c0 + nc - 1, which need
// the extended rows c0 .. c0 + nc + size - 2 (the halo is size - 1 rows). Rows are loaded so
// that reads coalesce: along the line when it is contiguous (stride 1), across the lines
// otherwise. Each (line, segment) pair is scanned by one thread: g forward into `sg`, h
// backward in place over `sx`. A segment cut by the tile's first row has wrong g there, one
// cut by its last row wrong h, but no output reads those: h(c) needs c's segment end
// <= c + size - 1 and g(c + size - 1) its segment start >= c, both inside the tile.
// Shared memory: 2 * (chunk + size - 1) * (MM_VH_W + 1) elements (padded rows: no bank
// conflicts). The same map is modelled in Rust (ops/filter/plan.rs, `tile_model`).
#define MM_VH_W 16
extern __shared__ __align__(16) unsigned char mm_dyn_smem[];

// Calls f(r, w) once for every row r < rows and lane w < MM_VH_W of a tile, spread over the
// block so that global accesses coalesce: on a contiguous axis each warp walks a line (lanes
// on consecutive rows), otherwise consecutive threads take consecutive lines. Tile
// coordinates are small (rows <= chunk + size - 1, bounded by the shared memory): 32-bit,
// and no division by a runtime value.
template <typename F>
__device__ __forceinline__ void mm_tile_each(int rows, bool contiguous, F f) {
    if (contiguous) {
        const int lane = threadIdx.x & 31;
        for (int w = threadIdx.x >> 5; w < MM_VH_W; w += blockDim.x >> 5)
            for (int r = lane; r < rows; r += 32) f(r, w);
    } else {
        for (int t = threadIdx.x; t < rows * MM_VH_W; t += blockDim.x)
            f(t / MM_VH_W, t % MM_VH_W);
    }
}

template <typename T>
__device__ void mm_maxf1d_tile(const T *s, T *d, i64 lines, i64 len, i64 stride, i64 size,
                               int mode, T cval, i64 chunk) {
    const int pitch = MM_VH_W + 1;
    __shared__ i64 sbase[MM_VH_W];
    T *sx = (T *)mm_dyn_smem;
    T *sg = sx + (chunk + size - 1) * pitch;
    const i64 lo = size / 2;
    const bool contiguous = stride == 1;
    const i64 groups = (lines + MM_VH_W - 1) / MM_VH_W;
    const i64 chunks = (len + chunk - 1) / chunk;
    for (i64 tile = blockIdx.x; tile < groups * chunks; tile += gridDim.x) {
        const i64 l0 = (tile / chunks) * MM_VH_W;
        const i64 c0 = (tile % chunks) * chunk;
        const int nl = (int)(lines - l0 < MM_VH_W ? lines - l0 : MM_VH_W);
        const int nc = (int)(len - c0 < chunk ? len - c0 : chunk);
        const int rows = nc + (int)size - 1;
        const int isize = (int)size;
        if (threadIdx.x < MM_VH_W) {
            const i64 l = l0 + threadIdx.x;
            sbase[threadIdx.x] = (l / stride) * len * stride + l % stride;
        }
        __syncthreads();
        mm_tile_each(rows, contiguous, [&](int r, int w) {
            T v = cval;
            if (w < nl) v = mm_maxf_read(s, sbase[w], stride, len, c0 + r - lo, mode, cval);
            sx[r * pitch + w] = v;
        });
        __syncthreads();
        const i64 s0 = c0 / size;
        const int nseg = (int)((c0 + rows - 1) / size - s0 + 1);
        const int off = (int)(s0 * size - c0); // first segment's start, tile row (<= 0)
        for (int t = threadIdx.x; t < nseg * MM_VH_W; t += blockDim.x) {
            const int w = t % MM_VH_W;
            const int start = off + (t / MM_VH_W) * isize;
            const int a = start > 0 ? start : 0;
            const int b = start + isize < rows ? start + isize : rows;
            T g = sx[a * pitch + w];
            sg[a * pitch + w] = g;
            for (int r = a + 1; r < b; ++r) {
                g = mm_vmax(g, sx[r * pitch + w]);
                sg[r * pitch + w] = g;
            }
            T h = sx[(b - 1) * pitch + w];
            for (int r = b - 2; r >= a; --r) {
                h = mm_vmax(sx[r * pitch + w], h);
                sx[r * pitch + w] = h;
            }
        }
        __syncthreads();
        mm_tile_each(nc, contiguous, [&](int r, int w) {
            if (w < nl)
                d[sbase[w] + (c0 + r) * stride] =
                    mm_vmax(sx[r * pitch + w], sg[(r + isize - 1) * pitch + w]);
        });
        __syncthreads();
    }
}

// Van Herk with one thread per line, in global memory, for windows too large for a tile:
// adjacent threads take adjacent lines, so reads along a strided axis coalesce. Pass 1
// stores g(c + size - 1) in d[c]; pass 2 walks back folding h in.
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
            g = (e % size == 0) ? v : mm_vmax(g, v);
            if (e >= size - 1) d[base + (e - size + 1) * stride] = g;
        }
        T h = cval;
        for (i64 e = ext - 1; e >= 0; --e) {
            const T v = mm_maxf_read(s, base, stride, len, e - lo, mode, cval);
            h = ((e + 1) % size == 0 || e == ext - 1) ? v : mm_vmax(v, h);
            if (e < len) {
                const T gv = d[base + e * stride];
                d[base + e * stride] = mm_vmax(h, gv);
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
        const unsigned long long pos = mm_warp_slot(counter);
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
    extern "C" __global__ void maxf1d_tile_##n(const T *s, T *d, i64 lines, i64 len,         \
                                               i64 stride, i64 size, int mode, T cval,      \
                                               i64 chunk) {                                 \
        mm_maxf1d_tile<T>(s, d, lines, len, stride, size, mode, cval, chunk);                \
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
