//! `trainer::cluster` through the public API, on the real machine: without an NVIDIA driver
//! doctor must report it cleanly (no panic) and a required GPU must fail with its code.

use trainer::cluster::gpu::{DriverProbe, probe_driver};
use trainer::cluster::{Vars, diagnose, exit_codes, preflight_cuda_with};

#[test]
fn doctor_on_this_machine_does_not_panic() {
    let vars = Vars::from_pairs([("TRAINER_TEST", "1")]);
    let driver = probe_driver(&vars);
    let has_driver = driver.info().is_some();
    let report = diagnose(&vars, driver.clone(), None, false);
    let text = report.render();
    assert!(text.contains("NVIDIA driver"), "{text}");
    serde_json::to_string(&report).expect("report serialises");
    if has_driver {
        println!("a driver is present; skipping the no-driver checks\n{text}");
        return;
    }
    assert_eq!(report.exit_code, exit_codes::OK, "{text}");
    assert!(text.contains("no NVIDIA driver"), "{text}");

    let required = diagnose(&vars, driver.clone(), None, true);
    assert_eq!(required.exit_code, exit_codes::NO_DRIVER);

    let err = preflight_cuda_with(
        &vars,
        driver,
        None,
        trainer::cluster::compat::GpuBackend::Tch,
    )
    .expect_err("no GPU here");
    assert_eq!(err.code, exit_codes::NO_DRIVER);
}

#[test]
fn missing_nv_is_diagnosed_from_slurm_and_apptainer_variables() {
    let vars = Vars::from_pairs([
        ("SLURM_JOB_ID", "1234"),
        ("SLURM_STEP_ID", "0"),
        ("SLURM_PROCID", "0"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_NTASKS", "1"),
        ("SLURM_STEP_NODELIST", "ai01"),
        ("SLURM_STEP_GPUS", "0"),
        ("CUDA_VISIBLE_DEVICES", "0"),
        ("APPTAINER_CONTAINER", "/ibmgpfs/me/trainer.sif"),
    ]);
    let driver = DriverProbe::Absent {
        reason: "libnvidia-ml.so.1: cannot open shared object file".into(),
    };
    let report = diagnose(&vars, driver, None, false);
    assert_eq!(report.exit_code, exit_codes::CONTAINER_MISSING_NV);
    assert!(report.render().contains("add --nv"));
}

#[test]
fn env_says_when_no_driver_backs_the_device_it_names() {
    // A Slurm step with one GPU, on a machine whose NVML cannot load (a library that is not
    // there, so a GPU machine gives the same answer).
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_trainer"))
        .arg("env")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs([
            ("SLURM_JOB_ID", "1234"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_PROCID", "0"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_NTASKS", "1"),
            ("SLURM_STEP_NODELIST", "ai01"),
            ("SLURM_STEP_GPUS", "0"),
            ("CUDA_VISIBLE_DEVICES", "0"),
            ("TRAINER_NVML_LIB", "/nonexistent/libnvidia-ml.so.1"),
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("cuda:0"), "{out}");
    assert!(out.contains("driver") && out.contains("exit 10"), "{out}");
}
