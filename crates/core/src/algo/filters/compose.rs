//! [`FilterSpec`] (tool-neutral parameters) and [`Filters`] (the built filters, a
//! [`SpectralFilter`]), composed as pytme 0.3.6's `match_template.py::setup_filter` does.
//!
//! Template filter (on the template box), in pytme's order: the per-tilt stack (exposure
//! weights × per-tilt CTF) gridded into 3-D, the wedge, the single CTF, the band-pass, the
//! whitening curve; target filter (on the FFT box): the binary continuous wedge over the tilt
//! range, the band-pass, the whitening curve; both cast to float32 with DC = 0.
//!
//! Frames: pytme builds every filter for its in-memory arrays, which are MRC data transposed
//! ((x, y, z)). [`AxisOrder::Reversed`] says the arrays here are the reverse ((z, y, x), as
//! numpy and mrcfile read an MRC): the filters are then built exactly as pytme builds them for
//! the reversed arrays (same float32 rounding, same wedge geometry) and returned in the
//! arrays' own axis order. A gridded template filter is not point symmetric on pytme's `k_z =
//! 0` plane, where pytme's inverse real FFT uses `(H(k) + H(-k)) / 2`; in the reversed frame
//! the returned weight is that effective, point-symmetric filter, so that an inverse FFT over
//! the other half grid applies the same filter pytme applies.

use ndarray::{ArrayD, IxDyn};

use super::SpectralFilter;
use super::bandpass::gaussian_bandpass_at;
use super::ctf::{CtfCorrection, Microscope, TiltCtf, single_ctf, tilt_ctf};
use super::grid::{for_each_freq, full_from_fn, half_shape, int_freq};
use super::wedge::{ContinuousWedge, exposure_slices, reconstruct, step_wedge};
use super::whitening::{Curve, ShellWeighting, whitening_profile};
use crate::backend::{Arr, ArrayMeta, Backend, FloatOf};
use crate::error::{Error, Result};
pub use crate::shape::AxisOrder;

/// The missing wedge.
#[derive(Clone, Debug, PartialEq)]
pub enum WedgeSpec {
    /// A continuous wedge between two tilt angles (degrees; `--tilt-angles a,b`, absolute
    /// values taken: `a` bounds the negative-tilt side).
    Continuous {
        /// First tilt limit in degrees.
        a: f64,
        /// Second tilt limit in degrees.
        b: f64,
    },
    /// A tilt series: one angle per tilt (degrees), with the accumulated dose per tilt (e/Å²)
    /// when known (needed by the relion and grigorieff weightings).
    TiltSeries {
        /// Tilt angles in degrees.
        angles: Vec<f64>,
        /// Dose per tilt in e/Å², if known.
        doses: Option<Vec<f64>>,
    },
}

/// How each tilt of a tilt series is weighted (`--tilt-weighting`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TiltWeighting {
    /// `cos(angle)`.
    Angle,
    /// RELION's exposure filter `exp(-dose k²) cos(angle)`.
    Relion,
    /// Grant & Grigorieff's exposure filter.
    Grigorieff,
}

/// The contrast transfer function applied to the template.
#[derive(Clone, Debug, PartialEq)]
pub enum CtfSpec {
    /// One CTF for the whole box (`--defocus`).
    Single {
        /// Defocus in Å (positive = underfocus).
        defocus: f64,
        /// Additional phase shift in radians.
        phase_shift: f64,
    },
    /// One CTF per tilt (a CTF file), gridded into 3-D with the tilt series' angles.
    PerTilt(Vec<TiltCtf>),
}

