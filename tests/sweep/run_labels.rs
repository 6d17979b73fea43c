//! `--label NAME=PATH` (issue 75, item 4): the name of a run wherever a report or figure names
//! it, `trainer compare`'s rows (per-run and `--against`), `trainer plot`'s and `compare
//! --plot`'s legends and `plot-sc --strata`'s bars; without one a run is named by its directory
//! (the shortest tail of its path that tells it from the others), never by its whole path. A
//! label keeps its colour when the runs come in another order; a label that names no run given,
//! or one name for two runs, is refused with exit 2. The run directories are written by hand:
//! only the files these commands read.

use crate::common;

use std::path::Path;

use common::*;
use serde_json::{Value, json};

/// A finished run of `model` at `dir` (fold 0, seed 0): its results, per-subject scores (model
/// mse `mse` + i/10 for subject i, identity 1), metrics rows and two horizon strata.
fn run(dir: &Path, model: &str, mse: f64) {
    std::fs::create_dir_all(dir).unwrap();
    let write = |file: &str, text: String| std::fs::write(dir.join(file), text).unwrap();
    let json = |file: &str, v: Value| write(file, v.to_string());
    json(
        "args.json",
        json!({"model_kind": model, "seed": 0, "sc_dir": "c/sc",
               "cohort_fingerprint": format!("{:0<32}", "c")}),
    );
    let sc = |mse: f64| json!({"sc_log_mse": mse, "sc_log_pearson_sparse": 0.5});
    json(
        "clg_ode_results.json",
        json!({"model": model, "cv_fold": 0, "best_fold": 0,
               "cv_folds": [{"fold": 0, "best_epoch": 1}],
               "test_sc_metrics": sc(mse), "test_identity_baseline_sc_metrics": sc(1.0),
               "test_skill": {"skill": 1.0 - mse, "pearson_sparse_gain": 0.0}}),
    );
    json(
        "test_metrics.json",
        json!({"model": {"sc_log_mse": mse}, "identity_baseline": {"sc_log_mse": 1.0},
               "skill": {"skill": 1.0 - mse}}),
    );
    let mut csv = String::from("subject,forecast,model_sc_log_mse,identity_sc_log_mse\n");
    for i in 0..6 {
        csv.push_str(&format!("s{i},1,{},1\n", mse + i as f64 / 10.0));
    }
    write("per_subject.csv", csv);
    let rows: Vec<String> = (1..=3)
        .map(|e| json!({"epoch": e, "train_loss": mse / e as f64, "val_loss": mse}).to_string())
        .collect();
    write("metrics.jsonl", rows.join("\n") + "\n");
    let stratum = |n: u64| {
        json!({"n": n, "model": {"sc_log_mse": mse}, "identity": {"sc_log_mse": 1.0},
               "skill": {"skill": 1.0 - mse}})
    };
    json(
        "strata.json",
        json!({"horizons": {"1 visit": stratum(12), "2 visits": stratum(9)}}),
    );
}

/// The texts of the SVG at `path` (it parses as XML).
fn svg_texts(path: &Path) -> Vec<String> {
    let svg = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or_default().trim().to_string())
        .collect()
}

/// The fill of the legend box drawn just before `label`'s text in the SVG at `path`.
fn legend_fill(path: &Path, label: &str) -> String {
    let svg = std::fs::read_to_string(path).unwrap();
    let at = svg
        .find(&format!(">\n{label}\n<"))
        .unwrap_or_else(|| panic!("{label} not in {}", path.display()));
    let head = &svg[..at];
    let rect = &head[head.rfind("<rect").expect("a box before the label")..];
    let fill = rect.find("fill=\"#").expect("a filled box") + 6;
    rect[fill..fill + 7].to_string()
}

