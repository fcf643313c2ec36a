//! Argument rules shared by every backend (the CPU is the reference).

use crate::backend::*;

/// The argument rules on which the CPU is the reference and every backend must agree: an
/// empty `affine_transform` source is an error (not zeros), `flip` rejects a repeated axis
/// (not a double flip), `affine_transform` takes 1 to 3 axes, `laplacian_dot` needs one
/// `active` flag per row (a short list is not "all active").
pub fn cpu_reference_argument_rules<B: Backend>(b: &B) {
    let d = b.zeros::<FloatOf<B>>(&[4, 4]).expect("zeros");
    let mut same = b.zeros::<FloatOf<B>>(&[4, 4]).expect("zeros");
    let e = b
        .flip(&d, &[1, 1], &mut same)
        .expect_err("repeated flip axis");
    assert!(e.to_string().contains("repeated"), "{e}");
    let empty = b.zeros::<FloatOf<B>>(&[0, 4]).expect("zeros");
    let id2 = [1.0, 0.0, 0.0, 1.0];
    let e = b
        .affine_transform(&empty, &id2, &[0.0; 2], Interpolation::Linear, &mut same)
        .expect_err("empty source");
    assert!(matches!(e, crate::Error::Empty(_)), "{e}");
    let mut nothing = b.zeros::<FloatOf<B>>(&[0, 4]).expect("zeros");
    b.affine_transform(&d, &id2, &[0.0; 2], Interpolation::Linear, &mut nothing)
        .expect("an empty destination has nothing to do");
    let mut id4 = [0.0; 16];
    for k in 0..4 {
        id4[k * 5] = 1.0;
    }
    let v4 = b.zeros::<FloatOf<B>>(&[2, 2, 2, 2]).expect("zeros");
    let mut w4 = b.zeros::<FloatOf<B>>(&[2, 2, 2, 2]).expect("zeros");
    assert!(
        b.affine_transform(&v4, &id4, &[0.0; 4], Interpolation::Linear, &mut w4)
            .is_err(),
        "4-D affine_transform"
    );
    let x = b.zeros::<FloatOf<B>>(&[3, 12]).expect("zeros");
    let mut y = b.zeros::<FloatOf<B>>(&[3, 12]).expect("zeros");
    for active in [&[true][..], &[], &[true, false, true, true]] {
        assert!(
            b.laplacian_dot(&[3, 4], Boundary::DirichletZero, &x, &mut y, active)
                .is_err(),
            "laplacian_dot with {} flags for 3 rows",
            active.len()
        );
    }
    let dots = b
        .laplacian_dot(
            &[3, 4],
            Boundary::DirichletZero,
            &x,
            &mut y,
            &[true, false, true],
        )
        .expect("laplacian_dot");
    assert_eq!(dots.len(), 3);
}
