//! The Slurm job templates in jobs/, checked and submitted for real to the one-node Slurm of
//! scripts/slurm-up.sh. `TRAINER_CPU_TEST=1` swaps each template's container and GPU parts for a
//! tiny CPU run of the binary in `TRAINER_BIN`; everything else (directives, log paths, preflight,
//! signal forwarding, `scontrol requeue` on exit code 75, `--resume auto`) is the template's own.

use crate::common;
use crate::slurm;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

const SLURM_TEMPLATES: &[&str] = &[
    "mnist_q_ai4.sh",
    "gnn_q_ai4.sh",
    "gnn_cpu_q_cn.sh",
    "ddp_q_ai8.sh",
    "mnist_shard.sh",
];
const GPU_TEMPLATES: &[&str] = &[
    "mnist_q_ai4.sh",
    "gnn_q_ai4.sh",
    "ddp_q_ai8.sh",
    "mnist_shard.sh",
];

fn jobs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("jobs")
}

fn template(name: &str) -> String {
    std::fs::read_to_string(jobs_dir().join(name)).unwrap()
}

fn sbatch_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("#SBATCH"))
        .map(|l| l.trim_start_matches("#SBATCH").trim().to_string())
        .collect()
}

/// Lines that are not comments (what runs).
fn code(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn templates_parse_and_carry_the_required_directives() {
    for name in SLURM_TEMPLATES {
        let path = jobs_dir().join(name);
        let o = Command::new("bash").arg("-n").arg(&path).output().unwrap();
        assert!(o.status.success(), "bash -n {name}: {}", stderr(&o));
        let text = template(name);
        assert!(text.starts_with("#!/bin/bash\n"), "{name}: shebang");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert!(mode & 0o111 != 0, "{name} is not executable");

        // Every directive has its own explanation: the line before it is a comment or another
        // directive of the same explained group.
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if l.starts_with("#SBATCH") {
                let prev = lines[i - 1];
                assert!(
                    prev.starts_with("# ") || prev.starts_with("#SBATCH"),
                    "{name}: directive `{l}` has no explaining comment above it"
                );
            }
        }
        let d = sbatch_lines(&text);
        let has = |want: &str| d.iter().any(|x| x == want);
        assert!(has("--signal=B:USR1@120"), "{name}: {d:?}");
        assert!(has("--requeue"), "{name}: {d:?}");
        assert!(has("--open-mode=append"), "{name}: {d:?}");
        let array = d.iter().any(|x| x.starts_with("--array="));
        let log = if array {
            "--output=outputs/logs/%x_%A_%a.out"
        } else {
            "--output=outputs/logs/%x_%j.out"
        };
        assert!(has(log), "{name}: wants {log}: {d:?}");
        // Site-specific parts are variables at the top, the one CPU-test switch is there.
        for var in ["RESULTS_DIR=", "TRAINER_CPU_TEST=", "TRAINER_BIN"] {
            assert!(text.contains(var), "{name}: no {var}");
        }
        assert!(text.contains("--resume auto"), "{name}: no --resume auto");
        assert!(
            text.contains("scontrol requeue"),
            "{name}: no requeue on 75"
        );
        assert!(text.contains("-eq 75"), "{name}: exit code 75 not handled");
        let run = code(&text);
        for bad in ["wget ", "curl ", "data fetch", "pip install"] {
            assert!(!run.contains(bad), "{name}: downloads at run time ({bad})");
        }
    }
    for name in GPU_TEMPLATES {
        let text = template(name);
        let d = sbatch_lines(&text);
        assert!(
            d.iter()
                .any(|x| x.starts_with("--gres=gpu:") || x.starts_with("--gres=shard:")),
            "{name}: {d:?}"
        );
        for x in &d {
            assert!(
                !(x.starts_with("-c")
                    || x.starts_with("--cpus-per-task")
                    || x.starts_with("--mem")),
                "{name}: GPU templates ask only for --gres (found {x})"
            );
        }
        assert!(
            text.contains("doctor --require-gpu"),
            "{name}: no GPU preflight"
        );
    }
    for name in ["mnist_q_ai4.sh", "gnn_q_ai4.sh", "ddp_q_ai8.sh"] {
        let text = template(name);
        assert!(text.contains("singularity exec --nv --bind \"$BIND_MOUNTS\" \"$IMAGE\" trainer"));
        assert!(text.contains("/ibmgpfs,/GPFS"), "{name}: bind mounts");
    }
    let gnn = sbatch_lines(&template("gnn_q_ai4.sh"));
    assert!(gnn.contains(&"--array=0-4".to_string()), "{gnn:?}");
    assert!(template("gnn_q_ai4.sh").contains("--cv-fold \"$FOLD\""));
    assert!(template("gnn_q_ai4.sh").contains("SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID"));
    assert!(sbatch_lines(&template("mnist_shard.sh")).contains(&"--gres=shard:16".to_string()));
    assert!(template("ddp_q_ai8.sh").contains("srun --mpi=pmix"));
    assert!(sbatch_lines(&template("gnn_cpu_q_cn.sh")).contains(&"--partition=q_cn".to_string()));
}

