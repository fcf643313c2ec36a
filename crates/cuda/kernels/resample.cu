// Rearrangements (pad / crop / flip / roll), the cubic B-spline prefilter and affine
// resampling with scipy.ndimage's semantics (mode="constant", cval=0, mirror-extended
// spline coefficients).


// mode: 0 crop (p = offset), 1 flip (p = 1 to flip the axis), 2 roll (p = shift in [0, n)),
//       3 zero pad (p = before), 4 symmetric pad (p = before).
template <typename E>
__device__ void mm_rearrange(int mode, const E *s, E *d, Geom g, i64 total) {
    GRID_LOOP(i, total) {
        i64 rem = i, sidx = 0, sstride = 1;
        bool zero = false;
        for (i64 k = g.nd - 1; k >= 0; --k) {
            const i64 c = rem % g.dst[k];
            rem /= g.dst[k];
            const i64 n = g.src[k];
            i64 j;
            switch (mode) {
            case 0: j = c + g.p[k]; break;
            case 1: j = g.p[k] ? n - 1 - c : c; break;
            case 2: j = c - g.p[k]; if (j < 0) j += n; break;
            case 3: j = c - g.p[k]; if (j < 0 || j >= n) { zero = true; j = 0; } break;
            default: {
                const i64 per = 2 * n;
                i64 m = (c - g.p[k]) % per;
                if (m < 0) m += per;
                j = m >= n ? per - 1 - m : m;
            }
            }
            sidx += j * sstride;
            sstride *= n;
        }
        d[i] = zero ? E() : s[sidx];
    }
}

#define MM_RE(n, E)                                                                         \
    extern "C" __global__ void rearrange_##n(int mode, const E *s, E *d, Geom g, i64 total) {\
        mm_rearrange<E>(mode, s, d, g, total);                                               \
    }
MM_RE(b1, unsigned char)
MM_RE(b4, u32)
MM_RE(b8, u64)
MM_RE(b16, B16)

// scipy's cubic spline filter along one axis (pole sqrt(3) - 2, mirror boundary), in f64.
// One thread per line: line l starts at (l / stride) * len * stride + l % stride.
extern "C" __global__ void spline_axis_f64(double *a, i64 nlines, i64 len, i64 stride) {
    const double z = -0.267949192431122706472553658494127633;
    const double gain = (1.0 - z) * (1.0 - 1.0 / z);
    GRID_LOOP(l, nlines) {
        if (len < 2) continue;
        double *c = a + (l / stride) * len * stride + (l % stride);
#define C(k) c[(i64)(k) * stride]
        for (i64 i = 0; i < len; ++i) C(i) *= gain;
        // causal init (mirror)
        double z_i = z;
        const double z_n_1 = pow(z, (double)(len - 1));
        double c0 = C(0) + z_n_1 * C(len - 1);
        for (i64 i = 1; i < len - 1; ++i) {
            c0 += z_i * (C(i) + z_n_1 * C(len - 1 - i));
            z_i *= z;
        }
        C(0) = c0 / (1 - z_n_1 * z_n_1);
        for (i64 i = 1; i < len; ++i) C(i) += z * C(i - 1);
        // anticausal init (mirror)
        C(len - 1) = (z * C(len - 2) + C(len - 1)) * z / (z * z - 1);
        for (i64 i = len - 2; i >= 0; --i) C(i) = z * (C(i + 1) - C(i));
#undef C
    }
}

struct Affine {
    i64 nd;
    i64 src[MM_MAXD];
    i64 dst[MM_MAXD];
    double m[MM_MAXD * MM_MAXD];
    double off[MM_MAXD];
    // bit 1: pytme's reversed frame, flip(affine(flip(src))): the coordinate y of the mirrored
    // output index is tested, and src is read at (n - 1) - y. bit 2: y is summed from the last
    // axis to the first (pytme holds the transposed arrays).
    i64 rev;
};

// dst[o] = interp(src, m . o + off); order 1 or 3; outside [0, n - 1] on any axis -> 0.
template <typename T>
__device__ void mm_affine(const T *s, T *d, Affine g, int order, i64 total) {
    GRID_LOOP(i, total) {
        i64 o[MM_MAXD];
        i64 rem = i;
        for (i64 k = g.nd - 1; k >= 0; --k) {
            o[k] = rem % g.dst[k];
            rem /= g.dst[k];
        }
        double w[MM_MAXD][4];
        i64 idx[MM_MAXD][4];
        bool constant = false;
        for (i64 h = 0; h < g.nd && !constant; ++h) {
            // scipy's order: start from the offset, add o_l * m[h][l] axis by axis; no FMA
            // contraction, so edge points (exactly 0 or n - 1) land on scipy's side.
            const bool rev = (g.rev & 1) != 0, backward = (g.rev & 2) != 0;
            double cc = g.off[h];
            for (i64 q = 0; q < g.nd; ++q) {
                const i64 l = backward ? g.nd - 1 - q : q;
                const i64 ol = rev ? g.dst[l] - 1 - o[l] : o[l];
                cc = __dadd_rn(cc, __dmul_rn((double)ol, g.m[h * g.nd + l]));
            }
            const i64 len = g.src[h];
            if (cc < 0.0 || cc > (double)(len - 1)) {
                constant = true;
                break;
            }
            if (rev) cc = __dsub_rn((double)(len - 1), cc);
            const double fl = floor(cc);
            const i64 start = (i64)fl - order / 2;
            const double x = cc - fl;
            if (order == 1) {
                w[h][0] = 1.0 - x;
                w[h][1] = 1.0 - w[h][0];
            } else {
                const double y = x, zz = 1.0 - x;
                w[h][1] = (y * y * (y - 2.0) * 3.0 + 4.0) / 6.0;
                w[h][2] = (zz * zz * (zz - 2.0) * 3.0 + 4.0) / 6.0;
                w[h][0] = zz * zz * zz / 6.0;
                double last = 1.0;
                for (int q = 0; q < 3; ++q) last -= w[h][q];
                w[h][3] = last;
            }
            for (int q = 0; q <= order; ++q) idx[h][q] = mm_border(start + q, len, 2);
        }
        if (constant) {
            d[i] = (T)0;
            continue;
        }
        i64 f[MM_MAXD];
        for (i64 k = 0; k < g.nd; ++k) f[k] = 0;
        i64 fsize = 1;
        for (i64 k = 0; k < g.nd; ++k) fsize *= (order + 1);
        double t = 0.0;
        for (i64 hh = 0; hh < fsize; ++hh) {
            i64 sidx = 0;
            for (i64 k = 0; k < g.nd; ++k) sidx = sidx * g.src[k] + idx[k][f[k]];
            double coeff = (double)s[sidx];
            for (i64 k = 0; k < g.nd; ++k) coeff *= w[k][f[k]];
            t += coeff;
            for (i64 k = g.nd - 1; k >= 0; --k) {
                if (f[k] < order) { f[k]++; break; }
                f[k] = 0;
            }
        }
        d[i] = (T)t;
    }
}

#define MM_AFF(n, T)                                                                        \
    extern "C" __global__ void affine_##n(const T *s, T *d, Affine g, int order, i64 total) {\
        mm_affine<T>(s, d, g, order, total);                                                 \
    }
MM_FLOATS(MM_AFF)