/// Tool-neutral parameters of the Fourier filters of a template-matching run.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterSpec {
    /// Voxel size in Å (pytme uses the template's).
    pub voxel_size: f64,
    /// The missing wedge, if any.
    pub wedge: Option<WedgeSpec>,
    /// `[opening, tilt]` as ARRAY axes; `None` = pytme's default `2,0` (pytme numbering),
    /// which needs a 3-D box.
    pub wedge_axes: Option<[usize; 2]>,
    /// Per-tilt weighting of a tilt series (ignored for a continuous wedge, as pytme does).
    pub tilt_weighting: Option<TiltWeighting>,
    /// The CTF, if any.
    pub ctf: Option<CtfSpec>,
    /// Voltage, Cs and amplitude contrast of the CTF.
    pub microscope: Microscope,
    /// How the CTF enters the template filter.
    pub ctf_correction: CtfCorrection,
    /// Gaussian low-pass edge in Å.
    pub lowpass: Option<f64>,
    /// Gaussian high-pass edge in Å.
    pub highpass: Option<f64>,
    /// Whiten with the target's radial power spectrum.
    pub whiten: bool,
    /// Filter the target too (wedge, band, whitening; never the CTF).
    pub filter_target: bool,
    /// How the arrays' axes relate to pytme's.
    pub axis_order: AxisOrder,
}

impl FilterSpec {
    /// No filter, with pytme's defaults (300 kV, Cs 2.7e7 Å, amplitude contrast 0.07,
    /// phase-flip, target filtered) and voxel size `voxel_size` Å.
    pub fn new(voxel_size: f64) -> Self {
        FilterSpec {
            voxel_size,
            wedge: None,
            wedge_axes: None,
            tilt_weighting: None,
            ctf: None,
            microscope: Microscope {
                voltage_kv: 300.0,
                cs: 2.7e7,
                amplitude_contrast: 0.07,
            },
            ctf_correction: CtfCorrection::PhaseFlip,
            lowpass: None,
            highpass: None,
            whiten: false,
            filter_target: true,
            axis_order: AxisOrder::Reversed,
        }
    }

    /// Whether any filter is asked for.
    pub fn is_empty(&self) -> bool {
        self.wedge.is_none()
            && self.ctf.is_none()
            && self.lowpass.is_none()
            && self.highpass.is_none()
            && !self.whiten
    }

    /// The permutation `perm[a]` = array axis of pytme axis `a`.
    fn perm(&self, ndim: usize) -> Vec<usize> {
        self.axis_order.perm(ndim)
    }

    /// The wedge axes in pytme's frame, checked for `ndim` axes.
    fn pytme_wedge_axes(&self, ndim: usize) -> Result<(usize, usize)> {
        let (o, t) = match self.wedge_axes {
            None => {
                if ndim != 3 {
                    return Err(Error::invalid(
                        "wedge-axes",
                        format!(
                            "the default wedge axes 2,0 need a 3-D box; give --wedge-axes for \
                             {ndim}-D data (e.g. 1,0)"
                        ),
                    ));
                }
                return Ok((2, 0));
            }
            Some([o, t]) => (o, t),
        };
        if o >= ndim || t >= ndim {
            return Err(Error::invalid(
                "wedge-axes",
                format!("axes {o},{t} out of range for {ndim}-D data"),
            ));
        }
        if o == t {
            return Err(Error::invalid(
                "wedge-axes",
                format!("the opening and tilt axes must differ (got {o},{t})"),
            ));
        }
        let perm = self.perm(ndim);
        let inv = |a: usize| perm.iter().position(|&p| p == a).expect("a permutation");
        Ok((inv(o), inv(t)))
    }

