//! `scripts/gpu-check.sh` on a machine without an NVIDIA driver: it stops at its first step,
//! `trainer doctor --require-gpu`, with doctor's exit code, names the step, and writes the JSON
//! report with doctor's own report in it. (On a GPU machine the whole script is the test.)

use std::path::Path;
use std::process::Command;

use trainer::cluster::Vars;
use trainer::cluster::gpu::probe_driver;

#[test]
fn without_a_gpu_the_script_stops_at_doctor_with_its_code() {
    if probe_driver(&Vars::from_process()).info().is_some() {
        println!("SKIP gpu_check_script: an NVIDIA driver is present; run scripts/gpu-check.sh");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let report = t.path().join("report.json");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gpu-check.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&script)
        .args(["--bin", env!("CARGO_BIN_EXE_trainer")])
        .args(["--features-bin", "/nonexistent/trainer"])
        .arg("--out")
        .arg(&report)
        .arg("--work")
        .arg(t.path().join("work"));
    for (k, _) in std::env::vars() {
        if k.starts_with("SLURM_") || k.starts_with("LSB_") || k == "CUDA_VISIBLE_DEVICES" {
            cmd.env_remove(k);
        }
    }
    let o = cmd.output().expect("bash runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(10), "{err}");
    assert!(err.contains("FAILED at step 'doctor' (exit 10)"), "{err}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report written"))
            .expect("report is JSON");
    assert_eq!(json["failed"], "doctor");
    assert_eq!(json["exit_code"], 10);
    assert_eq!(json["doctor"]["exit_code"], 10);
    let steps = json["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 1, "{json}");
    assert_eq!(steps[0]["name"], "doctor");
    assert_eq!(steps[0]["ok"], false);
    assert!(json["nvrtc"]["note"].is_string(), "{json}");
    assert!(
        steps[0]["log_tail"]
            .as_str()
            .is_some_and(|l| l.contains("no NVIDIA driver")),
        "{json}"
    );
}
