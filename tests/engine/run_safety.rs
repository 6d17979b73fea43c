//! Nothing lost, nothing silent (issue 71): a run removes only the checkpoints it recorded
//! writing (never a user's `backup_epoch_001.safetensors`, another fold's or another run's
//! files, nor through a `checkpoints/` link to shared scratch), a user's output path never
//! replaces a run's file, and `--resume auto` without the resume file refuses instead of
//! starting again at epoch 1 into the same metrics. A finished run drops its resume state
//! unless `--keep-checkpoints resume` (issue 75), a stopped one keeps it and resumes.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;
// The tiny MNIST run and the failure check of the run-integrity tests.
use crate::run_integrity::{fails_with, mnist_args as mnist, tiny_data};

fn succeeds(o: &Output) {
    assert!(o.status.success(), "{}", stderr(o));
}

/// Every file under `dir` (links followed) with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// A snapshot without the run's `.lock` (rewritten with the pid of each process that opens it).
fn unlocked(mut s: BTreeMap<PathBuf, Vec<u8>>) -> BTreeMap<PathBuf, Vec<u8>> {
    s.retain(|p, _| p.file_name().is_none_or(|n| n != ".lock"));
    s
}

/// The files a user and another run put in `dir`, with their bytes.
fn foreign_files(dir: &Path, names: &[&str]) -> Vec<(PathBuf, Vec<u8>)> {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let p = dir.join(n);
            let bytes = vec![i as u8 + 1; 1000 + i];
            std::fs::write(&p, &bytes).unwrap();
            (p, bytes)
        })
        .collect()
}

fn still_there(files: &[(PathBuf, Vec<u8>)]) {
    for (p, bytes) in files {
        let now = std::fs::read(p).unwrap_or_else(|e| panic!("{} removed: {e}", p.display()));
        assert_eq!(&now, bytes, "{} changed", p.display());
    }
}

#[test]
fn best_last_removes_only_the_epoch_files_the_run_recorded() {
    let t = tempfile::tempdir().unwrap();
    let data = tiny_data(t.path());
    let run = t.path().join("run");
    let ck = run.join("checkpoints");
    // A first part keeping every epoch (stopped in epoch 2): epoch_001 is the run's own.
    let all = ["--epochs", "4", "--keep-checkpoints", "all"];
    let o = run_in(
        t.path(),
        &mnist(
            &data,
            "run",
            &[&all[..], &["--stop-after-steps", "9"]].concat(),
        ),
    );
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    assert!(ck.join("epoch_001.safetensors").is_file());
    // A user's backup and another fold's file beside them, named like epoch files.
    let theirs = foreign_files(
        &ck,
        &[
            "backup_epoch_001.safetensors",
            "clg_ode_fold3_epoch_002.safetensors",
        ],
    );
    let o = run_in(
        t.path(),
        &mnist(&data, "run", &["--epochs", "4", "--resume", "auto"]),
    );
    succeeds(&o);
    still_there(&theirs);
    assert!(
        !ck.join("epoch_001.safetensors").exists(),
        "the run's own epoch file stays"
    );
    let err = stderr(&o);
    let line = err
        .lines()
        .find(|l| l.contains("checkpoints (best-last): "))
        .unwrap_or_else(|| panic!("no size line:\n{err}"));
    assert!(
        line.contains("2 unrecorded files 2.0 kB (kept)") && line.contains("removed 1 older ("),
        "{line}"
    );
    assert!(
        err.contains("2 epoch file(s)") && err.contains("did not record writing"),
        "{err}"
    );
}

