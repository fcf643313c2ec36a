//! What a backend runs on.

/// The kind of device a backend drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    /// Host CPU cores.
    Cpu,
    /// An NVIDIA GPU through CUDA.
    Cuda,
}

impl std::fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Cuda => "cuda",
        })
    }
}

/// Description of a backend's device.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceInfo {
    /// Human name ("AMD EPYC 7B13", "NVIDIA H200").
    pub name: String,
    /// CPU or CUDA.
    pub kind: DeviceKind,
    /// Total memory in bytes.
    pub total_memory: u64,
    /// Memory available now in bytes.
    pub free_memory: u64,
    /// Worker threads (CPU) or streaming multiprocessors (GPU).
    pub processors: usize,
    /// Anything else worth showing (precision, compute capability, driver version…).
    pub description: String,
}
