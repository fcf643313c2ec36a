//! `match`'s rotation set, chosen from its flags: `--angular-step` (with
//! `--angular-sampling-set`), `--rotations`, `--euler` or `--orientations` (with the seeded
//! search of `--orientations-uncertainty`), then `--symmetry`.

use std::path::PathBuf;

use clap::{ArgGroup, Args, ValueEnum};
use monomorph::algo::matching::{Seeds, searched_box};
use monomorph::algo::rotations::{RotationSet, Symmetry};

use super::error::{CliError, CliResult};
use super::peaks::read_rotation_set;
use super::project::Metadata;

/// The rotation-set flags of `monomorph match`.
#[derive(Args, Debug, Clone)]
#[command(group(ArgGroup::new("rotation_set").args(["rotations", "angular_step", "euler"])))]
pub struct RotationArgs {
    /// Rotation matrices `(n, d, d)` acting on the array's index order (z, y, x) (2-D: (y, x)),
    /// as pull-backs about the template centre: t_R[o] = t[R·(o − c) + c]. This is the frame
    /// of the rotations.npy that match writes; a matrix R_xyz from a tool whose arrays are
    /// (x, y, z), such as pytme reading MRC files, is P·R_xyz·P here (P reverses the axes).
    #[arg(long, value_name = "R.npy")]
    pub rotations: Option<PathBuf>,
    /// Even rotation sampling with this angular step in degrees (default 30); with
    /// --orientations, the cone's step.
    #[arg(long, short = 'a', value_name = "DEG")]
    pub angular_step: Option<f64>,
    /// Which even sampling --angular-step means (default `uniform`): monomorph's own
    /// (Hopf-fibration; see README) or `pytme`'s, the Karney set `pytme match -a DEG` picks
    /// (the nominal spacing nearest DEG), same matrices in the same order, so that
    /// rotation_index i is pytme's rotation i. pytme's matrices act on (x, y, z) (it transposes
    /// MRC data), so rotation i is stored here as P·R_i·P, the same physical rotation of the
    /// same MRC file. 3-D only. Built in: sets with a spacing of 16.29° and more (at most 1992
    /// rotations); the others need --pytme-data.
    #[arg(long, value_enum, value_name = "SET", conflicts_with_all = ["rotations", "euler", "orientations"])]
    pub angular_sampling_set: Option<SamplingSet>,
    /// pytme's data folder (site-packages/tme/data), read for --angular-sampling-set pytme when
    /// the step's set is not built in (c48n309.npy … c48u8649.npy).
    #[arg(long, value_name = "DIR", requires = "angular_sampling_set")]
    pub pytme_data: Option<PathBuf>,
    /// Seed orientations: a STAR file with _rlnAngleRot, _rlnAngleTilt, _rlnAnglePsi (RELION's
    /// angles, one row per particle, or `_label value` pairs for one seed). The rotation set
    /// is, for each distinct seed S, S itself, then C·S for every C of pytme's cone set
    /// (get_cone_rotations: the template's z axis within --orientations-cone of the seed's,
    /// sampled every --angular-step degrees, spun about the template's own z axis every
    /// --orientations-inplane-step degrees, within --orientations-inplane-range of the
    /// seed's spin). Without --orientations-uncertainty the whole set is searched at every
    /// position (positions in the file are ignored); with it, each seed searches only its own
    /// set, near its own position (a local refinement). 3-D only.
    #[arg(long, value_name = "FILE.star", requires = "orientations_cone", conflicts_with_all = ["rotations", "euler"])]
    pub orientations: Option<PathBuf>,
    /// Half-angle in degrees (0 to 180) of the cone around each --orientations seed: pytme's
    /// acceptance test, the angle between the template's z axis placed by the rotation and by
    /// the seed. 0: the seeds' in-plane spins alone.
    #[arg(long, value_name = "DEG", requires = "orientations")]
    pub orientations_cone: Option<f64>,
    /// In-plane step in degrees of the cone search (default: the --angular-step; pytme's
    /// axis_sampling).
    #[arg(long, value_name = "DEG", requires = "orientations")]
    pub orientations_inplane_step: Option<f64>,
    /// Limits the cone's in-plane spins to ±DEG about the seed's own (in (0, 180]; default
    /// 180, every spin): the spins of pytme's grid (−180 + j·360/m) within the range.
    #[arg(long, value_name = "DEG", requires = "orientations")]
    pub orientations_inplane_range: Option<f64>,
    /// Seeded search (local refinement, pytme's --orientations-uncertainty): each seed of
    /// --orientations searches only its own cone (the rotation set is each seed's own set in
    /// turn, seed by seed in file order, repeats kept, so rotation_index names the seed too;
    /// run.json `seeds` lists each seed's voxel and rotation range) at the positions within R
    /// voxels of its position: the ellipsoid Σ(y/R)² ≤ 1, y the offset x − s in the seed
    /// particle's own axes (its pose from the STAR's angles, as pytme orients its acceptance
    /// ellipsoid; the same for one R), one R or one per axis `Z,Y,X` of the particle (an axis
    /// with R = 0: the plane through the seed across it). Other positions are not
    /// searched (score −inf, rotation index −1); where neighbourhoods overlap the greater
    /// score wins (ties: the lower rotation index). Costs in proportion to the boxes around
    /// the seeds, not to the target; the target is filtered as for a whole run, so scores
    /// inside are a whole run's with that seed's rotations. Positions from the STAR's
    /// `_rlnCoordinateX/Y/Z` (voxels, array axes 2, 1, 0; `peaks --out x.star`) or RELION 5's
    /// `_rlnCenteredCoordinateX/Y/ZAngst` (`peaks --star-format relion5`; converted with the
    /// run's voxel size and size as RELION's reader does, c/ps + X/2, with the
    /// --relion5-tomograms-star row's binning, size and pixel when given; rows of other
    /// `_rlnTomoName`s than --tomo-name skipped), rounded to the nearest voxel. Not with mcc,
    /// --score-stats, --background-correction, --symmetry or --target-list.
    #[arg(long, value_name = "R|Z,Y,X", value_parser = parse_uncertainty, allow_negative_numbers = true)]
    pub orientations_uncertainty: Option<Uncertainty>,
    /// Euler angles, one `rot,tilt,psi` per line (3-D only), in RELION's convention as in STAR
    /// files: degrees, Rz(rot)·Ry(tilt)·Rz(psi) the rotation acting on (x, y, z) (intrinsic
    /// ZYZ; the transpose of RELION's Euler_angles2matrix; scipy's from_euler("ZYZ")), the
    /// same angles `peaks` writes. A first line without numbers is a header.
    #[arg(long, value_name = "E.csv")]
    pub euler: Option<PathBuf>,
    /// Point-group symmetry of the template about its z axis (array axis 0; pytme's axis 2),
    /// `Cn` or `Dn` (`D` adds n two-fold axes perpendicular to z, the first along x): the
    /// rotation set (any of the three above) is restricted to the group's fundamental domain,
    /// keeping the rotations pytme's `--symmetry` keeps (about 1/n of them for Cn, 1/2n for
    /// Dn). 2-D: Cn only. Default C1 (no restriction).
    #[arg(long, value_name = "Cn|Dn", value_parser = parse_symmetry)]
    pub symmetry: Option<Symmetry>,
}

