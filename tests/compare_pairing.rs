//! `trainer compare` counts what pairs right: runs of different cohorts are not pooled unless
//! `--pool-cohorts`, `--against MODEL` pairs each run with that model's run of the same fold and
//! seed and names it, a run given twice (another spelling, a symbolic link) is refused, and a
//! per-subject value missing or not finite on either side is dropped and counted, never a
//! panic or a number. The run directories are written by hand: only the files `compare` reads.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::{Value, json};

/// A finished run of `model` (fold `fold`, seed `seed`, cohort `cohort`) whose per-subject
/// `sc_log_mse` cells are `cells` (identity 1 each; an empty cell is a NaN the run wrote).
fn run(
    root: &Path,
    name: &str,
    model: &str,
    fold: u32,
    seed: u32,
    cohort: &str,
    cells: &[&str],
) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let write = |file: &str, v: Value| std::fs::write(dir.join(file), v.to_string()).unwrap();
    write(
        "args.json",
        json!({"model_kind": model, "seed": seed, "sc_dir": format!("{cohort}/sc"),
               "cohort_fingerprint": format!("{cohort:0<32}")}),
    );
    write(
        "clg_ode_results.json",
        json!({"model": model, "cv_fold": fold}),
    );
    let mean = cells
        .iter()
        .filter_map(|c| c.parse::<f64>().ok())
        .sum::<f64>()
        / cells.len() as f64;
    write(
        "test_metrics.json",
        json!({"model": {"sc_log_mse": mean}, "identity_baseline": {"sc_log_mse": 1.0}}),
    );
    let mut csv = String::from("subject,forecast,model_sc_log_mse,identity_sc_log_mse\n");
    for (i, c) in cells.iter().enumerate() {
        csv.push_str(&format!("s{i},1,{c},1\n"));
    }
    std::fs::write(dir.join("per_subject.csv"), csv).unwrap();
    dir
}

fn compare(cwd: &Path, runs: &[&Path], extra: &[&str]) -> std::process::Output {
    let mut args: Vec<String> = vec!["compare".into()];
    args.extend(runs.iter().map(|r| r.display().to_string()));
    args.extend(extra.iter().map(|s| s.to_string()));
    run_in(cwd, &args.iter().map(String::as_str).collect::<Vec<_>>())
}

const CELLS: [&str; 6] = ["1.5", "2", "2.5", "3", "3.5", "4"];

