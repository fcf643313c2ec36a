"""Arrays handed over in memory: outputs equal to the command's files bit for bit, no temporary
files, no stray run.json read from the working folder, how inputs are taken; several templates
in one pass."""

import json
import subprocess
import tempfile

import numpy as np
import pytest

import monomorph
from conftest import FIXTURES, command_binary, fixture

D = FIXTURES / "matching" / "3d_flc"


def _inputs():
    return np.load(D / "target.npy"), np.load(D / "template.npy"), np.load(D / "template_mask.npy")


def test_outputs_equal_the_command_files_bit_for_bit(tmp_path):
    exe = command_binary()
    if exe is None:
        pytest.skip("the monomorph command is not built (target/release/monomorph)")
    subprocess.run(
        [exe, "match", "-m", D / "target.npy", "-i", D / "template.npy", "--template-mask", D / "template_mask.npy",
         "--angular-step", "40", "-s", "flc", "--score-stats", "--out", tmp_path / "cmd", "-q"],
        check=True,
    )
    t, p, m = _inputs()
    r = monomorph.match_template(t, p, template_mask=m, angular_step=40, score="flc", score_stats=True)
    for name in ("scores", "rotation_index", "rotations", "score_mean", "score_std", "score_z"):
        want = np.load(tmp_path / "cmd" / f"{name}.npy")
        got = getattr(r, name)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert got.tobytes() == want.tobytes(), name
        # Handed over from the command's buffer, not read back from a file.
        assert not got.flags.owndata and got.flags.c_contiguous, name
    assert r.template_index is None
    run = json.loads((tmp_path / "cmd" / "run.json").read_text())
    assert r.run["ssum"] == run["ssum"] and r.run["score_statistics"] == run["score_statistics"]
    # With out= the folder is written too, and holds the same bytes.
    o = monomorph.match_template(t, p, template_mask=m, angular_step=40, score="flc", out=tmp_path / "o")
    assert np.load(tmp_path / "o" / "scores.npy").tobytes() == o.scores.tobytes() == r.scores.tobytes()
    assert json.loads((tmp_path / "o" / "run.json").read_text()) == o.run


def test_solve_arrays_equal_the_command_files(tmp_path):
    exe = command_binary()
    if exe is None:
        pytest.skip("the monomorph command is not built (target/release/monomorph)")
    rhs = np.random.default_rng(3).standard_normal((2, 64))
    np.save(tmp_path / "y.npy", rhs)
    subprocess.run([exe, "solve", "--laplacian", "8x8", "--rhs", tmp_path / "y.npy", "--trajectory",
                    "--out", tmp_path / "cmd", "-q"], check=True)
    s = monomorph.solve(rhs, laplacian=(8, 8), trajectory=True)
    for name in ("x", "residual", "trajectory"):
        assert getattr(s, name).tobytes() == np.load(tmp_path / "cmd" / f"{name}.npy").tobytes(), name
    assert s.result["iterations"] == json.loads((tmp_path / "cmd" / "result.json").read_text())["iterations"]


def test_no_temporary_files_without_out(tmp_path, monkeypatch):
    # Every call, peaks with a match run and CSR from a tuple included, writes nothing: neither
    # under the temporary folder (looked at while the match runs) nor in the working folder.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    seen = []
    t, p, m = _inputs()
    r = monomorph.match_template(t, p, template_mask=m, angular_step=60,
                                 euler=None, progress=lambda d, n: seen.append(sorted(tmp.iterdir())))
    assert seen and all(s == [] for s in seen)
    pk = r.peaks(num_peaks=3, false_positives=1)
    assert len(pk) >= 1
    e = monomorph.match_template(t, p, euler=np.array([[0.0, 10.0, 20.0]]),
                                 progress=lambda d, n: seen.append(sorted(tmp.iterdir())))
    assert len(e.rotations) == 1
    a = np.diag(np.full(5, 2.0))
    indptr, indices, data = np.arange(6), np.arange(5), np.full(5, 2.0)
    s = monomorph.solve(np.ones(5), csr=(indptr, indices, data))
    assert np.allclose(s.x, 0.5) and np.allclose(monomorph.solve(np.ones(5), matrix=a).x, 0.5)
    assert all(x == [] for x in seen)
    assert list(tmp.iterdir()) == [] and list(work.iterdir()) == []


