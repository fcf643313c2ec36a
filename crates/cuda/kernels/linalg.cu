// Batched linear algebra: one system per row of a (batch, n) array.

// y[b, i] = A[(b), i, :] . x[b, :], one warp per output element.
template <typename T>
__device__ void mm_matvec_dense(const T *a, const T *x, T *y, i64 batch, i64 m, i64 n,
                                int per_entry) {
    const i64 lane = threadIdx.x & 31;
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 warps = ((i64)blockDim.x * gridDim.x) >> 5;
    for (i64 o = warp; o < batch * m; o += warps) {
        const i64 b = o / m, i = o % m;
        const T *row = per_entry ? a + (b * m + i) * n : a + i * n;
        const T *xv = x + b * n;
        T acc = (T)0;
        for (i64 j = lane; j < n; j += 32) acc += row[j] * xv[j];
        for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
        if (lane == 0) y[o] = acc;
    }
}

// One point of the 3/5/7-point Laplacian in PhiFlow's order (as the CPU backend): centre,
// then slowest axis to fastest, lower neighbour before upper.
template <typename T>
__device__ __forceinline__ T mm_lap_point(const T *xv, i64 idx, i64 nz, i64 ny, i64 nx, int nd,
                                          int periodic) {
    const T centre = (T)(-2.0 * nd);
    const i64 ix = idx % nx, iy = (idx / nx) % ny, iz = idx / (nx * ny);
    T acc = mm_mul(centre, xv[idx]);
    const i64 cs[3] = {ix, iy, iz};
    const i64 ls[3] = {nx, ny, nz};
    const i64 st[3] = {1, nx, nx * ny};
    for (int k = nd - 1; k >= 0; --k) {
        const i64 c = cs[k], len = ls[k], s = st[k];
        T lo = (T)0, hi = (T)0;
        if (!(len == 1 && !periodic)) {
            if (c > 0) lo = xv[idx - s];
            else if (periodic) lo = xv[idx + (len - 1) * s];
            if (c + 1 < len) hi = xv[idx + s];
            else if (periodic) hi = xv[idx + s - len * s];
        }
        acc += lo;
        acc += hi;
    }
    return acc;
}

template <typename T>
__device__ void mm_laplacian(const T *x, T *y, i64 batch, i64 nz, i64 ny, i64 nx, int nd,
                             int periodic) {
    const i64 n = nz * ny * nx;
    GRID_LOOP(g, batch * n) {
        const i64 b = g / n, idx = g % n;
        y[g] = mm_lap_point(x + b * n, idx, nz, ny, nx, nd, periodic);
    }
}

// Block-sum of one f64 per thread into partial[slot].
__device__ __forceinline__ void mm_block_sum(double v, double *partial, i64 slot) {
    __shared__ double sh[MM_BLOCK];
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = MM_BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[slot] = sh[0];
    __syncthreads();
}

// y = lap(x) fused with x.y per row; rows with active[row] == 0 are skipped (partial 0).
template <typename T>
__device__ void mm_laplacian_dot(const T *x, T *y, i64 nz, i64 ny, i64 nx, int nd, int periodic,
                                 const int *active, i64 bpr, i64 row0, double *partial) {
    const i64 row = row0 + blockIdx.y;
    const i64 n = nz * ny * nx;
    double acc = 0.0;
    if (active[row]) {
        const T *xv = x + row * n;
        for (i64 i = (i64)blockIdx.x * MM_BLOCK + threadIdx.x; i < n; i += bpr * MM_BLOCK) {
            const T v = mm_lap_point(xv, i, nz, ny, nx, nd, periodic);
            y[row * n + i] = v;
            acc += (double)xv[i] * (double)v;
        }
    }
    mm_block_sum(acc, partial, row * bpr + blockIdx.x);
}

// axpy_pair_rows that also returns r.q: partial[0 .. rows*bpr) = r.r, then r.q.
template <typename T>
__device__ void mm_axpy_pair_rows_dots(const T *alpha, const T *d, const T *q, T *x, T *r, i64 n,
                                  i64 rows, i64 bpr, i64 row0, double *partial) {
    const i64 row = row0 + blockIdx.y;
    const T a = alpha[row];
    const i64 base = row * n;
    double rr = 0.0, rq = 0.0;
    for (i64 i = (i64)blockIdx.x * MM_BLOCK + threadIdx.x; i < n; i += bpr * MM_BLOCK) {
        const T qi = q[base + i];
        T nr = r[base + i];
        if (a != (T)0) {  // alpha = 0 leaves x and r as they are, even beside NaN (as the CPU)
            x[base + i] += mm_mul(a, d[base + i]);
            nr = nr - mm_mul(a, qi);
            r[base + i] = nr;
        }
        const double f = (double)nr;
        rr += f * f;
        rq += f * (double)qi;
    }
    mm_block_sum(rr, partial, row * bpr + blockIdx.x);
    mm_block_sum(rq, partial, rows * bpr + row * bpr + blockIdx.x);
}

