//! `trainer compare`'s grouped tables mean what they say (issue 34, item 2): configurations are
//! never pooled by default, unknown keys and metrics are errors listing the valid ones, the
//! identity has its row, numbers are numbers in CSV and JSON, `--plot` labels groups, and a run
//! whose results cannot be read is named under *missing*, never grouped.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::{Value, json};

/// Three finished runs on one cohort: the reference defaults, `--preset residual`, and the
/// linear-drift baseline (2 epochs, a small model: the table is the subject, not the models).
fn three_runs(dir: &Path) -> [PathBuf; 3] {
    synth_cohort(dir, 16, 12, 1);
    let c = dir.join("cohort");
    let (sc, morph, table) = (c.join("sc"), c.join("morph"), c.join("subject_info_sc.csv"));
    [
        ("ref", vec![]),
        ("res", vec!["--preset", "residual"]),
        ("lin", vec!["--model", "linear-drift"]),
    ]
    .map(|(name, extra)| {
        let mut args = vec![
            "train-gnn",
            "--sc_dir",
            sc.to_str().unwrap(),
            "--morph_root",
            morph.to_str().unwrap(),
            "--subject_info_csv",
            table.to_str().unwrap(),
            "--results_dir",
            "results",
            "--run_name",
            name,
            "--cv_fold",
            "0",
            "--max_epochs",
            "2",
            "--latent_dim",
            "8",
            "--hidden_dim",
            "16",
            "--solver_steps",
            "2",
        ];
        args.extend(extra);
        let o = run_in(dir, &args);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        dir.join("results/runs").join(name)
    })
}

fn compare(dir: &Path, runs: &[PathBuf], extra: &[&str]) -> std::process::Output {
    let mut args = vec!["compare".to_string()];
    args.extend(runs.iter().map(|r| r.display().to_string()));
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_in(dir, &args)
}

fn groups(rows: &Value) -> Vec<Value> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| r["group"].clone())
        .collect()
}