/// `trainer ARGS…` in `cwd`, which must succeed; its standard output.
fn ok(cwd: &Path, args: &[&str]) -> String {
    let o = run_in(cwd, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

#[test]
fn labels_name_runs_in_every_table_and_figure_and_no_path_is_a_legend() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().display().to_string();
    let a = format!("{root}/cv-a/fold0");
    let b = format!("{root}/cv-b/fold0");
    run(Path::new(&a), "eb-drift", 0.6);
    run(Path::new(&b), "linear-drift", 0.8);
    let no_path = |texts: &[String]| {
        assert!(
            !texts.iter().any(|x| x.contains(&root)),
            "a path in the figure: {texts:?}"
        );
    };

    // Without labels: each run by the shortest tail of its path that tells it apart.
    ok(t.path(), &["plot", &a, &b, "--out", "plain.svg"]);
    let texts = svg_texts(&t.path().join("plain.svg"));
    assert!(
        texts.iter().any(|x| x == "cv-a/fold0") && texts.iter().any(|x| x == "cv-b/fold0"),
        "{texts:?}"
    );
    no_path(&texts);

    // With labels, in both orders of the runs and of the labels: the names, the same colours.
    let (la, lb) = (format!("eb-drift={a}"), format!("linear-drift={b}"));
    ok(
        t.path(),
        &[
            "plot", &a, &b, "--label", &la, "--label", &lb, "--out", "one.svg",
        ],
    );
    ok(
        t.path(),
        &[
            "plot", &b, &a, "--label", &lb, "--label", &la, "--out", "two.svg",
        ],
    );
    for f in ["one.svg", "two.svg"] {
        let texts = svg_texts(&t.path().join(f));
        assert!(
            texts.iter().any(|x| x == "eb-drift") && texts.iter().any(|x| x == "linear-drift"),
            "{texts:?}"
        );
        no_path(&texts);
    }
    for name in ["eb-drift", "linear-drift"] {
        assert_eq!(
            legend_fill(&t.path().join("one.svg"), name),
            legend_fill(&t.path().join("two.svg"), name),
            "{name} changed colour with the order"
        );
    }
    assert_ne!(
        legend_fill(&t.path().join("one.svg"), "eb-drift"),
        legend_fill(&t.path().join("one.svg"), "linear-drift")
    );

    // plot-sc --strata: the bars' legend by label (the other run by its short name), colours
    // as in `trainer plot`.
    for (order, out) in [([&a, &b], "s1.svg"), ([&b, &a], "s2.svg")] {
        ok(
            t.path(),
            &[
                "plot-sc", order[0], order[1], "--strata", "--label", &la, "--out", out,
            ],
        );
        let texts = svg_texts(&t.path().join(out));
        assert!(
            texts.iter().any(|x| x == "eb-drift") && texts.iter().any(|x| x == "fold0"),
            "{texts:?}"
        );
        no_path(&texts);
    }
    assert_eq!(
        legend_fill(&t.path().join("s1.svg"), "eb-drift"),
        legend_fill(&t.path().join("s2.svg"), "eb-drift")
    );
    assert_eq!(
        legend_fill(&t.path().join("s1.svg"), "eb-drift"),
        legend_fill(&t.path().join("one.svg"), "eb-drift"),
        "one colour per name in every figure"
    );

    // compare: the per-run table's row and --against by the label; --plot's legend.
    let out = ok(
        t.path(),
        &["compare", &a, &b, "--label", &la, "--plot", "cmp.svg"],
    );
    assert!(
        out.lines().any(|l| l.contains("eb-drift")) && out.contains(&b),
        "{out}"
    );
    let texts = svg_texts(&t.path().join("cmp.svg"));
    assert!(texts.iter().any(|x| x == "eb-drift"), "{texts:?}");
    no_path(&texts);
    // --against by a label (not a model's name), the partner named by its label.
    let (ea, eb) = (format!("EB={a}"), format!("LD={b}"));
    let out = ok(
        t.path(),
        &[
            "compare",
            &a,
            &b,
            "--label",
            &ea,
            "--label",
            &eb,
            "--against",
            "EB",
            "--format",
            "csv",
        ],
    );
    let mut r = csv::Reader::from_reader(out.as_bytes());
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    let (run_col, against_col) = (
        header.iter().position(|h| h == "run").unwrap(),
        header.iter().position(|h| h == "partner").unwrap(),
    );
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    let row = rows
        .iter()
        .find(|r| &r[run_col] == "LD")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(&row[against_col], "EB", "{out}");

    // Refused: a label of a path not given, one name for two runs, two names for one run.
    let refused = |args: &[&str], says: &str| {
        let o = run_in(t.path(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    };
    let elsewhere = format!("x={root}/cv-c");
    refused(
        &["plot", &a, "--label", &elsewhere, "--out", "r.svg"],
        &format!("--label {elsewhere}: {root}/cv-c is not one of the runs given ({a})"),
    );
    let twice = format!("eb-drift={b}");
    refused(
        &["compare", &a, &b, "--label", &la, "--label", &twice],
        &format!("--label eb-drift: the name is given to two runs, {a} and {b}"),
    );
    let other = format!("x={a}");
    refused(
        &[
            "plot-sc", &a, &b, "--strata", "--label", &la, "--label", &other, "--out", "r.svg",
        ],
        "is given two names, eb-drift and x",
    );
    refused(
        &["plot", &a, "--label", "eb-drift", "--out", "r.svg"],
        "expected NAME=PATH",
    );
    assert!(!t.path().join("r.svg").exists());
}
