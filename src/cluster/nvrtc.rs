//! The NVRTC library CubeCL compiles kernels with, found the way cudarc finds it.
//!
//! cudarc 0.19 (`dynamic-loading`) tries, for the CUDA major version it was built for
//! (`CUDARC_CUDA_VERSION`, 12 here), `libnvrtc.so`, then `libnvrtc.so.<major>`, `.12`, `.11`,
//! `.10`, `.9` and `.1` (see `cudarc::get_lib_name_candidates`): never `libnvrtc.so.13`. A node
//! with only CUDA 13's NVRTC (driver 580) therefore has an NVRTC that cudarc will not load
//! unless a directory with `libnvrtc.so -> …/libnvrtc.so.13` comes first on `LD_LIBRARY_PATH`
//! (what `scripts/gpu-check.sh` does, and what doctor advises). NVRTC's version is the CUDA
//! runtime that really runs, which must not be newer than what the driver supports.

use serde::Serialize;

use super::cuda::CudaVersion;

/// The names cudarc tries for a CUDA `major` build, in its order (Linux names only).
pub(crate) fn cudarc_names(major: u32) -> Vec<String> {
    let mut v = vec!["libnvrtc.so".to_string(), format!("libnvrtc.so.{major}")];
    for m in ["12", "11", "10", "9", "1"] {
        let name = format!("libnvrtc.so.{m}");
        if !v.contains(&name) {
            v.push(name);
        }
    }
    v
}

/// The CUDA major version cudarc was built for (`CUDARC_CUDA_VERSION` at build time, else 12).
pub(crate) fn cudarc_major() -> u32 {
    option_env!("CUDARC_CUDA_VERSION")
        .and_then(CudaVersion::parse)
        .map_or(12, |v| v.major)
}

/// Names looked for beyond cudarc's: CUDA 13's, which cudarc built for CUDA 12 skips.
pub(crate) const EXTRA_NAMES: &[&str] = &["libnvrtc.so.13"];

/// An NVRTC library that loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NvrtcInfo {
    /// Library name that loaded.
    pub library: String,
    /// Its version, from `nvrtcVersion`.
    pub version: Option<CudaVersion>,
    /// The file it was loaded from (from `/proc/self/maps`), when known.
    pub path: Option<String>,
    /// Whether cudarc (and so the CUDA backend) finds it under this name.
    pub cudarc_loads_it: bool,
}

impl NvrtcInfo {
    /// One line for reports: `libnvrtc.so.12 12.8 (/usr/local/cuda/lib64/libnvrtc.so.12)`.
    pub fn describe(&self) -> String {
        format!(
            "{} {}{}{}",
            self.library,
            self.version.map_or("?".into(), |v| v.to_string()),
            self.path
                .as_deref()
                .map_or(String::new(), |p| format!(" ({p})")),
            if self.cudarc_loads_it {
                ""
            } else {
                ", not a name cudarc looks for"
            }
        )
    }
}

/// Finds NVRTC as cudarc would (CUDA `major`), else under CUDA 13's name; `None` when no
/// library loads.
pub(crate) fn probe_nvrtc(major: u32) -> Option<NvrtcInfo> {
    let cudarc = cudarc_names(major);
    std::panic::catch_unwind(|| {
        cudarc
            .iter()
            .map(|n| (n.as_str(), true))
            .chain(EXTRA_NAMES.iter().map(|n| (*n, false)))
            .find_map(|(name, by_cudarc)| load(name, by_cudarc))
    })
    .ok()
    .flatten()
}

fn load(name: &str, cudarc_loads_it: bool) -> Option<NvrtcInfo> {
    type VersionFn = unsafe extern "C" fn(*mut i32, *mut i32) -> i32;
    // SAFETY: loading NVRTC runs no initialisers with preconditions; `nvrtcVersion` has the
    // C signature `nvrtcResult nvrtcVersion(int *major, int *minor)` in every CUDA release,
    // and both pointers are valid for the call. The library stays loaded while in use here.
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
        let path = loaded_path("libnvrtc");
        drop(lib);
        Some(NvrtcInfo {
            library: name.to_string(),
            version,
            path,
            cudarc_loads_it,
        })
    }
}

/// The file of a loaded library whose name starts with `stem`, from `/proc/self/maps`.
fn loaded_path(stem: &str) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            std::path::Path::new(p)
                .file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with(stem))
        })
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cudarc_names_for_cuda_12_skip_13() {
        let n = cudarc_names(12);
        assert_eq!(n[0], "libnvrtc.so");
        assert_eq!(n[1], "libnvrtc.so.12");
        assert!(n.contains(&"libnvrtc.so.11".to_string()));
        assert!(!n.contains(&"libnvrtc.so.13".to_string()));
        assert!(cudarc_names(13).contains(&"libnvrtc.so.13".to_string()));
    }

    #[test]
    fn probing_without_nvrtc_is_none_not_a_panic() {
        // On machines without CUDA this is None; with CUDA, a described library.
        if let Some(i) = probe_nvrtc(12) {
            assert!(!i.describe().is_empty());
        }
    }
}
