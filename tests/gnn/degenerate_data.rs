//! Degenerate cohorts, checkpoints and run states, each built from a healthy one: refused with an
//! error naming the file (and line, subject or tensor), or, where the reference accepts the
//! data, trained with a warning on stderr that `run_meta.json` records (`extra.data_defects`,
//! `extra.data_warnings`).

use crate::common;

use std::path::Path;
use std::process::Output;

use common::*;
use serde_json::Value;
use trainer::toolbox::checkpoint::Checkpoint;

fn fails_with(o: &Output, needles: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks `{n}`:\n{err}");
    }
}

/// `train-gnn --model linear-drift` on `dir/cohort` into `dir/res/runs/<name>`.
fn gnn(dir: &Path, name: &str) -> Output {
    gnn_with(dir, name, &[])
}

/// [`gnn`] with more flags.
fn gnn_with(dir: &Path, name: &str, extra: &[&str]) -> Output {
    let base = [
        "train-gnn",
        "--model",
        "linear-drift",
        "--sc_dir",
        "cohort/sc",
        "--morph_root",
        "cohort/morph",
        "--subject_info_csv",
        "cohort/subject_info_sc.csv",
        "--results_dir",
        "res",
        "--cv_fold",
        "0",
        "--max_epochs",
        "1",
        "--run-name",
        name,
    ];
    run_in(dir, &[&base[..], extra].concat())
}

