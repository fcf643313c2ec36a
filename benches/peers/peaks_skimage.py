"""Peer timings for benches/peaks.rs: scikit-image peak_local_max(min_distance=5) and scipy
maximum_filter(size=11, mode='nearest') on a float32 256³ smoothed random map (white noise
blurred by two passes of a 5-wide box per axis, as in the Rust bench).

    /work/venv/bin/python benches/peers/peaks_skimage.py
"""
import time

import numpy as np
from scipy import ndimage as ndi
from skimage.feature import peak_local_max


def smoothed_map(n=256):
    rng = np.random.default_rng(0)
    a = (rng.random((n, n, n), dtype=np.float32) * 4 - 2).astype(np.float32)
    for _ in range(2):
        for axis in range(3):
            a = ndi.uniform_filter1d(a, 5, axis=axis, mode="nearest")
    return a.astype(np.float32)


def best_of(f, repeat=3):
    times = []
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return min(times), float(np.median(times)), out


def main():
    a = smoothed_map()
    tmin, tmed, peaks = best_of(lambda: peak_local_max(a, min_distance=5))
    print(f"skimage peak_local_max(min_distance=5) 256^3: min {tmin:.3f} s, median {tmed:.3f} s, {len(peaks)} peaks")
    tmin, tmed, _ = best_of(lambda: ndi.maximum_filter(a, size=11, mode="nearest"))
    print(f"scipy maximum_filter(size=11, nearest) 256^3: min {tmin:.3f} s, median {tmed:.3f} s")


if __name__ == "__main__":
    main()
