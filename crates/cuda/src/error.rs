//! The CUDA backend's error type and its conversion into [`monomorph_core::Error`].

use cudarc::cufft::result::CufftError;
use cudarc::driver::DriverError;
use cudarc::nvrtc::CompileError;
use monomorph_core::Error;

/// What can fail inside the CUDA backend. Converted into [`monomorph_core::Error`] at the API
/// boundary: [`CudaError::Unavailable`] becomes [`Error::DeviceUnavailable`], the rest
/// [`Error::Backend`] with `backend: "cuda"`.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// The driver, a device or a CUDA library is missing.
    #[error("{0}")]
    Unavailable(String),
    /// A CUDA driver call failed.
    #[error("CUDA driver error: {0}")]
    Driver(String),
    /// NVRTC could not compile the kernels (the message carries NVRTC's log).
    #[error("NVRTC compilation of the monomorph kernels failed: {0}")]
    Compile(String),
    /// A cuFFT call failed.
    #[error("cuFFT error: {0}")]
    Fft(String),
}

impl From<DriverError> for CudaError {
    fn from(e: DriverError) -> Self {
        CudaError::Driver(e.to_string())
    }
}

impl From<CufftError> for CudaError {
    fn from(e: CufftError) -> Self {
        CudaError::Fft(e.to_string())
    }
}

impl From<CompileError> for CudaError {
    fn from(e: CompileError) -> Self {
        match e {
            CompileError::CompileError {
                nvrtc,
                options,
                log,
            } => CudaError::Compile(format!(
                "{nvrtc:?} with options {options:?}; log:\n{}",
                log.to_string_lossy()
            )),
            other => CudaError::Compile(format!("{other:?}")),
        }
    }
}

impl From<CudaError> for Error {
    fn from(e: CudaError) -> Self {
        match e {
            CudaError::Unavailable(m) => Error::DeviceUnavailable(m),
            other => Error::Backend {
                backend: "cuda",
                message: other.to_string(),
            },
        }
    }
}

/// `?`-friendly conversion of cudarc results into monomorph results.
pub(crate) trait Ck<T> {
    /// Maps the library error into [`monomorph_core::Error`].
    fn ck(self) -> monomorph_core::Result<T>;
}

impl<T, E: Into<CudaError>> Ck<T> for Result<T, E> {
    fn ck(self) -> monomorph_core::Result<T> {
        self.map_err(|e| Error::from(e.into()))
    }
}