template <typename T>
__device__ void mm_axpy_pair_rows(const T *alpha, const T *d, const T *q, T *x, T *r, i64 n, i64 bpr,
                             i64 row0, double *partial) {
    __shared__ double sh[MM_BLOCK];
    const i64 row = row0 + blockIdx.y;
    const T a = alpha[row];
    const i64 base = row * n;
    double acc = 0.0;
    for (i64 i = (i64)blockIdx.x * MM_BLOCK + threadIdx.x; i < n; i += bpr * MM_BLOCK) {
        T nr = r[base + i];
        if (a != (T)0) {  // alpha = 0 leaves x and r as they are (as the CPU)
            x[base + i] += mm_mul(a, d[base + i]);
            nr = nr - mm_mul(a, q[base + i]);
            r[base + i] = nr;
        }
        double f = (double)nr;
        acc += f * f;
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = MM_BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[row * bpr + blockIdx.x] = sh[0];
}

// ---- Per-row scalars kept on the device (the `…_into` / `…_ratio` ops of `Linalg`) ----
// `s` is a (slots, rows) f64 array: slot k of row b is s[k * rows + b]. Masks are int flags.

// The step size of row `row`: s[num] / s[den] in f64, rounded once to T; 0 when the
// denominator is 0 (`step_ratio` in monomorph-core).
template <typename T>
__device__ __forceinline__ T mm_step_ratio(const double *s, i64 rows, i64 num, i64 den, i64 row) {
    const double d = s[den * rows + row];
    return d != 0.0 ? (T)(s[num * rows + row] / d) : (T)0;
}

// y = x + beta*y on the rows with active[row] (beta[row], or with `ratio` the step ratio of
// s, negated after rounding when ratio == 2), and with `dot` the per-block sums of y.x
// (after the update) into partial (0 for inactive rows). The other rows are not touched.
template <typename T>
__device__ void mm_xpay_rows_masked(const T *x, const T *beta, const double *s, i64 num, i64 den,
                                    int ratio, T *y, i64 n, i64 rows, const int *active, int dot,
                                    i64 bpr, i64 row0, double *partial) {
    const i64 row = row0 + blockIdx.y;
    double acc = 0.0;
    if (active[row]) {
        T b = ratio ? mm_step_ratio<T>(s, rows, num, den, row) : beta[row];
        if (ratio == 2) b = -b;
        const i64 base = row * n;
        for (i64 i = (i64)blockIdx.x * MM_BLOCK + threadIdx.x; i < n; i += bpr * MM_BLOCK) {
            const T xi = x[base + i];
            const T v = xi + mm_mul(b, y[base + i]);
            y[base + i] = v;
            acc += (double)v * (double)xi;
        }
    }
    if (dot) mm_block_sum(acc, partial, row * bpr + blockIdx.x);
}

// Square dense y[row] = A[(row)] . x[row] on the rows with active[row], one warp per output
// (8 per block), fused with the per-block sums of x.y into partial.
template <typename T>
__device__ void mm_matvec_dense_dot(const T *a, const T *x, T *y, i64 n, int per_entry,
                                    const int *active, i64 bpr, i64 row0, double *partial) {
    const i64 row = row0 + blockIdx.y;
    const i64 lane = threadIdx.x & 31;
    const i64 wpb = MM_BLOCK / 32;
    double acc = 0.0;
    if (active[row]) {
        const T *xv = x + row * n;
        // `i` is the same for the 32 lanes of a warp: the shuffles see the whole warp.
        for (i64 i = (i64)blockIdx.x * wpb + (threadIdx.x >> 5); i < n; i += bpr * wpb) {
            const T *arow = per_entry ? a + (row * n + i) * n : a + i * n;
            T v = (T)0;
            for (i64 j = lane; j < n; j += 32) v += arow[j] * xv[j];
            for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
            if (lane == 0) {
                y[row * n + i] = v;
                acc += (double)xv[i] * (double)v;
            }
        }
    }
    mm_block_sum(acc, partial, row * bpr + blockIdx.x);
}

// Square CSR y[row] = A_row . x[row] on the rows with active[row], one thread per output,
// fused with the per-block sums of x.y into partial.
template <typename T>
__device__ void mm_matvec_csr_dot(const i64 *ip, const i64 *ix, const T *v, const T *x, T *y,
                                  i64 n, i64 nnz, int per_entry, const int *active, i64 bpr,
                                  i64 row0, double *partial) {
    const i64 row = row0 + blockIdx.y;
    double acc = 0.0;
    if (active[row]) {
        const T *vals = per_entry ? v + row * nnz : v;
        const T *xv = x + row * n;
        for (i64 i = (i64)blockIdx.x * MM_BLOCK + threadIdx.x; i < n; i += bpr * MM_BLOCK) {
            T sum = (T)0;
            for (i64 p = ip[i]; p < ip[i + 1]; ++p) sum += vals[p] * xv[ix[p]];
            y[row * n + i] = sum;
            acc += (double)xv[i] * (double)sum;
        }
    }
    mm_block_sum(acc, partial, row * bpr + blockIdx.x);
}

// CG's update with its step size read on the device: alpha = step ratio of s where mask[row]
// (0 elsewhere; alpha = 0 leaves x and r as they are), x += alpha d, r -= alpha q, per-block
// sums of r.r into partial group 0; with `precond` also z = w*r and the sums of r.z into the
// next group; with `want_rq` the sums of r.q (after the update) into the group after that.
// A group is rows*bpr f64.
template <typename T>
__device__ void mm_axpy_pair_rows_ratio(const double *s, i64 num, i64 den, const int *mask,
                                        const T *d, const T *q, T *x, T *r, const T *w, T *z,
                                        int precond, int want_rq, i64 n, i64 rows, i64 bpr,
                                        i64 row0, double *partial) {
    const i64 row = row0 + blockIdx.y;
    const T a = mask[row] ? mm_step_ratio<T>(s, rows, num, den, row) : (T)0;
    const i64 base = row * n;
    double rr = 0.0, rz = 0.0, rq = 0.0;
    for (i64 i = (i64)blockIdx.x * MM_BLOCK + threadIdx.x; i < n; i += bpr * MM_BLOCK) {
        const T qi = q[base + i];
        T nr = r[base + i];
        if (a != (T)0) {
            x[base + i] += mm_mul(a, d[base + i]);
            nr = nr - mm_mul(a, qi);
            r[base + i] = nr;
        }
        const double f = (double)nr;
        rr += f * f;
        if (precond) {
            const T zi = mm_mul(w[base + i], nr);
            z[base + i] = zi;
            rz += f * (double)zi;
        }
        if (want_rq) rq += f * (double)qi;
    }
    const i64 group = rows * bpr, slot = row * bpr + blockIdx.x;
    mm_block_sum(rr, partial, slot);
    if (precond) mm_block_sum(rz, partial, group + slot);
    if (want_rq) mm_block_sum(rq, partial, (1 + precond) * group + slot);
}

// s[slot * rows + row] = the sum of the `bpr` per-block partials of each row (starting at
// partial[off]), one warp per row in a fixed order: lane l adds blocks l, l + 32, ..., then a
// fixed shuffle tree. Deterministic, no atomics.
extern "C" __global__ void row_partials_into(const double *partial, i64 off, i64 rows, i64 bpr,
                                             double *s, i64 slot) {
    const i64 lane = threadIdx.x & 31;
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 warps = ((i64)blockDim.x * gridDim.x) >> 5;
    for (i64 row = warp; row < rows; row += warps) {
        double acc = 0.0;
        for (i64 k = lane; k < bpr; k += 32) acc += partial[off + row * bpr + k];
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
        if (lane == 0) s[slot * rows + row] = acc;
    }
}

#define MM_LA(n, T)                                                                         \
    extern "C" __global__ void matvec_dense_##n(const T *a, const T *x, T *y, i64 batch,     \
                                                i64 m, i64 len, int per_entry) {            \
        mm_matvec_dense<T>(a, x, y, batch, m, len, per_entry);                               \
    }                                                                                       \
    extern "C" __global__ void matvec_csr_##n(const i64 *ip, const i64 *ix, const T *v,      \
                                              const T *x, T *y, i64 batch, i64 m, i64 len,   \
                                              i64 nnz, int per_entry) {                     \
        GRID_LOOP(g, batch * m) {                                                           \
            const i64 b = g / m, i = g % m;                                                 \
            const T *vals = per_entry ? v + b * nnz : v;                                    \
            const T *xv = x + b * len;                                                      \
            T acc = (T)0;                                                                   \
            for (i64 p = ip[i]; p < ip[i + 1]; ++p) acc += vals[p] * xv[ix[p]];             \
            y[g] = acc;                                                                     \
        }                                                                                   \
    }                                                                                       \
    extern "C" __global__ void laplacian_##n(const T *x, T *y, i64 batch, i64 nz, i64 ny,    \
                                             i64 nx, int nd, int periodic) {                \
        mm_laplacian<T>(x, y, batch, nz, ny, nx, nd, periodic);                              \
    }                                                                                       \
    extern "C" __global__ void scale_rows_##n(const T *alpha, T *x, i64 rows, i64 len) {     \
        GRID_LOOP(g, rows * len) x[g] *= alpha[g / len];                                    \
    }                                                                                       \
    extern "C" __global__ void axpy_rows_##n(const T *alpha, const T *x, T *y, i64 rows,     \
                                             i64 len) {                                     \
        GRID_LOOP(g, rows * len) y[g] += mm_mul(alpha[g / len], x[g]);                             \
    }                                                                                       \
    extern "C" __global__ void xpay_rows_##n(const T *x, const T *beta, T *y, i64 rows,      \
                                             i64 len) {                                     \
        GRID_LOOP(g, rows * len) y[g] = x[g] + mm_mul(beta[g / len], y[g]);                        \
    }                                                                                       \
    extern "C" __global__ void laplacian_dot_##n(const T *x, T *y, i64 nz, i64 ny, i64 nx,   \
                                                 int nd, int periodic, const int *active,  \
                                                 i64 bpr, i64 row0, double *partial) {     \
        mm_laplacian_dot<T>(x, y, nz, ny, nx, nd, periodic, active, bpr, row0, partial);    \
    }                                                                                       \
    extern "C" __global__ void axpy_pair_rows_dots_##n(const T *alpha, const T *d, const T *q, \
                                                     T *x, T *r, i64 len, i64 rows, i64 bpr,\
                                                     i64 row0, double *partial) {           \
        mm_axpy_pair_rows_dots<T>(alpha, d, q, x, r, len, rows, bpr, row0, partial);              \
    }                                                                                       \
    extern "C" __global__ void axpy_pair_rows_##n(const T *alpha, const T *d, const T *q, T *x,\
                                                T *r, i64 len, i64 bpr, i64 row0,           \
                                                double *partial) {                          \
        mm_axpy_pair_rows<T>(alpha, d, q, x, r, len, bpr, row0, partial);                         \
    }                                                                                       \
    extern "C" __global__ void xpay_rows_masked_##n(                                         \
        const T *x, const T *beta, const double *s, i64 num, i64 den, int ratio, T *y,      \
        i64 len, i64 rows, const int *active, int dot, i64 bpr, i64 row0, double *partial) {\
        mm_xpay_rows_masked<T>(x, beta, s, num, den, ratio, y, len, rows, active, dot, bpr,  \
                               row0, partial);                                              \
    }                                                                                       \
    extern "C" __global__ void matvec_dense_dot_##n(const T *a, const T *x, T *y, i64 len,   \
                                                    int per_entry, const int *active,       \
                                                    i64 bpr, i64 row0, double *partial) {   \
        mm_matvec_dense_dot<T>(a, x, y, len, per_entry, active, bpr, row0, partial);         \
    }                                                                                       \
    extern "C" __global__ void matvec_csr_dot_##n(                                           \
        const i64 *ip, const i64 *ix, const T *v, const T *x, T *y, i64 len, i64 nnz,       \
        int per_entry, const int *active, i64 bpr, i64 row0, double *partial) {             \
        mm_matvec_csr_dot<T>(ip, ix, v, x, y, len, nnz, per_entry, active, bpr, row0,        \
                             partial);                                                      \
    }                                                                                       \
    extern "C" __global__ void axpy_pair_rows_ratio_##n(                                     \
        const double *s, i64 num, i64 den, const int *mask, const T *d, const T *q, T *x,   \
        T *r, const T *w, T *z, int precond, int want_rq, i64 len, i64 rows, i64 bpr,       \
        i64 row0, double *partial) {                                                        \
        mm_axpy_pair_rows_ratio<T>(s, num, den, mask, d, q, x, r, w, z, precond, want_rq,    \
                                   len, rows, bpr, row0, partial);                          \
    }
