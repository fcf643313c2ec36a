"""DLPack producers: taken through the protocol by the extension (the capsule consumed, the
tensor checked there) and results handed back as arrays of the same kind, exported as DLPack
capsules (no copy). A producer's float target and template take the device path (adopted by
the backend of their device, the run kept there, the maps exported from the backend: on the
CPU backend for CPU producers, so the GPU path's protocol runs in CI); other inputs are read
on the host (in place where they can be). A small producer defined here stands in for
a CPU torch tensor (this module's ``from_dlpack`` is its library's); numpy's own
``__dlpack__`` (versioned and legacy) carries the buffers both ways. With torch installed, a
CPU tensor is checked too."""

import gc
import sys

import numpy as np
import pytest

import monomorph
from monomorph import _native
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


class Legacy(Tensor):
    """A producer older than DLPack 1.0: no ``max_version``, legacy capsules only."""

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__(stream=stream)


made = []


def from_dlpack(x):
    """This "library's" from_dlpack: a Tensor viewing the producer's buffer (no copy)."""
    t = Tensor(np.from_dlpack(x))
    made.append((x, t))
    return t


def test_a_producer_is_read_in_place_and_its_results_are_of_its_kind():
    want = monomorph.match_template(T, P, template_mask=M, angular_step=90, score_stats=True)
    made.clear()
    r = monomorph.match_template(Tensor(T), Tensor(P), template_mask=Legacy(M), angular_step=90, score_stats=True)
    assert r.inputs == {"target": "adopted", "template": "adopted", "template_mask": "borrowed"}
    # The device path was taken: the maps were kept on the backend and exported from it.
    assert r.run["kept_on_device"] == ["score_mean", "score_std", "score_z", "scores", "rotation_index"]
    assert "kept_on_device" not in want.run
    for name in ("scores", "rotation_index", "rotations", "score_mean", "score_std", "score_z"):
        got = getattr(r, name)
        assert isinstance(got, Tensor), name
        assert got.device == (1, 0)
        assert got.a.tobytes() == getattr(want, name).tobytes(), name
    # Zero copy: each result tensor views the buffer the command exported.
    assert made and all(isinstance(src, _native.DLPackArray) for src, _ in made)
    assert all(t.a.ctypes.data == src.data_ptr for src, t in made)
    # The results go on as inputs: peaks of a Tensor result equal the numpy ones.
    assert np.array_equal(r.peaks(min_distance=3).positions, want.peaks(min_distance=3).positions)


def test_each_producer_tensor_is_released_once_and_left_untouched():
    # numpy's capsule holds a reference to its array that the deleter drops: the count is back
    # where it was (not higher: never released; not lower: released twice).
    t, p, m = T.copy(), P.copy(), M.copy()
    before = [sys.getrefcount(a) for a in (t, p, m)]
    r = monomorph.match_template(Tensor(t), Legacy(p), template_mask=Tensor(m), angular_step=90)
    gc.collect()
    assert [sys.getrefcount(a) for a in (t, p, m)] == before
    assert t.tobytes() == T.tobytes() and p.tobytes() == P.tobytes() and m.tobytes() == M.tobytes()
    # A refused producer is released too.
    c = T.astype(np.complex64)
    n = sys.getrefcount(c)
    with pytest.raises(monomorph.InputError):
        monomorph.match_template(Tensor(c), P, angular_step=90)
    gc.collect()
    assert sys.getrefcount(c) == n
    del r


def test_exported_results_are_released_once_when_their_last_view_dies():
    made.clear()  # this module's from_dlpack keeps what it made
    gc.collect()
    base = _native.dlpack_exports_alive()
    r = monomorph.match_template(Tensor(T), P, template_mask=M, angular_step=90)
    views = [r.scores, r.rotation_index, r.rotations]
    assert _native.dlpack_exports_alive() == base + 3
    del r
    gc.collect()
    assert _native.dlpack_exports_alive() == base + 3, "the views keep their buffers"
    assert views[0].a.tobytes() == monomorph.match_template(T, P, template_mask=M, angular_step=90).scores.tobytes()
    del views
    made.clear()
    gc.collect()
    assert _native.dlpack_exports_alive() == base


