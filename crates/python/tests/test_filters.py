"""match_template with pytme's Fourier filter flags (wedge, CTF, band-pass, whitening) against
pytme 0.3.6's scores (tests/fixtures/matching-filters; its README says what was copied). The
arrays are given as pytme held them, so the filters are built in that frame, as for a .npy."""

import json

import numpy as np
import pytest

import monomorph
from conftest import FIXTURES

CASES = sorted(p.parent.name for p in (FIXTURES / "matching-filters").glob("*/case.json"))
# The arrays are given as pytme held them, while `wedge_axes` keeps monomorph's documented
# meaning (pytme's MRC numbering on (z, y, x) arrays; README "pytme's frame"): pytme's
# `--wedge-axes O,T` on arrays in its own frame is `2-O,2-T` here (pytme's default 2,0 -> 0,2).
PYTME_WEDGE_DEFAULT = (2, 0)
PARAMS = CASES
SKIP = {"-m", "-i", "-I", "-o", "-n", "-s", "-a"}
SCORES = {"FLC": "flc", "FLCSphericalMask": "flc-sphere", "CC": "cc"}


def _file(case, name):
    own = FIXTURES / "matching-filters" / case / name
    if own.exists():
        return own
    shared = "3d_whiten_flc" if case.startswith("3d") else "2d_bandpass_whiten_flc"
    return FIXTURES / "matching-filters" / shared / name


def _keywords(case, argv):
    """pytme's filter flags as keywords (a flag without a value is a switch)."""
    out, i = {}, 0
    while i < len(argv):
        a = argv[i]
        if a in SKIP:
            i += 2
            continue
        name = a.lstrip("-").replace("-", "_")
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if nxt is None or (nxt.startswith("-") and not nxt[1:2].isdigit()):
            out[name] = True
            i += 1
            continue
        here = FIXTURES / "matching-filters" / case / nxt
        out[name] = here if "." in nxt and here.is_file() else nxt
        i += 2
    return out


@pytest.mark.parametrize("case", PARAMS)
def test_filters_equal_pytme(case):
    meta = json.loads((FIXTURES / "matching-filters" / case / "case.json").read_text())
    score = SCORES[meta["score"]]
    load = lambda n: np.load(_file(case, n))  # noqa: E731
    kw = _keywords(case, meta["cli"]["argv"])
    kw["sampling_rate"] = 8.0 if case.startswith("3d") else 5.0
    if "tilt_angles" in kw and case.startswith("3d"):
        given = kw.get("wedge_axes")
        o, t = tuple(int(v) for v in given.split(",")) if given else PYTME_WEDGE_DEFAULT
        kw["wedge_axes"] = (2 - o, 2 - t)
    mask = load("template_mask.npy") if score != "cc" else None
    r = monomorph.match_template(
        load("target.npy"), load("template.npy"), template_mask=mask, rotations=load("rotations.npy"), score=score, **kw
    )
    d = FIXTURES / "matching-filters" / case
    if (d / "scores.npy").exists():
        want, got = np.load(d / "scores.npy"), r.scores
    else:
        want = np.load(d / "scores_center.npy")
        lo, hi = (12, 36) if want.ndim == 3 else (64, 192)
        got = r.scores[(slice(lo, hi),) * want.ndim]
    scale = float(np.abs(want).max())
    assert np.abs(got.astype(np.float64) - want).max() <= 1e-5 * scale