/// `--angular-sampling-set`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplingSet {
    /// monomorph's even sampling (Hopf fibration; 2-D: an even grid).
    Uniform,
    /// pytme 0.3.6's Karney set for the step, rotation for rotation.
    Pytme,
}

/// `--orientations-uncertainty`: the seeds' radius in voxels per array axis `(z, y, x)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Uncertainty(pub [f64; 3]);

/// Parses `--orientations-uncertainty`: `R` or `Z,Y,X`, finite and non-negative voxels.
fn parse_uncertainty(s: &str) -> Result<Uncertainty, String> {
    let v: Vec<&str> = s.split(',').map(str::trim).collect();
    if v.len() != 1 && v.len() != 3 {
        return Err(format!(
            "{} values, expected one radius in voxels or three (Z,Y,X)",
            v.len()
        ));
    }
    let mut r = [0.0; 3];
    for (k, t) in v.iter().enumerate() {
        match t.parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => r[k] = x,
            _ => {
                return Err(format!(
                    "'{t}' is not a radius, expected a finite number of voxels, 0 or more"
                ));
            }
        }
    }
    if v.len() == 1 {
        r = [r[0]; 3];
    }
    Ok(Uncertainty(r))
}

/// The run's rotation set and, with `--orientations-uncertainty`, its seeds, from the flags;
/// `shape` is the target's, `voxel` its voxel size in Å when known (for centred Å seed
/// positions), `metadata` the RELION 5 project row when given.
pub fn choose(
    a: &RotationArgs,
    shape: &[usize],
    voxel: Option<f64>,
    metadata: Option<&Metadata>,
) -> CliResult<(RotationSet, Option<Seeds>)> {
    let d = shape.len();
    if let Some(u) = a.orientations_uncertainty {
        let flag = format!("--orientations-uncertainty {}", u.show());
        let Some(p) = &a.orientations else {
            return Err(CliError::input(format!(
                "{flag}: needs --orientations (the seeds' STAR file) and --orientations-cone"
            )));
        };
        if let Some(sym) = a.symmetry {
            return Err(CliError::input(format!(
                "--symmetry {sym}: not with {flag} (each seed searches its own cone), expected \
                 one of the two"
            )));
        }
        if d != 3 {
            return Err(CliError::input(format!(
                "--orientations {}: needs a 3-D target, got {d}-D",
                p.display()
            )));
        }
        let step = a.angular_step.unwrap_or(30.0);
        let angles = [
            step,
            a.orientations_inplane_step.unwrap_or(step),
            a.orientations_inplane_range.unwrap_or(180.0),
        ];
        let cone = a.orientations_cone.unwrap_or(0.0);
        let place = super::orientations::Placement {
            shape,
            voxel,
            metadata,
        };
        let (set, seeds) = super::orientations::seeded_set(p, cone, angles, u.0, &place)?;
        return Ok((set, Some(seeds)));
    }
    let rotations = if let Some(p) = &a.rotations {
        read_rotation_set("--rotations", p, d, "target")?
    } else if let Some(p) = &a.euler {
        if d != 3 {
            return Err(CliError::input(format!(
                "--euler {}: Euler angles need a 3-D target, got {d}-D",
                p.display()
            )));
        }
        RotationSet::from_relion_euler(&super::output::read_euler_input(p)?)
            .map_err(|e| CliError::from(e).about(format!("--euler {}", p.display())))?
    } else {
        rotation_set(a, d)?
    };
    let rotations = match a.symmetry {
        Some(sym) => {
            let n = rotations.len();
            let none = || {
                CliError::input(format!(
                    "--symmetry {sym}: leaves none of the {n} rotation(s) to search (none lies \
                     in the group's asymmetric unit), expected a rotation set that covers it"
                ))
            };
            match rotations.reduce_by_symmetry(sym) {
                Ok(r) if r.is_empty() => return Err(none()),
                Ok(r) => r,
                // The library cannot build an empty set: the shape error of no rotation.
                Err(monomorph::Error::Shape { .. }) => return Err(none()),
                Err(e) => return Err(CliError::for_flag(e, "--symmetry", sym.to_string())),
            }
        }
        None => rotations,
    };
    Ok((rotations, None))
}

