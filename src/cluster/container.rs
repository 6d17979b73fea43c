//! Singularity/Apptainer detection. Inside a container `SINGULARITY_CONTAINER` or
//! `APPTAINER_CONTAINER` (the image path) and `*_NAME` are set; `--nv` binds the host driver.
//!
//! What `--nv` leaves behind tells "no `--nv`" from "`--nv` on a node without a driver":
//! it binds the host's driver libraries (`libcuda.so.1`, `libnvidia-ml.so.1`, ...) into
//! `/.singularity.d/libs`, and the host's `/dev/nvidia*` device files are visible in the
//! container whenever the host has a loaded driver (Apptainer mounts the host's `/dev`; `--nv`
//! binds the devices even under `--contain`). [`NvEvidence::probe`] reads both under a root
//! directory, so tests use a fake tree.

use std::path::Path;

use serde::Serialize;

use super::vars::Vars;

/// The container runtime this process runs in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Container {
    /// `apptainer` or `singularity`.
    pub runtime: String,
    /// Image path or name, as the runtime reports it.
    pub image: Option<String>,
}

/// The container from the variables, if any (Apptainer first: it also sets some SINGULARITY_ names).
pub(crate) fn detect_container(vars: &Vars) -> Option<Container> {
    for (runtime, image_var, name_var) in [
        ("apptainer", "APPTAINER_CONTAINER", "APPTAINER_NAME"),
        ("singularity", "SINGULARITY_CONTAINER", "SINGULARITY_NAME"),
    ] {
        if vars.has(image_var) || vars.has(name_var) {
            return Some(Container {
                runtime: runtime.into(),
                image: vars
                    .get(image_var)
                    .or(vars.get(name_var))
                    .map(str::to_string),
            });
        }
    }
    None
}

/// Where `--nv` binds the host's driver libraries inside the container.
pub const NV_LIBS_DIR: &str = ".singularity.d/libs";

/// What a container shows of the host's NVIDIA driver.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NvEvidence {
    /// Driver libraries found in `/.singularity.d/libs` (bound there by `--nv`).
    pub driver_libs: Vec<String>,
    /// `/dev/nvidia*` device files (present when the host's driver is loaded).
    pub devices: Vec<String>,
}

impl NvEvidence {
    /// Reads `<root>/.singularity.d/libs` and `<root>/dev` (root is `/` for real).
    pub fn probe(root: &Path) -> Self {
        let names = |dir: &Path, keep: &dyn Fn(&str) -> bool| -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| keep(n))
                .collect();
            v.sort();
            v
        };
        Self {
            driver_libs: names(&root.join(NV_LIBS_DIR), &|n| {
                n.starts_with("libcuda.so") || n.starts_with("libnvidia-ml.so")
            }),
            devices: names(&root.join("dev"), &|n| n.starts_with("nvidia")),
        }
    }

    /// `--nv` certainly was given: the host's driver libraries are bound in.
    pub fn nv_bound(&self) -> bool {
        !self.driver_libs.is_empty()
    }

    /// The host's driver is loaded: its device files are visible.
    pub fn host_has_devices(&self) -> bool {
        !self.devices.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_a_fake_tree() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(NvEvidence::probe(t.path()), NvEvidence::default());
        std::fs::create_dir_all(t.path().join(NV_LIBS_DIR)).unwrap();
        std::fs::create_dir_all(t.path().join("dev")).unwrap();
        for f in [
            ".singularity.d/libs/libcuda.so.1",
            ".singularity.d/libs/libnvidia-ml.so.1",
            ".singularity.d/libs/libEGL.so",
            "dev/nvidia0",
            "dev/nvidiactl",
            "dev/null",
        ] {
            std::fs::write(t.path().join(f), "").unwrap();
        }
        let e = NvEvidence::probe(t.path());
        assert_eq!(e.driver_libs, ["libcuda.so.1", "libnvidia-ml.so.1"]);
        assert_eq!(e.devices, ["nvidia0", "nvidiactl"]);
        assert!(e.nv_bound() && e.host_has_devices());
    }

    #[test]
    fn detects_both_runtimes() {
        let a = detect_container(&Vars::from_pairs([("APPTAINER_CONTAINER", "/x/t.sif")])).unwrap();
        assert_eq!(
            (a.runtime.as_str(), a.image.as_deref()),
            ("apptainer", Some("/x/t.sif"))
        );
        let s = detect_container(&Vars::from_pairs([("SINGULARITY_NAME", "t.sif")])).unwrap();
        assert_eq!(s.runtime, "singularity");
        assert!(detect_container(&Vars::default()).is_none());
    }
}