    /// Checks the parameters for data of `ndim` axes (one clear error per problem).
    pub fn validate(&self, ndim: usize) -> Result<()> {
        let pos = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(Error::invalid(
                    name,
                    format!("must be a positive number, got {v}"),
                ))
            }
        };
        pos("sampling-rate", self.voxel_size)?;
        if let Some(l) = self.lowpass {
            pos("lowpass", l)?;
        }
        if let Some(h) = self.highpass {
            pos("highpass", h)?;
        }
        if let (Some(l), Some(h)) = (self.lowpass, self.highpass)
            && l >= h
        {
            return Err(Error::invalid(
                "lowpass",
                format!("the lowpass ({l} Å) must be below the highpass ({h} Å)"),
            ));
        }
        let m = &self.microscope;
        if self.ctf.is_some() {
            pos("acceleration-voltage", m.voltage_kv)?;
            if !(m.cs.is_finite() && m.cs >= 0.0) {
                return Err(Error::invalid(
                    "spherical-aberration",
                    format!("must be >= 0, got {}", m.cs),
                ));
            }
            if !(0.0..1.0).contains(&m.amplitude_contrast) {
                return Err(Error::invalid(
                    "amplitude-contrast",
                    format!("must be in [0, 1), got {}", m.amplitude_contrast),
                ));
            }
        }
        let angle_ok = |a: f64| a.is_finite() && a.abs() <= 90.0;
        let n_tilts = match &self.wedge {
            None => None,
            Some(WedgeSpec::Continuous { a, b }) => {
                if !angle_ok(*a) || !angle_ok(*b) {
                    return Err(Error::invalid(
                        "tilt-angles",
                        format!("tilt limits must be within ±90 degrees, got {a},{b}"),
                    ));
                }
                None
            }
            Some(WedgeSpec::TiltSeries { angles, doses }) => {
                if angles.is_empty() {
                    return Err(Error::invalid("tilt-angles", "no tilt angles"));
                }
                if let Some(a) = angles.iter().find(|a| !angle_ok(**a)) {
                    return Err(Error::invalid(
                        "tilt-angles",
                        format!("tilt angles must be within ±90 degrees, got {a}"),
                    ));
                }
                if let Some(d) = doses {
                    if d.len() != angles.len() {
                        return Err(Error::invalid(
                            "tilt-angles",
                            format!("{} doses for {} tilt angles", d.len(), angles.len()),
                        ));
                    }
                    if let Some(v) = d.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
                        return Err(Error::invalid(
                            "tilt-angles",
                            format!("doses must be >= 0, got {v}"),
                        ));
                    }
                }
                if matches!(
                    self.tilt_weighting,
                    Some(TiltWeighting::Relion | TiltWeighting::Grigorieff)
                ) && doses.is_none()
                {
                    return Err(Error::invalid(
                        "tilt-weighting",
                        "relion and grigorieff weighting need the dose per tilt (a tilt file \
                         with a weights column); pytme would silently use dose 1",
                    ));
                }
                if ndim != 3 && angles.len() != 2 {
                    return Err(Error::invalid(
                        "tilt-angles",
                        "a tilt-series wedge needs 3-D data (use a two-angle range a,b in 2-D)",
                    ));
                }
                Some(angles.len())
            }
        };
        if self.wedge.is_some() {
            self.pytme_wedge_axes(ndim)?;
        }
        match &self.ctf {
            Some(CtfSpec::Single {
                defocus,
                phase_shift,
            }) if !defocus.is_finite() || !phase_shift.is_finite() => {
                return Err(Error::invalid("defocus", "must be a finite number"));
            }
            None | Some(CtfSpec::Single { .. }) => {}
            Some(CtfSpec::PerTilt(tilts)) => {
                let Some(n) = n_tilts else {
                    return Err(Error::invalid(
                        "ctf-file",
                        "a per-tilt CTF needs the tilt angles of a tilt series (--tilt-angles FILE)",
                    ));
                };
                if tilts.len() != n {
                    return Err(Error::invalid(
                        "ctf-file",
                        format!("{} CTF lines for {n} tilt angles", tilts.len()),
                    ));
                }
                if ndim != 3 {
                    return Err(Error::invalid("ctf-file", "a per-tilt CTF needs 3-D data"));
                }
            }
        }
        Ok(())
    }

    /// Builds the filters for a run on `target` (array frame) with a template box of
    /// `template_shape`: validates, and estimates the whitening spectrum from the target with
    /// the backend's own FFT when asked.
    pub fn build<B: Backend>(
        &self,
        b: &B,
        target: &Arr<B, FloatOf<B>>,
        template_shape: &[usize],
    ) -> Result<Filters> {
        let ndim = target.shape().len();
        if template_shape.len() != ndim {
            return Err(Error::invalid(
                "template",
                format!("{} axes, the target has {ndim}", template_shape.len()),
            ));
        }
        self.validate(ndim)?;
        let perm = self.perm(ndim);
        let curve = if self.whiten {
            let axes = if self.wedge.is_some() {
                Some(self.pytme_wedge_axes(ndim)?)
            } else {
                None
            };
            let angles: Option<Vec<f64>> = match &self.wedge {
                None => None,
                Some(WedgeSpec::Continuous { a, b }) => Some(vec![a.abs(), b.abs()]),
                Some(WedgeSpec::TiltSeries { angles, .. }) => Some(angles.clone()),
            };
            let tshape_p: Vec<usize> = perm.iter().map(|&a| template_shape[a]).collect();
            let weighting = match (&angles, axes) {
                (Some(a), Some((o, t))) => Some(ShellWeighting {
                    angles: a,
                    opening: o,
                    tilt: t,
                }),
                _ => None,
            };
            let profile = whitening_profile(b, target, &tshape_p, &perm, weighting)?;
            Some((profile.clone(), Curve::new(&profile)))
        } else {
            None
        };
        Ok(Filters {
            spec: self.clone(),
            ndim,
            whitening: curve,
        })
    }
}