def test_an_exported_array_serves_several_consumers_and_unused_capsules():
    made.clear()
    gc.collect()
    before = _native.dlpack_exports_alive()
    got = monomorph.match_template(Tensor(T), P, angular_step=90)
    base = _native.dlpack_exports_alive()
    assert base == before + 3  # the three result tensors
    e = next(src for src, t in made if t is got.scores)
    assert e.__dlpack_device__() == (1, 0) and e.shape == [48, 48, 48] and e.dtype == "float32"
    a, b = np.from_dlpack(e), np.from_dlpack(e)
    assert np.shares_memory(a, b) and a.ctypes.data == e.data_ptr
    assert _native.dlpack_exports_alive() == base + 2
    # A capsule nobody consumes is released by its destructor.
    cap = e.__dlpack__()
    assert _native.dlpack_exports_alive() == base + 3
    del cap
    assert _native.dlpack_exports_alive() == base + 2
    c = np.from_dlpack(e, copy=True)
    assert not np.shares_memory(a, c) and c.tobytes() == a.tobytes()
    with pytest.raises(BufferError):
        e.__dlpack__(dl_device=(2, 0))
    del a, b, c, got, e
    made.clear()
    gc.collect()
    assert _native.dlpack_exports_alive() == before


def test_other_dtypes_are_copied_or_converted_as_numpy_inputs_are():
    want = monomorph.match_template(T, P, angular_step=90)
    i = (T * 100).astype(np.int32)
    r = monomorph.match_template(Tensor(i), P, angular_step=90)
    assert r.inputs["target"] == "copied"
    assert r.scores.a.tobytes() == monomorph.match_template(i, P, angular_step=90).scores.tobytes()
    u = (T > 0).astype(np.uint8)
    r = monomorph.match_template(Tensor(u), P, angular_step=90)
    assert r.inputs["target"] == "converted"
    assert r.scores.a.tobytes() == monomorph.match_template(u, P, angular_step=90).scores.tobytes()
    # A read-only array: exported by numpy only as a versioned capsule (its read-only flag).
    ro = T.copy()
    ro.setflags(write=False)
    r = monomorph.match_template(Tensor(ro), P, angular_step=90)
    assert r.inputs["target"] == "adopted" and r.scores.a.tobytes() == want.scores.tobytes()


@pytest.mark.parametrize(
    "bad, says",
    [
        (T.astype(np.complex64), "DLPack dtype (code 5"),
        (T.astype(np.float16), "DLPack dtype (code 2, 16 bits"),
    ],
)
def test_dtypes_the_command_does_not_read_are_input_errors(bad, says):
    with pytest.raises(monomorph.InputError) as e:
        monomorph.match_template(Tensor(bad), P, angular_step=90)
    msg = str(e.value)
    assert msg.startswith("target: ") and says in msg and "\n" not in msg


def test_producers_that_break_the_protocol_are_input_errors():
    class NotACapsule(Tensor):
        def __dlpack__(self, **kw):
            return "a string"

    with pytest.raises(monomorph.InputError) as e:
        monomorph.match_template(T, NotACapsule(P), angular_step=90)
    assert str(e.value).startswith("template: ") and "capsule" in str(e.value)

    class Failing(Tensor):
        def __dlpack__(self, **kw):
            raise BufferError("cannot export")

    with pytest.raises(monomorph.InputError) as e:
        monomorph.match_template(T, P, template_mask=Failing(M), angular_step=90)
    assert "template_mask" in str(e.value) and "cannot export" in str(e.value)
    # A device that is neither the host nor CUDA (14: Metal).
    with pytest.raises(monomorph.InputError) as e:
        monomorph.match_template(Tensor(T, device=(14, 0)), P, angular_step=90)
    assert "DLPack device type 14" in str(e.value)


def test_numpy_producers_and_other_libraries_give_numpy_back():
    # numpy's own arrays are numpy arrays; a producer whose library has no from_dlpack gives
    # numpy arrays (the buffers still read in place).
    class Bare(Tensor):
        pass

    Bare.__module__ = "no_such_library_here"
    r = monomorph.match_template(Bare(T), P, template_mask=M, angular_step=90)
    assert isinstance(r.scores, np.ndarray) and r.inputs["target"] == "adopted"
    want = monomorph.match_template(T, P, template_mask=M, angular_step=90)
    assert r.scores.tobytes() == want.scores.tobytes()


def test_peaks_and_solve_take_producers_and_give_back_their_kind():
    rhs = np.arange(32, dtype=np.float64).reshape(2, 16)
    want = monomorph.solve(rhs, laplacian=(4, 4), periodic=False)
    got = monomorph.solve(Tensor(rhs), laplacian=(4, 4), periodic=False)
    assert isinstance(got.x, Tensor) and got.x.a.tobytes() == want.x.tobytes()
    s = monomorph.match_template(T, P, angular_step=90).scores
    a = monomorph.find_peaks(Tensor(s), min_distance=3)
    b = monomorph.find_peaks(s, min_distance=3)
    assert a.positions.shape[1] == 3 and np.array_equal(a.positions, b.positions)


