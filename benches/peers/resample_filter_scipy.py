"""scipy peers of benches/resample.rs and benches/filter.rs, measured the same way.

    /work/venv/bin/python benches/peers/resample_filter_scipy.py

* cubic rotation of a 32^3 float32 volume: affine_transform(order=3, mode="constant",
  prefilter=True) (pytme's template rotation), ZYZ (30, 40, 50) degrees about the centre;
* maximum_filter of a 256^3 float32 volume, size 3 / 11 / 21, mode "nearest".
Prints the median and minimum wall time over repeats and the mean CPU time (process time,
robust to a busy machine; scipy runs on one thread, so CPU time ~ wall time on a quiet one).
"""
import time

import numpy as np
from scipy import ndimage
from scipy.spatial.transform import Rotation


def timeit(f, repeat):
    """(median wall, min wall, mean CPU time of this process) in seconds."""
    ts = []
    c0 = time.process_time()
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    cpu = (time.process_time() - c0) / repeat
    return np.median(ts), np.min(ts), cpu


def main():
    n = 32
    i = np.indices((n, n, n), dtype=np.float32)
    c = (n - 1) / 2
    vol = (np.exp(-((i - c) ** 2).sum(0) / 40.0)
           + 0.1 * ((i[0] * 7 + i[1] * 13 + i[2] * 3) % 11)).astype(np.float32)
    r = Rotation.from_euler("ZYZ", [30, 40, 50], degrees=True).as_matrix()
    off = c - r @ np.full(3, c)
    out = np.zeros_like(vol)
    med, mn, cpu = timeit(lambda: ndimage.affine_transform(
        vol, r, off, output=out, order=3, mode="constant", prefilter=True), 50)
    print(f"scipy affine_transform(order=3, prefilter) 32^3 f32: median {med*1e3:.2f} ms, "
          f"min {mn*1e3:.2f} ms, cpu {cpu*1e3:.2f} ms")

    n = 256
    idx = np.indices((n, n, n), dtype=np.int64)
    big = (((idx[0] * 7919 + idx[1] * 104729 + idx[2] * 1299709) % 10007) / 10007.0).astype(np.float32)
    del idx
    out = np.empty_like(big)
    for size in (3, 11, 21):
        med, mn, cpu = timeit(
            lambda: ndimage.maximum_filter(big, size=size, mode="nearest", output=out), 3)
        print(f"scipy maximum_filter 256^3 f32 size {size}: median {med*1e3:.1f} ms, "
              f"min {mn*1e3:.1f} ms, cpu {cpu*1e3:.1f} ms")


if __name__ == "__main__":
    main()