/// Built filters: a [`SpectralFilter`] (see [`FilterSpec::build`]).
#[derive(Clone, Debug)]
pub struct Filters {
    spec: FilterSpec,
    ndim: usize,
    whitening: Option<(Vec<f64>, Curve)>,
}

fn f32_angles(v: &[f64]) -> Vec<f64> {
    v.iter().map(|&a| a as f32 as f64).collect()
}

impl Filters {
    /// The parameters these filters were built from.
    pub fn spec(&self) -> &FilterSpec {
        &self.spec
    }

    /// The whitening profile (`P/2 + 1` values from DC to Nyquist), when whitening.
    pub fn whitening_profile(&self) -> Option<&[f64]> {
        self.whitening.as_ref().map(|(p, _)| p.as_slice())
    }

    fn check_shape(&self, shape: &[usize]) -> Result<()> {
        if shape.len() != self.ndim || shape.contains(&0) {
            return Err(Error::invalid(
                "filters",
                format!(
                    "a weight was asked for shape {shape:?}, the filters were built for {}-D data",
                    self.ndim
                ),
            ));
        }
        Ok(())
    }

    /// The template filter's full grid in pytme's frame (`pshape`), before float32 rounding;
    /// `None` when there is no template filter.
    fn template_full(&self, pshape: &[usize]) -> Result<Option<ArrayD<f64>>> {
        let s = &self.spec;
        let vs = s.voxel_size;
        let mut parts: Vec<ArrayD<f64>> = Vec::new();
        let axes = if s.wedge.is_some() {
            Some(s.pytme_wedge_axes(pshape.len())?)
        } else {
            None
        };
        let mut stack: Option<Vec<ArrayD<f64>>> = None;
        let mut stack_w: Option<Vec<ArrayD<f64>>> = None;
        let mut rec_angles: Option<Vec<f64>> = None;
        match (&s.wedge, axes) {
            (Some(WedgeSpec::Continuous { a, b }), Some((o, t))) => {
                let w = ContinuousWedge::new((*a, *b), pshape, o, t);
                parts.push(full_from_fn(pshape, |u| {
                    if w.keeps(u, pshape) { 1.0 } else { 0.0 }
                }));
            }
            (Some(WedgeSpec::TiltSeries { angles, doses }), Some((o, t))) => {
                let angles = f32_angles(angles);
                match s.tilt_weighting {
                    Some(wt @ (TiltWeighting::Relion | TiltWeighting::Grigorieff)) => {
                        let d = doses.as_ref().expect("validated: doses present");
                        let sl = exposure_slices(
                            pshape,
                            &angles,
                            d,
                            o,
                            vs,
                            wt == TiltWeighting::Grigorieff,
                        )?;
                        stack = Some(sl);
                        rec_angles = Some(angles.clone());
                    }
                    wt => parts.push(step_wedge(
                        pshape,
                        &angles,
                        o,
                        t,
                        wt == Some(TiltWeighting::Angle),
                    )?),
                }
            }
            _ => {}
        }
        if let Some(CtfSpec::PerTilt(tilts)) = &s.ctf {
            let (o, _) = axes.expect("validated: a tilt series");
            let Some(WedgeSpec::TiltSeries { angles, .. }) = &s.wedge else {
                unreachable!("validated: a per-tilt CTF has a tilt series");
            };
            if pshape.iter().any(|&n| n != pshape[0]) {
                return Err(Error::invalid(
                    "ctf-file",
                    "a per-tilt CTF needs a cubic template box (as pytme's slice grid)",
                ));
            }
            let sl: Vec<usize> = (0..pshape.len())
                .filter(|&a| a != o)
                .map(|a| pshape[a])
                .collect();
            let raw: Vec<ArrayD<f64>> = tilts
                .iter()
                .map(|tc| tilt_ctf(&sl, vs, tc, &s.microscope))
                .collect();
            let (data, w): (Vec<ArrayD<f64>>, Option<Vec<ArrayD<f64>>>) = match s.ctf_correction {
                CtfCorrection::PhaseFlip => (
                    raw.iter().map(|r| r.mapv(|v| v * v)).collect(),
                    Some(raw.iter().map(|r| r.mapv(f64::abs)).collect()),
                ),
                CtfCorrection::Raw => (raw, None),
            };
            let data = match stack.take() {
                None => data,
                Some(ex) => data.iter().zip(&ex).map(|(d, e)| d * e).collect(),
            };
            stack = Some(data);
            stack_w = w;
            rec_angles = Some(f32_angles(angles));
        }
        if let Some(st) = stack {
            let (o, t) = axes.expect("a stack comes with a tilt series");
            let st: Vec<ArrayD<f64>> = st.iter().map(|a| a.mapv(|v| v as f32 as f64)).collect();
            let sw: Option<Vec<ArrayD<f64>>> =
                stack_w.map(|w| w.iter().map(|a| a.mapv(|v| v as f32 as f64)).collect());
            let angles = rec_angles.expect("set with the stack");
            parts.insert(0, reconstruct(&st, sw.as_deref(), pshape, &angles, o, t)?);
        }
        if let Some(CtfSpec::Single {
            defocus,
            phase_shift,
        }) = &s.ctf
        {
            parts.push(single_ctf(
                pshape,
                vs,
                *defocus,
                *phase_shift,
                &s.microscope,
                s.ctf_correction,
            ));
        }
        if s.lowpass.is_some() || s.highpass.is_some() {
            parts.push(full_from_fn(pshape, |u| {
                gaussian_bandpass_at(u, pshape, vs, s.lowpass, s.highpass)
            }));
        }
        if let Some((_, c)) = &self.whitening {
            parts.push(full_from_fn(pshape, |u| c.at(u, pshape)));
        }
        let mut it = parts.into_iter();
        let Some(mut out) = it.next() else {
            return Ok(None);
        };
        for p in it {
            out *= &p;
        }
        Ok(Some(out))
    }