/// A scratch directory with `outputs/logs` (Slurm does not create log directories).
fn workdir() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("outputs/logs")).unwrap();
    t
}

/// `sbatch [extra] jobs/NAME` from `dir` with the given environment; returns the job id.
fn submit(
    conf: &PathBuf,
    dir: &Path,
    name: &str,
    extra: &[&str],
    env: &[(&str, String)],
) -> String {
    let mut cmd = Command::new("sbatch");
    cmd.env("SLURM_CONF", conf)
        .current_dir(dir)
        .arg("--parsable");
    cmd.args(extra).arg(jobs_dir().join(name));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("sbatch");
    assert!(o.status.success(), "sbatch {name}: {}", stderr(&o));
    stdout(&o).trim().split(';').next().unwrap().to_string()
}

fn cpu_env(dir: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("TRAINER_CPU_TEST", "1".into()),
        ("TRAINER_BIN", env!("CARGO_BIN_EXE_trainer").into()),
        ("DATA_DIR", fashion_dir().display().to_string()),
        ("RESULTS_DIR", dir.join("results").display().to_string()),
    ]
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn exit_code(conf: &PathBuf, job: &str) -> String {
    slurm::job_field(conf, job, "ExitCode").unwrap_or_default()
}

macro_rules! need_slurm {
    ($name:expr) => {
        match slurm::slurm_conf() {
            Some(c) => c,
            None => {
                eprintln!(
                    "SKIP {}: no Slurm (run scripts/slurm-up.sh or set TRAINER_REQUIRE_SLURM=1)",
                    $name
                );
                return;
            }
        }
    };
}

#[test]
fn mnist_q_ai4_runs_as_a_cpu_test_job() {
    let conf = need_slurm!("mnist_q_ai4");
    let t = workdir();
    let job = submit(&conf, t.path(), "mnist_q_ai4.sh", &[], &cpu_env(t.path()));
    let state = slurm::wait_for_job(&conf, &job, Duration::from_secs(600));
    let log = t.path().join(format!("outputs/logs/mnist_q_ai4_{job}.out"));
    let text = read(&log);
    assert_eq!(state, "COMPLETED", "{text}");
    assert_eq!(exit_code(&conf, &job), "0:0");
    // The template's directives took effect.
    assert_eq!(
        slurm::job_field(&conf, &job, "Partition").as_deref(),
        Some("q_ai4")
    );
    assert_eq!(
        slurm::job_field(&conf, &job, "Requeue").as_deref(),
        Some("1")
    );
    let tres = slurm::job_field(&conf, &job, "TresPerNode").unwrap_or_default();
    assert!(tres.contains("gpu:1"), "TresPerNode={tres}");
    // Preflight ran before training, then the trainer, then the shell's summary.
    let doctor = text.find("exit code 0").expect("doctor output");
    let train = text
        .find("[train-mnist] epoch 1/1")
        .expect("training output");
    assert!(doctor < train, "{text}");
    assert!(
        text.contains("=== ") && text.contains("trainer exit code 0"),
        "{text}"
    );
    let run = t.path().join(format!("results/mnist_q_ai4_{job}"));
    assert!(run.join("checkpoints/last.safetensors").is_file(), "{text}");
    let rows = metrics_without_timing(&run);
    assert_eq!(rows.len(), 1);
    let meta = read(&run.join("run_meta.json"));
    assert!(meta.contains(&job), "run_meta.json does not name job {job}");
}