def test_a_gpu_producer_is_one_clear_error_naming_what_is_missing():
    # Matched on its GPU: without one, the CUDA backend's own probe says why, in one line
    # (the capsule is not taken: the producer's __dlpack__ is never called).
    class NoCapsule(Tensor):
        def __dlpack__(self, **kw):
            raise AssertionError("the capsule must not be requested")

    with pytest.raises(monomorph.RunError) as e:
        monomorph.match_template(NoCapsule(T, device=(2, 1)), P, angular_step=90)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("target: an array on GPU 1: ") and "CUDA" in msg
    assert "not built yet" not in msg
    # An explicit CPU backend with a GPU array is the caller's mistake, naming `backend`.
    with pytest.raises(monomorph.InputError, match="^backend: 'cpu' with target on GPU 0"):
        monomorph.match_template(NoCapsule(T, device=(2, 0)), P, angular_step=90, backend="cpu")
    # A template on another device than the target's, naming the template.
    with pytest.raises(monomorph.InputError, match="^template: an array on GPU 0, expected the target's device"):
        monomorph.match_template(Tensor(T), NoCapsule(P, device=(2, 0)), angular_step=90)
    # peaks and solve say the same, naming their argument.
    with pytest.raises(monomorph.RunError, match="^scores: an array on GPU 0"):
        monomorph.find_peaks(Tensor(T, device=(2, 0)))
    with pytest.raises(monomorph.RunError, match="^rhs: an array on GPU 0"):
        monomorph.solve(Tensor(np.ones((1, 16)), device=(2, 0)), laplacian=(4, 4))


def test_torch_cpu_tensors_in_torch_tensors_out():
    torch = pytest.importorskip("torch")
    want = monomorph.match_template(T, P, template_mask=M, angular_step=90)
    t = torch.from_numpy(T.copy())
    r = monomorph.match_template(t, torch.from_numpy(P), template_mask=M, angular_step=90)
    assert r.inputs["target"] == "adopted" and "kept_on_device" in r.run
    assert isinstance(r.scores, torch.Tensor) and r.scores.device.type == "cpu"
    assert r.scores.numpy().tobytes() == want.scores.tobytes()
    assert isinstance(r.rotation_index, torch.Tensor)


def test_array_api_strict_arrays_in_and_out():
    # A real third-party producer (pure Python over numpy): its arrays are taken through the
    # protocol and the results are its arrays.
    xp = pytest.importorskip("array_api_strict")
    want = monomorph.match_template(T, P, template_mask=M, angular_step=90)
    r = monomorph.match_template(xp.asarray(T), xp.asarray(P), template_mask=xp.asarray(M), angular_step=90)
    assert r.inputs == {"target": "adopted", "template": "adopted", "template_mask": "borrowed"}
    assert r.run["kept_on_device"] == ["scores", "rotation_index"]
    assert type(r.scores) is type(xp.asarray(T)) and r.scores.device == xp.asarray(T).device
    assert np.from_dlpack(r.scores).tobytes() == want.scores.tobytes()
    assert np.from_dlpack(r.rotation_index).tobytes() == want.rotation_index.tobytes()


@pytest.mark.parametrize(
    "strided",
    [np.ascontiguousarray(T).transpose(2, 1, 0), T[:, ::2, :], np.asfortranarray(T)],
)
def test_a_strided_producer_is_converted_once_as_a_numpy_view_is(strided):
    """A transposed or sliced tensor (torch's ``.T``): read through numpy and converted once to
    C order, the same scores as the numpy array of that layout, the producer untouched."""
    before = strided.copy()
    r = monomorph.match_template(Tensor(strided), P, angular_step=90)
    want = monomorph.match_template(strided, P, angular_step=90)
    assert r.inputs["target"] == "converted" == want.inputs["target"]
    assert r.scores.a.tobytes() == want.scores.tobytes()
    assert np.array_equal(strided, before)