    /// The target filter's value at pytme-frame integer frequency `up` of `pshape`.
    fn target_at(&self, up: &[i64], pshape: &[usize], wedge: Option<&ContinuousWedge>) -> f64 {
        let s = &self.spec;
        let mut v = 1.0;
        if let Some(w) = wedge {
            v *= if w.keeps(up, pshape) { 1.0 } else { 0.0 };
        }
        if s.lowpass.is_some() || s.highpass.is_some() {
            v *= gaussian_bandpass_at(up, pshape, s.voxel_size, s.lowpass, s.highpass);
        }
        if let Some((_, c)) = &self.whitening {
            v *= c.at(up, pshape);
        }
        v
    }
}

impl SpectralFilter for Filters {
    fn template_weight(&self, shape: &[usize]) -> Result<Option<ArrayD<f64>>> {
        self.check_shape(shape)?;
        let d = shape.len();
        let perm = self.spec.perm(d);
        let pshape: Vec<usize> = perm.iter().map(|&a| shape[a]).collect();
        let Some(full) = self.template_full(&pshape)? else {
            return Ok(None);
        };
        let full = full.mapv(|v| v as f32 as f64);
        let reversed = self.spec.axis_order == AxisOrder::Reversed;
        let nl = pshape[d - 1] as i64;
        let mut out = ArrayD::<f64>::zeros(IxDyn(&half_shape(shape)));
        let mut up = vec![0i64; d];
        let mut pidx = vec![0usize; d];
        let mut nidx = vec![0usize; d];
        let hs = half_shape(shape);
        for_each_freq(&hs, |idx, _| {
            for (a, &pa) in perm.iter().enumerate() {
                up[a] = int_freq(idx[pa], shape[pa]);
            }
            for a in 0..d {
                let n = pshape[a] as i64;
                pidx[a] = up[a].rem_euclid(n) as usize;
                nidx[a] = (-up[a]).rem_euclid(n) as usize;
            }
            let here = full[IxDyn(&pidx)];
            let v = if !reversed {
                here
            } else {
                let ul = up[d - 1];
                let edge = ul == 0 || (nl % 2 == 0 && ul == -nl / 2);
                if edge {
                    0.5 * (here + full[IxDyn(&nidx)])
                } else if ul > 0 {
                    here
                } else {
                    full[IxDyn(&nidx)]
                }
            };
            out[IxDyn(idx)] = v;
        });
        out[IxDyn(&vec![0; d])] = 0.0;
        Ok(Some(out))
    }