#[test]
fn mnist_q_ai4_requeues_on_the_time_limit_signal_and_resumes() {
    let conf = need_slurm!("mnist_q_ai4 requeue");
    let t = workdir();
    let args = "--limit-train 1920 --limit-test 200 --epochs 1 --seed 3 --log-every-secs 1";
    // The same run without interruption, for comparison.
    let whole = t.path().join("whole");
    let mut a = vec!["train-mnist", "--data-dir"];
    let data = fashion_dir().display().to_string();
    a.push(&data);
    a.extend(args.split(' '));
    let whole_s = whole.display().to_string();
    a.extend(["--out", &whole_s]);
    let o = run_in(t.path(), &a);
    assert!(o.status.success(), "{}", stderr(&o));

    let mut env = cpu_env(t.path());
    env.push(("TRAINER_CPU_TEST_ARGS", args.into()));
    // The run waits after its step 5 for the signal (a fast machine finishes the 30 steps
    // before a signal sent at the first progress line arrives); the requeued start resumes
    // after step 5 and never reaches it again.
    env.push(("TRAINER_TEST_PAUSE_AT_STEP", "5".into()));
    let job = submit(&conf, t.path(), "mnist_q_ai4.sh", &[], &env);
    let log = t.path().join(format!("outputs/logs/mnist_q_ai4_{job}.out"));
    // Once training is under way, send what `--signal=B:USR1@120` sends at the time limit:
    // SIGUSR1 to the batch shell only.
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("pausing after step 5") {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "training never started:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    slurm::slurm(&conf, "scancel", &["--signal=USR1", "--batch", &job]);
    let state = slurm::wait_for_job(&conf, &job, Duration::from_secs(600));
    let text = read(&log);
    assert_eq!(state, "COMPLETED", "{text}");
    let restarts: u32 = slurm::job_field(&conf, &job, "Restarts")
        .unwrap()
        .parse()
        .unwrap();
    assert!(restarts >= 1, "never requeued:\n{text}");
    assert!(
        text.contains("restart 0") && text.contains("restart 1"),
        "{text}"
    );
    assert!(
        text.contains("batch shell got SIGUSR1, forwarding to the trainer"),
        "{text}"
    );
    assert!(text.contains("trainer exit code 75"), "{text}");
    assert!(
        text.contains(&format!("requeueing Slurm job {job}")),
        "{text}"
    );
    assert!(text.contains("resuming from"), "{text}");
    assert!(text.trim_end().ends_with("trainer exit code 0"), "{text}");
    let run = t.path().join(format!("results/mnist_q_ai4_{job}"));
    // Bit-equality across processes is sound here: one binary on one machine (the same CPU
    // kernels), and the fast CPU kernels cut work by shape, never by thread count, so the job
    // (whatever CPUs Slurm gives it) follows the uninterrupted run exactly.
    assert_eq!(
        metrics_without_timing(&run),
        metrics_without_timing(&whole),
        "{text}"
    );
}

/// Without `TRAINER_CPU_TEST` the template runs its GPU path: `singularity exec --nv ...
/// trainer doctor --require-gpu` first. A stand-in `singularity` on PATH records its arguments
/// and runs the host binary; the test Slurm's GPUs have no driver, so the preflight must fail
/// with the doctor's exit code and the job must not train.
#[test]
fn mnist_q_ai4_gpu_path_runs_the_preflight_first_and_stops_on_failure() {
    let conf = need_slurm!("mnist_q_ai4 GPU path");
    let t = workdir();
    let bin = t.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let record = t.path().join("singularity.args");
    let shim = bin.join("singularity");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/bash\necho \"$*\" >> {rec}\n# drop `exec --nv --bind B IMAGE trainer`\nshift 6\nexec {bin} \"$@\"\n",
            rec = record.display(),
            bin = env!("CARGO_BIN_EXE_trainer"),
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = vec![
        ("PATH", path),
        ("IMAGE", "/ibmgpfs/test/trainer.sif".to_string()),
        ("DATA_DIR", fashion_dir().display().to_string()),
        (
            "RESULTS_DIR",
            t.path().join("results").display().to_string(),
        ),
        ("TRAINER_CPU_TEST", "0".to_string()),
    ];
    let job = submit(&conf, t.path(), "mnist_q_ai4.sh", &[], &env);
    let state = slurm::wait_for_job(&conf, &job, Duration::from_secs(300));
    let text = read(&t.path().join(format!("outputs/logs/mnist_q_ai4_{job}.out")));
    assert_eq!(state, "FAILED", "{text}");
    // Doctor: GPUs allocated by the scheduler but no driver found = 12.
    assert_eq!(exit_code(&conf, &job), "12:0", "{text}");
    assert!(
        text.contains("preflight failed with exit code 12: not training"),
        "{text}"
    );
    assert!(!text.contains("[train-mnist]"), "{text}");
    assert!(!t.path().join(format!("results/mnist_q_ai4_{job}")).exists());
    let args = read(&record);
    assert_eq!(
        args.trim(),
        "exec --nv --bind /ibmgpfs,/GPFS /ibmgpfs/test/trainer.sif trainer doctor --require-gpu"
    );
}

#[test]
fn mnist_shard_runs_as_a_cpu_test_job_on_16_shards() {
    let conf = need_slurm!("mnist_shard");
    let t = workdir();
    let job = submit(&conf, t.path(), "mnist_shard.sh", &[], &cpu_env(t.path()));
    let state = slurm::wait_for_job(&conf, &job, Duration::from_secs(600));
    let text = read(&t.path().join(format!("outputs/logs/mnist_shard_{job}.out")));
    assert_eq!(state, "COMPLETED", "{text}");
    let tres = slurm::job_field(&conf, &job, "TresPerNode").unwrap_or_default();
    assert!(tres.contains("shard:16"), "TresPerNode={tres}");
    assert!(text.contains("trainer exit code 0"), "{text}");
    let run = t.path().join(format!("results/mnist_shard_{job}"));
    assert_eq!(metrics_without_timing(&run).len(), 1);
}

/// A small synthetic cohort in `dir/cohort` (train-gnn's inputs).
fn cohort(dir: &Path) -> PathBuf {
    let out = dir.join("cohort");
    let o = run_in(
        dir,
        &[
            "synth-connectome",
            "--subjects",
            "12",
            "--nodes",
            "400",
            "--out",
            out.to_str().unwrap(),
            "--seed",
            "5",
        ],
    );
    assert!(o.status.success(), "synth-connectome: {}", stderr(&o));
    assert!(out.join("subject_info_sc.csv").is_file());
    out
}

#[test]
fn gnn_q_ai4_array_runs_one_cpu_test_task_per_fold() {
    let conf = need_slurm!("gnn_q_ai4");
    let t = workdir();
    let mut env = cpu_env(t.path());
    env.push(("COHORT_DIR", cohort(t.path()).display().to_string()));
    // Two of the five folds keep CI short; the template's own --array=0-4 is checked above.
    let job = submit(&conf, t.path(), "gnn_q_ai4.sh", &["--array=0-1"], &env);
    for task in 0..2 {
        let id = format!("{job}_{task}");
        let state = slurm::wait_for_job(&conf, &id, Duration::from_secs(900));
        let text = read(
            &t.path()
                .join(format!("outputs/logs/gnn_q_ai4_{job}_{task}.out")),
        );
        assert_eq!(state, "COMPLETED", "task {task}:\n{text}");
        assert!(text.contains(&format!("fold {task}")), "{text}");
        assert!(text.contains("trainer exit code 0"), "{text}");
        let run = t
            .path()
            .join(format!("results/runs/gnn_q_ai4_{job}_fold{task}"));
        assert!(run.is_dir(), "no run directory {}:\n{text}", run.display());
    }
}

#[test]
fn gnn_cpu_q_cn_runs_as_a_cpu_test_job() {
    let conf = need_slurm!("gnn_cpu_q_cn");
    let t = workdir();
    let mut env = cpu_env(t.path());
    env.push(("COHORT_DIR", cohort(t.path()).display().to_string()));
    let job = submit(&conf, t.path(), "gnn_cpu_q_cn.sh", &[], &env);
    let state = slurm::wait_for_job(&conf, &job, Duration::from_secs(900));
    let text = read(
        &t.path()
            .join(format!("outputs/logs/gnn_cpu_q_cn_{job}.out")),
    );
    assert_eq!(state, "COMPLETED", "{text}");
    assert_eq!(
        slurm::job_field(&conf, &job, "Partition").as_deref(),
        Some("q_cn")
    );
    assert!(text.contains("trainer exit code 0"), "{text}");
    assert!(
        t.path()
            .join(format!("results/runs/gnn_cpu_q_cn_{job}"))
            .is_dir(),
        "{text}"
    );
}

/// `trainer env --json` names an `mpi` field when the binary was built with the `mpi` feature.
fn built_with_mpi() -> bool {
    let o = trainer().args(["env", "--json"]).output().unwrap();
    serde_json::from_slice::<serde_json::Value>(&o.stdout)
        .ok()
        .and_then(|v| v.get("mpi").cloned())
        .is_some_and(|m| !m.is_null() && m != serde_json::Value::Bool(false))
}

#[test]
fn ddp_q_ai8_runs_two_cpu_ranks_when_built_with_mpi() {
    let conf = need_slurm!("ddp_q_ai8");
    if !built_with_mpi() {
        // scripts/test-jobs.sh builds with `mpi` where OpenMPI is installed and then requires it.
        assert!(
            std::env::var_os("TRAINER_REQUIRE_MPI").is_none(),
            "TRAINER_REQUIRE_MPI is set but the binary was built without the `mpi` feature"
        );
        eprintln!(
            "SKIP ddp_q_ai8 submission: `trainer env --json` has no `mpi` field (binary built \
             without the `mpi` feature, so two ranks would be two separate trainings); the \
             template's syntax and directives are checked by templates_parse_and_carry_the_required_directives"
        );
        return;
    }
    let t = workdir();
    let job = submit(
        &conf,
        t.path(),
        "ddp_q_ai8.sh",
        &["--gres=gpu:2", "--ntasks=2"],
        &cpu_env(t.path()),
    );
    let state = slurm::wait_for_job(&conf, &job, Duration::from_secs(900));
    let text = read(&t.path().join(format!("outputs/logs/ddp_q_ai8_{job}.out")));
    assert_eq!(state, "COMPLETED", "{text}");
    assert!(text.contains("srun exit code 0"), "{text}");
    let run = t.path().join(format!("results/ddp_q_ai8_{job}"));
    let meta: serde_json::Value = serde_json::from_str(&read(&run.join("run_meta.json"))).unwrap();
    let world = meta
        .pointer("/world_size")
        .or_else(|| meta.pointer("/env/world_size"));
    assert_eq!(world.and_then(|w| w.as_u64()), Some(2), "{meta}");
}