fn meta(dir: &Path, name: &str) -> Value {
    let path = dir.join("res/runs").join(name).join("run_meta.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A healthy synthetic cohort under `dir/cohort`.
fn cohort(dir: &Path) {
    synth_cohort(dir, 10, 12, 3);
}

/// The subject table's lines, and the 0-based index of the first data line whose subject has a
/// row after it (a baseline with a follow-up on the next line).
fn table_with_pair(dir: &Path) -> (Vec<String>, usize) {
    let text = std::fs::read_to_string(dir.join("cohort/subject_info_sc.csv")).unwrap();
    let lines: Vec<String> = text.lines().map(String::from).collect();
    let subject = |l: &str| l.split(',').next().unwrap().to_string();
    let i = (1..lines.len() - 1)
        .find(|&i| subject(&lines[i]) == subject(&lines[i + 1]))
        .expect("a subject with two scans");
    (lines, i)
}

fn set_cell(line: &mut String, column: usize, value: &str) {
    let mut cells: Vec<&str> = line.split(',').collect();
    cells[column] = value;
    *line = cells.join(",");
}

fn write_table(dir: &Path, lines: &[String]) {
    std::fs::write(
        dir.join("cohort/subject_info_sc.csv"),
        lines.join("\n") + "\n",
    )
    .unwrap();
}

/// The SC files of the cohort, sorted.
fn sc_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("cohort/sc"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// Sets entry (i, j) (0-based) of an SC file to `value`.
fn set_entry(path: &Path, i: usize, j: usize, value: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    set_cell(&mut lines[i], j, value);
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn a_cohort_without_any_follow_up_is_named_in_a_warning_and_run_meta() {
    let t = tempfile::tempdir().unwrap();
    cohort(t.path());
    for f in sc_files(t.path()) {
        if !f.to_string_lossy().contains("baseline") {
            std::fs::remove_file(f).unwrap();
        }
    }
    let o = gnn(t.path(), "single");
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("cohort/sc: no subject has two scans: nothing can be forecast"),
        "{err}"
    );
    let m = meta(t.path(), "single");
    assert_eq!(m["extra"]["data_defects"]["subjects_with_two_scans"], 0);
    let warnings = m["extra"]["data_warnings"].to_string();
    assert!(warnings.contains("no subject has two scans"), "{warnings}");
}

#[test]
fn a_negative_edge_weight_is_an_error_naming_file_line_and_column() {
    let t = tempfile::tempdir().unwrap();
    cohort(t.path());
    let victim = sc_files(t.path())[3].clone();
    set_entry(&victim, 1, 2, "-0.5");
    set_entry(&victim, 2, 1, "-0.5");
    let o = gnn(t.path(), "negative");
    let name = victim.file_name().unwrap().to_string_lossy().into_owned();
    fails_with(
        &o,
        &[
            &format!("{name}: line 2, column 3: negative edge weight \"-0.5\""),
            "≥ 0",
        ],
    );
    assert!(!t.path().join("res/runs/negative").exists());
}

#[test]
fn an_asymmetric_matrix_is_symmetrised_with_a_named_warning() {
    let t = tempfile::tempdir().unwrap();
    cohort(t.path());
    let victim = sc_files(t.path())[2].clone();
    set_entry(&victim, 0, 5, "7.25");
    let o = gnn(t.path(), "asym");
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let name = victim.file_name().unwrap().to_string_lossy().into_owned();
    let needle = format!("{name}: not symmetric: 1 pair(s)");
    assert!(err.contains(&needle) && err.contains("(7.25)"), "{err}");
    let m = meta(t.path(), "asym");
    assert_eq!(m["extra"]["data_defects"]["sc_asymmetric"], 1, "{m}");
    assert!(m["extra"]["data_warnings"].to_string().contains(&needle));
}

#[test]
fn follow_ups_not_older_than_the_baseline_are_errors_naming_subject_and_lines() {
    let t = tempfile::tempdir().unwrap();
    cohort(t.path());
    let (lines, i) = table_with_pair(t.path());
    let baseline_age: f64 = lines[i].split(',').nth(3).unwrap().parse().unwrap();
    let subject = lines[i].split(',').next().unwrap().to_string();
    for (case, age) in [("younger", baseline_age - 1.0), ("same", baseline_age)] {
        let mut edited = lines.clone();
        set_cell(&mut edited[i + 1], 3, &age.to_string());
        write_table(t.path(), &edited);
        let o = gnn(t.path(), case);
        fails_with(
            &o,
            &[
                &format!("subject_info_sc.csv: subject {subject}: "),
                &format!("(table line {}, age {age};", i + 2),
                &format!("(table line {}, age {baseline_age};", i + 1),
                "is not older than the visit before it",
            ],
        );
        assert!(!t.path().join("res/runs").join(case).exists());
    }
}

#[test]
fn negative_ages_are_errors_and_mixed_ages_are_named_warnings() {
    let t = tempfile::tempdir().unwrap();
    cohort(t.path());
    let (lines, i) = table_with_pair(t.path());
    let scan = lines[i].split(',').nth(2).unwrap().to_string();
    let mut edited = lines.clone();
    set_cell(&mut edited[i], 3, "-3");
    write_table(t.path(), &edited);
    let o = gnn(t.path(), "negative");
    fails_with(
        &o,
        &[&format!(
            "subject_info_sc.csv: line {}: scan {scan}: negative age \"-3\"",
            i + 1
        )],
    );

    // A follow-up without an age: its age is its visit index (as the reference), which the
    // baseline's table age makes meaningless: named, counted.
    let mut edited = lines.clone();
    set_cell(&mut edited[i + 1], 3, "");
    write_table(t.path(), &edited);
    let o = gnn(t.path(), "mixed");
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let subject = lines[i].split(',').next().unwrap();
    assert!(
        err.contains(&format!("subject {subject}: ages of {scan}")),
        "{err}"
    );
    let m = meta(t.path(), "mixed");
    assert_eq!(m["extra"]["data_defects"]["subjects_mixing_ages"], 1, "{m}");
}

/// A stopped train-mnist run in `dir/run` (10 epochs planned, one step done), and its resume
/// checkpoint.
fn stopped_mnist(dir: &Path) -> (String, std::path::PathBuf) {
    let data = dir.join("data");
    write_tiny_mnist(&data, 96);
    let data = data.to_str().unwrap().to_string();
    let o = run_in(dir, &mnist(&data, &["--stop-after-steps", "1"]));
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    let last = dir.join("run/checkpoints/last.safetensors");
    assert!(last.is_file());
    (data, last)
}

fn mnist<'a>(data: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "train-mnist",
        "--data-dir",
        data,
        "--limit-train",
        "96",
        "--limit-test",
        "32",
        "--batch-size",
        "16",
        "--epochs",
        "10",
        "--out",
        "run",
    ];
    v.extend(extra);
    v
}

#[test]
fn a_checkpoint_with_non_finite_weights_is_refused_naming_file_and_tensor() {
    let t = tempfile::tempdir().unwrap();
    let (data, last) = stopped_mnist(t.path());
    let mut ck = Checkpoint::load(&last).unwrap();
    let (name, tensor) = ck
        .floats
        .iter_mut()
        .find(|(k, _)| k.starts_with("model."))
        .unwrap();
    let name = name.clone();
    tensor.data[0] = f32::NAN;
    ck.save(&last).unwrap();
    let o = run_in(t.path(), &mnist(&data, &["--resume", "auto"]));
    fails_with(
        &o,
        &[
            "last.safetensors",
            &format!("tensor `{name}` holds 1 non-finite value(s)"),
        ],
    );
}

#[test]
fn a_run_state_at_an_impossible_epoch_is_refused_naming_the_file() {
    let t = tempfile::tempdir().unwrap();
    let (data, last) = stopped_mnist(t.path());
    let mut ck = Checkpoint::load(&last).unwrap();
    let mut state: Value = serde_json::from_str(&ck.metadata["run_state"]).unwrap();
    state["epoch"] = 1_000_000.into();
    ck.metadata
        .insert("run_state".into(), serde_json::to_string(&state).unwrap());
    ck.counters.insert("train.epoch".into(), 1_000_000);
    ck.save(&last).unwrap();
    let o = run_in(t.path(), &mnist(&data, &["--resume", "auto"]));
    fails_with(
        &o,
        &[
            "last.safetensors: impossible run state",
            "1000000 epoch(s) done in stage 1",
            "at most 10 epoch(s)",
        ],
    );
}

/// A monitor that never moves (a learning rate too small to change a weight) is a warning in
/// the run's log and in `finished.json`; a moving one is not.
#[test]
fn a_monitor_that_never_moves_is_a_warning_in_the_log_and_finished_json() {
    let t = tempfile::tempdir().unwrap();
    let data = fashion_dir();
    let mnist = |out: &str, lr: &str| {
        let o = run_in(
            t.path(),
            &[
                "train-mnist",
                "--data-dir",
                data.to_str().unwrap(),
                "--limit-train",
                "64",
                "--limit-test",
                "64",
                "--epochs",
                "3",
                "--lr",
                lr,
                "--early-stop-metric",
                "test_loss",
                "--out",
                out,
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let finished: Value = serde_json::from_str(
            &std::fs::read_to_string(t.path().join(out).join("finished.json")).unwrap(),
        )
        .unwrap();
        (stderr(&o), finished["warnings"].as_array().unwrap().clone())
    };
    let (log, warnings) = mnist("flat", "1e-30");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let w = warnings[0].as_str().unwrap();
    assert!(
        w.contains("the monitor test_loss did not change over 3 epochs"),
        "{w}"
    );
    assert_eq!(
        log.matches("warning: the monitor test_loss").count(),
        1,
        "{log}"
    );
    let (log, warnings) = mnist("moving", "1e-3");
    assert!(
        warnings.is_empty() && !log.contains("did not change"),
        "{warnings:?}\n{log}"
    );
}

/// Two runs whose setting makes no difference to the model (a learning rate, to a closed-form
/// fit): `compare` says their test results are identical and that the setting had no effect.
#[test]
fn compare_names_runs_with_identical_results() {
    let t = tempfile::tempdir().unwrap();
    cohort(t.path());
    for (name, lr) in [("a", "1e-4"), ("b", "5e-3")] {
        let o = gnn_with(t.path(), name, &["--learning_rate", lr]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let o = run_in(t.path(), &["compare", "res/runs/a", "res/runs/b"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("[compare] warning: 2 runs have identical test results")
            && err.contains("res/runs/a, res/runs/b"),
        "{err}"
    );
    assert!(
        !err.contains("scores exactly as the identity forecast"),
        "{err}"
    );
    // A forecast that scores as the identity forecast (here written so): named.
    let path = t.path().join("res/runs/a/test_metrics.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    m["model"]["sc_log_mse"] = m["identity_baseline"]["sc_log_mse"].clone();
    std::fs::write(&path, serde_json::to_string(&m).unwrap()).unwrap();
    let o = run_in(t.path(), &["compare", "res/runs/a", "res/runs/b"]);
    let err = stderr(&o);
    assert!(
        err.contains("res/runs/a: its forecast scores exactly as the identity forecast"),
        "{err}"
    );
    assert!(!err.contains("identical test results"), "{err}");
}

/// `sweep run` ends with every task's degeneracy warnings in one block (a transcript of it is in
/// docs/guide/sweep.md): two MNIST tasks whose learning rate moves no weight.
#[test]
fn sweep_run_ends_with_every_tasks_warnings_in_one_block() {
    let t = tempfile::tempdir().unwrap();
    let spec = format!(
        "command = \"train-mnist\"\n[base]\ndata_dir = \"{}\"\nlimit_train = 64\n\
         limit_test = 64\nepochs = 3\nearly_stop_metric = \"test_loss\"\n[grid]\n\
         lr = [1e-30, 2e-30]\n",
        fashion_dir().display()
    );
    std::fs::write(t.path().join("spec.toml"), spec).unwrap();
    // `sweep plan spec.toml --out S --scheduler local`, which must succeed.
    crate::sweep_helpers::plan(t.path(), "local", None);
    let o = run_in(t.path(), &["sweep", "run", "S"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let block = err
        .split("[sweep] 2 warning(s) of the tasks run")
        .nth(1)
        .unwrap_or_else(|| panic!("no block of warnings at the end:\n{err}"));
    for task in ["task 0 ", "task 1 "] {
        assert!(
            block
                .lines()
                .any(|l| l.contains(task) && l.contains("did not change")),
            "{task}: {block}"
        );
    }
}
