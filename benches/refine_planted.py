#!/usr/bin/env python3
"""Whole-process timing of seeded local refinement against the coarse search it refines.

A planted-particle tomogram (N^3, K copies of an asymmetric blob template of side M at uniformly
random orientations, not on any search grid, Gaussian noise), the same construction as
tests/suite/refine.rs: a coarse 30-degree search (`match --angular-step 30`), `peaks` into a
STAR file, then `match --orientations p.star --orientations-cone 15 --angular-step 3
--orientations-uncertainty 2 --orientations-inplane-range 15`. Prints each step's wall time
(best of REPEATS whole processes), the refinement's time per seed, and the mean angular error
of the coarse and refined peaks against the planted rotations.

Run: python benches/refine_planted.py [target/release/monomorph] [N] [K] [M]   (numpy only)
"""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/monomorph"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 128
K = int(sys.argv[3]) if len(sys.argv) > 3 else 16
M = int(sys.argv[4]) if len(sys.argv) > 4 else 21
REPEATS = 3
BLOBS = [((0, 0, 0), 1.8, 1.0), ((3.5, 0, 0), 1.2, 0.9), ((0, 3, 0), 1.1, 0.7),
         ((0, 0, -4), 1.0, 0.8), ((-2, 2, 2.5), 1.0, 0.6)]


def plant(a, centre, r):
    """Adds the blobs, offset p placed at centre + R^T p (R the pull-back, array order)."""
    idx = np.indices(a.shape, dtype=np.float64)
    for p, s, amp in BLOBS:
        q = np.asarray(centre) + r.T @ np.asarray(p, dtype=np.float64)
        d2 = sum((idx[k] - q[k]) ** 2 for k in range(3))
        a += (amp * np.exp(-d2 / (2 * s * s))).astype(np.float32)


def random_rotation(rng):
    u1, u2, u3 = rng.random(3)
    a, b = np.sqrt(1 - u1), np.sqrt(u1)
    w, x, y, z = a * np.sin(2 * np.pi * u2), a * np.cos(2 * np.pi * u2), b * np.sin(2 * np.pi * u3), b * np.cos(2 * np.pi * u3)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def relion_matrix(rot, tilt, psi):
    """P . Rz(rot) Ry(tilt) Rz(psi) . P: RELION angles to the array-order matrix."""
    def rz(t):
        c, s = np.cos(np.radians(t)), np.sin(np.radians(t))
        return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])

    def ry(t):
        c, s = np.cos(np.radians(t)), np.sin(np.radians(t))
        return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    m = rz(rot) @ ry(tilt) @ rz(psi)
    return m[::-1, ::-1]


def timed(args):
    best = None
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        subprocess.run([BIN, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best


def mean_error(csv, planted):
    rows = [list(map(float, l.split(","))) for l in open(csv).read().splitlines()[1:] if l.strip()]
    errs = []
    for c, r in planted:
        row = min(rows, key=lambda v: sum((v[k] - c[k]) ** 2 for k in range(3)))
        if max(abs(row[k] - c[k]) for k in range(3)) > 2:
            continue  # not found: no peak within 2 voxels
        m = relion_matrix(row[5], row[6], row[7])
        errs.append(np.degrees(np.arccos(np.clip((np.trace(m.T @ r) - 1) / 2, -1, 1))))
    return f"{np.mean(errs):.2f} deg over the {len(errs)} of {len(planted)} particles found"



def main():
    rng = np.random.default_rng(7)
    d = tempfile.mkdtemp(prefix="refine-bench-")
    target = (0.15 * rng.standard_normal((N, N, N))).astype(np.float32)
    side = int(np.ceil(K ** (1 / 3)))
    step = N / side
    planted = []
    for i in range(K):
        c = [int(step / 2 + step * ((i // side ** k) % side)) for k in range(3)]
        r = random_rotation(rng)
        plant(target, c, r)
        planted.append((c, r))
    template = np.zeros((M, M, M), np.float32)
    plant(template, [M // 2] * 3, np.eye(3))
    t, m = os.path.join(d, "t.npy"), os.path.join(d, "m.npy")
    np.save(t, target)
    np.save(m, template)
    coarse, fine, star = os.path.join(d, "coarse"), os.path.join(d, "fine"), os.path.join(d, "p.star")
    tc = timed(["match", "--target", t, "--template", m, "--angular-step", "30", "--out", coarse])
    pk = ["--min-distance", str(M // 2), "--num-peaks", str(K)]
    peaks = lambda run, out: ["peaks", "--scores", f"{run}/scores.npy", "--rotation-index",
                              f"{run}/rotation_index.npy", "--rotations", f"{run}/rotations.npy", *pk, "--out", out]
    subprocess.run([BIN, *peaks(coarse, star)], check=True, stderr=subprocess.DEVNULL)
    subprocess.run([BIN, *peaks(coarse, os.path.join(d, "coarse.csv"))], check=True, stderr=subprocess.DEVNULL)
    tf = timed(["match", "--target", t, "--template", m, "--orientations", star, "--orientations-cone", "15",
                "--angular-step", "3", "--orientations-uncertainty", "2", "--orientations-inplane-range", "15",
                "--out", fine])
    subprocess.run([BIN, *peaks(fine, os.path.join(d, "fine.csv"))], check=True, stderr=subprocess.DEVNULL)
    import json
    coarse_rot = json.load(open(f"{coarse}/run.json"))["parameters"]["n_rotations"]
    fine_rot = json.load(open(f"{fine}/run.json"))["parameters"]["n_rotations"]
    print(f"target {N}^3, {K} particles, template {M}^3, best of {REPEATS} whole processes")
    print(f"coarse 30-degree search: {coarse_rot} rotations, {tc:.2f} s; "
          f"mean angular error {mean_error(os.path.join(d, 'coarse.csv'), planted)}")
    print(f"refinement: {fine_rot} rotations ({fine_rot // K} per seed), {tf:.2f} s = {tf / K:.3f} s per seed; "
          f"mean angular error {mean_error(os.path.join(d, 'fine.csv'), planted)}")


if __name__ == "__main__":
    main()
