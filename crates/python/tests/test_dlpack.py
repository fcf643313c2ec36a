"""DLPack producers: read through the protocol (CPU producers in place) and results handed back
as arrays of the same kind, on the same device. A small producer defined here stands in for a
CPU torch tensor (this module's ``from_dlpack`` is its library's); numpy's own ``__dlpack__``
carries the buffers both ways. With torch installed, a CPU tensor is checked too."""

import numpy as np
import pytest

import monomorph
from conftest import FIXTURES

D = FIXTURES / "matching" / "3d_flc"
T = np.load(D / "target.npy").astype(np.float32)
P = np.load(D / "template.npy").astype(np.float32)
M = np.load(D / "template_mask.npy").astype(np.float32)


class Tensor:
    """A DLPack producer that is not a numpy array (what a CPU torch tensor is to numpy)."""

    def __init__(self, a, device=(1, 0)):
        self.a, self.device = a, device

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.device


made = []


def from_dlpack(x):
    """This "library's" from_dlpack: a Tensor viewing the producer's buffer (no copy)."""
    t = Tensor(np.from_dlpack(x))
    made.append((x, t))
    return t


def test_a_producer_is_read_in_place_and_its_results_are_of_its_kind():
    want = monomorph.match_template(T, P, template_mask=M, angular_step=90, score_stats=True)
    made.clear()
    r = monomorph.match_template(Tensor(T), Tensor(P), template_mask=Tensor(M), angular_step=90, score_stats=True)
    assert r.inputs == {"target": "borrowed", "template": "borrowed", "template_mask": "borrowed"}
    for name in ("scores", "rotation_index", "rotations", "score_mean", "score_std", "score_z"):
        got = getattr(r, name)
        assert isinstance(got, Tensor), name
        assert got.device == (1, 0)
        assert got.a.tobytes() == getattr(want, name).tobytes(), name
    # Zero copy: each result tensor views the buffer the command handed over.
    assert made and all(np.shares_memory(src, t.a) for src, t in made)
    # The results go on as inputs: peaks of a Tensor result equal the numpy ones.
    assert np.array_equal(r.peaks(min_distance=3).positions, want.peaks(min_distance=3).positions)


def test_numpy_producers_and_other_libraries_give_numpy_back():
    # numpy's own arrays are numpy arrays; a producer whose library has no from_dlpack gives
    # numpy arrays (the buffers still read in place).
    class Bare(Tensor):
        pass

    Bare.__module__ = "no_such_library_here"
    r = monomorph.match_template(Bare(T), P, template_mask=M, angular_step=90)
    assert isinstance(r.scores, np.ndarray) and r.inputs["target"] == "borrowed"


def test_solve_gives_back_the_rhs_kind():
    rhs = np.arange(32, dtype=np.float64).reshape(2, 16)
    want = monomorph.solve(rhs, laplacian=(4, 4), periodic=False)
    got = monomorph.solve(Tensor(rhs), laplacian=(4, 4), periodic=False)
    assert isinstance(got.x, Tensor) and got.x.a.tobytes() == want.x.tobytes()


def test_a_gpu_producer_is_one_clear_error_naming_what_is_missing():
    with pytest.raises(monomorph.RunError) as e:
        monomorph.match_template(Tensor(T, device=(2, 0)), P, angular_step=90)
    msg = str(e.value)
    assert "\n" not in msg and "target" in msg and "GPU" in msg and "not built yet" in msg


def test_torch_cpu_tensors_in_torch_tensors_out():
    torch = pytest.importorskip("torch")
    want = monomorph.match_template(T, P, template_mask=M, angular_step=90)
    t = torch.from_numpy(T.copy())
    r = monomorph.match_template(t, torch.from_numpy(P), template_mask=M, angular_step=90)
    assert r.inputs["target"] == "borrowed"
    assert isinstance(r.scores, torch.Tensor) and r.scores.device.type == "cpu"
    assert r.scores.numpy().tobytes() == want.scores.tobytes()
    assert isinstance(r.rotation_index, torch.Tensor)
