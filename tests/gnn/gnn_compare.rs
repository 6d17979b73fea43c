//! Forecasts against the identity: the exact topology in the test report, `trainer compare`
//! over two runs, the `residual` preset, and the second (Python) cohort generator.

use crate::common;

use std::path::Path;

use common::*;
use serde_json::Value;
use trainer::outputs::group_table::{mean_sd, sig4};

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn train(dir: &Path, cohort: &str, run: &str, extra: &[&str]) -> std::path::PathBuf {
    let sc = format!("{cohort}/sc");
    let morph = format!("{cohort}/morph");
    let table = format!("{cohort}/subject_info_sc.csv");
    let mut args = vec![
        "train-gnn",
        "--sc_dir",
        &sc,
        "--morph_root",
        &morph,
        "--subject_info_csv",
        &table,
        "--results_dir",
        "results",
        "--run_name",
        run,
        "--cv_fold",
        "0",
        "--latent_dim",
        "8",
        "--hidden_dim",
        "16",
        "--solver_steps",
        "3",
    ];
    args.extend_from_slice(extra);
    let o = run_in(dir, &args);
    assert!(o.status.success(), "{run}: {}", stderr(&o));
    dir.join("results/runs").join(run)
}

#[test]
fn compare_two_runs_with_exact_topology() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 16, 20, 3);
    let a = train(
        t.path(),
        "cohort",
        "residual",
        &["--preset", "residual", "--max_epochs", "3"],
    );
    let b = train(
        t.path(),
        "cohort",
        "original",
        &[
            "--max_epochs",
            "2",
            "--lambda_topo",
            "0",
            "--gradnorm_scope",
            "none",
        ],
    );

    // The test report has the exact topology of the model and of the identity.
    let test = json(&a.join("test_metrics.json"));
    let exact = &test["exact_topology"];
    assert_eq!(exact["thresholds"], 8);
    for side in ["model", "identity_baseline"] {
        for key in [
            "betti0_l1",
            "betti1_l1",
            "degree_pearson",
            "strength_pearson",
        ] {
            let v = exact[side][key].as_f64().unwrap();
            assert!(v.is_finite(), "{side}.{key} = {v}");
        }
    }
    // The preset's fixed support keeps the start visit's edges: its degrees follow the truth.
    assert!(
        exact["model"]["degree_pearson"].as_f64().unwrap() > 0.5,
        "{exact}"
    );

    // The table names both runs and shows each model figure beside its identity figure.
    let o = run_in(
        t.path(),
        &[
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--plot",
            "skill.svg",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    assert!(
        table.contains("identity") && table.contains("skill"),
        "{table}"
    );
    assert!(
        table.contains("runs/residual") && table.contains("runs/original"),
        "{table}"
    );
    let svg = std::fs::read_to_string(t.path().join("skill.svg")).unwrap();
    assert!(
        svg.contains("val_skill"),
        "the plot is of the validation skill"
    );

    let o = run_in(
        t.path(),
        &[
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for (row, dir, epochs) in [(&rows[0], &a, 3), (&rows[1], &b, 2)] {
        let results = json(&dir.join("clg_ode_results.json"));
        assert_eq!(row["epochs"], epochs);
        assert_eq!(
            row["test_sc_log_mse"],
            results["test_sc_metrics"]["sc_log_mse"]
        );
        assert_eq!(
            row["identity_sc_log_mse"],
            results["test_identity_baseline_sc_metrics"]["sc_log_mse"]
        );
        let (m, i) = (
            row["test_sc_log_mse"].as_f64().unwrap(),
            row["identity_sc_log_mse"].as_f64().unwrap(),
        );
        // The same f64 formula on the same two stored values, in one process each: equal to
        // the last ulp or two, on any CPU.
        assert!((row["skill"].as_f64().unwrap() - (1.0 - m / i)).abs() < 1e-12);
        assert_eq!(
            row["betti0_l1"],
            results["test_exact_topology"]["model"]["betti0_l1"]
        );
        assert!(row["cpu_seconds"].as_f64().unwrap() > 0.0);
        assert!(row["wall_seconds"].as_f64().unwrap() > 0.0);
    }

    // A directory that is not a finished run is an error naming the file.
    let o = run_in(t.path(), &["compare", "cohort"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("clg_ode_results.json"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_preset_resolves_and_flags_override_it() {
    let t = tempfile::tempdir().unwrap();
    let o = run_in(
        t.path(),
        &[
            "train-gnn",
            "--sc_dir",
            "sc",
            "--morph_root",
            "morph",
            "--subject_info_csv",
            "s.csv",
            "--results_dir",
            "results",
            "--preset",
            "residual",
            "--learning_rate",
            "0.01",
            "--print-config",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let cfg: toml::Table = stdout(&o).parse().expect("--print-config prints TOML");
    let flat: toml::Table = cfg
        .values()
        .filter_map(|v| v.as_table())
        .flat_map(|t| t.clone())
        .chain(cfg.clone())
        .collect();
    assert_eq!(flat["fixed_support"].as_bool(), Some(true));
    assert_eq!(flat["residual_skip"].as_bool(), Some(true));
    assert_eq!(flat["residual_scale_init"].as_float(), Some(0.0));
    assert_eq!(
        flat["learning_rate"].as_float(),
        Some(0.01),
        "the flag wins"
    );
}

#[test]
fn the_python_generator_writes_a_cohort_the_trainer_reads() {
    let t = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/synth_cohort.py");
    let o = std::process::Command::new("python3")
        .arg(&script)
        .args([
            "--out",
            "py",
            "--subjects",
            "14",
            "--nodes",
            "24",
            "--seed",
            "2",
        ])
        .current_dir(t.path())
        .output()
        .expect("python3 (with numpy: scripts/setup.sh installs it)");
    assert!(o.status.success(), "{}", stderr(&o));
    let summary = json(&t.path().join("py/summary.json"));
    assert_eq!(summary["subjects"], 14);
    assert!(summary["oracle_skill"].as_f64().unwrap() > 0.0, "{summary}");
    let run = train(
        t.path(),
        "py",
        "py",
        &["--preset", "residual", "--max_epochs", "2"],
    );
    let results = json(&run.join("clg_ode_results.json"));
    assert_eq!(results["n_subjects"], 14);
    assert!(
        results["test_skill"]["skill"].as_f64().unwrap().is_finite(),
        "{results}"
    );
}

// ---------------------------------------------------------------------------------------------
// Run directories of the reference's PyTorch trainer (tests/fixtures/reference-run, written by
// its own `scripts.train_clg_ode`: tests/golden/reference_run.py).

fn reference_runs() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference-run/runs")
}

/// The reference's best epoch of `fold` (the first lowest `monitor_value`: its monitor is the
/// validation loss) and that row's `column`, read from its `metrics.csv`.
fn best_epoch_value(run: &Path, fold: u64, column: &str) -> f64 {
    let mut r = csv::Reader::from_path(run.join("metrics.csv")).unwrap();
    let header = r.headers().unwrap().clone();
    let col = |c: &str| header.iter().position(|h| h == c).unwrap();
    let mut best: Option<(f64, f64)> = None;
    for row in r.records() {
        let row = row.unwrap();
        if row[col("fold")].parse::<u64>().unwrap() != fold {
            continue;
        }
        let m: f64 = row[col("monitor_value")].parse().unwrap();
        if best.is_none_or(|(b, _)| m < b) {
            best = Some((m, row[col(column)].parse().unwrap()));
        }
    }
    best.unwrap().1
}

fn compare_json(cwd: &Path, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["compare", "--format", "json"];
    all.extend_from_slice(args);
    let o = run_in(cwd, &all);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value =
        serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    v.as_array().unwrap().clone()
}

/// `compare`'s aggregate (f64, from values it read from the run directories) against the same
/// aggregate computed here from the same stored values. Both sides are f64 arithmetic on two
/// numbers (a mean, a sample standard deviation, a min or max) with possibly different
/// formulas (`(a + b) / 2` vs a running mean; `|a − b| / √2` vs a two-pass sd): they agree to a
/// few ulps (≈ 1e-15 relative). IEEE f64 add/sub/mul/div/sqrt are correctly rounded on every
/// CPU and nothing is summed in parallel, so this cannot depend on the machine or the thread
/// count; 1e-12 leaves a 1000× margin.
fn close(a: &Value, b: f64) -> bool {
    (a.as_f64().unwrap() - b).abs() <= 1e-12 * b.abs().max(1.0)
}

#[test]
fn compare_reads_the_reference_trainers_run_directories() {
    let refs = reference_runs();
    let base = refs.join("clg_ode_ref");
    let (f0, f1) = (base.join("fold0"), base.join("fold1"));
    let test_mse = |dir: &Path| {
        json(&dir.join("clg_ode_results.json"))["test_sc_metrics"]["sc_log_mse"]
            .as_f64()
            .unwrap()
    };
    let (m0, m1) = (test_mse(&f0), test_mse(&f1));
    let (v0, v1) = (
        best_epoch_value(&f0, 0, "val_loss"),
        best_epoch_value(&f1, 1, "val_loss"),
    );

    // The authors' layout `<base>/fold<k>`: the base directory gives its folds, two runs.
    let t = tempfile::tempdir().unwrap();
    let rows = compare_json(
        t.path(),
        &[
            base.to_str().unwrap(),
            "--group-by",
            "model",
            "--metric",
            "sc_log_mse",
            "--metric",
            "val_loss",
            "--metric",
            "val_sc_log_mse",
            "--metric",
            "skill",
            "--metric",
            "identity_sc_log_mse",
        ],
    );
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["group"], serde_json::json!({"model": "clg-ode"}));
    assert_eq!(row["n"], 2);
    let mse = &row["sc_log_mse"];
    assert_eq!(mse["n"], 2);
    assert!(close(&mse["mean"], (m0 + m1) / 2.0), "{mse}");
    assert!(close(&mse["sd"], (m0 - m1).abs() / 2f64.sqrt()), "{mse}");
    assert!(
        close(&mse["min"], m0.min(m1)) && close(&mse["max"], m0.max(m1)),
        "{mse}"
    );
    assert!(close(&row["val_loss"]["mean"], (v0 + v1) / 2.0), "{row}");
    // Validation SC metrics were computed every epoch in these runs: real values.
    let s0 = best_epoch_value(&f0, 0, "val_sc_log_mse");
    assert!(
        s0 > 0.0
            && close(
                &row["val_sc_log_mse"]["min"],
                s0.min(best_epoch_value(&f1, 1, "val_sc_log_mse"))
            )
    );
    // The reference writes no identity baseline: N/A, not a number made up.
    assert!(
        row["skill"].is_null() && row["identity_sc_log_mse"].is_null(),
        "{row}"
    );

    // One results file with both folds counts as two runs; only the tested (best) fold has
    // test metrics, and the 0.0 written for never-computed validation SC metrics is N/A.
    let all = refs.join("clg_ode_ref_allfolds");
    let results = json(&all.join("clg_ode_results.json"));
    let tested = results["best_model_path"].as_str().unwrap();
    assert!(tested.ends_with("clg_ode_fold1_best.pt"), "{tested}");
    let rows = compare_json(
        t.path(),
        &[
            all.to_str().unwrap(),
            "--group-by",
            "fold",
            "--metric",
            "sc_log_mse",
            "--metric",
            "val_loss",
            "--metric",
            "val_sc_log_mse",
        ],
    );
    assert_eq!(rows.len(), 2, "{rows:?}");
    for (row, fold) in rows.iter().zip([0u64, 1]) {
        assert_eq!(row["group"], serde_json::json!({"fold": fold.to_string()}));
        assert_eq!(row["n"], 1);
        assert!(
            close(
                &row["val_loss"]["mean"],
                best_epoch_value(&all, fold, "val_loss")
            ),
            "{row}"
        );
        assert!(row["val_sc_log_mse"].is_null(), "{row}");
    }
    assert!(rows[0]["sc_log_mse"].is_null(), "{:?}", rows[0]);
    assert_eq!(
        rows[1]["sc_log_mse"]["mean"],
        results["test_sc_metrics"]["sc_log_mse"]
    );

    // Any args.json key, in either spelling; n per fold over three directories.
    for key in ["lambda_density", "lambda-density"] {
        let rows = compare_json(
            t.path(),
            &[
                f0.to_str().unwrap(),
                f1.to_str().unwrap(),
                all.to_str().unwrap(),
                "--group-by",
                key,
            ],
        );
        let groups: Vec<(String, u64)> = rows
            .iter()
            .map(|r| {
                (
                    r["group"][key].as_str().unwrap().to_string(),
                    r["n"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            groups,
            [("0.0".to_string(), 2), ("0.01".to_string(), 2)],
            "{key}"
        );
    }

    // Markdown: the same figures.
    let o = run_in(
        t.path(),
        &[
            "compare",
            f0.to_str().unwrap(),
            f1.to_str().unwrap(),
            "--group-by",
            "model",
            "--metric",
            "sc_log_mse",
            "--format",
            "md",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let md = stdout(&o);
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(
        lines[0],
        "| model | n | sc_log_mse mean ± sd | sc_log_mse min | sc_log_mse max | missing |"
    );
    let expect = format!(
        "| clg-ode | 2 | {} | {} | {} |  |",
        mean_sd((m0 + m1) / 2.0, Some((m0 - m1).abs() / 2f64.sqrt())),
        sig4(m0.min(m1)),
        sig4(m0.max(m1))
    );
    assert_eq!(lines[2], expect, "{md}");
}

#[test]
fn reference_runs_sit_beside_ours() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 16, 20, 3);
    let ours = train(t.path(), "cohort", "ours", &["--max_epochs", "2"]);
    let reference = reference_runs().join("clg_ode_ref/fold0");
    // Rows in the inputs' order: the reference's, ours, the identity's.
    let args = [
        reference.to_str().unwrap(),
        ours.to_str().unwrap(),
        "--group-by",
        "model",
    ];

    // Different implementations are never pooled: a `source` column keeps them apart.
    let mut with_metric = args.to_vec();
    with_metric.extend(["--metric", "sc_log_mse", "--metric", "skill"]);
    let rows = compare_json(t.path(), &with_metric);
    assert_eq!(rows.len(), 3, "{rows:?}");
    let group = |source: &str, model: &str| serde_json::json!({"source": source, "model": model});
    assert_eq!(rows[0]["group"], group("reference", "clg-ode"));
    assert_eq!(rows[1]["group"], group("trainer", "clg-ode"));
    // The identity's row: ours only (the reference writes no identity figures).
    assert_eq!(rows[2]["group"], group("trainer", "identity"));
    assert_eq!(
        rows[0]["sc_log_mse"]["mean"],
        json(&reference.join("clg_ode_results.json"))["test_sc_metrics"]["sc_log_mse"]
    );
    let test = json(&ours.join("test_metrics.json"));
    assert_eq!(rows[1]["sc_log_mse"]["mean"], test["model"]["sc_log_mse"]);
    assert_eq!(rows[1]["skill"]["mean"], test["skill"]["skill"]);
    assert!(rows[0]["skill"].is_null());
    assert_eq!(
        rows[2]["sc_log_mse"]["mean"],
        test["identity_baseline"]["sc_log_mse"]
    );
    assert_eq!(rows[2]["skill"]["mean"], 0.0);

    // Both axes: the exact Betti distance and the skills of distances (1 − model / identity),
    // from ours only (the reference writes no identity figures), 0 on the identity's row.
    let mut axes = args.to_vec();
    axes.extend(["--metric", "betti0_l1", "--metric", "skill_ecc_l2"]);
    axes.extend(["--metric", "skill_betti1_l1"]);
    let rows = compare_json(t.path(), &axes);
    let (m, i) = (&test["model"], &test["identity_baseline"]);
    let ecc = 1.0 - m["ecc_l2"].as_f64().unwrap() / i["ecc_l2"].as_f64().unwrap();
    assert!(
        close(&rows[1]["skill_ecc_l2"]["mean"], ecc),
        "{:?}",
        rows[1]
    );
    let exact = &test["exact_topology"];
    assert_eq!(rows[1]["betti0_l1"]["mean"], exact["model"]["betti0_l1"]);
    let b1 = exact["model"]["betti1_l1"].as_f64().unwrap()
        / exact["identity_baseline"]["betti1_l1"].as_f64().unwrap();
    assert!(
        close(&rows[1]["skill_betti1_l1"]["mean"], 1.0 - b1),
        "{:?}",
        rows[1]
    );
    assert!(rows[0]["skill_ecc_l2"].is_null(), "{:?}", rows[0]);
    assert_eq!(rows[2]["skill_ecc_l2"]["mean"], 0.0);
    // The same axes drawn: a panel per topology skill, log-MSE skill up, one point per
    // configuration with a skill (the reference's run has none), the identity at 0, 0.
    let fig = t.path().join("frontier.svg");
    let mut drawn = axes.clone();
    drawn.extend(["--frontier", fig.to_str().unwrap()]);
    let o = run_in(t.path(), &[&["compare"][..], &drawn].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(&fig).unwrap();
    for text in [
        "ECC L2 skill",
        "β1 L1 skill",
        "log-MSE skill",
        "trainer / clg-ode (1 run)",
        "identity (the start scan): 0 on both axes",
    ] {
        assert!(svg.contains(text), "{text} not in the frontier");
    }
    assert!(
        !svg.contains("reference / clg-ode"),
        "a point without a skill"
    );
    // --column lays out a figure: alone it is refused.
    let mut alone = args.to_vec();
    alone.push("--column");
    let o = run_in(t.path(), &[&["compare"][..], &alone].concat());
    assert!(
        !o.status.success() && stderr(&o).contains("--column lays out a figure"),
        "{}",
        stderr(&o)
    );
    // A correlation has no skill of a distance: refused, naming the form.
    let mut bad = args.to_vec();
    bad.extend(["--metric", "skill_deg_pearson"]);
    let o = run_in(t.path(), &[&["compare"][..], &bad].concat());
    assert!(
        !o.status.success() && stderr(&o).contains("skill_<metric>"),
        "{}",
        stderr(&o)
    );

    let mut table = vec!["compare"];
    table.extend_from_slice(&args);
    let o = run_in(t.path(), &table);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let firsts: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().take(3).collect())
        .collect();
    assert_eq!(
        firsts,
        [
            vec!["source", "model", "n"],
            vec!["reference", "clg-ode", "1"],
            vec!["trainer", "clg-ode", "1"],
            vec!["trainer", "identity", "1"]
        ],
        "{out}"
    );
}

#[test]
fn a_broken_reference_results_file_is_named_and_an_unfinished_run_is_missing() {
    let t = tempfile::tempdir().unwrap();
    let src = reference_runs().join("clg_ode_ref/fold0");
    let run = t.path().join("fold0");
    std::fs::create_dir(&run).unwrap();
    for f in ["args.json", "metrics.csv", "clg_ode_results.json"] {
        std::fs::copy(src.join(f), run.join(f)).unwrap();
    }
    let results = run.join("clg_ode_results.json");
    let text = std::fs::read_to_string(&results).unwrap();
    // Cut short, as a full disk leaves it.
    std::fs::write(&results, &text[..text.len() / 2]).unwrap();
    let o = run_in(t.path(), &["compare", "fold0", "--group-by", "model"]);
    assert!(!o.status.success(), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.contains("fold0/clg_ode_results.json") && err.contains("not JSON"),
        "{err}"
    );

    // Without a results file the run has not finished: named under `missing`, n = 0.
    std::fs::remove_file(&results).unwrap();
    let rows = compare_json(t.path(), &["fold0", "--group-by", "model"]);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["n"], 0);
    assert_eq!(rows[0]["missing"], serde_json::json!(["fold0"]));
}
