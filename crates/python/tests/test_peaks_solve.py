"""find_peaks against scikit-image's and pytme's outputs, solve against the CG fixtures
(PhiFlow's loop with the seed rules, scipy's CSR)."""

import json

import numpy as np
import pytest

import monomorph
from conftest import FIXTURES, fixture

SK = [
    (case, q)
    for case in ("field2d_256", "border_2d")
    for q in json.loads((FIXTURES / f"peaks/{case}/case.json").read_text())["queries"]
    if q["tool"].startswith("skimage") and not ({"footprint", "p_norm"} & set(q["params"]))
]


@pytest.mark.parametrize("case,query", SK, ids=[f"{c}-{q['id']}" for c, q in SK])
def test_skimage_positions_exact(case, query):
    qid = query["id"]
    p = dict(query["params"])
    eb = p.pop("exclude_border", True)
    if eb is False:
        p["exclude_border"] = 0
    elif eb is not True:
        if isinstance(eb, list):
            pytest.skip("per-axis exclude_border is not a flag of monomorph peaks")
        p["exclude_border"] = eb
    scores = fixture(f"peaks/{case}/score.npy")
    got = monomorph.find_peaks(scores, caller="skimage", **p)
    want = fixture(f"peaks/{case}/q_{qid}.npy")
    assert got.positions.dtype == np.int64
    assert np.array_equal(got.positions, want.reshape(-1, 2))
    assert np.array_equal(got.scores, scores[tuple(want.T)].astype(np.float64))
    assert got.rotation_index is None and got.angles is None


def test_pytme_maxfilter_caller():
    scores = fixture("peaks/field2d_256/score.npy")
    got = monomorph.find_peaks(scores, caller="maxfilter", num_peaks=20, min_distance=5, exclude_border=0)
    want = fixture("peaks/field2d_256/q_tme_pc_n20_md5.npy")
    assert np.array_equal(got.positions, want)


def test_threshold_and_write(tmp_path):
    scores = fixture("peaks/field2d_256/score.npy")
    p = monomorph.find_peaks(scores, min_distance=5, threshold_abs=1.0, threshold_rel=0.3)
    assert p.threshold == pytest.approx(max(1.0, 0.3 * float(scores.max())))
    assert monomorph.find_peaks(scores).threshold is None
    p.write(tmp_path / "p.csv")
    p.write(tmp_path / "p.star")
    rows = (tmp_path / "p.csv").read_text().strip().splitlines()
    assert len(rows) == len(p) + 1
    assert "_rlnCoordinateX" in (tmp_path / "p.star").read_text()


def test_match_result_peaks_with_angles_and_false_positives(tmp_path):
    d = "matching/3d_flc/"
    r = monomorph.match_template(fixture(d + "target.npy"), fixture(d + "template.npy"), rotations=fixture(d + "rotations.npy"))
    p = r.peaks(min_distance=8, num_peaks=4, false_positives=1)
    assert p.angles.shape == (len(p), 3) and p.rotation_index.dtype == np.int64
    assert np.array_equal(p.rotation_index, r.rotation_index[tuple(p.positions.T)])
    assert p.threshold is not None and (p.scores > p.threshold).all()
    # match_run as a dict gives the same threshold.
    q = monomorph.find_peaks(r.scores, min_distance=8, num_peaks=4, false_positives=1, match_run=r.run)
    assert q.threshold == p.threshold
    s = monomorph.find_peaks(r.scores, peak_oversampling=2, num_peaks=2, min_distance=8)
    assert s.positions.dtype == np.float64 and s.positions.shape == (2, 3)


def _cg(name):
    d = f"cg/{name}/"
    return d, {k: fixture(d + f"{k}.npy") for k in ("y", "x0", "rtol", "atol", "max_iter", "seed_x", "seed_iterations", "seed_converged")}


def test_dense_cg_equals_the_seed_rules():
    d, c = _cg("spd50_cg_f64")
    A = fixture(d + "A.npy")
    row = 0
    r = monomorph.solve(c["y"], matrix=A, x0=c["x0"], rtol=float(c["rtol"][row]), atol=float(c["atol"][row]), max_iter=int(np.ravel(c["max_iter"][row])[0]))
    assert r.iterations == list(np.atleast_1d(c["seed_iterations"][row]))
    assert r.converged == [bool(v) for v in np.atleast_1d(c["seed_converged"][row])]
    assert np.allclose(r.x, np.reshape(c["seed_x"][row], r.x.shape), rtol=1e-8, atol=1e-10)
    assert r.result["method"] == "cg" and r.x.dtype == np.float64


def test_csr_tuple_and_scipy_sparse_agree():
    d, c = _cg("poisson2d_csr_f64")
    csr = tuple(fixture(d + f"A_csr_{k}.npy") for k in ("indptr", "indices", "data"))
    kw = dict(x0=c["x0"], rtol=float(c["rtol"][0]), atol=float(c["atol"][0]), max_iter=int(np.ravel(c["max_iter"][0])[0]))
    r = monomorph.solve(c["y"], csr=csr, **kw)
    assert r.iterations == list(np.atleast_1d(c["seed_iterations"][0]))
    assert np.allclose(r.x, np.reshape(c["seed_x"][0], r.x.shape), rtol=1e-7, atol=1e-9)
    sparse = pytest.importorskip("scipy.sparse")
    A = sparse.csr_matrix((csr[2], csr[1], csr[0]))
    s = monomorph.solve(c["y"], matrix=A, **kw)
    assert s.x.tobytes() == r.x.tobytes()


def test_not_converged_is_not_an_exception():
    y = np.ones((2, 16))
    r = monomorph.solve(y, laplacian=(4, 4), max_iter=1, rtol=1e-12)
    assert r.converged == [False, False] and r.iterations == [1, 1]
    assert all("max_iter" in m or "iteration" in m for m in r.result["message"])
    ok = monomorph.solve(y, laplacian=(4, 4), periodic=False)
    assert ok.converged == [True, True]
