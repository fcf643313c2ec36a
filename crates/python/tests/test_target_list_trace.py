"""match_template(target_list=...) (many targets in one call, each with its own result) and
trace= (the command's --trace FILE, embedded)."""

import json

import numpy as np
import pytest

import monomorph
from conftest import fixture

CASE = "matching/2d_cc/"


def _inputs():
    t = fixture(CASE + "target.npy")
    m = fixture(CASE + "template.npy")
    r = fixture(CASE + "rotations.npy")
    # Three targets that differ: their scores must stay apart.
    targets = [t, np.ascontiguousarray(t[::-1]), np.ascontiguousarray(t[:, ::-1]) * 2.0]
    return targets, m, r


def _write(tmp_path, targets):
    paths = []
    for k, a in enumerate(targets):
        p = tmp_path / f"tomo_{k}.npy"
        np.save(p, a)
        paths.append(p)
    return paths


def _singles(targets, m, r):
    return [monomorph.match_template(a, m, rotations=r, score="cc") for a in targets]


def _same(results, singles):
    assert len(results) == len(singles)
    for got, want in zip(results, singles):
        assert isinstance(got, monomorph.MatchResult)
        np.testing.assert_array_equal(np.asarray(got.scores), want.scores)
        np.testing.assert_array_equal(np.asarray(got.rotation_index), want.rotation_index)
        np.testing.assert_array_equal(np.asarray(got.rotations), want.rotations)
        assert got.run["parameters"]["n_rotations"] == want.run["parameters"]["n_rotations"]
    # Different targets, different scores: no result holds another target's arrays.
    assert not np.array_equal(np.asarray(results[0].scores), np.asarray(results[1].scores))


def test_list_file_gives_one_result_per_target_in_order(tmp_path):
    targets, m, r = _inputs()
    paths = _write(tmp_path, targets)
    lst = tmp_path / "list.txt"
    lst.write_text("".join(p.name + "\n" for p in paths))
    got = monomorph.match_template(None, m, target_list=str(lst), rotations=r, score="cc")
    _same(got, _singles(targets, m, r))
    assert [g.target for g in got] == [p.name for p in paths]
    # Each run.json names its own target.
    assert [g.run["parameters"]["target"] for g in got] == [str(p) for p in paths]


def test_python_lists_of_paths_and_arrays(tmp_path):
    targets, m, r = _inputs()
    paths = _write(tmp_path, targets)
    singles = _singles(targets, m, r)
    _same(monomorph.match_template(None, m, target_list=paths, rotations=r, score="cc"), singles)
    _same(monomorph.match_template(None, m, target_list=targets, rotations=r, score="cc"), singles)
    # Mixed, and the template given once for all (read again by every target).
    mixed = [targets[0], str(paths[1]), targets[2]]
    _same(monomorph.match_template(None, m, target_list=mixed, rotations=r, score="cc"), singles)


def test_list_with_out_writes_the_folders_and_maps_them(tmp_path):
    targets, m, r = _inputs()
    paths = _write(tmp_path, targets)
    out = tmp_path / "out"
    got = monomorph.match_template(None, m, target_list=paths, rotations=r, score="cc", out=out)
    _same(got, _singles(targets, m, r))
    summary = json.loads((out / "list.json").read_text())
    assert [t["folder"] for t in summary["targets"]] == [g.folder for g in got]
    for g in got:
        # Read lazily from the files the command wrote (200 targets need not fit in memory).
        assert isinstance(g.scores, np.memmap)
        np.testing.assert_array_equal(g.scores, np.load(out / g.folder / "scores.npy"))
        assert json.loads((out / g.folder / "run.json").read_text())["parameters"] == g.run["parameters"]


def test_list_progress_and_errors(tmp_path):
    targets, m, r = _inputs()
    paths = _write(tmp_path, targets)
    seen = []
    monomorph.match_template(
        None, m, target_list=paths, rotations=r, score="cc", progress=lambda d, t: seen.append((d, t))
    )
    assert seen and seen[-1][0] == seen[-1][1] == 3 * len(r)
    # A missing target: the command's input error naming the list and the line.
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{paths[0].name}\nmissing.npy\n")
    with pytest.raises(monomorph.InputError, match=r"target_list .*bad\.txt line 2"):
        monomorph.match_template(None, m, target_list=str(bad), rotations=r, score="cc")
    with pytest.raises(monomorph.InputError, match="target_list: an empty list"):
        monomorph.match_template(None, m, target_list=[], rotations=r, score="cc")
    with pytest.raises(monomorph.InputError, match="target_list"):
        monomorph.match_template(None, m, target_list=np.zeros((2, 2)), rotations=r, score="cc")


def _trace(path):
    events = json.loads(path.read_text())
    assert isinstance(events, list)
    return [e.get("name") for e in events]


def test_trace_writes_a_chrome_trace_per_run(tmp_path):
    targets, m, r = _inputs()
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    monomorph.match_template(targets[0], m, rotations=r, score="cc", trace=first)
    names = _trace(first)
    for span in ("match_template", "upload", "download"):
        assert span in names, (span, names)
    # A second traced run in the same process gets its own complete file; the first file is
    # not written again by it or by an untraced run.
    before = first.read_bytes()
    monomorph.match_template(targets[1], m, rotations=r, score="cc", trace=second)
    monomorph.match_template(targets[1], m, rotations=r, score="cc")
    assert first.read_bytes() == before
    assert "match_template" in _trace(second)
    # peaks and solve too.
    p = tmp_path / "p.json"
    monomorph.find_peaks(fixture(CASE + "scores.npy"), trace=p)
    assert "peaks" in _trace(p)
    s = tmp_path / "s.json"
    monomorph.solve(np.ones(4), laplacian=(4,), periodic=False, trace=s)
    assert "solve" in _trace(s)


def test_trace_errors_name_the_flag(tmp_path):
    targets, m, r = _inputs()
    with pytest.raises(monomorph.InputError, match=r"^trace "):
        monomorph.match_template(targets[0], m, rotations=r, trace=tmp_path)
    with pytest.raises(monomorph.InputError, match=r"^trace "):
        monomorph.match_template(targets[0], m, rotations=r, trace=tmp_path / "no" / "t.json")


def test_list_on_device_threads_and_a_failing_callback():
    targets, m, r = _inputs()
    # devices=: targets load on the device threads, which read the template given in memory.
    got = monomorph.match_template(
        None, m, target_list=targets, rotations=r, score="cc", devices="0,1", backend="cpu"
    )
    _same(got, _singles(targets, m, r))
    assert len(got[0].run["devices"]["workers"]) == 2

    class Stop(Exception):
        pass

    def fail(done, total):
        raise Stop()

    # An exception in the progress callback stops the list and is raised.
    with pytest.raises(Stop):
        monomorph.match_template(None, m, target_list=targets, rotations=r, score="cc", progress=fail)