def test_the_device_path_gives_the_numpy_paths_bits_and_checks_values_where_they_live():
    # numpy's own __dlpack__ (through a producer that is not a numpy array), float64 and
    # float32, with statistics: identical to the numpy path, map for map.
    for dt in (np.float32, np.float64):
        t, p = T.astype(dt), P.astype(dt)
        want = monomorph.match_template(t, p, template_mask=M, angular_step=90, score_stats=True)
        got = monomorph.match_template(Bare(t), Bare(p), template_mask=M, angular_step=90, score_stats=True)
        assert got.inputs["target"] == "adopted" and "kept_on_device" in got.run
        for name in ("scores", "rotation_index", "rotations", "score_mean", "score_std", "score_z"):
            a, b = getattr(got, name), getattr(want, name)
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), (dt, name)
        assert got.run["ssum"] == want.run["ssum"]
    # out= still writes the files (downloaded for them), the same bytes.
    # Non-finite values are found where the array lives (a reduction), an InputError naming it.
    bad = T.copy()
    bad[1, 2, 3] = np.nan
    with pytest.raises(monomorph.InputError, match="`target`: 1 NaN or infinite value.s. in the array in host memory"):
        monomorph.match_template(Bare(bad), P, angular_step=90)
    # A CPU producer with an option the device path does not take goes the host way (see
    # test_a_cpu_producer_goes_the_host_way_…); the command's own refusal of those options for
    # a buffer on a device is test_the_command_refuses_what_a_target_on_a_device_cannot_take.


class Bare(Tensor):
    """A producer whose library has no from_dlpack: results come back as numpy arrays."""


Bare.__module__ = "no_such_library_here"


def test_the_device_path_writes_files_as_the_host_path_does(tmp_path):
    want = monomorph.match_template(T, P, template_mask=M, angular_step=90, out=tmp_path / "host")
    got = monomorph.match_template(Bare(T), P, template_mask=M, angular_step=90, out=tmp_path / "dev")
    for f in ("scores.npy", "rotation_index.npy", "rotations.npy"):
        assert (tmp_path / "dev" / f).read_bytes() == (tmp_path / "host" / f).read_bytes(), f
    assert got.scores.tobytes() == want.scores.tobytes()


@pytest.mark.parametrize(
    "flags",
    [
        {"devices": "0,1", "backend": "cpu"},
        {"check_hand": 3},
        {"invert_target_contrast": True},
    ],
    ids=["devices", "check_hand", "invert_target_contrast"],
)
def test_a_cpu_producer_goes_the_host_way_where_the_device_path_does_not_run(flags):
    # A run the device path refuses for a target living on a GPU (split over devices, mirrored,
    # negated on the host) still runs for a CPU producer: its target is read on the host, as
    # a numpy array is, and gives the numpy array's result.
    want = monomorph.match_template(T, P, template_mask=M, angular_step=90, **flags)
    r = monomorph.match_template(Tensor(T), Tensor(P), template_mask=M, angular_step=90, **flags)
    # Read as the numpy arrays were (in place, or converted where the run negates or mirrors).
    assert r.inputs == want.inputs and "adopted" not in r.inputs.values(), (r.inputs, want.inputs)
    assert "kept_on_device" not in r.run
    assert isinstance(r.scores, Tensor) and r.scores.a.tobytes() == want.scores.tobytes()


@pytest.mark.parametrize(
    "extra",
    [["--invert-target-contrast"], ["--check-hand=3"], ["--devices=0,1"], ["--backend=cuda"]],
    ids=["invert", "check_hand", "devices", "backend"],
)
def test_the_command_refuses_what_a_target_on_a_device_cannot_take(extra):
    # What a GPU target cannot be matched with is an input error naming the flag; a CPU buffer
    # handed to the command as a buffer on its device (what the Python layer does for a GPU
    # array) stands in for one here, the Python layer's host fallback bypassed.
    f = _native.take_dlpack(Tensor(T))
    a = _native.ARRAY
    args = ["match", "--quiet", f"--target={a}", f"--template={a}", "-a", "90", f"--out={a}", *extra]
    code, message, *_ = _native.run_command(
        args, [("--target", f), ("--template", P)], None, False, [], False, ["--target"]
    )
    assert code == 2 and message.startswith(extra[0].split("=")[0]), message


def test_a_cpu_producer_with_backend_cuda_is_uploaded_as_a_numpy_array_is():
    # backend="cuda" with host data: the CPU producer's target goes the host way and is
    # uploaded to the GPU as a numpy array is (without a GPU: the same RunError).
    def run(t, p):
        try:
            return monomorph.match_template(t, p, angular_step=90, backend="cuda")
        except monomorph.RunError as e:
            return str(e)

    want, got = run(T, P), run(Tensor(T), Tensor(P))
    if isinstance(want, str):
        assert got == want
    else:
        assert "kept_on_device" not in got.run
        assert got.scores.a.tobytes() == want.scores.tobytes()
