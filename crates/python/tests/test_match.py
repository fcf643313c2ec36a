"""match_template against pytme 0.3.6's outputs (tests/fixtures), against the command, and
its result type."""

import json
import subprocess

import numpy as np
import pytest

import monomorph
from conftest import FIXTURES, command_binary, fixture


def _case(name):
    d = f"matching/{name}/"
    return {k: fixture(d + f"{k}.npy") for k in ("target", "template", "rotations", "scores", "rotation_index")}


@pytest.mark.parametrize("name,score", [("3d_flc", "FLC"), ("2d_flcsphericalmask", "FLCSphericalMask"), ("2d_cc", "CC"), ("2d_ncc", "CORR")])
def test_scores_equal_pytme(name, score):
    c = _case(name)
    case = json.loads((FIXTURES / "matching" / name / "case.json").read_text())
    mask = None
    if case.get("template_mask"):
        mask = fixture(f"matching/{name}/{case['template_mask']}")
    r = monomorph.match_template(c["target"], c["template"], template_mask=mask, rotations=c["rotations"], score=score)
    want = c["scores"]
    scale = max(1.0, float(np.abs(want).max()))
    tol = case["tolerances"]
    assert np.abs(r.scores - want).max() <= max(tol["score_abs"], tol["score_rel_to_max_abs"] * scale)
    assert r.scores.dtype == np.float32 and r.rotation_index.dtype == np.int32
    # The best rotation wherever it is not ambiguous.
    assert (r.rotation_index == c["rotation_index"]).mean() > 0.9
    assert r.rotations.shape == c["rotations"].shape
    assert r.score_mean is None
    assert r.run["parameters"]["n_rotations"] == len(c["rotations"])


def test_phase_scrambling_equals_pytme():
    d = "phase-scrambling/3d_flc/"
    r = monomorph.match_template(
        fixture(d + "target.npy"),
        fixture(d + "template.npy"),
        template_mask=fixture(d + "template_mask.npy"),
        rotations=fixture(d + "rotations.npy"),
        score="flc",
        background_correction="phase-scrambling",
    )
    want = fixture(d + "scores.npy")
    assert np.abs(r.scores - want).max() <= 1e-5 * np.abs(want).max()


def test_score_stats_and_progress():
    c = _case("3d_flc")
    seen = []
    r = monomorph.match_template(
        c["target"], c["template"], rotations=c["rotations"], score_stats=True, progress=lambda d, t: seen.append((d, t))
    )
    n = len(c["rotations"])
    assert seen and seen[-1] == (n, n)
    assert r.score_mean.shape == r.scores.shape and r.score_z.dtype == np.float32
    assert r.run["score_stats"]["files"] == ["score_mean", "score_std", "score_z"]


def test_progress_exception_stops_the_run():
    c = _case("3d_flc")

    def boom(done, total):
        raise ZeroDivisionError("from the callback")

    with pytest.raises(ZeroDivisionError):
        monomorph.match_template(c["target"], c["template"], rotations=c["rotations"], progress=boom)


def test_bit_identical_to_the_command(tmp_path):
    exe = command_binary()
    if exe is None:
        pytest.skip("the monomorph command is not built (target/release/monomorph)")
    d = FIXTURES / "matching" / "3d_flc"
    subprocess.run(
        [exe, "match", "-m", d / "target.npy", "-i", d / "template.npy", "--template-mask", d / "template_mask.npy",
         "--angular-step", "40", "-s", "flc", "--tilt-angles", "50,45", "--lowpass", "20", "--sampling-rate", "4",
         "--out", tmp_path / "cmd", "-q"],
        check=True,
    )
    r = monomorph.match_template(
        np.load(d / "target.npy"), np.load(d / "template.npy"), template_mask=np.load(d / "template_mask.npy"),
        angular_step=40, score="flc", tilt_angles=(50, 45), lowpass=20.0, sampling_rate=4,
    )
    cmd = np.load(tmp_path / "cmd" / "scores.npy")
    assert r.scores.tobytes() == cmd.tobytes()
    assert r.rotation_index.tobytes() == np.load(tmp_path / "cmd" / "rotation_index.npy").tobytes()
    run = json.loads((tmp_path / "cmd" / "run.json").read_text())
    assert r.run["ssum"] == run["ssum"] and r.run["filters"] == run["filters"]


def test_paths_and_out(tmp_path):
    d = FIXTURES / "matching" / "2d_cc"
    r = monomorph.match_template(d / "target.npy", str(d / "template.npy"), rotations=d / "rotations.npy", score="cc", out=tmp_path / "o")
    assert (tmp_path / "o" / "run.json").exists()
    assert np.array_equal(np.load(tmp_path / "o" / "scores.npy"), r.scores)


def test_euler_array_equals_csv(tmp_path):
    c = _case("3d_flc")
    e = np.array([[0.0, 0.0, 0.0], [30.0, 40.0, 50.0], [120.0, 60.0, -30.0]])
    np.savetxt(tmp_path / "e.csv", e, delimiter=",")
    a = monomorph.match_template(c["target"], c["template"], euler=e)
    b = monomorph.match_template(c["target"], c["template"], euler=tmp_path / "e.csv")
    assert a.scores.tobytes() == b.scores.tobytes() and len(a.rotations) == 3


def test_devices_and_version():
    assert monomorph.__version__.count(".") == 2
    ds = monomorph.devices()
    assert ds[0]["backend"] == "cpu" and ds[0]["available"]
    assert any(d["auto"] for d in ds)