#[test]
fn a_linked_checkpoints_folder_keeps_another_runs_files() {
    let t = tempfile::tempdir().unwrap();
    let data = tiny_data(t.path());
    let run = t.path().join("run");
    let o = run_in(
        t.path(),
        &mnist(&data, "run", &["--epochs", "4", "--stop-after-steps", "9"]),
    );
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    // `checkpoints/` becomes a link to a scratch folder another run writes into too.
    let scratch = t.path().join("scratch");
    std::fs::rename(run.join("checkpoints"), &scratch).unwrap();
    std::os::unix::fs::symlink(&scratch, run.join("checkpoints")).unwrap();
    let theirs = foreign_files(
        &scratch,
        &["epoch_003.safetensors", "other_run_epoch_003.safetensors"],
    );
    let o = run_in(
        t.path(),
        &mnist(&data, "run", &["--epochs", "4", "--resume", "auto"]),
    );
    succeeds(&o);
    assert!(stderr(&o).contains("resuming from"), "{}", stderr(&o));
    still_there(&theirs);
    assert!(scratch.join("last.safetensors").is_file());
}

#[test]
fn resume_auto_without_its_resume_file_refuses_and_writes_nothing() {
    let t = tempfile::tempdir().unwrap();
    let data = tiny_data(t.path());
    let run = t.path().join("run");
    let o = run_in(
        t.path(),
        &mnist(&data, "run", &["--epochs", "3", "--stop-after-steps", "9"]),
    );
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    std::fs::remove_file(run.join("checkpoints/last.safetensors")).unwrap();
    let before = snapshot(&run);
    assert!(before.contains_key(&run.join("metrics.jsonl")));
    let o = run_in(
        t.path(),
        &mnist(&data, "run", &["--epochs", "3", "--resume", "auto"]),
    );
    fails_with(
        &o,
        1,
        &[
            "--resume auto: run holds a run",
            "run/checkpoints/last.safetensors",
            "nothing was written",
        ],
    );
    assert_eq!(snapshot(&run), before, "the run directory changed");

    // A finished run whose resume file is gone (deleted by hand, or dropped at its end): it is
    // finished, nothing is done, nothing touched (but the lock, which each process that opens
    // the run rewrites with its pid).
    let o = run_in(t.path(), &mnist(&data, "done", &["--epochs", "1"]));
    succeeds(&o);
    let done = t.path().join("done");
    std::fs::remove_file(done.join("checkpoints/last.safetensors")).unwrap();
    let before = unlocked(snapshot(&done));
    let o = run_in(
        t.path(),
        &mnist(&data, "done", &["--epochs", "1", "--resume", "auto"]),
    );
    succeeds(&o);
    assert!(stderr(&o).contains("already finished"), "{}", stderr(&o));
    assert_eq!(unlocked(snapshot(&done)), before);

    // A new directory with `--resume auto` still starts (a job script's first start).
    succeeds(&run_in(
        t.path(),
        &mnist(&data, "fresh", &["--epochs", "1", "--resume", "auto"]),
    ));
}

#[test]
fn output_paths_never_replace_a_runs_files() {
    let t = tempfile::tempdir().unwrap();
    // Edges appear in this cohort: `--new-edges` has curves to draw and scores to write.
    noisy_cohort(
        t.path(),
        &["--subjects", "40", "--nodes", "20", "--seed", "5"],
    );
    train_model(t.path(), "linear-drift", "res");
    let run = "res/runs/linear-drift";
    let dir = t.path().join(run).canonicalize().unwrap();
    let before = snapshot(&dir);
    let at = |f: &str| format!("{run}/{f}");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "plot-sc".into(),
                run.into(),
                "--new-edges".into(),
                "--scores".into(),
                at("per_subject.csv"),
                "--out".into(),
                "pr.svg".into(),
            ],
            "per_subject.csv",
        ),
        (
            vec![
                "plot-sc".into(),
                run.into(),
                "--strata".into(),
                "--out".into(),
                at("curves.svg"),
            ],
            "curves.svg",
        ),
        (
            vec!["plot".into(), run.into(), "--out".into(), at("curves.svg")],
            "curves.svg",
        ),
        (
            vec![
                "compare".into(),
                run.into(),
                "--plot".into(),
                at("metrics.csv"),
            ],
            "metrics.csv",
        ),
        (
            vec![
                "predict".into(),
                run.into(),
                "--next-visit".into(),
                "--out".into(),
                at("checkpoints"),
            ],
            "checkpoints",
        ),
        (
            vec!["eval-gnn".into(), run.into(), "--out".into(), run.into()],
            "is a run directory",
        ),
    ];
    for (args, names) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run_in(t.path(), &args);
        fails_with(
            &o,
            2,
            &[names, dir.to_str().unwrap(), "nothing was written"],
        );
        assert_eq!(snapshot(&dir), before, "{args:?} changed the run");
    }
    assert!(!t.path().join("pr.svg").exists());
    // A link to a run's file is the file.
    std::os::unix::fs::symlink(dir.join("test_metrics.json"), t.path().join("link.svg")).unwrap();
    let o = run_in(t.path(), &["plot", run, "--out", "link.svg"]);
    fails_with(&o, 2, &["test_metrics.json"]);
    // Beside the run's files, a new name is fine; elsewhere too.
    let scores = ["--new-edges", "--scores", "scores.csv", "--out", "pr.svg"];
    succeeds(&run_in(
        t.path(),
        &[&["plot-sc", run][..], &scores].concat(),
    ));
    succeeds(&run_in(t.path(), &["plot", run, "--out", &at("mine.svg")]));
}

