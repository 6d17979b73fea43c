//! Exit codes of `trainer doctor`, `trainer mig-pick` and the CUDA preflight of train commands,
//! as numbers: each is [`Exit::code`] of its variant in [`crate::exit::Exit`], the one table of
//! the binary's codes (meanings and fixes are documented there). Reports keep codes as numbers
//! (`DoctorReport::exit_code`, `--json`); these names compare against them.

pub(crate) use crate::exit::Exit;

/// [`Exit::Ok`].
pub const OK: u8 = Exit::Ok.code();
/// [`Exit::NoDriver`].
pub const NO_DRIVER: u8 = Exit::NoDriver.code();
/// [`Exit::ContainerMissingNv`].
pub const CONTAINER_MISSING_NV: u8 = Exit::ContainerMissingNv.code();
/// [`Exit::AllocatedGpuNotVisible`].
pub const ALLOCATED_GPU_NOT_VISIBLE: u8 = Exit::AllocatedGpuNotVisible.code();
/// [`Exit::NoVisibleGpu`].
pub const NO_VISIBLE_GPU: u8 = Exit::NoVisibleGpu.code();
/// [`Exit::RuntimeNewerThanDriver`].
pub const RUNTIME_NEWER_THAN_DRIVER: u8 = Exit::RuntimeNewerThanDriver.code();
/// [`Exit::UnsupportedComputeCapability`].
pub const UNSUPPORTED_COMPUTE_CAPABILITY: u8 = Exit::UnsupportedComputeCapability.code();
/// [`Exit::BadClusterEnv`].
pub const BAD_CLUSTER_ENV: u8 = Exit::BadClusterEnv.code();
/// [`Exit::MigDisabled`].
pub const MIG_DISABLED: u8 = Exit::MigDisabled.code();
/// [`Exit::MigNoneFree`].
pub const MIG_NONE_FREE: u8 = Exit::MigNoneFree.code();

/// The codes of doctor, the preflight and mig-pick (success, 10–16, 20–21) with their name and
/// one-line meaning, from [`Exit`], for `--help` texts and docs.
pub const ALL: &[(u8, &str, &str)] = &[
    row(Exit::Ok),
    row(Exit::NoDriver),
    row(Exit::ContainerMissingNv),
    row(Exit::AllocatedGpuNotVisible),
    row(Exit::NoVisibleGpu),
    row(Exit::RuntimeNewerThanDriver),
    row(Exit::UnsupportedComputeCapability),
    row(Exit::BadClusterEnv),
    row(Exit::MigDisabled),
    row(Exit::MigNoneFree),
];

const fn row(e: Exit) -> (u8, &'static str, &'static str) {
    (e.code(), e.name(), e.meaning())
}

#[cfg(test)]
mod tests {
    use crate::exit::Exit;

    #[test]
    fn codes_are_distinct_and_avoid_1_and_2() {
        let mut seen = std::collections::BTreeSet::new();
        for (code, _, _) in super::ALL {
            assert!(seen.insert(*code), "duplicate {code}");
            assert!(*code != Exit::General.code() && *code != Exit::Usage.code());
        }
    }
}
