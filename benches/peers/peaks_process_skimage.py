"""Peer timing for the whole-process `monomorph peaks` figure: writes the float32 256³ smoothed
random map of benches/peers/peaks_skimage.py to a .npy file, then times scikit-image's
peak_local_max(min_distance=5, exclude_border=5) on the map already in memory (the call alone).

    /work/venv/bin/python benches/peers/peaks_process_skimage.py /tmp/s.npy
    monomorph peaks --scores /tmp/s.npy --caller skimage --min-distance 5 --exclude-border 5 --out /tmp/p.csv
"""
import sys

import numpy as np
from skimage.feature import peak_local_max

from peaks_skimage import best_of, smoothed_map


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/s.npy"
    a = smoothed_map()
    np.save(path, a)
    tmin, tmed, peaks = best_of(lambda: peak_local_max(a, min_distance=5, exclude_border=5), 5)
    print(f"wrote {path}; skimage peak_local_max(min_distance=5, exclude_border=5) 256^3 in memory: "
          f"min {tmin:.3f} s, median {tmed:.3f} s, {len(peaks)} peaks")


if __name__ == "__main__":
    main()
