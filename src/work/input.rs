//! A job's array inputs: host data, or a buffer another program owns (on a GPU or the host)
//! that the backend running the job adopts on its own device, without a host round trip.

use crate::backend::{ForeignBuffer, Location};
use crate::dispatch::PrecisionChoice;
use crate::host_array::HostArray;
use crate::{Arr, Backend, DType, FloatOf, Result};

/// One array of a [`MatchJob`](super::MatchJob): host data (read and uploaded by each backend
/// that runs the job) or a foreign buffer ([`ForeignBuffer`]: a DLPack producer's tensor),
/// adopted by the backend whose device it lives on ([`Foreign::adopt`]: one copy on that
/// device; another device is an error). Host checks of the values (finite, range) apply to
/// host data only: a foreign buffer's values are never read on the host.
#[derive(Debug, Clone)]
pub enum JobArray {
    /// Host data.
    Host(HostArray),
    /// A buffer another program owns, on a device or the host.
    Foreign(ForeignBuffer),
}

impl From<HostArray> for JobArray {
    fn from(h: HostArray) -> Self {
        JobArray::Host(h)
    }
}

impl From<ForeignBuffer> for JobArray {
    fn from(f: ForeignBuffer) -> Self {
        JobArray::Foreign(f)
    }
}

impl JobArray {
    /// The shape.
    pub fn shape(&self) -> &[usize] {
        match self {
            JobArray::Host(h) => h.shape(),
            JobArray::Foreign(f) => f.shape(),
        }
    }

    /// The host data, `None` for a foreign buffer.
    pub fn host(&self) -> Option<&HostArray> {
        match self {
            JobArray::Host(h) => Some(h),
            JobArray::Foreign(_) => None,
        }
    }

    /// Where the values live ([`Location::Host`] for host data).
    pub fn location(&self) -> Location {
        match self {
            JobArray::Host(_) => Location::Host,
            JobArray::Foreign(f) => f.location(),
        }
    }

    /// The precision a job over this target runs in by default: double for float64 (and
    /// int64 host data), else single ([`PrecisionChoice::of_input`]).
    pub fn precision(&self) -> PrecisionChoice {
        match self {
            JobArray::Host(h) => PrecisionChoice::of_input(h),
            JobArray::Foreign(f) if f.dtype() == DType::F64 => PrecisionChoice::Double,
            JobArray::Foreign(_) => PrecisionChoice::Single,
        }
    }

    /// The array on `b` in its float type: host data uploaded from its own buffer (the stored
    /// type as it is; another converted once and handed over), a foreign buffer adopted and
    /// checked there (`what` names it): a NaN or infinite value, or a float64 value beyond
    /// the float32 range in single precision (infinite once converted), is an
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) — the checks the command
    /// makes on the host for host data, made by a reduction on the device.
    pub fn to_backend<B: Backend>(&self, b: &B, what: &str) -> Result<Arr<B, FloatOf<B>>> {
        match self {
            JobArray::Host(h) => match h.float_view::<FloatOf<B>>() {
                Some(v) => b.upload(v),
                None => b.upload_owned(h.to_float::<FloatOf<B>>()),
            },
            JobArray::Foreign(f) => {
                let a = b.adopt(f)?;
                let count = b.count_nonfinite(&a)?;
                if count > 0 {
                    let single = <FloatOf<B> as crate::Element>::DTYPE == DType::F32;
                    let beyond = if f.dtype() == DType::F64 && single {
                        " (float64 values beyond the float32 range count too: use double \
                         precision)"
                    } else {
                        ""
                    };
                    return Err(crate::Error::invalid(
                        what,
                        format!(
                            "{count} NaN or infinite value(s) in the array in {}, expected \
                             finite values{beyond}",
                            f.location()
                        ),
                    ));
                }
                Ok(a)
            }
        }
    }
}
