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
    copied once), "converted" (another dtype or order, converted once) or "adopted" (a DLPack
    producer's array matched on its device)). The arrays are the .npy files' values, bit for bit,
    handed over without a copy: numpy arrays, or with a DLPack producer as target arrays of its
    library on its device (its from_dlpack over the exported buffers)."""

    scores: np.ndarray
    rotation_index: np.ndarray
    template_index: np.ndarray | None
    rotations: np.ndarray
    score_mean: np.ndarray | None
    score_std: np.ndarray | None
    score_z: np.ndarray | None
    run: dict[str, Any]
    inputs: dict[str, str]
    target: str | None
    """With target_list: the entry as the list gives it (None for one target)."""
    folder: str | None
    """With target_list: the target's folder name inside out (None for one target)."""
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
    target: ArrayOrPath | None,
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
    orientations_inplane_range: float | None = ...,
    orientations_uncertainty: str | float | tuple[float, float, float] | None = ...,
    euler: ArrayOrPath | None = ...,
    symmetry: str | None = ...,
    interpolation: Literal["cubic", "linear"] = "cubic",
    pad_edges: bool = False,
    memory_limit: str | int | None = ...,
    png: bool = False,
    score_stats: bool = False,
    background_correction: Literal["phase-scrambling"] | None = ...,
    check_hand: int | None = ...,
    devices: str | tuple[int, ...] | None = ...,
    tilt_angles: str | tuple[float, ...] | os.PathLike[str] | None = ...,
    wedge_axes: str | tuple[int, int] | None = ...,
    tilt_weighting: Literal["angle", "relion", "grigorieff"] | None = ...,
    defocus: float | None = ...,
    ctf_file: str | os.PathLike[str] | None = ...,
    acceleration_voltage: float | None = ...,
    spherical_aberration: float | None = ...,
    amplitude_contrast: float | None = ...,
    phase_shift: float | None = ...,
    ctf_correction: Literal["phase-flip", "raw"] = "phase-flip",
    lowpass: float | None = ...,
    highpass: float | None = ...,
    whiten_spectrum: bool = False,
    no_filter_target: bool = False,
    invert_target_contrast: bool = False,
    sampling_rate: float | None = ...,
    scheduling_mask: ArrayOrPath | None = ...,
    search_z: str | tuple[int, int] | None = ...,
    search_y: str | tuple[int, int] | None = ...,
    search_x: str | tuple[int, int] | None = ...,
    target_list: str | os.PathLike[str] | list[ArrayOrPath] | tuple[ArrayOrPath, ...] | None = ...,
    peaks: bool = False,
    min_distance: int = 5,
    threshold_abs: float | None = ...,
    threshold_rel: float | None = ...,
    exclude_border: int | None = ...,
    num_peaks: int | None = ...,
    false_positives: float | None = ...,
    max_score: float | None = ...,
    peak_oversampling: float | None = ...,
    star_format: Literal["relion4", "relion5"] | None = ...,
    relion5_centre: str | None = ...,
    caller: Literal["skimage", "maxfilter", "recursive", "pytom"] = "skimage",
    relion5_tomograms_star: str | os.PathLike[str] | None = ...,
    tomo_name: str | None = ...,
    tilt_angle_source: Literal["nominal", "aligned"] | None = ...,
    no_tomogram_metadata: bool = False,
    warp_xml: str | os.PathLike[str] | None = ...,
    backend: Literal["auto", "cpu", "cuda"] = "auto",
    precision: Literal["auto", "single", "double"] = "auto",
    trace: str | os.PathLike[str] | None = ...,
    out: str | os.PathLike[str] | None = ...,
    progress: Progress = False,
    **flags: Any,
) -> MatchResult | list[MatchResult]:
    """Template matching, as `monomorph match` (every flag a keyword in snake_case). Several
    templates (a list, one shape) are matched in one pass: scores are the per-voxel best
    (ties to the first) and template_index says which. Without out= no file is written.
    C-ordered arrays of the working dtype are read in place. A DLPack producer's C-ordered
    float32/float64 target (and template on the same device) is matched on the device it
    lives on (a CUDA tensor on its GPU, a CPU tensor on the CPU backend): inputs says
    "adopted", run["kept_on_device"] lists the maps kept there, and the results are arrays of
    its kind on that device (zero copy). Without a usable GPU a GPU target is a RunError (the
    CUDA probe's reason); backend="cpu" with one, or a template elsewhere, an InputError.
    Other producers' inputs are read on the host (a strided one converted once), and so is a
    CPU tensor's target where the device path does not run (backend="cuda", devices,
    check_hand, invert_target_contrast), as a numpy array is.

    Keywords (the flags of `monomorph match`):

    target: Target (tomogram or micrograph): `.npy` (2-D/3-D) or MRC (`.mrc`, `.map`, `.rec`)
    template: Template, same number of axes as the target and no larger
    template_mask: Template mask (template-shaped) for cam, flc-sphere, flc, mcc: one for every
        --template, or one per --template in the same order
    target_mask: Target mask (target-shaped), required by mcc
    score: Score (pytme's CC, LCC, NCC, CAM, FLCSphericalMask, FLC, MCC) [default: flc-sphere]
    rotations: Rotation matrices `(n, d, d)` acting on the array's index order (z, y, x) (2-D: (y,
        x)), as pull-backs about the template centre: t_R[o] = t[R·(o − c) + c]
    angular_step: Even rotation sampling with this angular step in degrees (default 30)
    angular_sampling_set: Which even sampling --angular-step means (default `uniform`): monomorph's
        own (Hopf-fibration; see README) or `pytme`'s, the Karney set `pytme match -a DEG` picks
        (the nominal spacing nearest DEG), same matrices in the same order, so that rotation_index i
        is pytme's rotation i
    pytme_data: pytme's data folder (site-packages/tme/data), read for --angular-sampling-set pytme
        when the step's set is not built in (c48n309.npy … c48u8649.npy)
    orientations: Seed orientations: a STAR file with _rlnAngleRot, _rlnAngleTilt, _rlnAnglePsi
        (RELION's angles, one row per particle, or `_label value` pairs for one seed)
    orientations_cone: Half-angle in degrees (0 to 180) of the cone around each --orientations seed:
        pytme's acceptance test, the angle between the template's z axis placed by the rotation and
        by the seed
    orientations_inplane_step: In-plane step in degrees of the cone search (default: the --angular-
        step; pytme's axis_sampling)
    orientations_inplane_range: Limits the cone's in-plane spins to ±DEG about the seed's own (in
        (0, 180]; default 180, every spin): the spins of pytme's grid (−180 + j·360/m) within the
        range
    orientations_uncertainty: Seeded search (local refinement, pytme's --orientations-uncertainty):
        each seed of --orientations searches only its own cone (the rotation set is each seed's own
        set in turn, seed by seed in file order, repeats kept, so rotation_index names the seed too;
        run.json `seeds` lists each seed's voxel and rotation range) at the positions within R
        voxels of its position: the ellipsoid Σ(y/R)² ≤ 1, y the offset x − s in the seed
        particle's own axes (its pose from the STAR's angles, as pytme orients its acceptance
        ellipsoid; the same for one R), one R or one per axis `Z,Y,X` of the particle (an axis with R
        = 0: the plane through the seed across it)
    euler: Euler angles, one `rot,tilt,psi` per line (3-D only), in RELION's convention as in STAR
        files: degrees, Rz(rot)·Ry(tilt)·Rz(psi) the rotation acting on (x, y, z) (intrinsic ZYZ;
        the transpose of RELION's Euler_angles2matrix; scipy's from_euler("ZYZ")), the same angles
        `peaks` writes
    symmetry: Point-group symmetry of the template about its z axis (array axis 0; pytme's axis 2),
        `Cn` or `Dn` (`D` adds n two-fold axes perpendicular to z, the first along x): the rotation
        set (any of the three above) is restricted to the group's fundamental domain, keeping the
        rotations pytme's `--symmetry` keeps (about 1/n of them for Cn, 1/2n for Dn)
    interpolation: Interpolation of the rotated template [default: cubic]
    pad_edges: Extend the target symmetrically at its edges instead of wrapping around (pytme's
        `--pad-edges`: numpy's `symmetric` extension by n − 1 per axis, without pytme's off-by-one
        at index 0 for an even template length)
    memory_limit: At most this much memory (e.g. 8G, 512M)
    out: Output folder: scores.npy, rotation_index.npy, rotations.npy, run.json (+ scores.mrc)
    png: Also write DIR/scores.png: the central slice with the best peaks marked
    score_stats: Also write per-voxel statistics of the score over all rotations searched, beside
        the scores and in the same formats: score_mean, score_std (population standard deviation
        over the rotations) and score_z = (best − mean) / std, 0 where std = 0 (a voxel whose score
        does not change with the rotation, or a single rotation)
    background_correction: Background correction, as pytme's: `phase-scrambling` subtracts from the
        best score of each voxel the best score (over the same rotations, from 0) of a phase-
        scrambled copy of the template (numpy's default_rng(42), pytme's scramble_phases), rotated,
        filtered and normalised like the template, minus its mean over pytme's FFT box
    check_hand: Handedness check (Warp's --check_hand): also match the template mirrored (its last
        array axis, x, reversed; its mask alike), call peaks on both score maps (the best N, at
        least half the template's smallest side apart) and record in run.json `check_hand`: `n`,
        `original` and `mirrored` (the mean of each map's best N peak scores) and `better`
        ("original" or "mirrored"; a tie says "original")
    devices: Devices to split the rotations over, e.g. `0,1,2,3` (each runs a contiguous range; the
        results merge exactly, byte-identical to one device)
    tilt_angles: Missing wedge: `A,B` (a continuous wedge between two tilt limits in degrees,
        absolute values taken) or a tilt-angle file: IMOD .tlt / text (one angle per line, or a
        header `angles weights` with the dose per tilt in `weights`; AreTomo's
        angle/index/exposure), .star (stopgap wedge list, Warp, RELION 5 tilt series), Warp/M .xml
        (tilts with UseTilt False left out) or SerialEM .mdoc (dose (z + 1) × ExposureDose, as
        pytme)
    wedge_axes: Wedge axes `OPENING,TILT` in pytme's numbering (0 = x, 1 = y, 2 = z; the tilt series
        rotates about the third axis)
    tilt_weighting: Per-tilt weighting of a tilt-angle file: angle (cos), relion or grigorieff
        (exposure filters; need the dose per tilt in the file)
    defocus: Defocus in Å (positive = underfocus): one CTF applied to the template
    ctf_file: Per-tilt CTF: CTFFIND4 or AreTomo3 (_CTF.txt) output, a RELION/GCTF or stopgap .star,
        a Warp/M .xml (phase shift in units of π, as Warp stores it) or a SerialEM .mdoc
    acceleration_voltage: Acceleration voltage in kV [default: 300, or the tilt-series metadata's]
    spherical_aberration: Spherical aberration in Å (not mm: 2.7 mm = 2.7e7) [default: 2.7e7, or the
        metadata's]
    amplitude_contrast: Amplitude contrast fraction [default: 0.07, or the metadata's]
    phase_shift: Additional phase shift in DEGREES (pytme 0.3.6 documents degrees but passes the
        number on as radians with --defocus; monomorph converts, so pytme's runs with a non-zero
        value are not reproduced: give the value in degrees here) [default: 0]
    ctf_correction: How the target's CTF was treated: phase-flip (template gets |CTF|) or raw
        (signed CTF) [default: phase-flip]
    lowpass: Gaussian low-pass edge in Å (0.5 at 1/Å)
    highpass: Gaussian high-pass edge in Å (0.5 at 1/Å)
    whiten_spectrum: Whiten template and target with the target's radially averaged power spectrum
    no_filter_target: Do not filter the target (the template filter is unchanged)
    invert_target_contrast: Negate the target once, before anything else
    sampling_rate: Voxel size in Å for inputs whose file carries none (.npy)
    scheduling_mask: Binary mask (target-shaped, values 0 and 1) of the positions where a match may
        occur, as pytme's --scheduling-mask: only its bounding box is tiled, tiles holding no 1 are
        skipped (no FFT work), and positions at 0 are not searched (score -inf, rotation index -1 in
        the outputs; pytme leaves real scores wherever its boxes happen to reach, here the outputs
        do not depend on the tiling)
    search_z: Search only positions START..STOP (STOP excluded, 0-based voxels; either end may be
        left out) along z, array axis 0 (3-D only), as pytom-match-pick's --search-z (e.g. the ice
        layer)
    search_y: As --search-z along y (array axis 0 in 2-D, 1 in 3-D)
    search_x: As --search-z along x (the last array axis)
    target_list: Many targets in one job, instead of --target: a text file with one target path per
        line (blank lines and `#` comments skipped; relative paths from the list's folder), or a
        RELION STAR file (`.star`) whose `_rlnTomoReconstructedTomogram` or `_rlnMicrographName`
        column holds the paths (relative paths from the current folder, as in a RELION project)
    peaks: Call peaks on every target's result, as `monomorph peaks` with the flags below would on
        its output folder, and write them all to one STAR file, OUT/particles.star, naming each
        row's target in `_rlnMicrographName` (the path as the list gives it)
    min_distance: Minimum distance between peaks in voxels (Chebyshev, strict) and max-filter radius
        [default: 5]
    threshold_abs: Only peaks scoring above X (skimage: strictly above)
    max_score: Only peaks scoring at most X, as pytme's --max-score: with --caller maxfilter or
        recursive, candidates above X are dropped before the distance filter (so they suppress no
        neighbour), as pytme's callers do
    peak_oversampling: Sub-voxel peak positions as pytme's postprocess --peak-oversampling F: the
        score map's DFT interpolant sampled F times finer around each peak (upsampled DFT, Guizar-
        Sicairos 2008; a region of ceil(1.5 F) samples per axis), precision 1/F voxel
    threshold_rel: Only peaks scoring above Y × the map maximum
    exclude_border: No peaks within N voxels of the border (default: the minimum distance)
    num_peaks: At most K peaks, the best first
    false_positives: Raise the threshold so that at most K false positives are expected, by pytme's
        postprocess --n-false-positives rule: erfcinv(2K / (voxels × rotations)) · √2 · σ over the
        voxels inside the border
    caller: Peak caller: scikit-image's peak_local_max, pytme's maximum-filter caller, pytme's
        recursive masking, or pytom-match-pick's extraction (--particle-diameter, --num-peaks;
        --false-positives, default 1, sets its cut-off, --threshold-abs replaces it) [default:
        skimage]
    star_format: With --peaks: the format of OUT/particles.star: relion4 (the default: voxels,
        `_rlnMicrographName`) or relion5 (`_rlnTomoName`, centred Å, data_optics; each tomogram's
        geometry from its tomograms.star row, see `peaks --star-format`)
    relion5_centre: With --star-format relion5: the centring rule (see `peaks --relion5-centre`)
    relion5_tomograms_star: A RELION 5 tomogram set (`Tomograms/jobNNN/tomograms.star`, block
        data_global)
    tomo_name: The tomogram (`_rlnTomoName`) of --relion5-tomograms-star
    tilt_angle_source: Which tilt angles of the per-tilt STAR: nominal
        (`_rlnTomoNominalStageTiltAngle`, the default, as pytom-match-pick and pytme read them) or
        aligned (`_rlnTomoYTilt`, which can differ by the lamella pre-tilt)
    no_tomogram_metadata: With --target-list T.star (a RELION 5 tomograms.star): match every
        tomogram with the filter flags alone, not with its own metadata (the behaviour before RELION
        5 projects were read)
    warp_xml: A Warp/M tilt-series XML: exactly `--tilt-angles X.xml --ctf-file X.xml --tilt-
        weighting relion` (angles as Warp stores them, as pytme reads them; per-tilt defocus U/V
        from GridCTF and its delta, with the astigmatism angle; tilts with UseTilt False left out)
        plus the voltage, Cs and amplitude contrast the XML holds (explicit flags override; the
        XML's PixelSize is the tilt images', recorded in run.json, not the voxel size)
    backend: Backend: `auto` picks CUDA when compiled in and a device is present, else the CPU
        [default: auto]
    precision: Float precision of the computation (scores are always written as float32) [default:
        auto]
    trace: Write a Chrome/Perfetto trace of every instrumented step to FILE.json
    """

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
    tophat_filter: bool = False,
    tophat_connectivity: Literal[1, 2, 3] = 1,
    tophat_bins: int = 50,
    tomogram_mask: ArrayOrPath | None = ...,
    star_format: Literal["relion4", "relion5"] | None = ...,
    relion5_centre: str | None = ...,
    relion5_tomograms_star: str | os.PathLike[str] | None = ...,
    tomo_name: str | None = ...,
    png: str | os.PathLike[str] | None = ...,
    backend: Literal["auto", "cpu", "cuda"] = "auto",
    precision: Literal["auto", "single", "double"] = "auto",
    trace: str | os.PathLike[str] | None = ...,
    out: str | os.PathLike[str] | None = ...,
    **flags: Any,
) -> Peaks:
    """Peak calling, as `monomorph peaks` (every flag a keyword in snake_case). Array
    arguments may be CPU DLPack producers (read through the protocol); a GPU one: RunError.

    Keywords (the flags of `monomorph peaks`):

    scores: Score map (`.npy` or MRC), 2-D or 3-D
    rotation_index: Best-rotation index per voxel (int32/int64 `.npy`, same shape as the scores)
    rotations: The rotation list `(n, d, d)` the index refers to (adds rotation and angle columns):
        matrices acting on the array's index order (z, y, x), as `match` writes them (rotations.npy)
    template_index: The template of the best score per voxel (int `.npy`, the scores' shape), from a
        `match` with several --template: rows get its index (CSV column `template`, 0-based; STAR
        `_rlnClassNumber`, the index + 1)
    min_distance: Minimum distance between peaks in voxels (Chebyshev, strict) and max-filter radius
        [default: 5]
    threshold_abs: Only peaks scoring above X (skimage: strictly above)
    max_score: Only peaks scoring at most X, as pytme's --max-score: with --caller maxfilter or
        recursive, candidates above X are dropped before the distance filter (so they suppress no
        neighbour), as pytme's callers do
    peak_oversampling: Sub-voxel peak positions as pytme's postprocess --peak-oversampling F: the
        score map's DFT interpolant sampled F times finer around each peak (upsampled DFT, Guizar-
        Sicairos 2008; a region of ceil(1.5 F) samples per axis), precision 1/F voxel
    threshold_rel: Only peaks scoring above Y × the map maximum
    exclude_border: No peaks within N voxels of the border (default: the minimum distance)
    num_peaks: At most K peaks, the best first
    false_positives: Raise the threshold so that at most K false positives are expected, by pytme's
        postprocess --n-false-positives rule: erfcinv(2K / (voxels × rotations)) · √2 · σ over the
        voxels inside the border
    caller: Peak caller: scikit-image's peak_local_max, pytme's maximum-filter caller, pytme's
        recursive masking, or pytom-match-pick's extraction (--particle-diameter, --num-peaks;
        --false-positives, default 1, sets its cut-off, --threshold-abs replaces it) [default:
        skimage]
    match_run: The `match` output folder whose run.json holds the run's score statistics (default: a
        run.json beside --scores, when there is one)
    allow_nan: Accept NaN scores and treat them as never a peak (NaN is never above a threshold nor
        a local maximum)
    particle_diameter: Particle diameter in Å (--caller pytom): border planes of `r =
        int(D/2/voxel)` voxels are not searched and a `(2r+1)³` cube around each particle is cleared
        (pytom's behaviour; its documentation says a ball)
    sampling_rate: Voxel size in Å of the scores, for --particle-diameter when neither the scores'
        header nor the run.json holds one
    tophat_filter: --caller pytom: keep only voxels whose white top-hat transform exceeds the cut
        fitted to its histogram (pytom's --tophat-filter: a Gaussian fitted to the log histogram,
        cut at --false-positives expected false positives)
    tophat_connectivity: Connectivity of the top-hat's structure element: 1 (faces), 2 (+ edges), 3
        (cube) [default: 1]
    tophat_bins: Bins of the top-hat histogram [default: 50]
    tomogram_mask: Mask (`.npy` or MRC, the scores' shape): scores where it is <= 0 are set to 0
        before extraction, as pytom's --tomogram-mask
    out: Output peak list: `.csv` (`z,y,x,score[,rotation,rot,tilt,psi]`; 2-D
        `y,x,score[,rotation,psi]`) or `.star` (RELION 4: _rlnCoordinateX/Y/Z = array axes 2, 1, 0)
    star_format: The STAR format of --out: relion4 (default, as above) or relion5, a RELION 5
        tomography particle file (3-D only): `_rlnTomoName`, `_rlnCenteredCoordinateX/Y/ZAngst`,
        `_rlnAngleRot/Tilt/Psi`, `_rlnAutopickFigureOfMerit` (the score), `_rlnOpticsGroup` and a
        `data_optics` table (pixel = `_rlnTomoTiltSeriesPixelSize`, voltage, Cs, amplitude contrast)
    relion5_centre: With --star-format relion5: `reader` (default; RELION's C++ reader, c/ps + X/2,
        puts the particle back exactly at i·b) or `picker` (RELION 5's picker, `(i·b − (X/2 −
        1))·ps`, what pytom-match-pick's --relion5-compat approximates; one tilt-series pixel off
        for RELION's reader)
    relion5_tomograms_star: With --star-format relion5: the RELION 5 tomograms.star giving the
        geometry and optics of --tomo-name's row
    tomo_name: With --star-format relion5: the tomogram's `_rlnTomoName` (the row of
        --relion5-tomograms-star)
    png: Also draw the central slice of the map with the peaks marked, as a 16-bit PNG
    backend: Backend: `auto` picks CUDA when compiled in and a device is present, else the CPU
        [default: auto]
    precision: Float precision of the computation (scores are always written as float32) [default:
        auto]
    trace: Write a Chrome/Perfetto trace of every instrumented step to FILE.json
    """

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
    trace: str | os.PathLike[str] | None = ...,
    out: str | os.PathLike[str] | None = ...,
    **flags: Any,
) -> SolveResult:
    """Batched conjugate gradient, as `monomorph solve` (every flag a keyword in snake_case).
    With a CPU DLPack producer as rhs, x and residual are arrays of its kind (zero copy); a GPU
    one: RunError.

    Keywords (the flags of `monomorph solve`):

    matrix: Dense matrix `(n, n)` shared by all systems, or `(batch, n, n)` one per system
    csr: CSR matrix: a folder holding `indptr.npy`, `indices.npy` and `data.npy`
    laplacian: Matrix-free Laplacian Δ (h = 1, centre −2·ndim, neighbours +1) on a grid `N[xN[xN]]`,
        unknowns in row-major order (axis 0 slowest; PhiFlow's (x, y[, z]) grids: index = ix·ny +
        iy)
    periodic: Periodic boundary for --laplacian (the same as --boundary periodic)
    boundary: Boundary of the solved field for --laplacian (for a pressure solve a closed wall is
        `neumann`, an open side `dirichlet`): one word for every side (`dirichlet`, `neumann`,
        `periodic`, or phiml's `zero`, `zero-gradient`), or a comma list with one item per axis,
        each one word or `LOWER:UPPER` (`neumann,neumann:dirichlet`)
    spacing: Grid spacing for --laplacian: one value, or one per axis comma-separated (`0.5,0.25`)
    obstacles: Obstacle mask for --laplacian, grid-shaped, 1 in obstacle cells (0/1, any numeric or
        bool dtype): those cells are not unknowns (y and x0 there are ignored, x is 0 there) and the
        faces towards them carry no flux
    trajectory: Also write trajectory.npy: x after every iteration, `(steps + 1, batch, n)` (step 0
        is x0; the state at step k is what a solve with --max-iter k returns)
    rhs: Right-hand sides `(batch, n)` (or `(n,)` for one system)
    x0: Initial guesses, same shape as --rhs (default zeros)
    method: CG variant [default: cg]
    preconditioner: Preconditioner (--method cg only): Jacobi divides by the operator's diagonal,
        which must have no zero [default: none]
    rtol: Relative tolerance on ‖y − A·x‖ (to ‖y‖), finite and ≥ 0 [default: 0.00001]
    atol: Absolute tolerance on ‖y − A·x‖, finite and ≥ 0 [default: 0]
    max_iter: Iteration limit per system (at least 1) [default: 1000]
    out: Output folder: x.npy, residual.npy, result.json
    backend: Backend: `auto` picks CUDA when compiled in and a device is present, else the CPU
        [default: auto]
    precision: Float precision of the computation (scores are always written as float32) [default:
        auto]
    trace: Write a Chrome/Perfetto trace of every instrumented step to FILE.json
    """
