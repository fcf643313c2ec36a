"""Writes pytme_sets.bin: pytme 0.3.6's small Karney rotation sets, exactly.

pytme (tme/rotations.py, get_rotation_matrices) picks, for an angular step, the set of
tme/data/metadata.yaml whose nominal spacing is closest, loads tme/data/<name>.npy
(rows w, x, y, z, weight: Charles Karney's cffk/orientation sets, MIT licence, parsed
from text with 9 decimals) and returns Rotation.from_quat((x, y, z, w)).as_matrix().

Every quaternion component in those files is exactly the double nearest to n / 1e9 for
an integer |n| <= 1e9 (checked below), so the sets are stored here as little-endian int32
n, four per rotation (w, x, y, z), set after set in EMBEDDED's order; monomorph rebuilds
each component as n as f64 / 1e9, which is the same double. The larger sets (7416
rotations and up, 38 MB in all) are not embedded: monomorph reads them from a pytme data
folder (--pytme-data). Run once: /work/venv/bin/python pytme_sets.py
"""

import os

import numpy as np
import tme

DATA = os.path.join(os.path.dirname(tme.__file__), "data")
HERE = os.path.dirname(os.path.abspath(__file__))
EMBEDDED = ["c48u1", "c600v", "c48n9", "c600vc", "c48u27", "c48u83"]

out = []
for name in EMBEDDED:
    q = np.load(os.path.join(DATA, name + ".npy"))[:, :4]
    n = np.round(q * 1e9).astype(np.int64)
    assert np.array_equal(n / 1e9, q), name
    assert np.abs(n).max() <= 10**9
    out.append(n.astype("<i4"))
    print(name, len(q))
with open(os.path.join(HERE, "pytme_sets.bin"), "wb") as f:
    f.write(np.concatenate(out).tobytes())
