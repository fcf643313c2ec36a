"""FFTW's r2c + c2r pairs, the peer of benches/fft.rs.

pyFFTW builders (FFTW_MEASURE, float32, planned once), timing `execute()` of the forward then
the inverse, median and minimum of N runs, for 128^3, 256^3 and 2048^2 on 1 and 2 threads, plus
the forward alone at 128^3 (the "full" figure of the pruning bench). The CPU time per pair (all
threads) is printed too: on a shared machine it is less disturbed by other processes than the
wall time.

    /work/venv/bin/python benches/peers/fft_fftw.py [runs] [threads] [shape ...]

e.g. `fft_fftw.py 21 1 128x128x128` (defaults: 11 runs, threads 1 and 2, all three shapes).
"""

import sys
import time

import numpy as np
import pyfftw
import pyfftw.builders as builders


def pair_times(shape, threads, runs):
    rng = np.random.default_rng(0)
    a = pyfftw.empty_aligned(shape, dtype="float32")
    a[...] = rng.standard_normal(shape, dtype=np.float32)
    fwd = builders.rfftn(a, threads=threads, planner_effort="FFTW_MEASURE", avoid_copy=True)
    spec = fwd.output_array
    inv = builders.irfftn(
        spec, s=shape, threads=threads, planner_effort="FFTW_MEASURE", avoid_copy=True
    )
    a[...] = rng.standard_normal(shape, dtype=np.float32)
    # pyFFTW's irfftn builder may copy the input; execute() runs on its internal arrays.
    pair, forward = [], []
    for _ in range(2):
        fwd.execute()
        inv.execute()
    c0 = time.process_time()
    for _ in range(runs):
        t0 = time.perf_counter()
        fwd.execute()
        t1 = time.perf_counter()
        inv.execute()
        t2 = time.perf_counter()
        pair.append((t2 - t0) * 1e3)
        forward.append((t1 - t0) * 1e3)
    cpu = (time.process_time() - c0) * 1e3 / runs
    return pair, forward, cpu


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 11
    thread_counts = [int(sys.argv[2])] if len(sys.argv) > 2 else [1, 2]
    shapes = [tuple(int(v) for v in a.split("x")) for a in sys.argv[3:]] or [
        (128, 128, 128),
        (256, 256, 256),
        (2048, 2048),
    ]
    print(f"pyFFTW {pyfftw.__version__}, FFTW_MEASURE, float32, {runs} runs (ms)")
    for shape in shapes:
        for threads in thread_counts:
            pair, forward, cpu = pair_times(shape, threads, runs)
            name = "x".join(map(str, shape))
            print(
                f"r2c+c2r {name:>12} threads={threads}: median {np.median(pair):8.2f}"
                f"  min {np.min(pair):8.2f}  (CPU time per pair {cpu:8.2f})"
                + (
                    f"   | forward alone: median {np.median(forward):7.2f} min {np.min(forward):7.2f}"
                    if shape == (128, 128, 128)
                    else ""
                )
            )


if __name__ == "__main__":
    main()
