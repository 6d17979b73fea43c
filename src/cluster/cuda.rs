//! CUDA versions: the runtime/NVRTC this build uses, what the driver supports, and which
//! compute capabilities a runtime still targets.

use serde::Serialize;

use super::vars::Vars;

/// A CUDA version, `12.4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct CudaVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl CudaVersion {
    /// A version from its parts.
    pub const fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }

    /// From NVML/CUDA's integer form, `12040` → 12.4.
    pub fn from_int(v: i32) -> Option<Self> {
        let v = u32::try_from(v).ok().filter(|&v| v > 0)?;
        Some(Self::new(v / 1000, (v % 1000) / 10))
    }

    /// Parses `12.4`, `12`, `12040` or `12.4.1`.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        if !s.contains('.') && s.len() >= 4 {
            return Self::from_int(s.parse().ok()?);
        }
        let mut parts = s.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = match parts.next() {
            Some(m) => m.parse().ok()?,
            None => 0,
        };
        Some(Self::new(major, minor))
    }
}

impl std::fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// CUDA runtime this build targets when nothing says otherwise. CubeCL reaches CUDA through
/// cudarc, whose bindings are fixed at build time; build with `CUDARC_CUDA_VERSION=12080` to
/// make that 12.8 (without it and without `nvcc`, cudarc falls back to its newest, 13.x).
pub(crate) const DEFAULT_CUDA_RUNTIME: CudaVersion = CudaVersion::new(12, 8);

/// Run-time override of the runtime version doctor and preflight assume (`12.4`, `12040`).
pub(crate) const RUNTIME_ENV: &str = "TRAINER_CUDA_RUNTIME";

/// Where the runtime version came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeTarget {
    /// The version.
    pub version: CudaVersion,
    /// `TRAINER_CUDA_RUNTIME`, `CUDARC_CUDA_VERSION at build time`, or `default`.
    pub source: String,
}

/// The runtime version this build uses: `TRAINER_CUDA_RUNTIME` at run time, else
/// `CUDARC_CUDA_VERSION` as set when this crate was built, else [`DEFAULT_CUDA_RUNTIME`].
pub(crate) fn runtime_target(vars: &Vars) -> RuntimeTarget {
    if let Some(v) = vars.get(RUNTIME_ENV).and_then(CudaVersion::parse) {
        return RuntimeTarget {
            version: v,
            source: RUNTIME_ENV.into(),
        };
    }
    if let Some(v) = option_env!("CUDARC_CUDA_VERSION").and_then(CudaVersion::parse) {
        return RuntimeTarget {
            version: v,
            source: "CUDARC_CUDA_VERSION at build time".into(),
        };
    }
    RuntimeTarget {
        version: DEFAULT_CUDA_RUNTIME,
        source: "default".into(),
    }
}

/// A compute capability, `7.0` for V100.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ComputeCapability {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
}

impl std::fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Oldest compute capability a CUDA runtime still compiles for: 11.x → 3.5, 12.x → 5.0,
/// 13.x → 7.5 (CUDA 13 dropped Maxwell, Pascal and Volta, so no V100).
pub(crate) fn min_compute_capability(runtime: CudaVersion) -> ComputeCapability {
    let (major, minor) = match runtime.major {
        0..=10 => (3, 0),
        11 => (3, 5),
        12 => (5, 0),
        _ => (7, 5),
    };
    ComputeCapability { major, minor }
}

/// Oldest CUDA runtime that knows a compute capability (A100 8.0 needs 11.0, 8.6 needs 11.1,
/// Ada 8.9 and Hopper 9.0 need 11.8, Blackwell 10.0/12.0 need 12.8).
pub(crate) fn min_runtime_for(cc: ComputeCapability) -> CudaVersion {
    match (cc.major, cc.minor) {
        (0..=7, _) => CudaVersion::new(10, 0),
        (8, 0) => CudaVersion::new(11, 0),
        (8, 1..=6) => CudaVersion::new(11, 1),
        (8, 7) => CudaVersion::new(11, 4),
        (8, _) | (9, _) => CudaVersion::new(11, 8),
        _ => CudaVersion::new(12, 8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse() {
        assert_eq!(CudaVersion::from_int(12040), Some(CudaVersion::new(12, 4)));
        assert_eq!(CudaVersion::from_int(11080), Some(CudaVersion::new(11, 8)));
        assert_eq!(CudaVersion::from_int(-1), None);
        assert_eq!(CudaVersion::parse("12.4"), Some(CudaVersion::new(12, 4)));
        assert_eq!(CudaVersion::parse("13"), Some(CudaVersion::new(13, 0)));
        assert_eq!(CudaVersion::parse("12080"), Some(CudaVersion::new(12, 8)));
        assert_eq!(CudaVersion::parse("x"), None);
        assert!(CudaVersion::new(12, 8) > CudaVersion::new(12, 4));
        assert!(CudaVersion::new(11, 8) < CudaVersion::new(12, 0));
    }

    #[test]
    fn runtime_override() {
        let t = runtime_target(&Vars::from_pairs([(RUNTIME_ENV, "11.8")]));
        assert_eq!(t.version, CudaVersion::new(11, 8));
        assert_eq!(t.source, RUNTIME_ENV);
        let t = runtime_target(&Vars::default());
        assert_ne!(t.source, RUNTIME_ENV);
    }

    #[test]
    fn volta_dropped_by_cuda_13() {
        let v100 = ComputeCapability { major: 7, minor: 0 };
        assert!(v100 >= min_compute_capability(CudaVersion::new(12, 8)));
        assert!(v100 < min_compute_capability(CudaVersion::new(13, 0)));
        let a100 = ComputeCapability { major: 8, minor: 0 };
        assert!(min_runtime_for(a100) <= CudaVersion::new(11, 1));
    }
}
