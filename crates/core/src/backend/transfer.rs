//! Typed host↔device transfers: upload any real `ndarray` array, download as the element type
//! and dimension you want.
//!
//! [`Memory::upload`] and [`Memory::download`] move `ArrayD` of the device array's own element
//! type. [`Transfer`] (implemented for every backend, in the prelude) adds the conversions a
//! program otherwise writes by hand:
//!
//! ```
//! # use monomorph_core as monomorph;
//! # use monomorph_cpu::Cpu;
//! use monomorph::prelude::*;
//! use monomorph::ndarray::{Array2, Ix2};
//!
//! let b = Cpu::<Single>::new();
//! let host = Array2::from_shape_fn((4, 6), |(i, j)| (i * 6 + j) as i32); // any real type
//! let a = b.upload_array(&host)?;                // f32 on the device
//! assert_eq!(a.shape(), &[4, 6]);
//! let back = b.download_as::<f64, Ix2>(&a)?;     // f64, two axes
//! assert_eq!(back[[3, 5]], 23.0);
//! // Asking for the wrong number of axes is an error, not a panic:
//! let err = b.download_as::<f64, monomorph::ndarray::Ix3>(&a).unwrap_err();
//! assert!(err.to_string().contains("3 axes"), "{err}");
//! # Ok::<(), monomorph::Error>(())
//! ```

use std::any::{Any, TypeId};

use ndarray::{Array, ArrayBase, ArrayD, ArrayViewD, Data, Dimension, IxDyn};

use crate::backend::{Arr, ArrayMeta, FloatOf, Memory};
use crate::dtype::{Element, Real};
use crate::error::{Error, Result, fmt_shape};
use num_traits::AsPrimitive;

/// Typed transfers for every [`Memory`] backend (blanket-implemented; in the prelude).
pub trait Transfer: Memory {
    /// Uploads a host array of any real element type (`f32`, `f64`, `u8`, `i16`, `i32`, `u64`…:
    /// any plain-old-data type that converts to `f64` with `as`) and any dimension as a device array of the backend's
    /// float type ([`FloatOf<Self>`]). Values are converted as `as` does (through `f64`); an
    /// array already in the backend's float type and in standard layout is not copied on the
    /// host first.
    fn upload_array<S, D>(&self, host: &ArrayBase<S, D>) -> Result<Arr<Self, FloatOf<Self>>>
    where
        S: Data,
        S::Elem: bytemuck::Pod + AsPrimitive<f64>,
        D: Dimension,
    {
        let shape = host.shape().to_vec();
        if TypeId::of::<S::Elem>() == TypeId::of::<FloatOf<Self>>()
            && let Some(slice) = host.as_slice()
        {
            // Same type: reinterpret the standard-layout slice (a no-op cast between one type).
            let same: &[FloatOf<Self>] = bytemuck::cast_slice(slice);
            let view = ArrayViewD::from_shape(IxDyn(&shape), same)
                .map_err(|e| Error::shape("upload_array", fmt_shape(&shape), e))?;
            return self.upload(view);
        }
        let converted = host
            .mapv(|v| <FloatOf<Self> as Real>::from_f64(v.as_()))
            .into_dyn();
        self.upload(converted.view())
    }

    /// Downloads a device array (of any real element type) to the host as an array of `T` with
    /// dimension `D` (`Ix1`…`Ix6` or `IxDyn`), converting values as `as` does (through `f64`:
    /// any primitive number type). When `T` is the array's own element type the download is
    /// returned as it is: no conversion, no second host copy, and every value kept (an `i64`
    /// beyond 2^53 or a NaN's payload would not survive the trip through `f64`).
    ///
    /// Errors: [`Error::Shape`] when the array's number of axes is not `D`'s.
    fn download_as<T, D>(
        &self,
        a: &Arr<Self, impl Element + AsPrimitive<f64>>,
    ) -> Result<Array<T, D>>
    where
        T: Copy + 'static,
        f64: AsPrimitive<T>,
        D: Dimension,
    {
        same_type_download(self, a)
    }
}

/// [`Transfer::download_as`] with the element type named (`E`), so that `T == E` can be
/// recognised and the download moved out as it is.
fn same_type_download<B, E, T, D>(b: &B, a: &Arr<B, E>) -> Result<Array<T, D>>
where
    B: Memory,
    E: Element + AsPrimitive<f64>,
    T: Copy + 'static,
    f64: AsPrimitive<T>,
    D: Dimension,
{
    if let Some(n) = D::NDIM
        && n != a.ndim()
    {
        return Err(Error::shape(
            "download_as",
            format!("an array with {n} axes (the requested dimension)"),
            format!("{} axes, shape {}", a.ndim(), fmt_shape(a.shape())),
        ));
    }
    let host = b.download(a)?;
    let host: Box<dyn Any> = Box::new(host);
    let converted: ArrayD<T> = match host.downcast::<ArrayD<T>>() {
        // The same type: moved, not converted.
        Ok(same) => *same,
        Err(other) => {
            let host = other
                .downcast::<ArrayD<E>>()
                .map_err(|_| Error::invalid("download_as", "the downloaded array's type"))?;
            host.mapv(|v| {
                let wide: f64 = v.as_();
                <f64 as AsPrimitive<T>>::as_(wide)
            })
        }
    };
    converted
        .into_dimensionality::<D>()
        .map_err(|e| Error::shape("download_as", "the requested dimension", e))
}

impl<B: Memory> Transfer for B {}