MM_FLOATS(MM_LA)

// The pressure-Poisson stencil (monomorph_core::PoissonStencil, Linalg::stencil): per-cell flags
// (bit 0 active, bit 1 + 2p / 2 + 2p the lower / upper face of padded axis p open) decide which
// faces carry flux; a Dirichlet ghost holds 0; a periodic axis wraps. Without a flags array the
// flags follow from the boundary alone (`open`: bit 2p / 2p + 1 = the lower / upper boundary face
// of padded axis p is open). Same order and rounding as the CPU backend: per real axis, slowest
// first, c_p * ((lo + hi) - k * x), summed left to right.

template <typename T>
__device__ __forceinline__ T mm_stencil_axis(unsigned f, int p, T lo, T hi, T x) {
    const T l = (f & (1u << (1 + 2 * p))) ? lo : (T)0;
    const T h = (f & (1u << (2 + 2 * p))) ? hi : (T)0;
    const T k = (T)(((f >> (1 + 2 * p)) & 1u) + ((f >> (2 + 2 * p)) & 1u));
    return (l + h) - mm_mul(k, x);
}

template <typename T>
__device__ __forceinline__ T mm_stencil_point(const T *xv, const unsigned char *cells,
                                              int has_cells, i64 idx, i64 nz, i64 ny, i64 nx,
                                              double cz, double cy, double cx, int per, int open,
                                              int first) {
    const i64 n3[3] = {nz, ny, nx};
    const i64 st[3] = {ny * nx, nx, 1};
    const i64 c3[3] = {idx / (ny * nx), (idx / nx) % ny, idx % nx};
    const double cc[3] = {cz, cy, cx};
    unsigned f;
    if (has_cells) {
        f = cells[idx];
    } else {
        f = 1u;
        for (int p = first; p < 3; ++p) {
            if (c3[p] > 0 || ((open >> (2 * p)) & 1)) f |= 1u << (1 + 2 * p);
            if (c3[p] + 1 < n3[p] || ((open >> (2 * p + 1)) & 1)) f |= 1u << (2 + 2 * p);
        }
    }
    if (!(f & 1u)) return (T)0;
    const T x = xv[idx];
    T acc = (T)0;
    for (int p = first; p < 3; ++p) {
        const i64 c = c3[p], len = n3[p], s = st[p];
        const int wrap = (per >> p) & 1;
        T lo = (T)0, hi = (T)0;
        if (c > 0) lo = xv[idx - s];
        else if (wrap) lo = xv[idx + (len - 1) * s];
        if (c + 1 < len) hi = xv[idx + s];
        else if (wrap) hi = xv[idx - (len - 1) * s];
        const T term = mm_mul((T)cc[p], mm_stencil_axis<T>(f, p, lo, hi, x));
        acc = (p == first) ? term : acc + term;
    }
    return acc;
}