#[test]
fn runs_of_different_cohorts_are_pooled_only_when_asked() {
    let t = tempfile::tempdir().unwrap();
    let a = run(t.path(), "a", "clg-ode", 0, 1, "aaaa", &CELLS);
    let b = run(t.path(), "b", "clg-ode", 0, 2, "bbbb", &CELLS);
    let o = compare(t.path(), &[&a, &b], &["--format", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let e = stderr(&o);
    for what in [
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "different cohorts",
        "--pool-cohorts",
    ] {
        assert!(e.contains(what), "no `{what}` in: {e}");
    }
    assert!(
        e.contains(&format!("{:0<32}", "aaaa")) && e.contains(&format!("{:0<32}", "bbbb")),
        "{e}"
    );

    // Asked: pooled, with a warning. Grouped by cohort: two groups, nothing pooled.
    let o = compare(t.path(), &[&a, &b], &["--format", "json", "--pool-cohorts"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("warning"), "{}", stderr(&o));
    let o = compare(
        t.path(),
        &[&a, &b],
        &["--format", "json", "--group-by", "model,cohort"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let groups: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let n = groups
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["group"]["model"] == "clg-ode")
        .count();
    assert_eq!(n, 2, "{groups}");

    // `--against` pools a run with its partner: refused across cohorts too.
    let eb = run(t.path(), "eb", "eb-drift", 0, 2, "bbbb", &CELLS);
    let o = compare(t.path(), &[&a, &eb], &["--against", "eb-drift"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("different cohorts"), "{}", stderr(&o));
    let o = compare(
        t.path(),
        &[&a, &eb],
        &["--against", "eb-drift", "--pool-cohorts"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn against_pairs_each_run_with_its_folds_and_seeds_partner() {
    let t = tempfile::tempdir().unwrap();
    let eb0 = run(
        t.path(),
        "eb0",
        "eb-drift",
        0,
        1,
        "c",
        &["1", "1", "1", "1", "1", "1"],
    );
    let eb1 = run(
        t.path(),
        "eb1",
        "eb-drift",
        1,
        1,
        "c",
        &["2", "2", "2", "2", "2", "2"],
    );
    let ours = run(t.path(), "ours", "clg-ode", 1, 1, "c", &CELLS);
    let seed2 = run(t.path(), "seed2", "clg-ode", 0, 2, "c", &CELLS);
    let o = compare(
        t.path(),
        &[&eb0, &eb1, &ours, &seed2],
        &["--against", "eb-drift", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let line = |dir: &Path| {
        out["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["run"] == dir.to_str().unwrap())
            .unwrap()
            .clone()
    };
    let l = line(&ours);
    assert_eq!(
        l["against"],
        eb1.to_str().unwrap(),
        "the fold-1 partner, not the first: {l}"
    );
    assert_eq!(l["vs_against"]["mean"], 0.75, "{l}");
    let l = line(&seed2);
    assert!(l["against"].is_null() && l["vs_against"].is_null(), "{l}");
    assert!(
        l["unpaired"]
            .as_str()
            .unwrap()
            .contains("fold 0 and seed 2"),
        "{l}"
    );
    assert!(stderr(&o).contains("unpaired") && stderr(&o).contains(seed2.to_str().unwrap()));

    // The table names the partner in the run's row, and says unpaired where there is none.
    let o = compare(
        t.path(),
        &[&eb0, &eb1, &ours, &seed2],
        &["--against", "eb-drift"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let row = |dir: &Path| {
        text.lines()
            .find(|r| r.starts_with(&format!("| {} |", dir.display())))
            .unwrap()
    };
    assert!(
        row(&ours).contains(&format!("| {} |", eb1.display())),
        "{text}"
    );
    assert!(row(&seed2).contains("unpaired"), "{text}");
}

#[test]
fn a_run_given_twice_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let a = run(t.path(), "a", "clg-ode", 0, 1, "c", &CELLS);
    std::os::unix::fs::symlink(&a, t.path().join("link")).unwrap();
    for twice in [["a", "a"], ["a", "./a"], ["a", "link"], ["link", "x/../a"]] {
        std::fs::create_dir_all(t.path().join("x")).unwrap();
        let dirs: Vec<PathBuf> = twice.iter().map(PathBuf::from).collect();
        let refs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
        let o = compare(t.path(), &refs, &["--format", "json"]);
        assert_eq!(o.status.code(), Some(1), "{twice:?}: {}", stdout(&o));
        let e = stderr(&o);
        assert!(
            e.contains("given twice") && e.contains(twice[1]),
            "{twice:?}: {e}"
        );
    }
    let o = compare(t.path(), &[&a, &a, &a], &["--against", "clg-ode"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
}

/// An eb-drift run with an empty cell (a NaN it wrote) and a run with an infinite one: the
/// comparison pairs the subjects finite in both, says how many it dropped, and never panics;
/// with no subject left, nothing is computed.
#[test]
fn missing_or_non_finite_subjects_are_dropped_and_counted() {
    let t = tempfile::tempdir().unwrap();
    let eb = run(
        t.path(),
        "eb",
        "eb-drift",
        0,
        1,
        "c",
        &["1", "", "1", "1", "1", "1"],
    );
    let ours = run(
        t.path(),
        "ours",
        "clg-ode",
        0,
        1,
        "c",
        &["2", "2", "inf", "2", "2", "3"],
    );
    let o = compare(
        t.path(),
        &[&ours, &eb],
        &["--against", "eb-drift", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let l = out["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["model"] == "clg-ode")
        .unwrap();
    assert_eq!(l["vs_against"]["n"], 4, "{l}");
    assert_eq!(l["dropped_vs_against"], 2, "{l}");
    assert_eq!(l["vs_against"]["mean"], 1.25, "{l}");
    assert_eq!(l["dropped_vs_identity"], 1, "{l}");
    let o = compare(t.path(), &[&eb, &ours], &["--against", "eb-drift"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("4 (2 dropped)"), "{}", stdout(&o));

    let none = run(
        t.path(),
        "none",
        "clg-ode",
        0,
        1,
        "c",
        &["nan", "", "inf", "-inf", "", ""],
    );
    let o = compare(
        t.path(),
        &[&eb, &none],
        &["--against", "eb-drift", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let l = out["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["model"] == "clg-ode")
        .unwrap();
    let vs = &l["vs_against"];
    assert_eq!(vs["n"], 0, "{l}");
    assert!(
        vs["mean"].is_null() && vs["ci_low"].is_null() && vs["p_wilcoxon"].is_null(),
        "{l}"
    );
    let o = compare(t.path(), &[&eb, &none], &["--against", "eb-drift"]);
    assert!(stdout(&o).contains("not computable"), "{}", stdout(&o));
}
