#!/usr/bin/env python3
"""Small synthetic inputs for tests/identity/run.sh (plain Python, no numpy): a 40^3 MRC and
npy target with planted copies of a 12^3 template, a second (smaller) target, masks, a
scheduling mask, target lists (text and STAR). Deterministic."""
import math, os, random, struct, sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = random.Random(7)


def npy(path, shape, data):
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % (
        "".join(f"{s}, " for s in shape) if len(shape) > 1 else f"{shape[0]},")
    pad = 64 - (10 + len(hdr) + 1) % 64
    hdr = hdr + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack(f"<{len(data)}f", *data))


def mrc(path, shape, data, vs=6.8):
    nz, ny, nx = shape
    h = bytearray(1024)
    for i, v in [(0, nx), (1, ny), (2, nz), (3, 2), (7, nx), (8, ny), (9, nz), (16, 1), (17, 2),
                 (18, 3), (22, 1), (27, 20140)]:
        struct.pack_into("<i", h, 4 * i, v)
    for i, v in [(10, vs * nx), (11, vs * ny), (12, vs * nz), (13, 90), (14, 90), (15, 90)]:
        struct.pack_into("<f", h, 4 * i, v)
    h[208:212] = b"MAP "
    h[212:216] = bytes([0x44, 0x44, 0, 0])
    with open(path, "wb") as f:
        f.write(h)
        f.write(struct.pack(f"<{len(data)}f", *data))


def template(n):
    c = (n - 1) / 2
    t = []
    for z in range(n):
        for y in range(n):
            for x in range(n):
                r = math.sqrt((z - c) ** 2 + 0.6 * (y - c) ** 2 + 1.7 * (x - c) ** 2)
                t.append(max(0.0, 1.0 - r / (0.45 * n)) + (0.3 if z < c and x > c else 0.0))
    return t


def target(shape, t, n, places, seed):
    r = random.Random(seed)
    nz, ny, nx = shape
    a = [r.gauss(0, 0.3) for _ in range(nz * ny * nx)]
    for (pz, py, px) in places:
        for z in range(n):
            for y in range(n):
                for x in range(n):
                    a[((pz + z) * ny + py + y) * nx + px + x] += t[(z * n + y) * n + x]
    return a


n = 12
t = template(n)
npy(f"{out}/template.npy", (n, n, n), t)
c = (n - 1) / 2
mask = [1.0 if (z - c) ** 2 + (y - c) ** 2 + (x - c) ** 2 <= (0.5 * n) ** 2 else 0.0
        for z in range(n) for y in range(n) for x in range(n)]
npy(f"{out}/template_mask.npy", (n, n, n), mask)
shape = (40, 40, 40)
a = target(shape, t, n, [(4, 6, 8), (22, 20, 25), (10, 26, 4)], 1)
mrc(f"{out}/target.mrc", shape, a)
npy(f"{out}/target.npy", shape, a)
b = target((32, 36, 28), t, n, [(10, 12, 8)], 2)
mrc(f"{out}/small.mrc", (32, 36, 28), b)
sm = [1.0 if 8 <= z < 30 and 5 <= y < 34 else 0.0
      for z in range(40) for y in range(40) for x in range(40)]
npy(f"{out}/scheduling_mask.npy", shape, sm)
tm = [1.0 if 2 <= z < 38 else 0.0 for z in range(40) for y in range(40) for x in range(40)]
npy(f"{out}/target_mask.npy", shape, tm)
with open(f"{out}/list.txt", "w") as f:
    f.write("# two targets\ntarget.mrc\nsmall.mrc\n")
with open(f"{out}/one.txt", "w") as f:
    f.write("target.mrc\n")
with open(f"{out}/list.star", "w") as f:
    f.write("data_\nloop_\n_rlnMicrographName #1\n"
            f"{out}/small.mrc\n{out}/target.mrc\n{out}/target.npy\n")
