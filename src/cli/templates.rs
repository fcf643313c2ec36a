//! `monomorph match`'s templates: several `--template`s (with their `--template-mask`s) read
//! and checked for one pass, and the mirrored template of `--check-hand`.

use monomorph::HostArray;
use monomorph::work::ExtraTemplate;
use ndarray::Axis;

use super::error::{CliError, CliResult};
use super::output::read_input;

/// The template reversed along its last array axis (x): the other hand.
pub fn mirror(t: &HostArray) -> HostArray {
    let mut a = t.to_float::<f64>();
    let last = Axis(a.ndim() - 1);
    a.invert_axis(last);
    HostArray::F64(a.as_standard_layout().into_owned())
}

/// The `--template`s (the first as read, with its voxel size; the others as further
/// templates) and the first's mask, each further template with its mask: every template of
/// the first's shape, and no more `--template-mask`s than templates (one for all, or one
/// each); with several templates, none of the `exclusive` (flag, given) pairs may be given.
/// Input errors name the flag.
pub fn read_templates(
    template: &[std::path::PathBuf],
    template_mask: &[std::path::PathBuf],
    exclusive: &[(&str, bool)],
    tshape: &[usize],
) -> CliResult<(monomorph::io::Volume, Vec<ExtraTemplate>, Option<HostArray>)> {
    let (nt, nm) = (template.len(), template_mask.len());
    if nm > nt || (nm > 1 && nm != nt) {
        return Err(CliError::input(format!(
            "--template-mask: {nm} masks for {nt} template(s), expected one mask for every \
             template or one per --template"
        )));
    }
    if nt > 1 {
        for &(flag, on) in exclusive {
            if on {
                return Err(CliError::input(format!(
                    "{flag}: not with several --template ({nt} given), expected one template \
                     (statistics and corrections are defined over one template's rotations)"
                )));
            }
        }
    }
    let mut templates = Vec::with_capacity(nt);
    for (k, p) in template.iter().enumerate() {
        let t = read_input("--template", p, &[2, 3])?;
        check_same_ndim("--template", p, t.data.shape(), tshape, false)?;
        if k > 0 {
            let first: &monomorph::io::Volume = &templates[0];
            if t.data.shape() != first.data.shape() {
                return Err(CliError::input(format!(
                    "--template {}: shape {:?}, expected the shape {:?} of the first \
                     --template {} (templates matched in one pass share one shape)",
                    p.display(),
                    t.data.shape(),
                    first.data.shape(),
                    template[0].display()
                )));
            }
        }
        templates.push(t);
    }
    let mut masks = Vec::with_capacity(nm);
    for p in template_mask {
        let m = read_input("--template-mask", p, &[2, 3])?;
        check_same_ndim(
            "--template-mask",
            p,
            m.data.shape(),
            templates[0].data.shape(),
            true,
        )?;
        masks.push(m.data);
    }
    let mask_of = |k: usize| match nm {
        0 => None,
        1 => Some(masks[0].clone()),
        _ => Some(masks[k].clone()),
    };
    let mut it = templates.into_iter();
    let first = it
        .next()
        .ok_or_else(|| CliError::input("--template: expected at least one template"))?;
    let more = it
        .enumerate()
        .map(|(k, t)| ExtraTemplate {
            template: t.data,
            mask: mask_of(k + 1),
        })
        .collect();
    Ok((first, more, mask_of(0)))
}

/// An input of `flag` at `p` must have `want`'s number of axes and, with `exact`, its shape (else
/// no axis larger than `want`'s): an input error naming the flag otherwise.
pub(super) fn check_same_ndim(
    flag: &str,
    p: &std::path::Path,
    shape: &[usize],
    want: &[usize],
    exact: bool,
) -> CliResult<()> {
    let ok = shape.len() == want.len()
        && (!exact || shape == want)
        && (exact || shape.iter().zip(want).all(|(a, b)| a <= b));
    if ok {
        Ok(())
    } else {
        Err(CliError::input(format!(
            "{flag} {}: shape {shape:?}, expected {} {want:?}",
            p.display(),
            if exact {
                "the shape"
            } else {
                "as many axes as, and no larger than, the target"
            }
        )))
    }
}
