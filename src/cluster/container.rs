//! Singularity/Apptainer detection. Inside a container `SINGULARITY_CONTAINER` or
//! `APPTAINER_CONTAINER` (the image path) and `*_NAME` are set; `--nv` binds the host driver.

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
pub fn detect_container(vars: &Vars) -> Option<Container> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
