//! One run per directory, resumes that refuse what they cannot continue, no silent degradation
//! (issue 24): each case asserts the exit code, the message naming the cause, and the files
//! left behind.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use common::*;

pub(crate) fn mnist_args<'a>(data: &'a str, out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "train-mnist",
        "--data-dir",
        data,
        "--limit-train",
        "96",
        "--limit-test",
        "32",
    ];
    if !extra.contains(&"--batch-size") {
        v.extend(["--batch-size", "16"]);
    }
    if !out.is_empty() {
        v.extend(["--out", out]);
    }
    v.extend(extra);
    v
}

pub(crate) fn tiny_data(dir: &Path) -> String {
    let d = dir.join("data");
    write_tiny_mnist(&d, 96);
    d.to_str().unwrap().to_string()
}

pub(crate) fn fails_with(o: &Output, code: i32, needles: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks `{n}`:\n{err}");
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn a_second_run_into_a_live_or_finished_directory_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let data = fashion_dir();
    let data = data.to_str().unwrap();
    // A run long enough to be alive while the second one starts.
    let long = [
        "train-mnist",
        "--data-dir",
        data,
        "--limit-train",
        "6000",
        "--limit-test",
        "100",
        "--epochs",
        "2",
        "--out",
        "run",
    ];
    let first = trainer()
        .args(long)
        .current_dir(t.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lock = t.path().join("run/.lock");
    let t0 = Instant::now();
    while !read_or_empty(&lock).contains(&first.id().to_string()) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the first run never locked"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = run_in(t.path(), &long);
    fails_with(
        &second,
        1,
        &["run directory run is in use by another run", "pid"],
    );
    let first = first.wait_with_output().unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    let csv = read(&t.path().join("run/metrics.csv"));
    let epochs: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(epochs, ["1", "2"], "{csv}");

    // Into the finished directory, without --resume: refused, nothing touched.
    let before = read(&t.path().join("run/metrics.jsonl"));
    let last = std::fs::metadata(t.path().join("run/checkpoints/last.safetensors"))
        .unwrap()
        .modified()
        .unwrap();
    let again = run_in(t.path(), &long);
    fails_with(&again, 1, &["already holds a run", "--resume auto"]);
    assert_eq!(read(&t.path().join("run/metrics.jsonl")), before);
    let last_after = std::fs::metadata(t.path().join("run/checkpoints/last.safetensors"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(
        last, last_after,
        "the finished run's checkpoint was rewritten"
    );
}

fn read_or_empty(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

#[test]
fn default_names_are_unique_within_one_second() {
    let t = tempfile::tempdir().unwrap();
    let data = tiny_data(t.path());
    let spawn = |seed: &str| {
        trainer()
            .args(mnist_args(&data, "", &["--seed", seed]))
            .current_dir(t.path())
            .output()
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| spawn("1"));
        let b = s.spawn(|| spawn("2"));
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    assert!(a.status.success(), "{}", stderr(&a));
    assert!(b.status.success(), "{}", stderr(&b));
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(t.path().join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    let mut seeds: Vec<String> = dirs
        .iter()
        .map(|d| {
            let c: toml::Table = read(&d.join("config.toml")).parse().unwrap();
            c["optimisation"]["seed"].to_string()
        })
        .collect();
    seeds.sort();
    assert_eq!(seeds, ["1", "2"]);
    for d in &dirs {
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.ends_with("_local") && name.contains("_p"), "{name}");
    }
}

#[test]
fn mnist_resume_refuses_changed_settings_naming_each() {
    let t = tempfile::tempdir().unwrap();
    let data = tiny_data(t.path());
    let o = run_in(
        t.path(),
        &mnist_args(&data, "run", &["--epochs", "2", "--stop-after-steps", "3"]),
    );
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    let config = read(&t.path().join("run/config.toml"));
    let o = run_in(
        t.path(),
        &mnist_args(
            &data,
            "run",
            &[
                "--epochs",
                "2",
                "--resume",
                "auto",
                "--batch-size",
                "32",
                "--lr",
                "0.002",
            ],
        ),
    );
    fails_with(
        &o,
        1,
        &[
            "effective_batch_size: checkpoint 16, this run 32",
            "lr: checkpoint 0.001, this run 0.002",
        ],
    );
    assert_eq!(
        read(&t.path().join("run/config.toml")),
        config,
        "config.toml rewritten"
    );
    assert!(!t.path().join("run/metrics.csv").exists());
    // Another data directory is refused too.
    let other = t.path().join("other");
    write_tiny_mnist(&other, 96);
    let o = run_in(
        t.path(),
        &mnist_args(
            other.to_str().unwrap(),
            "run",
            &["--epochs", "2", "--resume", "auto"],
        ),
    );
    fails_with(&o, 1, &["data_dir: checkpoint"]);
    // The same settings continue; more epochs are allowed.
    let o = run_in(
        t.path(),
        &mnist_args(&data, "run", &["--epochs", "3", "--resume", "auto"]),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read(&t.path().join("run/metrics.csv")).lines().count(), 4);
}

#[test]
fn a_torn_metrics_line_is_dropped_not_fatal() {
    let t = tempfile::tempdir().unwrap();
    let data = tiny_data(t.path());
    // Stopped inside epoch 2 (6 steps an epoch), after epoch 1's row.
    let o = run_in(
        t.path(),
        &mnist_args(&data, "run", &["--epochs", "2", "--stop-after-steps", "8"]),
    );
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    let jsonl = t.path().join("run/metrics.jsonl");
    let mut text = read(&jsonl);
    text.push_str("{\"epoch\": 2, \"train_lo");
    std::fs::write(&jsonl, text).unwrap();
    let o = run_in(
        t.path(),
        &mnist_args(&data, "run", &["--epochs", "2", "--resume", "auto"]),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("dropping its last line"),
        "{}",
        stderr(&o)
    );
    let rows: Vec<serde_json::Value> = read(&jsonl)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let epochs: Vec<u64> = rows.iter().map(|r| r["epoch"].as_u64().unwrap()).collect();
    assert_eq!(epochs, [1, 2]);
    assert_eq!(read(&t.path().join("run/metrics.csv")).lines().count(), 3);
}

#[test]
fn numbers_and_contradictions_are_usage_errors_leaving_nothing() {
    let t = tempfile::tempdir().unwrap();
    let data = tiny_data(t.path());
    std::fs::write(t.path().join("c.toml"), "epochs = 0\n").unwrap();
    let cases: [(&[&str], &[&str]); 6] = [
        (&["--epochs", "0"], &["--epochs", "at least 1"]),
        (&["--limit-train", "0"], &["--limit-train", "at least 1"]),
        (&["--lr", "NaN"], &["--lr", "finite"]),
        (&["--lr=-1"], &["--lr", "greater than 0"]),
        (
            &["--config", "c.toml"],
            &["c.toml", "key `epochs`", "at least 1"],
        ),
        (&["--run-name", "x"], &["--run-name", "--out"]),
    ];
    for (extra, needles) in cases {
        let o = run_in(t.path(), &mnist_args(&data, "run", extra));
        fails_with(&o, 2, needles);
        assert!(
            !t.path().join("run").exists(),
            "{extra:?} left a run directory"
        );
        assert!(
            !t.path().join("runs").exists(),
            "{extra:?} left a run directory"
        );
    }
    // A missing --resume file: exit 1, nothing created.
    let o = run_in(
        t.path(),
        &mnist_args(&data, "run", &["--resume", "nope.safetensors"]),
    );
    fails_with(&o, 1, &["nope.safetensors", "no such checkpoint"]);
    assert!(!t.path().join("run").exists());
}

#[test]
fn leftover_temporaries_of_dead_processes_are_removed() {
    let t = tempfile::tempdir().unwrap();
    let data = tiny_data(t.path());
    let o = run_in(t.path(), &mnist_args(&data, "run", &["--epochs", "1"]));
    assert!(o.status.success(), "{}", stderr(&o));
    // A process that has ended: one we ran and waited for.
    let dead = std::process::Command::new("true").spawn().unwrap();
    let pid = dead.id();
    dead.wait_with_output().unwrap();
    let leftover = t
        .path()
        .join(format!("run/checkpoints/.last.safetensors.tmp.{pid}"));
    std::fs::write(&leftover, vec![0u8; 1024]).unwrap();
    let o = run_in(
        t.path(),
        &mnist_args(&data, "run", &["--epochs", "2", "--resume", "auto"]),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !leftover.exists(),
        "the dead process's temporary file is still there"
    );
    assert!(stderr(&o).contains("which has ended"), "{}", stderr(&o));
}

/// The names of a run's checkpoint files, sorted.
fn checkpoint_names(run: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(run.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".safetensors"))
        .collect();
    names.sort();
    names
}

/// The log line of the checkpoints' sizes.
fn sizes_line(o: &Output, policy: &str) -> String {
    let err = stderr(o);
    let head = format!("] checkpoints ({policy}): ");
    let line = err.lines().find(|l| l.contains(&head));
    line.unwrap_or_else(|| panic!("no `{head}` line:\n{err}"))
        .to_string()
}

#[test]
fn checkpoints_keep_best_and_last_unless_all_and_resume_after_removal_is_exact() {
    let t = tempfile::tempdir().unwrap();
    let data = tiny_data(t.path());
    let base = ["--epochs", "4", "--early-stop-metric", "test_loss"];
    let best_last = ["best.safetensors", "last.safetensors"];
    let o = run_in(t.path(), &mnist_args(&data, "whole", &base));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(checkpoint_names(&t.path().join("whole")), best_last);
    // Finished: the resume checkpoint reduced to the last weights (train-mnist's only file of
    // them), said in the size line.
    let line = sizes_line(&o, "best-last");
    assert!(
        line.contains(": best ")
            && line.contains(" MB, last ")
            && line.contains("reduced the resume state to the last weights"),
        "{line}"
    );

    let mut all = base.to_vec();
    all.extend(["--keep-checkpoints", "all"]);
    let o = run_in(t.path(), &mnist_args(&data, "all", &all));
    assert!(o.status.success(), "{}", stderr(&o));
    let epochs = (1..=4).map(|e| format!("epoch_00{e}.safetensors"));
    let want: Vec<String> = ["best.safetensors".to_string()]
        .into_iter()
        .chain(epochs)
        .chain(["last.safetensors".to_string()])
        .collect();
    assert_eq!(checkpoint_names(&t.path().join("all")), want);
    assert!(sizes_line(&o, "all").contains(", 4 epoch files "));

    // Stopped in epoch 2 keeping every epoch (6 steps an epoch), then in epoch 3 with the
    // default, which removes epoch 1's file, then resumed to the end: as if uninterrupted.
    let mut first = all.clone();
    first.extend(["--stop-after-steps", "9"]);
    let o = run_in(t.path(), &mnist_args(&data, "parts", &first));
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    let parts = t.path().join("parts");
    assert!(checkpoint_names(&parts).contains(&"epoch_001.safetensors".into()));
    let mut second = base.to_vec();
    second.extend(["--resume", "auto", "--stop-after-steps", "8"]);
    let o = run_in(t.path(), &mnist_args(&data, "parts", &second));
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    assert!(sizes_line(&o, "best-last").contains(", removed 1 older ("));
    assert_eq!(checkpoint_names(&parts), best_last);
    let o = run_in(
        t.path(),
        &mnist_args(&data, "parts", &[&base[..], &["--resume", "auto"]].concat()),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("resuming from"), "{}", stderr(&o));
    assert_eq!(checkpoint_names(&parts), best_last);
    let whole = t.path().join("whole");
    assert_eq!(
        metrics_without_timing(&whole),
        metrics_without_timing(&parts)
    );
    for f in best_last {
        let tensors = |run: &Path| checkpoint_tensors(&run.join("checkpoints").join(f));
        assert_eq!(tensors(&whole), tensors(&parts), "{f} differs");
    }
}

fn synth(dir: &Path) {
    synth_cohort(dir, 10, 12, 3);
}

fn gnn<'a>(name: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "train-gnn",
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
        "2",
        "--latent_dim",
        "4",
        "--hidden_dim",
        "8",
        "--solver_steps",
        "1",
        "--lambda_topo",
        "0",
        "--run-name",
        name,
    ];
    v.extend(extra);
    v
}

#[test]
fn gnn_resume_names_the_differing_key_and_resume_from_refuses_other_models() {
    let t = tempfile::tempdir().unwrap();
    synth(t.path());
    let o = run_in(t.path(), &gnn("a", &["--stop-after-steps", "1"]));
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    let o = run_in(
        t.path(),
        &gnn("a", &["--resume", "auto", "--learning_rate", "0.002"]),
    );
    fails_with(&o, 1, &["learning_rate: checkpoint ", "this run 0.002"]);
    let line = stderr(&o)
        .lines()
        .find(|l| l.contains("other settings"))
        .unwrap_or_default()
        .to_string();
    assert!(
        line.len() < 400,
        "the message should name the key, not print fingerprints: {line}"
    );

    // An MNIST checkpoint into --resume_from: refused before any run directory exists.
    let data = tiny_data(t.path());
    let o = run_in(t.path(), &mnist_args(&data, "m", &["--epochs", "1"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run_in(
        t.path(),
        &gnn("b", &["--resume_from", "m/checkpoints/last.safetensors"]),
    );
    fails_with(&o, 1, &["--resume-from", "holds model `mnist_cnn`"]);
    assert!(!t.path().join("res/runs/b").exists());
}

/// The morphology files of the cohort, in path order.
fn morph_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut v = Vec::new();
    walk(&dir.join("cohort/morph"), &mut v);
    v.sort();
    v
}

/// Keeps the columns of a one-row CSV for which `keep(name)` holds.
fn drop_columns(path: &Path, keep: impl Fn(&str) -> bool) {
    let text = read(path);
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    let cols: Vec<usize> = (0..lines[0].len()).filter(|&c| keep(lines[0][c])).collect();
    let out: Vec<String> = lines
        .iter()
        .map(|l| cols.iter().map(|&c| l[c]).collect::<Vec<_>>().join(","))
        .collect();
    std::fs::write(path, out.join("\n") + "\n").unwrap();
}

#[test]
fn cohort_defects_are_errors_or_named_warnings() {
    let t = tempfile::tempdir().unwrap();
    synth(t.path());
    let table = t.path().join("cohort/subject_info_sc.csv");
    let original = read(&table);

    // A subject table without `age`: an error naming the file and the column.
    drop_columns(&table, |c| c != "age");
    let o = run_in(t.path(), &gnn("noage", &[]));
    fails_with(&o, 1, &["subject_info_sc.csv", "age"]);
    assert!(!t.path().join("res").exists());

    // Tolerated as the reference does, each affected file or row named, counted in run_meta:
    // a morphology file without any `_Curv` column, a duplicated scanid, an unparsable age.
    let mut lines: Vec<String> = original.lines().map(String::from).collect();
    let second = lines[2].clone();
    let mut cells: Vec<String> = lines[1].split(',').map(String::from).collect();
    cells[3] = "nine".into();
    lines[1] = cells.join(",");
    lines.push(second);
    let duplicate = format!("(lines 3, {}; the last wins)", lines.len());
    std::fs::write(&table, lines.join("\n") + "\n").unwrap();
    let victim = morph_files(t.path()).pop().unwrap();
    drop_columns(&victim, |c| !c.ends_with("_Curv"));
    let o = run_in(t.path(), &gnn("warned", &[]));
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let victim_name = victim.file_name().unwrap().to_string_lossy().into_owned();
    for needle in [
        format!("{victim_name}: lacks all 12 `_Curv` columns"),
        "age is not a number at line 2".to_string(),
        "\"nine\"".to_string(),
        duplicate,
    ] {
        assert!(err.contains(&needle), "stderr lacks `{needle}`:\n{err}");
    }
    let meta: serde_json::Value =
        serde_json::from_str(&read(&t.path().join("res/runs/warned/run_meta.json"))).unwrap();
    let d = &meta["extra"]["data_defects"];
    assert_eq!(d["morph_files_missing_columns"], 1, "{d}");
    assert_eq!(d["table_duplicate_scan_ids"], 1, "{d}");
    assert_eq!(d["table_unparsable_ages"], 1, "{d}");
}

/// A resume checkpoint whose run state was edited to positions the data cannot hold (10^15
/// items of an epoch of 96, step 2^64 − 1) is refused, naming the values, and the run's files
/// are left as they were; before, the first trained no step and the second overflowed.
#[test]
fn hand_edited_run_states_beyond_the_data_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let data = tiny_data(t.path());
    // 6 steps an epoch: stopped in epoch 2, with epoch 1's row written.
    let stop = ["--epochs", "3", "--stop-after-steps", "8"];
    let o = run_in(t.path(), &mnist_args(&data, "edited", &stop));
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    let last = t.path().join("edited/checkpoints/last.safetensors");
    let metrics = read(&t.path().join("edited/metrics.jsonl"));
    for (key, value) in [("epoch_items", "10**15"), ("global_step", "2**64 - 1")] {
        let script = format!(
            "import json, sys\nfrom safetensors import safe_open\n\
             from safetensors.numpy import save_file\np = sys.argv[1]\n\
             with safe_open(p, 'np') as f:\n    meta = f.metadata()\n    \
             tensors = {{k: f.get_tensor(k) for k in f.keys()}}\n\
             state = json.loads(meta['run_state'])\nstate['{key}'] = {value}\n\
             meta['run_state'] = json.dumps(state)\nsave_file(tensors, p + '.edited', metadata=meta)\n"
        );
        let o = std::process::Command::new("python3")
            .args(["-c", &script])
            .arg(&last)
            .output()
            .expect("python3 with safetensors (scripts/setup.sh)");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let saved = std::fs::read(&last).unwrap();
        std::fs::rename(last.with_extension("safetensors.edited"), &last).unwrap();
        let resume = ["--epochs", "3", "--resume", "auto"];
        let o = run_in(t.path(), &mnist_args(&data, "edited", &resume));
        fails_with(&o, 1, &["impossible run state", "96 item(s)"]);
        assert_eq!(
            read(&t.path().join("edited/metrics.jsonl")),
            metrics,
            "{key}"
        );
        std::fs::write(&last, saved).unwrap();
    }
}
