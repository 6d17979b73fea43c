//! The NVRTC library CubeCL will compile kernels with, found the way cudarc looks for it.
//!
//! Its version is the CUDA runtime that really runs, which must not be newer than what the
//! driver supports.

use serde::Serialize;

use super::cuda::CudaVersion;

/// Library names tried in order (cudarc tries the plain name first, then versioned ones).
pub const NVRTC_LIB_NAMES: &[&str] = &[
    "libnvrtc.so",
    "libnvrtc.so.13",
    "libnvrtc.so.12",
    "libnvrtc.so.11.2",
    "libnvrtc.so.11",
];

/// An NVRTC library that loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NvrtcInfo {
    /// Library name that loaded.
    pub library: String,
    /// Its version, from `nvrtcVersion`.
    pub version: Option<CudaVersion>,
}

/// Finds NVRTC and asks its version; `None` when no library loads.
pub fn probe_nvrtc() -> Option<NvrtcInfo> {
    std::panic::catch_unwind(|| NVRTC_LIB_NAMES.iter().find_map(|name| load(name)))
        .ok()
        .flatten()
}

fn load(name: &str) -> Option<NvrtcInfo> {
    type VersionFn = unsafe extern "C" fn(*mut i32, *mut i32) -> i32;
    // SAFETY: loading NVRTC runs no initialisers with preconditions; `nvrtcVersion` has the
    // C signature `nvrtcResult nvrtcVersion(int *major, int *minor)` in every CUDA release,
    // and both pointers are valid for the call.
    unsafe {
        let lib = libloading::Library::new(name).ok()?;
        let version = lib.get::<VersionFn>(b"nvrtcVersion\0").ok().and_then(|f| {
            let (mut major, mut minor) = (0i32, 0i32);
            (f(&mut major, &mut minor) == 0).then(|| {
                CudaVersion::new(
                    u32::try_from(major).unwrap_or(0),
                    u32::try_from(minor).unwrap_or(0),
                )
            })
        });
        Some(NvrtcInfo {
            library: name.to_string(),
            version,
        })
    }
}