#define MM_STENCIL(n, T)                                                                       \
    extern "C" __global__ void stencil_##n(const T *x, T *y, i64 batch, i64 nz, i64 ny, i64 nx, \
                                           double cz, double cy, double cx, int per, int open,   \
                                           int first, const unsigned char *cells,               \
                                           int has_cells) {                                     \
        const i64 len = nz * ny * nx;                                                          \
        GRID_LOOP(g, batch * len) {                                                            \
            const i64 b = g / len, idx = g % len;                                               \
            y[g] = mm_stencil_point<T>(x + b * len, cells, has_cells, idx, nz, ny, nx, cz, cy,  \
                                       cx, per, open, first);                                   \
        }                                                                                      \
    }                                                                                          \
    extern "C" __global__ void stencil_dot_##n(                                                \
        const T *x, T *y, i64 nz, i64 ny, i64 nx, double cz, double cy, double cx, int per,    \
        int open, int first, const unsigned char *cells, int has_cells, const int *active,     \
        i64 bpr, i64 row0, double *partial) {                                                  \
        const i64 row = row0 + blockIdx.y;                                                     \
        const i64 len = nz * ny * nx;                                                          \
        double acc = 0.0;                                                                      \
        if (active[row]) {                                                                     \
            const T *xv = x + row * len;                                                       \
            for (i64 i = (i64)blockIdx.x * MM_BLOCK + threadIdx.x; i < len;                    \
                 i += bpr * MM_BLOCK) {                                                        \
                const T v = mm_stencil_point<T>(xv, cells, has_cells, i, nz, ny, nx, cz, cy,   \
                                                cx, per, open, first);                         \
                y[row * len + i] = v;                                                          \
                acc += (double)xv[i] * (double)v;                                              \
            }                                                                                  \
        }                                                                                      \
        mm_block_sum(acc, partial, row * bpr + blockIdx.x);                                    \
    }
MM_FLOATS(MM_STENCIL)
