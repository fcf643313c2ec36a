use monomorph::ndarray::{ArrayD, s};
use monomorph::prelude::*;

/// Matches `template` (with `mask`) in `target` and calls peaks, on any backend.
fn pick<B: Backend>(
    b: &B,
    target: &ArrayD<f32>,
    template: &ArrayD<f32>,
    mask: &ArrayD<f32>,
) -> monomorph::Result<Vec<Peak>> {
    let t = b.upload_array(target)?; // any real element type and dimension
    let p = b.upload_array(template)?;
    let m = b.upload_array(mask)?;
    let mut params = MatchParams::new(Score::FLC, RotationSet::uniform(3, 60.0)?);
    params.template_mask = Some(&m);
    let result = match_template(b, &t, &p, &params)?; // stays on the device
    result.peaks(b, &PeakParams::with_min_distance(4)) // each with its best rotation
}

fn main() -> monomorph::Result<()> {
    // One copy of an asymmetric 8³ particle in a 32³ volume, its corner at (10, 12, 14).
    let template = ArrayD::from_shape_fn(vec![8; 3], |i| (i[0] + 2 * i[1] + 3 * i[2]) as f32);
    let mask = ArrayD::from_elem(vec![8; 3], 1.0f32);
    let mut target = ArrayD::<f32>::zeros(vec![32; 3]);
    let mut corner = target.slice_mut(s![10..18, 12..20, 14..22]);
    corner.assign(&template);

    let peaks = pick(&Cpu::<Single>::new(), &target, &template, &mask)?;
    // let peaks = pick(&Cuda::<Single>::new(0)?, &target, &template, &mask)?; // feature "cuda"
    let best = &peaks[0];
    assert_eq!(best.coord, vec![14, 16, 18]); // where the template's centre voxel landed
    assert_eq!(best.rotation.as_ref().map(|r| r.0), Some(0)); // the identity
    println!("best peak {:?}, score {:.3}", best.coord, best.score);
    Ok(())
}
