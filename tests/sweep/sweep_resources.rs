//! Queue resources of a sweep (issue 33, item 1): the spec's `[resources]` and `sweep plan`'s
//! flags become each scheduler's directives, the container and `module load` lines, the
//! checkpoint signal's margin and the GPU preflight; on the test Slurm (fake GPUs, no driver)
//! every GPU task fails fast with the doctor's code and `sweep status` says why.

use crate::common;
use crate::slurm;
use crate::sweep_helpers as sweep;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use sweep::{setup_with, status};

const RESOURCES: &str = "[resources]\npartition = \"q_gpu_c\"\ngpus = 1\ntime = \"00:10:00\"\n\
     mem = \"2G\"\nimage = \"/ibmgpfs/test/trainer.sif\"\nbinds = [\"/ibmgpfs\", \"/tmp\"]\n\
     modules = [\"singularity/3.8\"]\n";

fn plan_ok(dir: &Path, args: &[&str]) -> String {
    let o = run_in(dir, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stderr(&o)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The spec of `setup_with` with its `[resources]` table (and anything after it) replaced by
/// `tail`.
fn respec(dir: &Path, tail: &str) {
    let path = dir.join("spec.toml");
    let text = read(&path);
    let head = text.split("[resources]").next().unwrap();
    std::fs::write(path, format!("{head}{tail}")).unwrap();
}

/// `bash -n`: the script parses.
fn parses(script: &Path) {
    let o = Command::new("bash").arg("-n").arg(script).output().unwrap();
    assert!(o.status.success(), "{}: {}", script.display(), stderr(&o));
}

#[test]
fn resources_become_each_schedulers_directives_and_flags_override_the_spec() {
    let t = tempfile::tempdir().unwrap();
    setup_with(t.path(), "folds = [0, 1]\n", RESOURCES);
    let spec = ["sweep", "plan", "spec.toml", "--out"];
    plan_ok(
        t.path(),
        &[
            &spec[..],
            &[
                "S",
                "--partition",
                "q_ai4",
                "--time",
                "30",
                "--extra=--exclusive",
            ],
        ]
        .concat(),
    );
    let slurm = read(&t.path().join("S/submit.slurm"));
    for want in [
        "#SBATCH --partition=q_ai4\n",
        "#SBATCH --gres=gpu:1\n",
        "#SBATCH --mem=2048M\n",
        "#SBATCH --time=00:30:00\n",
        "#SBATCH --exclusive\n",
        // A tenth of 30 minutes.
        "#SBATCH --signal=B:USR1@180\n",
        "module load singularity/3.8 ||",
        "[[ -n \"${IMAGE:-}\" ]] || IMAGE=/ibmgpfs/test/trainer.sif\n",
        "[[ -n \"${BIND_MOUNTS:-}\" ]] || BIND_MOUNTS='/ibmgpfs,/tmp'\n",
        "\"$TASK\" --preflight &",
    ] {
        assert!(slurm.contains(want), "{want}\n{slurm}");
    }
    assert!(!slurm.contains("q_gpu_c"), "{slurm}");
    parses(&t.path().join("S/submit.slurm"));

    plan_ok(
        t.path(),
        &[&spec[..], &["L", "--scheduler", "lsf"]].concat(),
    );
    let lsf = read(&t.path().join("L/submit.lsf"));
    for want in [
        "#BSUB -q q_gpu_c\n",
        "#BSUB -gpu \"num=1\"\n",
        "#BSUB -W 0:10\n",
        "#BSUB -wt 1\n",
        "\"$TASK\" --preflight &",
    ] {
        assert!(lsf.contains(want), "{want}\n{lsf}");
    }
    parses(&t.path().join("L/submit.lsf"));

    let said = plan_ok(
        t.path(),
        &[&spec[..], &["G", "--scheduler", "gflow", "--gpus", "2"]].concat(),
    );
    assert!(
        said.contains("no directive for resources partition"),
        "{said}"
    );
    let gflow = read(&t.path().join("G/task.gflow"));
    for want in [
        "# GFLOW --gpus 2\n",
        "# GFLOW --time 00:10:00\n",
        "# GFLOW --memory 2048M\n",
    ] {
        assert!(gflow.contains(want), "{want}\n{gflow}");
    }
    parses(&t.path().join("G/task.gflow"));

    // The manifest keeps them: a re-plan of what is left asks for the same.
    plan_ok(
        t.path(),
        &["sweep", "plan", "--missing", "S", "--scheduler", "slurm"],
    );
    let again = read(&t.path().join("S/submit-missing.slurm"));
    assert!(again.contains("#SBATCH --partition=q_ai4\n"), "{again}");
    assert!(again.contains("#SBATCH --gres=gpu:1\n"), "{again}");

    // Without resources: no GPU request, no preflight, the fixed margin.
    respec(t.path(), "");
    plan_ok(t.path(), &[&spec[..], &["N"]].concat());
    let plain = read(&t.path().join("N/submit.slurm"));
    assert!(
        !plain.contains("--gres") && !plain.contains("--preflight"),
        "{plain}"
    );
    assert!(plain.contains("#SBATCH --signal=B:USR1@120\n"), "{plain}");
}

#[test]
fn bad_resources_fail_at_plan_time_naming_the_key() {
    let t = tempfile::tempdir().unwrap();
    setup_with(t.path(), "", "");
    for (tail, flags, needle) in [
        ("[resources]\ngpu = 1\n", &[][..], "spec.toml:"),
        (
            "[resources]\ngpu = 1\n",
            &[][..],
            "`gpu` is not a resource; expected one of partition, gpus",
        ),
        (
            "[resources]\ntime = \"soon\"\n",
            &[][..],
            "`time` = \"soon\": expected minutes",
        ),
        ("", &["--time", "1:2:3:4"][..], "--time: `time`"),
        ("", &["--gpus=-1"][..], "--gpus: `gpus` = \"-1\""),
        ("", &["--partition", "q ai4"][..], "expected one word"),
        ("", &["--mem", "lots"][..], "--mem: `mem`"),
    ] {
        respec(t.path(), tail);
        let args = [&["sweep", "plan", "spec.toml", "--out", "S"][..], flags].concat();
        let o = run_in(t.path(), &args);
        assert!(!o.status.success(), "{tail} {flags:?}");
        assert!(
            stderr(&o).contains(needle),
            "{tail} {flags:?}: {}",
            stderr(&o)
        );
        assert!(!t.path().join("S").exists(), "{tail} {flags:?}");
    }
}

/// A `singularity` that records its arguments and runs what follows `IMAGE trainer` with the
/// test's binary, and a `module` that records what it loads.
fn shims(dir: &Path) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let singularity = format!(
        "#!/bin/bash\necho \"$*\" >> {rec}\nwhile [[ $# -gt 0 && $1 != trainer ]]; do shift; done\n\
         shift\nexec {bin} \"$@\"\n",
        rec = dir.join("singularity.args").display(),
        bin = env!("CARGO_BIN_EXE_trainer"),
    );
    let module = format!(
        "#!/bin/bash\necho \"$*\" >> {}\n",
        dir.join("module.args").display()
    );
    use std::os::unix::fs::PermissionsExt;
    for (name, text) in [("singularity", singularity), ("module", module)] {
        std::fs::write(bin.join(name), text).unwrap();
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn on_slurm_gpu_tasks_on_a_node_without_a_usable_gpu_fail_fast_with_the_doctors_code() {
    let Some(conf) = slurm::slurm_conf() else {
        eprintln!("SKIP sweep resources on Slurm: no Slurm (scripts/slurm-up.sh)");
        return;
    };
    let t = tempfile::tempdir().unwrap();
    setup_with(t.path(), "folds = [0, 1]\n", RESOURCES);
    plan_ok(t.path(), &["sweep", "plan", "spec.toml", "--out", "S"]);
    // The container path of the script (no $TRAINER): the test Slurm's GPUs are device files
    // without a driver, so the doctor fails with 12 (GPUs allocated, no driver).
    let o = Command::new("sbatch")
        .env("SLURM_CONF", &conf)
        .env("PATH", shims(t.path()))
        .env_remove("TRAINER")
        .current_dir(t.path())
        .args(["--parsable", "S/submit.slurm"])
        .output()
        .unwrap();
    assert!(o.status.success(), "sbatch: {}", stderr(&o));
    let job = stdout(&o).trim().split(';').next().unwrap().to_string();
    for i in 0..2 {
        let state = slurm::wait_for_job(&conf, &format!("{job}_{i}"), Duration::from_secs(300));
        let log =
            std::fs::read_to_string(t.path().join(format!("S/logs/{i}.log"))).unwrap_or_default();
        assert_eq!(state, "FAILED", "task {i}:\n{log}");
        assert!(log.contains("=== GPU preflight"), "{log}");
        assert!(!log.contains("[train-gnn]"), "the trainer started:\n{log}");
    }
    let rows = status(t.path(), "S");
    for r in &rows {
        assert_eq!(r["state"], "failed", "{r}");
        assert_eq!(r["code"], 12, "{r}");
        let error = r["error"].as_str().unwrap();
        assert!(error.starts_with("GPU preflight: "), "{error}");
        assert!(error.contains("driver"), "{error}");
    }
    let o = run_in(t.path(), &["sweep", "status", "S"]);
    assert!(
        stdout(&o).contains("(exit 12: GPU preflight: "),
        "{}",
        stdout(&o)
    );
    let recorded = read(&t.path().join("singularity.args"));
    assert!(
        recorded.contains(
            "exec --nv --bind /ibmgpfs,/tmp /ibmgpfs/test/trainer.sif trainer sweep task"
        ),
        "{recorded}"
    );
    assert!(recorded.contains("--preflight"), "{recorded}");
    assert_eq!(
        read(&t.path().join("module.args"))
            .lines()
            .collect::<Vec<_>>(),
        ["load singularity/3.8", "load singularity/3.8"]
    );
    assert!(
        !t.path().join("S/runs").exists(),
        "no task reached training"
    );
}
