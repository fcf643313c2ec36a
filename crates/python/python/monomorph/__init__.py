"""monomorph from Python: template matching, peak calling and batched conjugate gradient.

Each function runs the ``monomorph`` command's own code in this process (no subprocess, no
input files): every flag of ``monomorph match`` / ``peaks`` / ``solve`` is a keyword argument
in snake_case with the same meaning, default and validation (see ``monomorph match --help``).
A keyword takes the text the command accepts (``tilt_angles="60,60"``, ``memory_limit="2G"``)
or a natural Python value: numbers, tuples (``wedge_axes=(2, 0)``, ``search_z=(10, 50)``,
``laplacian=(64, 64)``), ``True`` for a switch (``whiten_spectrum=True``). Arrays are numpy
arrays in the command's (z, y, x) frame, or paths.

Inputs are read in place where they can be (a C-ordered array of the working dtype), and
results are handed over without a copy; a DLPack producer (a torch tensor, a CuPy array) is
taken through the protocol and gets arrays of its own kind back (the results exported as
DLPack capsules). ``match_template`` matches a producer's float target on the device it lives
on (a GPU array on its GPU, the result kept there); ``find_peaks`` and ``solve`` read host
arrays only (a GPU one raises :class:`RunError`).

Errors: :class:`InputError` (a ``ValueError``) where the command exits 2, naming the argument;
:class:`RunError` (a ``RuntimeError``) where it exits 1. The GIL is released while computing and
Ctrl-C raises ``KeyboardInterrupt`` within about one rotation.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from typing import Any, Callable

import numpy as np

from . import _native

__version__: str = _native.__version__

__all__ = [
    "__version__",
    "devices",
    "match_template",
    "find_peaks",
    "solve",
    "MatchResult",
    "Peaks",
    "SolveResult",
    "InputError",
    "RunError",
]


class InputError(ValueError):
    """Bad input (what the command answers with exit 2): the message names the argument."""


class RunError(RuntimeError):
    """A failure while running (the command's exit 1), e.g. ``backend="cuda"`` without a GPU."""


_ARRAY = _native.ARRAY

# pytme's score names, accepted beside the command's.
_SCORES = {
    "CC": "cc",
    "LCC": "lcc",
    "CORR": "ncc",
    "NCC": "ncc",
    "CAM": "cam",
    "FLCSphericalMask": "flc-sphere",
    "FLC": "flc",
    "MCC": "mcc",
}

_SUBCOMMAND_DOC = {
    "match": "monomorph.match_template",
    "peaks": "monomorph.find_peaks",
    "solve": "monomorph.solve",
}


def _snake(message: str, sub: str) -> str:
    """The command's message with its flags in Python's spelling (``--tilt-angles`` ->
    ``tilt_angles``) and the help hint pointing at ``help()``."""
    message = re.sub(
        r"\(see `monomorph[^`]*`\)",
        f"(see help({_SUBCOMMAND_DOC.get(sub, 'monomorph')}))",
        message,
    )
    return re.sub(
        r"--([a-z][a-z0-9-]*)",
        lambda m: m.group(0) if m.group(1) == "features" else m.group(1).replace("-", "_"),
        message,
    )


def _is_array_like(v: Any) -> bool:
    return isinstance(v, np.ndarray) or hasattr(v, "__dlpack__") or hasattr(v, "__array_interface__")


# Python dtypes the command reads as float32, as its .npy reader does.
_WIDEN = {np.dtype(t) for t in ("bool", "int8", "uint8", "int16", "uint16")}
_KEEP = {np.dtype(t) for t in ("float32", "float64", "int32", "int64")}
# Python dtypes the command reads in place (lent, not copied).
_FLOAT = {np.dtype(t) for t in ("float32", "float64")}


def _host(name: str, v: Any) -> tuple[Any, str]:
    """``v`` as a C-ordered numpy array of a dtype the command reads, and how it was taken:
    ``"borrowed"`` for a float32/float64 one as it is (lent to the command and read in place
    where its dtype is the run's working type; the command says afterwards when it converted
    it instead), ``"copied"`` for an int32/int64 one (the command copies its buffer once),
    ``"converted"`` when numpy made a converted copy first (another dtype, or not C-ordered); a
    DLPack producer is taken by :func:`_dlpack`."""
    if not isinstance(v, np.ndarray) and hasattr(v, "__dlpack__"):
        return _dlpack(name, v)
    a = np.asarray(v)
    how = "borrowed" if a.dtype in _FLOAT else "copied"
    if a.dtype in _WIDEN:
        a = a.astype(np.float32)
        how = "converted"
    elif a.dtype not in _KEEP:
        raise InputError(
            f"{name}: dtype {a.dtype}, expected float32, float64, int32 or int64 "
            "(or bool/int8/uint8/int16/uint16, read as float32)"
        )
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
        how = "converted"
    return a, how


# DLPack device types read on the host: kDLCPU, kDLCUDAHost (pinned host memory).
_HOST_DEVICES = (1, 3)
_KDLCUDA = 2


def _dlpack(name: str, v: Any) -> tuple[Any, str]:
    """A DLPack producer (a torch tensor; not a numpy array) taken through the protocol by the
    extension (its capsule consumed, the tensor checked there) and how it will be read: a
    float32/float64 host array ``"borrowed"`` (read in place), int32/int64 ``"copied"``, the
    small types ``"converted"`` (to float32), a strided (not C-contiguous) one ``"converted"``
    once to C order through numpy, as a numpy array of that layout is. An array on a GPU is a
    :class:`RunError` (read on the host here: only ``match_template``'s target and template are
    taken on their device, by ``_Call._on_device``); another device or an element type the
    command does not read, an :class:`InputError` naming ``name``."""
    kind, dev = _dlpack_device(v)
    if kind == _KDLCUDA:
        raise RunError(
            f"{name}: an array on GPU {dev} (DLPack device type {kind}): read on the host here "
            "(only match_template's target and template are taken on their device), expected a "
            "CPU array (copy it to the host first, e.g. .cpu() or cupy.asnumpy)"
        )
    if kind not in _HOST_DEVICES:
        raise InputError(
            f"{name}: an array on DLPack device type {kind} (device {dev}), expected a CPU array"
        )
    try:
        f = _native.take_dlpack(v)
    except ValueError as e:
        if "not C-contiguous" in str(e):
            # A strided host view (a transposed tensor): converted once to C order, as a
            # numpy array of that layout is (its capsule was released, so it is exported again).
            try:
                a = np.from_dlpack(v)
            except (TypeError, ValueError, RuntimeError, BufferError) as e2:
                raise InputError(f"{name}: {e} (and not readable by numpy: {e2})") from None
            return _host(name, a)
        raise InputError(f"{name}: {e}") from None
    except (TypeError, RuntimeError, BufferError) as e:
        raise InputError(f"{name}: not readable through DLPack ({e}), expected a CPU array") from None
    if f.device[0] not in _HOST_DEVICES:
        # The capsule contradicts __dlpack_device__: read nothing from it.
        raise InputError(
            f"{name}: __dlpack_device__ says {kind} but the tensor is on DLPack device type "
            f"{f.device[0]}, expected a CPU array"
        )
    if f.dtype in ("float32", "float64"):
        return f, "borrowed"
    return f, "copied" if f.dtype in ("int32", "int64") else "converted"


def _where(kind: int, dev: int) -> str:
    return f"GPU {dev}" if kind == _KDLCUDA else "the CPU"


def _is_producer(v: Any) -> bool:
    return not isinstance(v, np.ndarray) and hasattr(v, "__dlpack__")


def _dlpack_device(v: Any) -> tuple[int, int]:
    """A DLPack producer's (device type, device id); the CPU when it does not say."""
    dev = getattr(v, "__dlpack_device__", lambda: (1, 0))()
    return int(dev[0]), int(dev[1])


def _kind(v: Any) -> Callable[[Any], Any] | None:
    """The ``from_dlpack`` of the library a DLPack producer (not a numpy array) comes from —
    ``torch.from_dlpack`` for a tensor, a module-level ``from_dlpack`` of the producer's
    module or of its top package —, so that results come back as arrays of the same kind;
    None for numpy arrays, paths and producers whose library has none."""
    if isinstance(v, np.ndarray) or not hasattr(v, "__dlpack__"):
        return None
    name = type(v).__module__ or ""
    for mod in (name, name.split(".")[0]):
        m = sys.modules.get(mod)
        if m is None:
            try:
                m = importlib.import_module(mod)
            except ImportError:
                continue
        f = getattr(m, "from_dlpack", None)
        if callable(f):
            return f
    return None


def _like(kind: Callable[[Any], Any] | None, a: Any) -> Any:
    """A result array as an array of the input's kind (``kind``: its library's
    ``from_dlpack``), zero copy: the new array views the command's buffer, exported by the
    extension as a DLPack capsule (a ``_native.DLPackArray``), on the CPU, where the input
    lived. ``a`` itself without a kind."""
    if kind is None and isinstance(a, _native.DLPackArray) and a.__dlpack_device__()[0] == 1:
        # Kept on the CPU backend for a producer whose library has no from_dlpack.
        return np.from_dlpack(a)
    if kind is None or not isinstance(a, (np.ndarray, _native.DLPackArray)):
        return a
    return kind(a)


def _value(flag: str, v: Any) -> str:
    """A keyword's value as the command's text."""
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    if isinstance(v, (tuple, list)):
        items = [_value(flag, x) for x in v]
        if flag == "laplacian":
            return "x".join(items)
        if flag.startswith("search_"):
            return ":".join(items)
        return ",".join(items)
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return str(v)


class _Call:
    """One command line under construction: tokens, in-memory arrays and documents (no
    temporary files: ``(array)`` stands for them)."""

    def __init__(self, sub: str):
        self.sub = sub
        self.args: list[str] = [sub, "--quiet"]
        # numpy arrays, or DLPack producers taken by the extension (`_native.Foreign`).
        self.arrays: list[tuple[str, Any]] = []
        self.documents: list[tuple[str, str]] = []
        self.inputs: dict[str, str] = {}
        self.labels: dict[str, str] = {}
        # The main input's DLPack library (its `from_dlpack`), set by the first array input.
        self.kind: Callable[[Any], Any] | None = None
        self.first = True
        # `match` over a DLPack producer's target: the flags handed over as buffers on their
        # device (adopted there by the backend, the result kept there), and that device.
        self.adopt: list[str] = []
        self.device: tuple[int, int] | None = None
        self.backend = "auto"
        # A run the device path does not take (on another backend or device, split over
        # devices, mirrored, negated on the host): a CPU producer's target is then read on the
        # host, as a numpy array is (uploaded to that backend as before).
        self.host_only = False

    def flag(self, name: str, value: Any) -> None:
        """Adds keyword ``name`` (snake_case) with ``value``: None and False leave it out."""
        if value is None or value is False:
            return
        flag = "--" + name.replace("_", "-")
        if value is True:
            self.args.append(flag)
        else:
            self.args.append(f"{flag}={_value(name, value)}")

    def array(self, name: str, value: Any, item: str | None = None) -> None:
        """An array input: a numpy array (or DLPack/array-like) in memory, else a path.
        ``item`` names one of several arrays of a repeated flag (``--template``) or a file of
        a folder flag (``--csr``): the value ``(array)/item``."""
        if value is None:
            return
        if self.first:
            # Results come back as arrays of the main input's kind (its first array).
            self.first = False
            self.kind = _kind(value)
        if isinstance(value, (str, os.PathLike)):
            self.flag(name, value)
            return
        flag = "--" + name.replace("_", "-")
        if item is None:
            self.args.append(f"{flag}={_ARRAY}")
            key, label = flag, name
        else:
            key, label = f"{flag}/{item}", f"{name}[{item}]"
        if self.sub == "match" and name in ("target", "template") and _is_producer(value):
            a, how = self._on_device(key, label, name, value)
        elif self.device is not None and self.device[0] == _KDLCUDA and _is_producer(value):
            kind, dev = _dlpack_device(value)
            if kind == _KDLCUDA:
                raise InputError(
                    f"{label}: an array on GPU {dev}: only target and template are taken on the "
                    "device, expected a numpy array"
                )
            a, how = _host(label, value)
        else:
            a, how = _host(label, value)
        self.arrays.append((key, a))
        self.inputs[label] = how
        self.labels[key] = label

    def _on_device(self, key: str, label: str, name: str, v: Any) -> tuple[Any, str]:
        """A DLPack producer's target (or template, with such a target): a C-ordered
        float32/float64 tensor is handed to the command as a buffer on its device (``"adopted"``:
        the backend of that device copies it once there and keeps the result there; a CPU
        producer takes the same path on the CPU backend); other types and layouts of a host
        tensor are read on the host as before. A GPU target needs a usable CUDA device (the
        CUDA backend's probe, :class:`RunError` otherwise) and no ``backend="cpu"``; a template
        elsewhere than the target is an :class:`InputError`."""
        kind, dev = _dlpack_device(v)
        if name == "template":
            if self.device is None:
                return _host(label, v)
            here = (kind if kind != 3 else 1, dev if kind == _KDLCUDA else 0)
            if here != self.device:
                raise InputError(
                    f"{label}: an array on {_where(*here)}, expected the target's device "
                    f"({_where(*self.device)}) or a numpy array"
                )
        elif kind == _KDLCUDA:
            if self.backend == "cpu":
                raise InputError(
                    f"backend: 'cpu' with {label} on GPU {dev}, expected 'cuda' or none (an "
                    "array is matched on the device it lives on)"
                )
            why = _native.cuda_unavailable(dev)
            if why is not None:
                raise RunError(f"{label}: an array on GPU {dev}: {why}")
        elif kind not in _HOST_DEVICES or self.host_only:
            return _host(label, v)
        try:
            f = _native.take_dlpack(v, 1 if kind == _KDLCUDA else None)
        except ValueError as e:
            if kind != _KDLCUDA and "not C-contiguous" in str(e):
                return _dlpack(label, v)
            raise InputError(f"{label}: {e}") from None
        except (TypeError, RuntimeError, BufferError) as e:
            raise InputError(f"{label}: not readable through DLPack ({e})") from None
        if (f.device[0] == _KDLCUDA) != (kind == _KDLCUDA):
            raise InputError(
                f"{label}: __dlpack_device__ says {kind} but the tensor is on DLPack device "
                f"type {f.device[0]}"
            )
        if f.dtype in ("float32", "float64"):
            if name == "target":
                self.device = (_KDLCUDA, f.device[1]) if kind == _KDLCUDA else (1, 0)
            self.adopt.append(key)
            return f, "adopted"
        if kind == _KDLCUDA:
            raise InputError(
                f"{label}: {f.dtype} on GPU {dev}, expected float32 or float64 (an array on a "
                "GPU is matched as it is)"
            )
        return f, "copied" if f.dtype in ("int32", "int64") else "converted"

    def arrays_of(self, name: str, value: Any) -> int:
        """A repeatable array flag (``--template``): one array or path, or a list/tuple of
        them (each its own ``--flag``). Returns how many."""
        if value is None:
            return 0
        if not isinstance(value, (list, tuple)):
            self.array(name, value)
            return 1
        if len(value) == 0:
            raise InputError(f"{name}: an empty list, expected an array or a path (or a list of them)")
        flag = "--" + name.replace("_", "-")
        for k, v in enumerate(value):
            if isinstance(v, (str, os.PathLike)):
                self.flag(name, v)
            else:
                self.args.append(f"{flag}={_ARRAY}/{k}")
                self.array(name, v, item=str(k))
        return len(value)

    def document(self, name: str, filename: str, text: str) -> None:
        """A text input (a run.json, an Euler CSV) given in memory: ``--flag (array)/filename``."""
        self.documents.append((filename, text))
        self.flag(name, f"{_ARRAY}/{filename}")

    def run(self, progress: Any = False, allow: tuple[int, ...] = ()) -> tuple[dict, dict]:
        """Runs the command; raises InputError/RunError as it fails; returns its results
        (JSON) and its output arrays (numpy arrays owning the command's buffers)."""
        bar = progress is True
        cb = progress if callable(progress) else None
        if progress not in (True, False, None) and cb is None:
            raise InputError(f"progress: {progress!r}, expected True, False or a callable (done, total)")
        # A DLPack caller's library (`kind`) gets the outputs as DLPack exports.
        code, message, results, arrays, read = _native.run_command(
            self.args, self.arrays, cb, bar, self.documents, self.kind is not None, self.adopt
        )
        self.arrays = []
        for key, taken in read.items():
            label = self.labels.get(key)
            if label is not None and self.inputs.get(label) == "borrowed":
                self.inputs[label] = taken
        if code != 0 and code not in allow:
            text = _snake(message, self.sub)
            if code == 2:
                raise InputError(text)
            raise RunError(text)
        return json.loads(results), arrays


def _split(flags: dict, *names: str) -> list:
    return [flags.pop(n, None) for n in names]


def devices() -> list[dict]:
    """What ``monomorph devices`` prints, as one dict per backend (CPU, then CUDA): ``backend``,
    ``kind``, ``name``, ``description``, ``total_memory``/``free_memory`` (bytes),
    ``processors``, ``available`` (with ``reason`` when not), ``compiled`` and ``auto`` (the
    one ``backend="auto"`` picks)."""
    return json.loads(_native.devices_json())


class MatchResult:
    """The result of :func:`match_template`.

    Attributes: ``scores`` (float32, the target's shape), ``rotation_index`` (int32, -1 where
    not searched), ``template_index`` (int32, the template of each voxel's best score, 0-based
    in the order given, -1 where not searched; None with one template), ``rotations``
    ((n, d, d) float32, acting on (z, y, x)), ``score_mean``, ``score_std``, ``score_z`` (with
    ``score_stats=True``, else None), ``run`` (the dict run.json holds for the same run) and
    ``inputs`` (how each array input was taken: ``"borrowed"``, read in place from its own
    buffer — a C-ordered array of the run's working dtype: float32, or float64 with
    ``precision="double"`` or a float64 target —, ``"copied"``, an int32/int64 array copied
    once, or ``"converted"``, another dtype or order converted once, by numpy or the command).
    The arrays are the values the command's .npy files hold, bit for bit, handed over without
    a copy."""

    def __init__(self, arrays: dict, run: dict, inputs: dict | None = None):
        self.scores: np.ndarray = arrays["scores"]
        self.rotation_index: np.ndarray = arrays["rotation_index"]
        self.template_index: np.ndarray | None = arrays.get("template_index")
        self.rotations: np.ndarray = arrays["rotations"]
        self.score_mean: np.ndarray | None = arrays.get("score_mean")
        self.score_std: np.ndarray | None = arrays.get("score_std")
        self.score_z: np.ndarray | None = arrays.get("score_z")
        self.run: dict = run
        self.inputs: dict = dict(inputs or {})
        # With target_list: the entry as the list gives it and its folder's name in out.
        self.target: str | None = None
        self.folder: str | None = None

    def peaks(self, **flags: Any) -> "Peaks":
        """Calls peaks on this result: :func:`find_peaks` with its rotation index, rotations,
        template index (several templates: each peak's template) and statistics
        (``match_run``) filled in."""
        flags.setdefault("rotation_index", self.rotation_index)
        flags.setdefault("rotations", self.rotations)
        if self.template_index is not None:
            flags.setdefault("template_index", self.template_index)
        flags.setdefault("match_run", self)
        return find_peaks(self.scores, **flags)

    def __repr__(self) -> str:
        return f"MatchResult(scores={self.scores.shape}, rotations={len(self.rotations)})"


def match_template(target: Any, template: Any, **flags: Any) -> MatchResult:
    """Template matching, as ``monomorph match``: every flag is a keyword in snake_case
    (``template`` may be a list of arrays/paths of one shape, matched in one pass: scores are
    the best over the templates, ties to the first, and ``template_index`` says which;
    ``template_mask`` one mask for all or a list, one per template; ``score`` — "flc-sphere" by default; pytme's "FLCSphericalMask",
    "FLC", "CC", … accepted —, ``rotations`` ((n, d, d) array or path), ``angular_step``,
    ``euler`` ((n, 3) RELION angles or a CSV path), ``symmetry``, ``tilt_angles``,
    ``wedge_axes``, ``defocus``, ``lowpass``, ``highpass``, ``whiten_spectrum``,
    ``score_stats``, ``background_correction``, ``scheduling_mask``, ``search_z``/``_y``/``_x``
    ((start, stop)), ``memory_limit``, ``pad_edges``, ``interpolation``, ``devices``,
    ``sampling_rate``, ``backend``, ``precision``, …; ``out`` also writes the command's output
    folder; without it no file is written; ``trace`` writes the command's Chrome/Perfetto
    trace of the run). ``target`` and ``template`` are 2-D/3-D arrays (z, y, x) or paths; a
    C-ordered array of the run's working dtype is read in place. A DLPack producer is taken
    through the protocol (its capsule consumed): a C-ordered float32/float64 target (and a
    template on the same device) is matched on the device it lives on — the backend of that
    device (CUDA on its ordinal, the CPU for a CPU tensor) adopts it and keeps the result there
    (``inputs["target"] == "adopted"``, ``run["kept_on_device"]``), and the result arrays come
    back as arrays of the target's kind on that device (its library's ``from_dlpack`` over the
    backend's buffers exported as DLPack capsules, zero copy); without a usable GPU a GPU
    target raises :class:`RunError` (the CUDA probe's reason), ``backend="cpu"`` with one or a
    template on another device :class:`InputError`. Other producer inputs are read on the host
    (a strided one converted once), and so is a CPU tensor's target where the device path does
    not run (``backend="cuda"``, ``devices``, ``check_hand``,
    ``invert_target_contrast``), as a numpy array is.
    ``progress``: True (a bar on stderr when it is a terminal), False, or ``f(done, total)``.

    ``target_list`` (with ``target=None``): a list file as ``--target-list`` reads it, or a
    Python list of paths and arrays; returns a list of :class:`MatchResult`, one per target in
    list order (``.target`` the entry, ``.folder`` its folder inside ``out``). With ``out``
    each target's folder is written as the command writes it and its arrays are memory-mapped
    from the files (nothing is read until used); ``peaks=True`` also writes
    ``out/particles.star``.
    """
    progress = flags.pop("progress", False)
    flags.pop("quiet", None)
    target_list = flags.pop("target_list", None)
    call = _Call("match")
    call.backend = str(flags.get("backend") or "auto").lower()
    call.host_only = call.backend == "cuda" or any(
        flags.get(k) not in (None, False)
        for k in ("devices", "check_hand", "invert_target_contrast")
    )
    call.array("target", target)
    if target_list is not None:
        _target_list(call, target_list)
    call.arrays_of("template", template)
    call.arrays_of("template_mask", flags.pop("template_mask", None))
    for name in ("target_mask", "scheduling_mask", "rotations"):
        call.array(name, flags.pop(name, None))
    euler = flags.pop("euler", None)
    if euler is not None and not isinstance(euler, (str, os.PathLike)):
        e = np.asarray(euler, dtype=np.float64)
        if e.ndim != 2 or e.shape[1] != 3:
            raise InputError(f"euler: shape {e.shape}, expected (n, 3) RELION angles rot, tilt, psi")
        # The command's own CSV parser reads it ("%.17g" gives every float64 back exactly).
        text = "".join(",".join(format(float(x), ".17g") for x in row) + "\n" for row in e)
        call.document("euler", "euler.csv", text)
    else:
        call.flag("euler", euler)
    score = flags.pop("score", None)
    if score is not None:
        score = _SCORES.get(str(score), str(score).lower().replace("_", "-"))
    call.flag("score", score)
    out = flags.pop("out", None)
    for k, v in flags.items():
        call.flag(k, v)
    call.flag("out", os.fspath(out) if out is not None else _ARRAY)
    results, arrays = call.run(progress)
    if target_list is not None:
        return _list_results(results, arrays, out, call.inputs)
    arrays = {k: _like(call.kind, a) for k, a in arrays.items()}
    return MatchResult(arrays, results["run"], call.inputs)


def _target_list(call: _Call, value: Any) -> None:
    """``--target-list``: a list file (path), or a list of targets (paths and arrays) given in
    memory as the list ``(array)/list.txt`` (a path as an absolute path, array K as the line
    ``tK``, read as ``--target/tK``)."""
    if isinstance(value, (str, os.PathLike)):
        call.flag("target_list", value)
        return
    if isinstance(value, np.ndarray) or not isinstance(value, (list, tuple)):
        raise InputError(
            f"target_list: {type(value).__name__}, expected a list file or a list of paths/arrays"
        )
    if not value:
        raise InputError("target_list: an empty list, expected one or more paths or arrays")
    lines = []
    for k, v in enumerate(value):
        if isinstance(v, (str, os.PathLike)):
            path = os.path.abspath(os.fspath(v))
            if "\n" in path or "\r" in path:
                raise InputError(f"target_list[{k}]: {path!r}, expected a path without line breaks")
            lines.append(path)
        else:
            lines.append(f"t{k}")
            call.array("target", v, item=f"t{k}")
    call.document("target_list", "list.txt", "".join(line + "\n" for line in lines))


def _list_results(results: dict, arrays: dict, out: Any, inputs: dict) -> list["MatchResult"]:
    """One :class:`MatchResult` per target of a list, in list order: the arrays handed over
    (without ``out``) or the target's files memory-mapped (with ``out``: nothing is read until
    used)."""
    summary = results.get("list") or {}
    found = []
    for k, entry in enumerate(summary.get("targets", [])):
        prefix = f"targets/{k}/"
        mine = {n[len(prefix):]: a for n, a in arrays.items() if n.startswith(prefix)}
        if out is not None:
            folder = os.path.join(os.fspath(out), entry["folder"])
            for name in ("scores", "rotation_index", "template_index", "rotations",
                         "score_mean", "score_std", "score_z"):
                f = os.path.join(folder, name + ".npy")
                if name not in mine and os.path.exists(f):
                    mine[name] = np.load(f, mmap_mode="r")
        r = MatchResult(mine, results[prefix + "run"], inputs)
        r.target = entry.get("target")
        r.folder = entry.get("folder")
        found.append(r)
    return found


class Peaks:
    """The result of :func:`find_peaks`.

    Attributes: ``positions`` ((k, d) int64, or float64 with ``peak_oversampling``),
    ``scores`` (float64), ``rotation_index`` ((k,) int64, or None without rotations),
    ``template_index`` ((k,) int64, each peak's template, 0-based, or None without a template
    index), ``angles`` ((k, 3) RELION rot, tilt, psi in degrees, or None) and ``threshold`` (the
    lowest score a peak could have: the largest of threshold_abs, the false_positives
    threshold and threshold_rel × the maximum; None without one)."""

    def __init__(self, data: dict, ndim: int, rerun: Callable[[str], None]):
        k = len(data["scores"])
        if data.get("subvoxel") is not None:
            self.positions = np.asarray(data["subvoxel"], dtype=np.float64).reshape(k, ndim)
        else:
            self.positions = np.asarray(data["positions"], dtype=np.int64).reshape(k, ndim)
        self.scores = np.asarray(data["scores"], dtype=np.float64)
        rot = data["rotation"]
        has = k > 0 and all(r is not None for r in rot)
        self.rotation_index = np.asarray(rot, dtype=np.int64) if has else None
        self.angles = np.asarray(data["euler"], dtype=np.float64).reshape(k, 3) if has else None
        tpl = data.get("template")
        has_t = tpl is not None and k > 0 and all(t is not None for t in tpl)
        self.template_index = np.asarray(tpl, dtype=np.int64) if has_t else None
        self.threshold: float | None = data.get("threshold")
        self._rerun = rerun

    def __len__(self) -> int:
        return len(self.scores)

    def write(self, path: str | os.PathLike) -> None:
        """Writes what ``monomorph peaks --out path`` writes: a STAR file (``.star``) or CSV."""
        self._rerun(os.fspath(path))

    def __repr__(self) -> str:
        return f"Peaks({len(self)} peaks, threshold={self.threshold})"


def find_peaks(scores: Any, **flags: Any) -> Peaks:
    """Peak calling, as ``monomorph peaks``: ``min_distance`` (default 5), ``threshold_abs``
    (alias ``min_score``), ``threshold_rel``, ``max_score``, ``exclude_border``, ``num_peaks``,
    ``caller`` ("skimage" — exactly ``skimage.feature.peak_local_max`` —, "maxfilter",
    "recursive", "pytom"), ``false_positives``, ``rotation_index``, ``rotations`` and
    ``template_index`` (arrays or paths), ``match_run`` (a :class:`MatchResult`, a run.json
    dict or a folder),
    ``peak_oversampling``, ``allow_nan``, pytom's ``particle_diameter``, ``sampling_rate``, …;
    ``out`` also writes the peak list. Array arguments may be DLPack producers on the CPU
    (read through the protocol, as in :func:`match_template`); one on a GPU raises
    :class:`RunError` (not done on the device yet)."""
    keep = dict(flags)
    out = flags.pop("out", None)
    flags.pop("quiet", None)
    call = _Call("peaks")
    call.array("scores", scores)
    # The axes of the array as taken (np.ndim of a DLPack producer would be 0).
    ndim = call.arrays[0][1].ndim if call.arrays else None
    for name in ("rotation_index", "rotations", "template_index", "tomogram_mask"):
        call.array(name, flags.pop(name, None))
    mr = flags.pop("match_run", None)
    if isinstance(mr, MatchResult):
        mr = mr.run
    if isinstance(mr, dict):
        # `--match-run (array)`: the folder's run.json, given in memory.
        call.documents.append(("run.json", json.dumps(mr)))
        call.flag("match_run", _ARRAY)
    else:
        call.flag("match_run", mr)
    for k, v in flags.items():
        call.flag(k, v)
    call.flag("out", os.fspath(out) if out is not None else _ARRAY)
    results, _ = call.run()
    data = results.get("peaks") or {"positions": [], "scores": [], "rotation": [], "euler": []}
    if ndim is None:
        ndim = len(data["positions"][0]) if data["positions"] else 3

    def rerun(path: str) -> None:
        find_peaks(scores, **{**keep, "out": path})

    return Peaks(data, ndim, rerun)


class SolveResult:
    """The result of :func:`solve`: ``x`` and ``residual`` ((batch, n) float64), per system
    ``converged``, ``diverged``, ``iterations``, ``function_evaluations``, ``residual_norm``
    (lists), and ``result`` (the dict result.json holds). A system that did not converge is
    not an exception: ``converged`` says so (and ``result["message"]`` why)."""

    def __init__(self, result: dict, arrays: dict):
        self.result: dict = result
        self.x: np.ndarray = arrays["x"]
        self.residual: np.ndarray = arrays["residual"]
        r = self.result
        self.converged: list[bool] = r["converged"]
        self.diverged: list[bool] = r["diverged"]
        self.iterations: list[int] = r["iterations"]
        self.function_evaluations: list[int] = r["function_evaluations"]
        self.residual_norm: list[float] = r["residual_norm"]
        self.trajectory: np.ndarray | None = arrays.get("trajectory")

    def __repr__(self) -> str:
        return f"SolveResult(x={self.x.shape}, converged={self.converged})"


def _csr(call: _Call, indptr: Any, indices: Any, data: Any) -> None:
    """``--csr (array)``: the folder's three arrays, given in memory."""
    call.flag("csr", _ARRAY)
    for item, a in (("indptr.npy", indptr), ("indices.npy", indices), ("data.npy", data)):
        call.array("csr", np.asarray(a), item=item)


def solve(rhs: Any, **flags: Any) -> SolveResult:
    """Batched conjugate gradient, as ``monomorph solve``: ``rhs`` ((batch, n) or (n,));
    one operator: ``matrix`` (a dense (n, n)/(batch, n, n) array or a ``scipy.sparse`` matrix),
    ``csr`` ((indptr, indices, data) or a folder) or ``laplacian`` (a grid shape, with
    ``periodic``, ``boundary``, ``spacing``, ``obstacles``); ``x0``, ``method`` ("cg",
    "cg-adaptive"), ``rtol``, ``atol``, ``max_iter``, ``preconditioner``, ``trajectory``,
    ``precision``, ``backend``; ``out`` also writes the command's output folder. With a CPU
    DLPack producer as ``rhs`` (a torch CPU tensor), ``x``/``residual`` are of its kind (zero
    copy); one on a GPU raises :class:`RunError` (not solved on the device yet)."""
    flags.pop("quiet", None)
    call = _Call("solve")
    call.array("rhs", rhs)
    call.array("x0", flags.pop("x0", None))
    call.array("obstacles", flags.pop("obstacles", None))
    matrix = flags.pop("matrix", None)
    if matrix is not None and hasattr(matrix, "tocsr") and not isinstance(matrix, np.ndarray):
        m = matrix.tocsr()
        _csr(call, m.indptr, m.indices, m.data)
    else:
        call.array("matrix", matrix)
    csr = flags.pop("csr", None)
    if isinstance(csr, (tuple, list)):
        if len(csr) != 3:
            raise InputError("csr: expected (indptr, indices, data) or a folder")
        _csr(call, *csr)
    else:
        call.flag("csr", csr)
    method = flags.pop("method", None)
    call.flag("method", None if method is None else str(method).replace("_", "-"))
    out = flags.pop("out", None)
    for k, v in flags.items():
        call.flag(k, v)
    call.flag("out", os.fspath(out) if out is not None else _ARRAY)
    results, arrays = call.run(allow=(3,))
    arrays = {k: _like(call.kind, a) for k, a in arrays.items()}
    return SolveResult(results["result"], arrays)


# ---- Every flag in help(): each function's docstring ends with its command's flags, read from
# the command's own --help (so they cannot fall behind it).

_OPTION = re.compile(r"^  (?:-[A-Za-z], |    )--([a-z0-9][a-z0-9-]*)(.*)$")
# Flags that are not keywords: the command's own help and version; --quiet and --verbose (no
# log lines are shown embedded).
_NOT_KEYWORDS = {"help", "version", "quiet", "verbose"}


def _flags(sub: str) -> list[tuple[str, bool, str]]:
    """``(keyword, takes a value, first sentence of its help)`` for every flag of
    ``monomorph SUB --help`` (the global ones included)."""
    lines = (_native.help_text(sub) or "").splitlines()
    found = []
    for i, line in enumerate(lines):
        m = _OPTION.match(line)
        if not m or m.group(1) in _NOT_KEYWORDS:
            continue
        takes = m.group(2).strip().startswith("<")
        block = []
        for nxt in lines[i + 1 :]:
            if _OPTION.match(nxt):
                break
            block.append(nxt.strip())
        text = " ".join(block)
        first = _sentence(" ".join(text.split("  ")[0].split()))
        default = re.search(r"\[default: ([^\]]*)\]", text)
        if default and "[default:" not in first:
            first += f" [default: {default.group(1)}]"
        found.append((m.group(1).replace("-", "_"), takes, first))
    return found


def _sentence(text: str) -> str:
    """The first sentence of ``text``: up to a ``.`` or ``;`` followed by a space outside
    parentheses (not after "e.g" or "i.e")."""
    depth = 0
    for i, c in enumerate(text):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth = max(0, depth - 1)
        elif c in ".;" and depth == 0 and text[i + 1 : i + 2] == " ":
            if text[max(0, i - 3) : i] in ("e.g", "i.e"):
                continue
            return text[:i]
    return text.rstrip(".;")


def _document(fn: Callable, sub: str) -> None:
    try:
        flags = _flags(sub)
    except Exception:  # pragma: no cover - help text is built in; never fail the import
        return
    lines = [f"    {name}: {text}" for name, _, text in flags]
    fn.__doc__ = (fn.__doc__ or "") + (
        f"\n\n    Keywords (the flags of ``monomorph {sub}``, see ``monomorph {sub} --help``):\n\n"
        + "\n".join(lines)
        + "\n"
    )


_document(match_template, "match")
_document(find_peaks, "peaks")
_document(solve, "solve")

