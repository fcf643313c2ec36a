"""pytme 0.3.6 peer for benches/matching.rs: seconds per rotation and peak RSS.

`match_exhaustive` with the numpyfftw backend (float32, pyFFTW), job_schedule=(1, N_JOBS),
MaxScoreOverRotations, same sizes as the Rust bench:
  3-D target 128^3, template 32^3, ball mask radius 15, 64 rotations: FLCSphericalMask, FLC
  2-D target 2048^2, template 64^2, disc mask radius 31, 16 rotations: FLC

    /work/venv/bin/python benches/peers/matching_pytme.py [case ...]

cases: flcsph3d flc3d flc2d (default: all). Prints one line per case: the best of two runs,
so the figure is pytme warm (FFTW plans made and worker processes started by the first run),
like the Rust bench, which warms its plans with one untimed run. A cold first run is about
1.4x slower (3-D FLC: ~64 vs ~44 ms/rotation on the 2-core Xeon, 2026-11-29).
"""

import resource
import sys
import time
import warnings

import numpy as np

warnings.filterwarnings("ignore")
from tme.analyzer import MaxScoreOverRotations  # noqa: E402
from tme.matching_data import MatchingData  # noqa: E402
from tme.matching_exhaustive import match_exhaustive  # noqa: E402
from tme.matching_scores import MATCHING_EXHAUSTIVE_REGISTER  # noqa: E402
from tme.rotations import get_rotation_matrices  # noqa: E402

N_JOBS = 2


def ball(shape, radius):
    grid = np.indices(shape, dtype=np.float64)
    c = (np.asarray(shape, dtype=np.float64) - 1) / 2
    r2 = sum((g - ci) ** 2 for g, ci in zip(grid, c))
    return (r2 <= radius * radius).astype(np.float32)


def rotations(dim, n):
    if dim == 3:
        return get_rotation_matrices(15.0)[:n].astype(np.float32)
    a = np.radians(np.arange(n) * 2.0)
    return np.stack([[[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]] for t in a]).astype(np.float32)


def run(score, tshape, mshape, nrot, repeats=1):
    rng = np.random.default_rng(7)
    target = rng.random(tshape, dtype=np.float32) - 0.5
    template = rng.random(mshape, dtype=np.float32) - 0.5
    mask = ball(mshape, mshape[0] / 2 - 1)
    setup, scoring = MATCHING_EXHAUSTIVE_REGISTER[score]
    best = np.inf
    for _ in range(repeats):
        md = MatchingData(target, template, template_mask=mask)
        md.rotations = rotations(len(tshape), nrot)
        t0 = time.perf_counter()
        match_exhaustive(md, scoring, setup, callback_class=MaxScoreOverRotations,
                         job_schedule=(1, N_JOBS), pad_target_edges=False)
        best = min(best, time.perf_counter() - t0)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"pytme {score:17s} target {tshape} template {mshape} {nrot} rotations, {N_JOBS} jobs: "
          f"{best:.2f} s total, {best / nrot:.4f} s/rotation; peak RSS parent {own:.0f} MiB, "
          f"largest child {kids:.0f} MiB", flush=True)


CASES = {
    "flcsph3d": ("FLCSphericalMask", (128,) * 3, (32,) * 3, 64),
    "flc3d": ("FLC", (128,) * 3, (32,) * 3, 64),
    "flc2d": ("FLC", (2048, 2048), (64, 64), 16),
}

if __name__ == "__main__":
    for name in sys.argv[1:] or list(CASES):
        run(*CASES[name], repeats=2)
