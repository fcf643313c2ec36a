"""Type stubs of the monomorph package (flags are keywords of the command, in snake_case)."""

import os
from typing import Any, Callable, Literal

import numpy as np
import numpy.typing as npt

__version__: str

ArrayOrPath = npt.ArrayLike | str | os.PathLike[str]
# One or several (a list: repeated flags, e.g. several templates matched in one pass).
ArraysOrPaths = ArrayOrPath | list[ArrayOrPath] | tuple[ArrayOrPath, ...]
Progress = bool | Callable[[int, int], Any]

class InputError(ValueError):
    """Bad input (the command's exit 2); the message names the argument in snake_case."""

class RunError(RuntimeError):
    """A failure while running (the command's exit 1)."""

def devices() -> list[dict[str, Any]]:
    """What `monomorph devices` prints: one dict per backend (CPU, then CUDA)."""

class MatchResult:
    """scores, rotation_index, template_index (several templates, else None), rotations;
    score_mean/std/z with score_stats=True; run (run.json); inputs (how each array input was
    taken: "borrowed" (read in place: C order, the run's working dtype), "copied" (int32/int64,
    copied once) or "converted" (another dtype or order, converted once)). The arrays are the .npy files' values, bit for bit,
    handed over without a copy."""

    scores: np.ndarray
    rotation_index: np.ndarray
    template_index: np.ndarray | None
    rotations: np.ndarray
    score_mean: np.ndarray | None
    score_std: np.ndarray | None
    score_z: np.ndarray | None
    run: dict[str, Any]
    inputs: dict[str, str]
    def peaks(self, **flags: Any) -> Peaks:
        """find_peaks on this result, with its rotations, template index and run statistics."""

class Peaks:
    """positions (k, d), scores, rotation_index, template_index, angles (RELION, degrees),
    threshold."""

    positions: np.ndarray
    scores: np.ndarray
    rotation_index: np.ndarray | None
    template_index: np.ndarray | None
    angles: np.ndarray | None
    threshold: float | None
    def __len__(self) -> int: ...
    def write(self, path: str | os.PathLike[str]) -> None:
        """Writes what `monomorph peaks --out path` writes (STAR or CSV by extension)."""

class SolveResult:
    """x, residual, converged, diverged, iterations, function_evaluations, residual_norm, result."""

    x: np.ndarray
    residual: np.ndarray
    converged: list[bool]
    diverged: list[bool]
    iterations: list[int]
    function_evaluations: list[int]
    residual_norm: list[float]
    trajectory: np.ndarray | None
    result: dict[str, Any]

def match_template(
    target: ArrayOrPath,
    template: ArraysOrPaths,
    *,
    template_mask: ArraysOrPaths | None = ...,
    target_mask: ArrayOrPath | None = ...,
    score: str = "flc-sphere",
    rotations: ArrayOrPath | None = ...,
    angular_step: float | None = ...,
    angular_sampling_set: Literal["uniform", "pytme"] | None = ...,
    pytme_data: str | os.PathLike[str] | None = ...,
    orientations: str | os.PathLike[str] | None = ...,
    orientations_cone: float | None = ...,
    orientations_inplane_step: float | None = ...,
    euler: ArrayOrPath | None = ...,
    symmetry: str | None = ...,
    interpolation: Literal["cubic", "linear"] = "cubic",
    pad_edges: bool = False,
    memory_limit: str | int | None = ...,
    score_stats: bool = False,
    background_correction: Literal["phase-scrambling"] | None = ...,
    devices: str | tuple[int, ...] | None = ...,
    tilt_angles: str | tuple[float, ...] | None = ...,
    wedge_axes: str | tuple[int, int] | None = ...,
    defocus: float | None = ...,
    lowpass: float | None = ...,
    highpass: float | None = ...,
    whiten_spectrum: bool = False,
    sampling_rate: float | None = ...,
    scheduling_mask: ArrayOrPath | None = ...,
    search_z: str | tuple[int, int] | None = ...,
    search_y: str | tuple[int, int] | None = ...,
    search_x: str | tuple[int, int] | None = ...,
    backend: Literal["auto", "cpu", "cuda"] = "auto",
    precision: Literal["auto", "single", "double"] = "auto",
    out: str | os.PathLike[str] | None = ...,
    progress: Progress = False,
    **flags: Any,
) -> MatchResult:
    """Template matching, as `monomorph match` (every flag a keyword in snake_case). Several
    templates (a list, one shape) are matched in one pass: scores are the per-voxel best
    (ties to the first) and template_index says which. Without out= no file is written.
    C-ordered arrays of the working dtype are read in place; a CPU DLPack producer (a torch
    CPU tensor) as target gets result arrays of its kind (zero copy); a GPU one: RunError."""

def find_peaks(
    scores: ArrayOrPath,
    *,
    min_distance: int = 5,
    threshold_abs: float | None = ...,
    min_score: float | None = ...,
    threshold_rel: float | None = ...,
    max_score: float | None = ...,
    exclude_border: int | None = ...,
    num_peaks: int | None = ...,
    false_positives: float | None = ...,
    caller: Literal["skimage", "maxfilter", "recursive", "pytom"] = "skimage",
    rotation_index: ArrayOrPath | None = ...,
    rotations: ArrayOrPath | None = ...,
    template_index: ArrayOrPath | None = ...,
    match_run: MatchResult | dict[str, Any] | str | os.PathLike[str] | None = ...,
    peak_oversampling: float | None = ...,
    allow_nan: bool = False,
    particle_diameter: float | None = ...,
    sampling_rate: float | None = ...,
    backend: Literal["auto", "cpu", "cuda"] = "auto",
    precision: Literal["auto", "single", "double"] = "auto",
    out: str | os.PathLike[str] | None = ...,
    **flags: Any,
) -> Peaks:
    """Peak calling, as `monomorph peaks` (every flag a keyword in snake_case)."""

def solve(
    rhs: ArrayOrPath,
    *,
    matrix: Any = ...,
    csr: tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike] | str | os.PathLike[str] | None = ...,
    laplacian: str | tuple[int, ...] | None = ...,
    periodic: bool = False,
    boundary: str | None = ...,
    spacing: str | float | tuple[float, ...] | None = ...,
    obstacles: ArrayOrPath | None = ...,
    x0: ArrayOrPath | None = ...,
    method: Literal["cg", "cg-adaptive", "auto"] = "cg",
    rtol: float = 1e-5,
    atol: float = 0.0,
    max_iter: int | None = ...,
    preconditioner: Literal["none", "jacobi"] = "none",
    trajectory: bool = False,
    backend: Literal["auto", "cpu", "cuda"] = "auto",
    precision: Literal["auto", "single", "double"] = "auto",
    out: str | os.PathLike[str] | None = ...,
    **flags: Any,
) -> SolveResult:
    """Batched conjugate gradient, as `monomorph solve` (every flag a keyword in snake_case)."""