#[test]
fn a_path_through_a_file_is_a_clear_error() {
    let t = tempfile::tempdir().unwrap();
    let data = tiny_data(t.path());
    std::fs::write(t.path().join("afile"), "x").unwrap();
    // Root bypasses permissions, not a file where a folder must be.
    let o = run_in(t.path(), &mnist(&data, "afile/run", &["--epochs", "1"]));
    fails_with(&o, 1, &["afile/run"]);
    // The run's record of its epoch files cannot be written: said, no panic.
    let o = run_in(
        t.path(),
        &mnist(&data, "run", &["--epochs", "2", "--stop-after-steps", "1"]),
    );
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    std::fs::create_dir_all(t.path().join("run/written_checkpoints.json/x")).unwrap();
    let o = run_in(
        t.path(),
        &mnist(
            &data,
            "run",
            &[
                "--epochs",
                "2",
                "--resume",
                "auto",
                "--keep-checkpoints",
                "all",
            ],
        ),
    );
    fails_with(&o, 1, &["written_checkpoints.json"]);
}

/// `sweep plan --out` naming a run directory is refused before anything is written there.
#[test]
fn a_sweep_is_not_planned_into_a_run_directory() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 10, 4, 1);
    train_model(t.path(), "eb-drift", "res");
    std::fs::write(
        t.path().join("spec.toml"),
        "command = \"train-gnn\"\nfolds = [0]\n[base]\nmodel = \"eb-drift\"\n\
         sc_dir = \"cohort/sc\"\nmorph_root = \"cohort/morph\"\n",
    )
    .unwrap();
    let run = t.path().join("res/runs/eb-drift");
    let before: Vec<_> = std::fs::read_dir(&run)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let o = run_in(
        t.path(),
        &[
            "sweep",
            "plan",
            "spec.toml",
            "--out",
            "res/runs/eb-drift",
            "--scheduler",
            "local",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is a run directory"), "{}", stderr(&o));
    let after: Vec<_> = std::fs::read_dir(&run)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(before, after);
}

/// Issue 75: a finished run keeps its best and last weights and drops its resume state (here,
/// train-mnist, whose `last.safetensors` is also its last weights: reduced to them), and says
/// so; `--keep-checkpoints resume` keeps it whole; a stopped run keeps it and resumes; a
/// finished run resumed again is finished; the reduced file still evaluates and is refused as
/// a resume source with a reason.
#[test]
fn a_finished_run_drops_its_resume_state_unless_asked_a_stopped_one_keeps_it() {
    use trainer::toolbox::checkpoint::Checkpoint;
    let t = tempfile::tempdir().unwrap();
    let data = tiny_data(t.path());
    let keys = |run: &str| -> Vec<String> {
        let ck =
            Checkpoint::load(&t.path().join(run).join("checkpoints/last.safetensors")).unwrap();
        let mut k: Vec<String> = ck.floats.keys().cloned().collect();
        k.extend(ck.counters.keys().cloned());
        k.extend(ck.metadata.keys().map(|m| format!("meta:{m}")));
        k
    };
    let optim = |k: &[String]| k.iter().any(|k| k.starts_with("optim."));
    let base = ["--epochs", "2", "--early-stop-metric", "test_loss"];

    // Stopped in epoch 2 (6 steps an epoch): the resume state stays whole, and resumes.
    let stop = [&base[..], &["--stop-after-steps", "8"]].concat();
    let o = run_in(t.path(), &mnist(&data, "parts", &stop));
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    assert!(optim(&keys("parts")), "{:?}", keys("parts"));
    assert!(!stderr(&o).contains("resume state"), "{}", stderr(&o));
    let o = run_in(
        t.path(),
        &mnist(&data, "parts", &[&base[..], &["--resume", "auto"]].concat()),
    );
    succeeds(&o);
    assert!(stderr(&o).contains("resuming from"), "{}", stderr(&o));
    // Finished: reduced to the last weights, said in the size line and in finished.json.
    let k = keys("parts");
    assert!(k.iter().any(|k| k.starts_with("model.")), "{k:?}");
    assert!(
        !optim(&k)
            && !k
                .iter()
                .any(|k| k.starts_with("best.") || k.starts_with("train.")),
        "{k:?}"
    );
    assert!(!k.contains(&"meta:run_state".to_string()), "{k:?}");
    let line = stderr(&o)
        .lines()
        .find(|l| l.contains("] checkpoints (best-last): "))
        .unwrap_or_else(|| panic!("no size line: {}", stderr(&o)))
        .to_string();
    assert!(
        line.contains("last ")
            && !line.contains("MB, resume ")
            && line.contains("reduced the resume state to the last weights (")
            && line.contains("--keep-checkpoints resume keeps it whole"),
        "{line}"
    );
    let finished: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(t.path().join("parts/finished.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        finished["resume_state"]["dropped"], "reduced to the last weights",
        "{finished}"
    );
    // Resumed again: finished, nothing touched.
    let run = t.path().join("parts");
    let before = unlocked(snapshot(&run));
    let o = run_in(
        t.path(),
        &mnist(&data, "parts", &[&base[..], &["--resume", "auto"]].concat()),
    );
    succeeds(&o);
    assert!(stderr(&o).contains("already finished"), "{}", stderr(&o));
    assert_eq!(unlocked(snapshot(&run)), before);
    // The last weights still evaluate; as a resume source elsewhere they are refused, saying why.
    let last = run.join("checkpoints/last.safetensors");
    let o = run_in(
        t.path(),
        &[
            "eval",
            "--checkpoint",
            last.to_str().unwrap(),
            "--data-dir",
            &data,
        ],
    );
    succeeds(&o);
    let o = run_in(
        t.path(),
        &mnist(
            &data,
            "elsewhere",
            &[&base[..], &["--resume", last.to_str().unwrap()]].concat(),
        ),
    );
    fails_with(
        &o,
        1,
        &["not a resume checkpoint", "--keep-checkpoints resume"],
    );

    // `--keep-checkpoints resume`: kept whole at the end, and the size line says "resume".
    let keep = [&base[..], &["--keep-checkpoints", "resume"]].concat();
    let o = run_in(t.path(), &mnist(&data, "kept", &keep));
    succeeds(&o);
    assert!(optim(&keys("kept")), "{:?}", keys("kept"));
    let err = stderr(&o);
    assert!(
        err.contains("] checkpoints (resume): ") && !err.contains("resume state"),
        "{err}"
    );
    // The same weights either way.
    let weights = |run: &str| {
        let ck =
            Checkpoint::load(&t.path().join(run).join("checkpoints/last.safetensors")).unwrap();
        ck.model()
    };
    assert_eq!(weights("parts"), weights("kept"));
}