    fn target_weight(&self, fast_shape: &[usize]) -> Result<Option<ArrayD<f64>>> {
        self.check_shape(fast_shape)?;
        let s = &self.spec;
        if !s.filter_target
            || (s.wedge.is_none() && s.lowpass.is_none() && s.highpass.is_none() && !s.whiten)
        {
            return Ok(None);
        }
        let d = fast_shape.len();
        let perm = s.perm(d);
        let pshape: Vec<usize> = perm.iter().map(|&a| fast_shape[a]).collect();
        let wedge = match &s.wedge {
            None => None,
            Some(w) => {
                let (o, t) = s.pytme_wedge_axes(d)?;
                let (a, b) = match w {
                    WedgeSpec::Continuous { a, b } => (*a, *b),
                    WedgeSpec::TiltSeries { angles, .. } => {
                        let f = f32_angles(angles);
                        let lo = f.iter().copied().fold(f64::INFINITY, f64::min);
                        let hi = f.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                        (lo, hi)
                    }
                };
                Some(ContinuousWedge::new((a, b), &pshape, o, t))
            }
        };
        let hs = half_shape(fast_shape);
        let mut up = vec![0i64; d];
        let mut vals = Vec::with_capacity(hs.iter().product());
        for_each_freq(&hs, |idx, _| {
            for (a, &pa) in perm.iter().enumerate() {
                up[a] = int_freq(idx[pa], fast_shape[pa]);
            }
            vals.push(self.target_at(&up, &pshape, wedge.as_ref()) as f32 as f64);
        });
        let mut out = ArrayD::from_shape_vec(IxDyn(&hs), vals).expect("half grid length");
        out[IxDyn(&vec![0; d])] = 0.0;
        Ok(Some(out))
    }
}
