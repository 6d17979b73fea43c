//! Exit codes of `trainer doctor`, `trainer mig-pick` and the CUDA preflight of train commands.
//!
//! Each failure has its own code, so job scripts can branch on it (`case $? in 11) ...`).
//! 1 stays "any other error" and 2 is taken by argument errors (clap).

/// Everything needed is there.
pub const OK: u8 = 0;
/// No NVIDIA driver (libnvidia-ml not loadable or NVML init failed) while a GPU was required.
/// Fix: run on a GPU node, or use `--device cpu`.
pub const NO_DRIVER: u8 = 10;
/// Inside a Singularity/Apptainer container with GPUs allocated but no driver visible, while
/// the host's `/dev/nvidia*` are there and no driver library is bound: `--nv` is missing.
/// Fix: `singularity exec --nv IMAGE trainer ...`.
pub const CONTAINER_MISSING_NV: u8 = 11;
/// The scheduler allocated GPUs (Slurm/LSF/gflow variables) but no driver is visible: outside a
/// container, or inside one where `--nv` cannot help (no `/dev/nvidia*`) or was given and the
/// bound driver does not load. Fix: check the node's driver (`nvidia-smi`) and the GPU request.
pub const ALLOCATED_GPU_NOT_VISIBLE: u8 = 12;
/// The driver works but no GPU is visible to this process (`CUDA_VISIBLE_DEVICES` hides all,
/// or names devices that do not exist). Fix: unset it or list existing devices.
pub const NO_VISIBLE_GPU: u8 = 13;
/// The CUDA runtime/NVRTC this build uses is newer than the driver supports (runtime ≤ driver).
/// Fix: a newer driver, or a build for an older CUDA (`CUDARC_CUDA_VERSION`).
pub const RUNTIME_NEWER_THAN_DRIVER: u8 = 14;
/// A visible GPU's compute capability is not targeted by the CUDA runtime in use
/// (e.g. CUDA 13 dropped Volta/V100, cc 7.0). Fix: a CUDA 12 build, or another GPU.
pub const UNSUPPORTED_COMPUTE_CAPABILITY: u8 = 15;
/// The scheduler variables are missing or contradict each other. Fix: named in the message.
pub const BAD_CLUSTER_ENV: u8 = 16;
/// `mig-pick`: MIG is off on every visible GPU (or no GPU supports it).
/// Fix: use a whole GPU, or ask the admins for a MIG-enabled card.
pub const MIG_DISABLED: u8 = 20;
/// `mig-pick`: every MIG instance on the visible GPUs runs a compute process.
/// Fix: wait, or pick another node.
pub const MIG_NONE_FREE: u8 = 21;

/// Every code with its name and one-line meaning, for `--help` texts and docs.
pub const ALL: &[(u8, &str, &str)] = &[
    (OK, "ok", "all checks passed"),
    (
        NO_DRIVER,
        "no-driver",
        "no NVIDIA driver while a GPU was required",
    ),
    (
        CONTAINER_MISSING_NV,
        "container-missing-nv",
        "in a container without --nv while GPUs were allocated",
    ),
    (
        ALLOCATED_GPU_NOT_VISIBLE,
        "allocated-gpu-not-visible",
        "GPUs allocated but no driver visible",
    ),
    (
        NO_VISIBLE_GPU,
        "no-visible-gpu",
        "driver present but no GPU visible to this process",
    ),
    (
        RUNTIME_NEWER_THAN_DRIVER,
        "runtime-newer-than-driver",
        "CUDA runtime newer than the driver supports",
    ),
    (
        UNSUPPORTED_COMPUTE_CAPABILITY,
        "unsupported-compute-capability",
        "GPU not targeted by this CUDA runtime",
    ),
    (
        BAD_CLUSTER_ENV,
        "bad-cluster-env",
        "scheduler variables missing or contradictory",
    ),
    (
        MIG_DISABLED,
        "mig-disabled",
        "MIG is off on every visible GPU",
    ),
    (MIG_NONE_FREE, "mig-none-free", "every MIG instance is busy"),
];

#[cfg(test)]
mod tests {
    #[test]
    fn codes_are_distinct_and_avoid_1_and_2() {
        let mut seen = std::collections::BTreeSet::new();
        for (code, _, _) in super::ALL {
            assert!(seen.insert(*code), "duplicate {code}");
            assert!(*code != 1 && *code != 2);
        }
    }
}