def test_a_run_json_in_the_working_folder_is_not_the_scores_run(tmp_path, monkeypatch):
    # Scores given in memory have no folder: a run.json where Python runs (another match's,
    # of the same shape) must not become their matching run (it changed the threshold).
    scores = fixture("peaks/field2d_256/score.npy").astype(np.float32)
    clean = monomorph.find_peaks(scores, false_positives=1, min_distance=5)
    monkeypatch.chdir(tmp_path)
    stray = {"score_statistics": {"ssum": 1e-6, "n_rotations": 1000, "shape": list(scores.shape)}}
    (tmp_path / "run.json").write_text(json.dumps(stray))
    got = monomorph.find_peaks(scores, false_positives=1, min_distance=5)
    assert got.threshold == clean.threshold
    assert np.array_equal(got.positions, clean.positions)


def test_how_inputs_are_taken():
    t, p, m = _inputs()
    r = monomorph.match_template(t.astype(np.float32), p, template_mask=m, angular_step=90)
    assert r.inputs["target"] == "borrowed"
    r = monomorph.match_template(np.asfortranarray(t.astype(np.float64)), p.astype(np.int16), angular_step=90)
    assert r.inputs == {"target": "converted", "template": "converted"}
    # float64 in a single-precision run: the command converts it (once), and says so.
    r = monomorph.match_template(t.astype(np.float64), p.astype(np.float32), angular_step=90, precision="single")
    assert r.inputs == {"target": "converted", "template": "borrowed"}
    # ... and in a double run (a float64 target's default) it is the working type: in place.
    r = monomorph.match_template(t.astype(np.float64), p.astype(np.float64), angular_step=90)
    assert r.inputs == {"target": "borrowed", "template": "borrowed"}
    r = monomorph.match_template(t.astype(np.int32), p.astype(np.float32), angular_step=90)
    assert r.inputs["target"] == "copied"


def test_a_borrowed_input_is_read_in_place_and_left_as_it_was():
    import sys

    t, p, m = _inputs()
    t = np.ascontiguousarray(t, dtype=np.float32)
    before = t.copy()
    refs = sys.getrefcount(t)
    writeable = t.flags.writeable
    r = monomorph.match_template(t, p, template_mask=m, angular_step=90)
    assert r.inputs["target"] == "borrowed"
    # Not written, not kept: the same values, the same references, the same flags.
    assert np.array_equal(t, before)
    assert sys.getrefcount(t) == refs
    assert t.flags.writeable == writeable
    # The same scores as a run on a private copy (bit for bit), and none aliases the input.
    c = monomorph.match_template(before.copy(), p, template_mask=m, angular_step=90)
    assert np.array_equal(r.scores, c.scores) and np.array_equal(r.rotation_index, c.rotation_index)
    assert not np.shares_memory(r.scores, t)
    # A strided view is converted (numpy's contiguous copy), never read past its strides.
    v = np.ascontiguousarray(np.repeat(t, 2, axis=2))[:, :, ::2]
    s = monomorph.match_template(v, p, template_mask=m, angular_step=90)
    assert s.inputs["target"] == "converted"
    assert np.array_equal(s.scores, r.scores)


def test_several_templates_are_the_per_voxel_best_of_single_runs():
    t, p, m = _inputs()
    q = np.ascontiguousarray(p[::-1, :, ::-1])
    kw = dict(angular_step=60, score="flc")
    a = monomorph.match_template(t, p, template_mask=m, **kw)
    b = monomorph.match_template(t, q, template_mask=m, **kw)
    both = monomorph.match_template(t, [p, q], template_mask=m, **kw)
    masks = monomorph.match_template(t, [p, q], template_mask=[m, m], **kw)
    second = b.scores > a.scores  # ties to the lower index
    assert both.scores.tobytes() == np.where(second, b.scores, a.scores).tobytes()
    assert np.array_equal(both.template_index, second.astype(np.int32))
    assert np.array_equal(both.rotation_index, np.where(second, b.rotation_index, a.rotation_index))
    assert masks.scores.tobytes() == both.scores.tobytes()
    assert both.template_index.dtype == np.int32 and 0 < second.mean() < 1
    assert a.template_index is None and both.run["templates"] == ["(array)/0", "(array)/1"]
    # Peaks carry the template of each.
    pk = both.peaks(num_peaks=5)
    pos = tuple(pk.positions.T)
    assert np.array_equal(pk.template_index, both.template_index[pos].astype(np.int64))
    assert a.peaks(num_peaks=5).template_index is None
    # A path among the templates works too.
    mixed = monomorph.match_template(t, [D / "template.npy", q], template_mask=m, **kw)
    assert mixed.scores.tobytes() == both.scores.tobytes()
    with pytest.raises(monomorph.InputError, match="template"):
        monomorph.match_template(t, [], **kw)
