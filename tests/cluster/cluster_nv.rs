//! The `--nv` diagnosis inside a container, from fake container trees: what `--nv` binds
//! (`/.singularity.d/libs/libcuda.so.1`, `libnvidia-ml.so.1`) and the host's `/dev/nvidia*`
//! tell "no --nv" (add it) from "--nv on a node without a driver" (it cannot help) and from
//! "--nv given, driver libraries bound, but the driver does not load".

use std::path::Path;

use trainer::cluster::container::{NV_LIBS_DIR, NvEvidence};
use trainer::cluster::gpu::DriverProbe;
use trainer::cluster::{DoctorReport, Vars, diagnose_with, exit_codes};

/// A Slurm GPU job inside Apptainer.
fn slurm_gpu_job_in_apptainer() -> Vars {
    Vars::from_pairs([
        ("SLURM_JOB_ID", "4242"),
        ("SLURM_JOB_NODELIST", "ai03"),
        ("SLURM_JOB_GPUS", "0"),
        ("CUDA_VISIBLE_DEVICES", "0"),
        ("APPTAINER_CONTAINER", "/ibmgpfs/me/trainer.sif"),
    ])
}

fn absent() -> DriverProbe {
    DriverProbe::Absent {
        reason: "libnvidia-ml.so.1: cannot open shared object file".into(),
    }
}

/// A container root with the given files (empty).
fn tree(files: &[&str]) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join(NV_LIBS_DIR)).unwrap();
    std::fs::create_dir_all(t.path().join("dev")).unwrap();
    for f in files {
        std::fs::write(t.path().join(f), "").unwrap();
    }
    t
}

fn doctor(root: &Path, vars: &Vars, require_gpu: bool) -> (DoctorReport, String) {
    let nv = NvEvidence::probe(root);
    let r = diagnose_with(vars, absent(), None, Some(nv), require_gpu);
    let failure = r
        .failures()
        .next()
        .map(|f| format!("{} / fix: {}", f.message, f.fix.as_deref().unwrap_or("")))
        .unwrap_or_default();
    (r, failure)
}

#[test]
fn host_with_devices_but_no_nv_says_add_nv() {
    let t = tree(&["dev/nvidia0", "dev/nvidiactl", "dev/null"]);
    let (r, f) = doctor(t.path(), &slurm_gpu_job_in_apptainer(), false);
    assert_eq!(r.exit_code, exit_codes::CONTAINER_MISSING_NV, "{f}");
    assert!(f.contains("add --nv"), "{f}");
    assert!(f.contains("/dev/nvidia0"), "{f}");
    assert!(f.contains("apptainer exec --nv"), "{f}");
    // The report says what was seen, for `--json` readers.
    let nv = r.nv.as_ref().expect("probed");
    assert_eq!(nv.devices, ["nvidia0", "nvidiactl"]);
    assert!(nv.driver_libs.is_empty());
}

#[test]
fn nv_on_a_node_without_driver_does_not_say_add_nv() {
    // `--nv` on a host without a driver binds nothing: no library, no /dev/nvidia*.
    let t = tree(&["dev/null"]);
    let (r, f) = doctor(t.path(), &slurm_gpu_job_in_apptainer(), false);
    assert_eq!(r.exit_code, exit_codes::ALLOCATED_GPU_NOT_VISIBLE, "{f}");
    assert!(f.contains("--nv cannot help"), "{f}");
    assert!(!f.contains("add --nv"), "{f}");
    assert!(f.contains("SLURM_JOB_GPUS=0"), "{f}");
    // Without an allocation, a required GPU is "no driver".
    let vars = Vars::from_pairs([("APPTAINER_CONTAINER", "/x.sif")]);
    let (r, f) = doctor(t.path(), &vars, true);
    assert_eq!(r.exit_code, exit_codes::NO_DRIVER, "{f}");
    assert!(f.contains("--nv cannot help"), "{f}");
}

#[test]
fn nv_given_with_libraries_bound_but_driver_broken() {
    let t = tree(&[
        ".singularity.d/libs/libcuda.so.1",
        ".singularity.d/libs/libnvidia-ml.so.1",
        "dev/nvidia0",
        "dev/nvidiactl",
    ]);
    let (r, f) = doctor(t.path(), &slurm_gpu_job_in_apptainer(), false);
    assert_eq!(r.exit_code, exit_codes::ALLOCATED_GPU_NOT_VISIBLE, "{f}");
    assert!(f.contains("--nv is given"), "{f}");
    assert!(f.contains("libcuda.so.1, libnvidia-ml.so.1"), "{f}");
    assert!(f.contains("cannot open shared object file"), "{f}");
    assert!(!f.contains("add --nv"), "{f}");
}

#[test]
fn container_without_gpu_request_is_fine_whatever_the_tree() {
    for files in [&[][..], &["dev/nvidia0"][..]] {
        let t = tree(files);
        let vars = Vars::from_pairs([("SINGULARITY_CONTAINER", "/x.sif")]);
        let (r, f) = doctor(t.path(), &vars, false);
        assert_eq!(r.exit_code, exit_codes::OK, "{files:?}: {f}");
    }
}

#[test]
fn unprobed_container_keeps_the_add_nv_diagnosis() {
    let r = diagnose_with(&slurm_gpu_job_in_apptainer(), absent(), None, None, false);
    assert_eq!(r.exit_code, exit_codes::CONTAINER_MISSING_NV);
}
