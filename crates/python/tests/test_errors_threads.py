"""Bad input is an InputError naming the argument in snake_case, a failure a RunError; never
a crash. The GIL is released while computing; Ctrl-C stops a match."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import monomorph
from conftest import fixture

T = fixture("matching/3d_flc/target.npy")
P = fixture("matching/3d_flc/template.npy")


def _input_error(match, f, *a, **kw):
    with pytest.raises(monomorph.InputError) as e:
        f(*a, **kw)
    msg = str(e.value)
    assert match in msg, msg
    assert "--" not in msg.replace("--features", ""), msg
    assert "\n" not in msg
    return msg


def test_errors_name_the_argument():
    _input_error("tilt_angles", monomorph.match_template, T, P, tilt_angles="abc")
    _input_error("angular_step", monomorph.match_template, T, P, angular_step=-3)
    _input_error("memory_limit", monomorph.match_template, T, P, memory_limit="2X")
    _input_error("unexpected argument 'no_such_flag'", monomorph.match_template, T, P, no_such_flag=1)
    _input_error("min_distance", monomorph.find_peaks, T, min_distance=-1)
    _input_error("threshold_rel", monomorph.find_peaks, T, threshold_rel=float("nan"))
    _input_error("rtol", monomorph.solve, np.ones(4), laplacian=(2, 2), rtol=-1)
    _input_error("progress", monomorph.match_template, T, P, progress="yes")
    assert issubclass(monomorph.InputError, ValueError) and issubclass(monomorph.RunError, RuntimeError)


@pytest.mark.parametrize(
    "bad,what",
    [
        (T[0, 0], "1-D"),
        (T[None], "4-D"),
        (np.zeros((0, 4, 4), np.float32), "empty"),
        (np.where(T > 1, np.nan, T), "NaN"),
        (T.astype(np.complex64), "dtype complex64"),
        (np.array([["a"]]), "dtype <U1"),
    ],
)
def test_bad_targets_are_input_errors(bad, what):
    _input_error(what, monomorph.match_template, bad, P)


def test_layouts_give_the_same_scores():
    want = monomorph.match_template(T, P, angular_step=90).scores
    fortran = np.asfortranarray(T)
    strided = np.zeros((48, 48, 96), np.float32)
    strided[:, :, ::2] = T
    for t in (fortran, strided[:, :, ::2], T.astype(np.float64).astype(np.float32)):
        assert monomorph.match_template(t, P, angular_step=90).scores.tobytes() == want.tobytes()
    # A float64 target runs in double precision (the command's --precision auto).
    r = monomorph.match_template(T.astype(np.float64), P, angular_step=90)
    assert r.run["precision"] == "double"


def test_huge_memory_limit_small_is_an_error():
    _input_error("memory_limit", monomorph.match_template, T, P, memory_limit="1K")


def test_cuda_without_a_device_is_one_line():
    # The wheel carries the CUDA backend (pyproject.toml); without a driver it is a RunError.
    if not next(d for d in monomorph.devices() if d["backend"].startswith("cuda"))["compiled"]:
        pytest.skip("built without the cuda feature")
    if any(d["available"] for d in monomorph.devices() if d["backend"].startswith("cuda")):
        pytest.skip("a CUDA device is present")
    with pytest.raises(monomorph.RunError) as e:
        monomorph.match_template(T, P, backend="cuda", angular_step=90)
    assert "\n" not in str(e.value) and "cuda" in str(e.value).lower()


def test_gil_is_released():
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    th = threading.Thread(target=count)
    th.start()
    t0 = time.time()
    monomorph.match_template(T, P, angular_step=20)
    took = time.time() - t0
    stop.set()
    th.join()
    assert took > 0.05
    # The other thread kept running (at least a tick every ~10 ms of the match).
    assert len(ticks) > took / 0.01 * 0.5, (len(ticks), took)


def test_ctrl_c_interrupts_a_match():
    """Ctrl-C stops a match within seconds as a KeyboardInterrupt. (Both Ctrl-C tests' children
    install Python's SIGINT handler themselves: a Python started with SIGINT ignored, as by a
    runner launched in the background without job control, would keep it ignored.)"""
    code = textwrap.dedent(
        """
        import signal, sys, time, numpy as np, monomorph
        signal.signal(signal.SIGINT, signal.default_int_handler)
        t = np.random.default_rng(0).normal(size=(64, 64, 64)).astype(np.float32)
        p = t[:16, :16, :16].copy()
        def started(d, n):
            if d == 1:
                print("started", flush=True)
        try:
            monomorph.match_template(t, p, angular_step=5, progress=started)
            print("finished")
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.strip() == "started"
    t0 = time.time()
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert time.time() - t0 < 5
    assert out.strip() == "interrupted"


def test_ctrl_c_interrupts_a_solve():
    """CG reads the stop flag after every iteration (this solve, with both tolerances 0, would
    run its 10^6 iterations for an hour)."""
    code = textwrap.dedent(
        """
        import signal, sys, numpy as np, monomorph
        signal.signal(signal.SIGINT, signal.default_int_handler)
        y = np.random.default_rng(0).normal(size=(1, 128 ** 3))
        print("started", flush=True)
        try:
            r = monomorph.solve(y, laplacian=(128, 128, 128), rtol=0, atol=0, max_iter=10**6)
            print("finished", r.iterations)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.strip() == "started"
    time.sleep(2.0)
    t0 = time.time()
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert out.strip() == "interrupted"
    assert time.time() - t0 < 5


class _Producer:
    """A DLPack producer that is not a numpy array (as a CPU torch tensor would be)."""

    def __init__(self, a, device=(1, 0)):
        self.a, self.device = a, device

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.device


def test_dlpack_cpu_producer_equals_numpy():
    want = monomorph.match_template(T, P, angular_step=90).scores
    got = monomorph.match_template(_Producer(T), _Producer(P), angular_step=90).scores
    assert got.tobytes() == want.tobytes()


def test_dlpack_gpu_producer_is_one_clear_error():
    with pytest.raises(monomorph.RunError) as e:
        monomorph.match_template(_Producer(T, device=(2, 0)), P, angular_step=90)
    assert "target" in str(e.value) and "GPU" in str(e.value)
