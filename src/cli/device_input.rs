//! Inputs that live on a device (the Python package's GPU arrays and CPU DLPack producers,
//! [`super::session::take_foreign`]): checked as [`read_input`] checks a host file, their values
//! where they live.

use std::path::PathBuf;

use monomorph::backend::ForeignBuffer;
use monomorph::io::HostArray;
use monomorph::work::{ExtraTemplate, JobArray};

use super::error::{CliError, CliResult};
use super::output::read_input;
use super::session::ARRAY;
use super::templates::check_same_ndim;

/// An input on a device ([`super::session::take_foreign`]): `dims` axes and no empty axis,
/// as [`read_input`] checks a host one (its values are checked where it lives).
pub(super) fn check_device_input(flag: &str, f: &ForeignBuffer, dims: &[usize]) -> CliResult<()> {
    let shape = f.shape();
    if !dims.contains(&shape.len()) || shape.contains(&0) {
        return Err(CliError::input(format!(
            "{flag} {ARRAY}: an array of shape {shape:?} in {}, expected a non-empty 2-D or 3-D \
             array",
            f.location()
        )));
    }
    Ok(())
}

/// The templates `template` with masks `template_mask` (see [`super::templates::read_templates`]) with their voxel sizes; one
/// template on a device (with a host mask, if any) is taken where it lives.
#[allow(clippy::type_complexity)]
pub(super) fn read_job_templates(
    template: &[PathBuf],
    template_mask: &[PathBuf],
    exclusive: &[(&str, bool)],
    tshape: &[usize],
) -> CliResult<(
    (JobArray, Option<[f32; 3]>),
    Vec<ExtraTemplate>,
    Option<HostArray>,
)> {
    let on_device = template
        .first()
        .and_then(|p| super::session::take_foreign("--template", p));
    let Some(f) = on_device else {
        let (t, more, mask) =
            super::templates::read_templates(template, template_mask, exclusive, tshape)?;
        return Ok(((JobArray::Host(t.data), t.voxel_size), more, mask));
    };
    check_device_input("--template", &f, &[2, 3])?;
    let p = &template[0];
    check_same_ndim("--template", p, f.shape(), tshape, false)?;
    if template.len() > 1 || template_mask.len() > 1 {
        return Err(CliError::input(
            "--template: one template on a device (with at most one --template-mask), expected \
             host arrays for several templates",
        ));
    }
    let mask = match template_mask.first() {
        Some(mp) => {
            let m = read_input("--template-mask", mp, &[2, 3])?;
            check_same_ndim("--template-mask", mp, m.data.shape(), f.shape(), true)?;
            Some(m.data)
        }
        None => None,
    };
    Ok(((JobArray::Foreign(f), None), Vec::new(), mask))
}
