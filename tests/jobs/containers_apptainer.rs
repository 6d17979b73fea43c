//! containers/trainer-cpu.def built with a real Apptainer 1.4.5 (scripts/apptainer-up.sh), then
//! the image is run: labels and help, %runscript, %test, `apptainer exec --nv … trainer doctor`,
//! the missing-`--nv` diagnosis, a tiny training inside the container, and jobs/mnist_q_ai4.sh's
//! GPU path submitted to the test Slurm with this image as its `singularity`.

use crate::common;
use crate::slurm;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The wrapper written by scripts/apptainer-up.sh.
fn apptainer() -> Option<PathBuf> {
    let p = std::env::var_os("TRAINER_APPTAINER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/trainer-apptainer/bin/apptainer"));
    p.is_file().then_some(p)
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("apptainer wrapper")
}

fn all(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

#[test]
fn trainer_cpu_def_builds_and_runs_under_a_real_apptainer() {
    let Some(app) = apptainer() else {
        assert!(
            std::env::var("TRAINER_REQUIRE_APPTAINER").as_deref() != Ok("1"),
            "TRAINER_REQUIRE_APPTAINER=1 but no Apptainer: run scripts/apptainer-up.sh"
        );
        eprintln!("SKIP containers_apptainer: no Apptainer (eval \"$(scripts/apptainer-up.sh)\")");
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let sif = t.path().join("trainer-cpu.sif");
    let version = stdout(&trainer().arg("--version").output().unwrap())
        .trim()
        .trim_start_matches("trainer ")
        .to_string();
    let app_cmd = || {
        let mut c = Command::new(&app);
        // No scheduler variables from the runner's shell leak into the container.
        for (k, _) in std::env::vars() {
            if k.starts_with("SLURM_") || k == "CUDA_VISIBLE_DEVICES" {
                c.env_remove(k);
            }
        }
        c
    };

    // --- build (from the repository root: %files paths are relative to it) --------------------
    let t0 = Instant::now();
    let o = run(app_cmd()
        .current_dir(repo())
        .args(["build", "--force", "--build-arg"])
        .arg(format!("VERSION={version}"))
        .arg("--build-arg")
        .arg(format!("TRAINER_BIN={}", env!("CARGO_BIN_EXE_trainer")))
        .arg(&sif)
        .arg("containers/trainer-cpu.def"));
    let build_log = all(&o);
    assert!(o.status.success(), "apptainer build failed:\n{build_log}");
    eprintln!("apptainer build: {:.0} s", t0.elapsed().as_secs_f64());
    // %test ran at the end of the build: trainer doctor inside the new image.
    assert!(build_log.contains("Running testscript"), "{build_log}");
    assert!(
        build_log.contains("container              apptainer"),
        "{build_log}"
    );

    // --- metadata ------------------------------------------------------------------------------
    let o = run(app_cmd().arg("inspect").arg(&sif));
    let labels = all(&o);
    assert!(o.status.success(), "{labels}");
    assert!(
        labels.contains(&format!("org.opencontainers.image.version: {version}")),
        "{labels}"
    );
    let o = run(app_cmd().arg("run-help").arg(&sif));
    assert!(
        all(&o).contains(&format!("trainer {version}")),
        "{}",
        all(&o)
    );

    // --- %runscript = trainer "$@"; %test = trainer doctor --------------------------------------
    let o = run(app_cmd().arg("run").arg(&sif).arg("--version"));
    assert_eq!(
        stdout(&o).trim(),
        format!("trainer {version}"),
        "{}",
        all(&o)
    );
    let o = run(app_cmd().arg("test").arg(&sif));
    assert!(o.status.success(), "{}", all(&o));

    // --- exec --nv … trainer doctor: no driver here, so CPU, exit 0 ----------------------------
    let o = run(app_cmd()
        .args(["exec", "--nv"])
        .arg(&sif)
        .args(["trainer", "doctor"]));
    let text = all(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("container              apptainer"), "{text}");
    assert!(
        text.contains("no NVIDIA driver: training runs on the CPU"),
        "{text}"
    );

    // --- GPUs allocated by Slurm but no driver on this host: with or without --nv, no
    // /dev/nvidia* and no bound driver library, so "add --nv" would not help (the fake-tree
    // cases, "add --nv" included, are in tests/cluster/cluster_nv.rs) ----------------------------------
    for nv in [&[][..], &["--nv"][..]] {
        let o = run(app_cmd()
            .env("SLURM_JOB_ID", "77")
            .env("SLURM_JOB_GPUS", "0")
            .env("CUDA_VISIBLE_DEVICES", "0")
            .arg("exec")
            .args(nv)
            .arg(&sif)
            .args(["trainer", "doctor", "--require-gpu"]));
        let text = all(&o);
        assert_eq!(o.status.code(), Some(12), "{nv:?}: {text}");
        assert!(text.contains("--nv cannot help"), "{nv:?}: {text}");
    }

    // --- a tiny training inside the container ----------------------------------------------------
    let out = t.path().join("run");
    let data = fashion_dir();
    let o = run(app_cmd()
        .args(["exec", "--nv", "--bind"])
        .arg(&data)
        .arg(&sif)
        .args(["trainer", "train-mnist", "--data-dir"])
        .arg(&data)
        .args([
            "--limit-train",
            "640",
            "--limit-test",
            "200",
            "--epochs",
            "1",
            "--out",
        ])
        .arg(&out));
    assert!(o.status.success(), "{}", all(&o));
    assert_eq!(metrics_without_timing(&out).len(), 1);
    assert!(out.join("checkpoints/last.safetensors").is_file());
    let meta = std::fs::read_to_string(out.join("run_meta.json")).unwrap();
    assert!(
        meta.contains("apptainer"),
        "run_meta.json does not record the container: {meta}"
    );

    // --- jobs/mnist_q_ai4.sh's GPU path with this image, under the test Slurm -------------------
    let Some(conf) = slurm::slurm_conf() else {
        eprintln!("SKIP the Slurm part of containers_apptainer: no Slurm");
        return;
    };
    let bin = t.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(&app, bin.join("singularity")).unwrap();
    let work = t.path().join("work");
    std::fs::create_dir_all(work.join("outputs/logs")).unwrap();
    let o = Command::new("sbatch")
        .env("SLURM_CONF", &conf)
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env("IMAGE", &sif)
        .env("BIND_MOUNTS", format!("{}", data.display()))
        .env("DATA_DIR", &data)
        .env("RESULTS_DIR", work.join("results"))
        .env("TRAINER_CPU_TEST", "0")
        .current_dir(&work)
        .arg("--parsable")
        .arg(repo().join("jobs/mnist_q_ai4.sh"))
        .output()
        .unwrap();
    assert!(o.status.success(), "sbatch: {}", stderr(&o));
    let job = stdout(&o).trim().split(';').next().unwrap().to_string();
    let state = slurm::wait_for_job(&conf, &job, Duration::from_secs(300));
    let log = std::fs::read_to_string(work.join(format!("outputs/logs/mnist_q_ai4_{job}.out")))
        .unwrap_or_default();
    // The real container ran the preflight with --nv; the test Slurm's GPUs have no driver and
    // the node has no /dev/nvidia*, so the doctor stops the job before any training with 12 (no
    // driver on this node: --nv cannot help), not 11 (a forgotten --nv).
    assert_eq!(state, "FAILED", "{log}");
    assert!(log.contains("container              apptainer"), "{log}");
    assert!(
        log.contains("preflight failed with exit code 12: not training")
            && log.contains("--nv cannot help"),
        "{log}"
    );
    assert!(!log.contains("[train-mnist]"), "{log}");
}