impl Uncertainty {
    /// `R` or `Z,Y,X`, as given.
    pub fn show(&self) -> String {
        let [z, y, x] = self.0.map(super::error::show);
        if z == y && y == x {
            z
        } else {
            format!("{z},{y},{x}")
        }
    }
}

/// The rotation set of `--angular-step` (with `--angular-sampling-set`) or `--orientations`.
fn rotation_set(a: &RotationArgs, d: usize) -> CliResult<RotationSet> {
    let step = a.angular_step.unwrap_or(30.0);
    let three_d = |flag: String| -> CliResult<()> {
        if d == 3 {
            Ok(())
        } else {
            Err(CliError::input(format!(
                "{flag}: needs a 3-D target, got {d}-D"
            )))
        }
    };
    if let Some(p) = &a.orientations {
        three_d(format!("--orientations {}", p.display()))?;
        let cone = a.orientations_cone.unwrap_or(0.0);
        let inplane = a.orientations_inplane_step.unwrap_or(step);
        let range = a.orientations_inplane_range.unwrap_or(180.0);
        return super::orientations::cone_set(p, cone, [step, inplane, range]);
    }
    if let (Some(dir), Some(SamplingSet::Uniform)) = (&a.pytme_data, a.angular_sampling_set) {
        return Err(CliError::input(format!(
            "--pytme-data {}: only read with --angular-sampling-set pytme",
            dir.display()
        )));
    }
    if a.angular_sampling_set == Some(SamplingSet::Pytme) {
        three_d("--angular-sampling-set pytme".into())?;
        return super::orientations::pytme_set(step, a.pytme_data.as_deref());
    }
    RotationSet::uniform(d, step)
        .map_err(|e| CliError::for_flag(e, "--angular-step", super::error::show(step)))
}

/// `--symmetry`: a point group `Cn` or `Dn`.
fn parse_symmetry(s: &str) -> Result<Symmetry, String> {
    s.parse().map_err(|e: monomorph::Error| e.to_string())
}

/// The seed boxes a seeded search of `job` runs, each a restricted search of its own
/// (run.json's `tiles` for such a run): one per seed with rotations whose neighbourhood's box
/// meets the box the job's restriction searches.
pub fn seed_boxes(job: &monomorph::work::MatchJob, seeds: &Seeds) -> monomorph::Result<usize> {
    let mask = job.search.mask.as_ref().map(|m| m.to_float::<f32>());
    let (lo, hi) = searched_box(
        job.search.ranges.as_deref(),
        mask.as_ref().map(|m| m.view()),
        job.target.shape(),
    )?;
    Ok(seeds.boxes(&lo, &hi).count())
}

/// run.json's `seeds`: the seeded search's radius, and each seed's voxel and rotation range
/// (indices into rotations.npy).
pub fn seeds_json(s: &Seeds) -> serde_json::Value {
    serde_json::json!({
        "radius_zyx": s.radius,
        "neighbourhood": "the voxels x with sum over axes of ((x - seed)/radius)^2 <= 1 (an axis with radius 0: x = seed there)",
        "rotation_order": "seed by seed in file order, each seed's own set: the seed, then its cone",
        "n_seeds": s.seeds.len(),
        "seeds": s.seeds.iter().map(|d| serde_json::json!({
            "voxel_zyx": d.position,
            "rotations": [d.rotations.start, d.rotations.end],
        })).collect::<Vec<_>>(),
    })
}