#[test]
fn grouped_tables_keep_configurations_apart_and_name_what_is_wrong() {
    let t = tempfile::tempdir().unwrap();
    let runs = three_runs(t.path());

    // Default grouping: model and preset, in the runs' order, and the identity's own row last
    // (its figures from the runs' test results; skill 0 by definition).
    let o = compare(t.path(), &runs, &["--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let g = |model: &str, preset: &str| json!({"model": model, "preset": preset});
    assert_eq!(
        groups(&rows),
        [
            g("clg-ode", "none"),
            g("clg-ode", "residual"),
            g("linear-drift", "none"),
            g("identity", "identity")
        ]
    );
    let test: Value =
        serde_json::from_str(&std::fs::read_to_string(runs[0].join("test_metrics.json")).unwrap())
            .unwrap();
    assert_eq!(
        rows[3]["sc_log_mse"]["mean"],
        test["identity_baseline"]["sc_log_mse"]
    );
    assert_eq!(rows[3]["skill"]["mean"], 0.0);
    assert_eq!(rows[3]["n"], 1, "three runs of one test set: one identity");

    // `--group-by preset` resolves (no "?"), and warns that it pools two models.
    let o = compare(t.path(), &runs, &["--group-by", "preset", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Value = serde_json::from_str(&stdout(&o)).expect("--json is JSON");
    let presets: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["group"]["preset"].as_str().unwrap())
        .collect();
    assert_eq!(presets, ["none", "residual", "identity"]);
    assert!(
        stderr(&o).contains("the group none pools 2 configurations")
            && stderr(&o).contains("--group-by model"),
        "{}",
        stderr(&o)
    );
    let o = compare(t.path(), &runs, &["--group-by", "model", "--format", "md"]);
    assert!(stderr(&o).contains("--group-by preset"), "{}", stderr(&o));

    // Unknown keys and metrics: errors that list the valid ones.
    let o = compare(t.path(), &runs, &["--group-by", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--group-by nope") && stderr(&o).contains("model, preset"),
        "{}",
        stderr(&o)
    );
    let o = compare(t.path(), &runs, &["--metric", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--metric nope") && stderr(&o).contains("sc_log_mse"),
        "{}",
        stderr(&o)
    );

    // CSV: one numeric column per statistic.
    let o = compare(t.path(), &runs, &["--metric", "skill", "--format", "csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap(),
        "model,preset,n,skill_mean,skill_sd,skill_min,skill_max,skill_n,missing"
    );
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        cells[3].parse::<f64>().expect("a mean is a number");
        assert_eq!(cells[4], "", "one run per group: no sd");
    }

    // --plot with groups: a curve per run, labelled by its group.
    let o = compare(
        t.path(),
        &runs,
        &["--group-by", "model,preset", "--plot", "g.svg"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(t.path().join("g.svg")).unwrap();
    assert!(
        svg.contains("model=clg-ode preset=residual"),
        "no group legend"
    );

    // Strata as text: every stratum with its n, small ones marked.
    let o = compare(t.path(), &runs[..1], &["--strata"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("Δt short") && text.contains("fewer than 5 forecasts"),
        "{text}"
    );

    pictures_people_can_read(t.path(), &runs[0]);
    strata_of_several_runs(t.path(), &runs);

    // A run whose test results are cut short: named under missing, in no group of its own.
    let file = runs[1].join("test_metrics.json");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, &text[..text.len() / 2]).unwrap();
    let o = compare(t.path(), &runs, &["--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let res = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["group"] == g("clg-ode", "residual"))
        .expect("the run's group stays (its config.toml says the preset)");
    assert_eq!(res["n"], 0);
    let missing = res["missing"][0].as_str().unwrap();
    assert!(missing.contains("unreadable") && missing.contains("test_metrics.json"));
    assert!(groups(&rows).iter().all(|g| !g.to_string().contains('?')));
}

/// The texts of an SVG (what a reader sees).
fn svg_texts(path: &Path) -> Vec<String> {
    let svg = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(|t| t.trim().to_string()))
        .collect()
}

/// plot-sc (issue 34, item 6): folders created, colour bars whose ends give each panel's scale,
/// the two error panels on their own scales (this run's model is broken after 2 epochs: its
/// errors are far larger than the identity's), strata labelled with n and a warning.
fn pictures_people_can_read(dir: &Path, run: &Path) {
    let fig = dir.join("new/folder/heatmaps.svg");
    let o = run_in(
        dir,
        &[
            "plot-sc",
            run.to_str().unwrap(),
            "--out",
            fig.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let texts = svg_texts(&fig);
    let lows: Vec<&String> = texts.iter().filter(|t| t.starts_with('-')).collect();
    assert!(
        lows.len() == 2 && lows[0] == lows[1],
        "the two error panels share one scale: {texts:?}"
    );
    assert_eq!(
        texts.iter().filter(|t| t.contains(", rms ")).count(),
        2,
        "each error panel titled with its rms: {texts:?}"
    );
    assert_eq!(
        texts.iter().filter(|t| *t == "0").count(),
        3,
        "the three weight panels' bars start at 0: {texts:?}"
    );
    assert!(
        texts.iter().all(|t| !t.contains("checkpoints")),
        "no checkpoint path in the title: {texts:?}"
    );
    assert!(
        texts.iter().any(|t| t.ends_with("best checkpoint)")),
        "{texts:?}"
    );

    let fig = dir.join("new/strata.svg");
    let o = run_in(
        dir,
        &[
            "plot-sc",
            run.to_str().unwrap(),
            "--strata",
            "--out",
            fig.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("fewer than 5 forecasts"),
        "{}",
        stderr(&o)
    );
    let strata: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("strata.json")).unwrap()).unwrap();
    let texts = svg_texts(&fig);
    let bars = strata["dt_terciles"]
        .as_object()
        .unwrap()
        .values()
        .chain(strata["horizons"].as_object().unwrap().values())
        .filter(|s| s["skill"]["skill"].is_number())
        .count();
    let n_labels = texts.iter().filter(|t| t.starts_with("n=")).count();
    assert_eq!(n_labels, bars, "an n over every bar: {texts:?}");
    for label in ["Δt short", "Δt middle", "Δt long"] {
        assert!(texts.iter().any(|t| t == label), "{label}: {texts:?}");
    }
    let p33 = strata["dt_terciles"]["p33_years"].as_f64().unwrap();
    assert!(
        texts.contains(&format!("≤ {p33:.2} y")),
        "the short tercile's threshold under its name: {texts:?}"
    );
    assert!(texts.iter().any(|t| t.starts_with("warning:")), "{texts:?}");
}

/// Several runs' strata in one chart (issue 58, item 4): one bar and one colour per run, an n
/// over each bar, the runs named in a legend right of the bars, and `--title`; the same strata
/// as CSV rows that parse, one per run and stratum (item 3).
fn strata_of_several_runs(dir: &Path, runs: &[PathBuf]) {
    let fig = dir.join("multi.svg");
    let mut args = vec!["plot-sc".to_string()];
    args.extend(runs.iter().map(|r| r.display().to_string()));
    args.extend(["--strata", "--title", "Three models", "--out"].map(String::from));
    args.push(fig.display().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run_in(dir, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let texts = svg_texts(&fig);
    let bars: usize = runs
        .iter()
        .map(|r| {
            let s: Value =
                serde_json::from_str(&std::fs::read_to_string(r.join("strata.json")).unwrap())
                    .unwrap();
            s["dt_terciles"]
                .as_object()
                .unwrap()
                .values()
                .chain(s["horizons"].as_object().unwrap().values())
                .filter(|s| s["skill"]["skill"].is_number())
                .count()
        })
        .sum();
    let n_labels = texts.iter().filter(|t| t.starts_with("n=")).count();
    assert_eq!(
        n_labels, bars,
        "an n over every bar of every run: {texts:?}"
    );
    for name in ["ref", "res", "lin"] {
        assert!(
            texts.iter().any(|t| t == name),
            "{name} in the legend: {texts:?}"
        );
    }
    assert!(texts.iter().any(|t| t == "Three models"), "{texts:?}");

    let o = compare(dir, runs, &["--strata", "--format", "csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap(),
        "run,stratum,range,n,mse,identity_mse,skill,few"
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 3 * 6, "six strata of three runs: {out}");
    assert!(
        rows.iter()
            .all(|r| r.split(',').nth(3).unwrap().parse::<u64>().is_ok())
    );

    // Heatmaps draw one run.
    let o = run_in(
        dir,
        &[
            "plot-sc",
            runs[0].to_str().unwrap(),
            runs[1].to_str().unwrap(),
            "--out",
            "x.svg",
        ],
    );
    assert!(
        !o.status.success() && stderr(&o).contains("only with --strata"),
        "{}",
        stderr(&o)
    );
}
