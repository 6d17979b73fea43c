//! `trainer compare` and `trainer plot` on runs with hostile names (issue 71): every CSV they
//! write has no cell a spreadsheet would evaluate (a run or variant named `=HYPERLINK(…)`,
//! `+cmd`, `@SUM(1)`, `-2+3` or starting with a TAB gets a leading `'`; numbers stay numbers),
//! every SVG parses as XML whatever the title, names and metric names, and `--against NAME`
//! matching two runs is refused with both named. The run directories are written by hand: only
//! the files `compare` and `plot` read.

use crate::common;

use std::path::Path;

use common::*;
use serde_json::{Value, json};

/// The names of the campaign's repros.
const NAMES: [&str; 5] = [
    "=HYPERLINK(\"http://x\",\"y\")",
    "+cmd",
    "@SUM(1)",
    "-2+3",
    "\tx",
];

/// A metric column whose name is hostile too (a chart's title in `trainer plot`).
const METRIC: &str = "m\u{1}<&>\u{FFFF}";

/// A finished clg-ode run at `root/name` (fold 0, seed `seed`): skill −1.75 (mean mse 2.75
/// against an identity of 1), `[run] variant` = `name`, metrics rows, and a horizon stratum
/// named `name`.
fn run(root: &Path, name: &str, seed: usize) {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let write = |file: &str, text: String| std::fs::write(dir.join(file), text).unwrap();
    let json = |file: &str, v: Value| write(file, v.to_string());
    json(
        "args.json",
        json!({"model_kind": "clg-ode", "seed": seed, "sc_dir": "c/sc",
               "cohort_fingerprint": format!("{:0<32}", "c")}),
    );
    let sc = |mse: f64| json!({"sc_log_mse": mse, "sc_log_pearson_sparse": 0.5});
    json(
        "clg_ode_results.json",
        json!({"model": "clg-ode", "cv_fold": 0, "best_fold": 0,
               "cv_folds": [{"fold": 0, "best_epoch": 1}],
               "test_sc_metrics": sc(2.75), "test_identity_baseline_sc_metrics": sc(1.0),
               "test_skill": {"skill": -1.75, "pearson_sparse_gain": 0.0}}),
    );
    json(
        "test_metrics.json",
        json!({"model": {"sc_log_mse": 2.75}, "identity_baseline": {"sc_log_mse": 1.0},
               "skill": {"skill": -1.75}}),
    );
    let mut csv = String::from("subject,forecast,model_sc_log_mse,identity_sc_log_mse\n");
    for (i, c) in ["1.5", "2", "2.5", "3", "3.5", "4"].iter().enumerate() {
        csv.push_str(&format!("s{i},1,{c},1\n"));
    }
    write("per_subject.csv", csv);
    // A JSON string is a TOML basic string (the same escapes).
    write(
        "config.toml",
        format!(
            "[run]\nvariant = {}\n",
            serde_json::to_string(name).unwrap()
        ),
    );
    let rows: Vec<String> = (1..=2)
        .map(|e| {
            json!({"epoch": e, "train_loss": 1.0 / e as f64, "val_loss": 0.5 + seed as f64,
                   METRIC: e})
            .to_string()
        })
        .collect();
    write("metrics.jsonl", rows.join("\n") + "\n");
    let stratum = json!({"n": 6, "model": {"sc_log_mse": 2.75},
                         "identity": {"sc_log_mse": 1.0}, "skill": {"skill": -1.75}});
    json("strata.json", json!({"horizons": {name: stratum}}));
}

/// `trainer ARGS…` in `cwd`, which must succeed; its standard output.
fn ok(cwd: &Path, args: &[&str]) -> String {
    let o = run_in(cwd, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

/// The CSV parses and no cell is a formula a spreadsheet would evaluate unless it is a
/// number; its header and rows.
fn check_csv(what: &str, csv: &str) -> (Vec<String>, Vec<csv::StringRecord>) {
    let mut r = csv::Reader::from_reader(csv.as_bytes());
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    for cell in header
        .iter()
        .map(String::as_str)
        .chain(rows.iter().flatten())
    {
        let formula = cell.starts_with(['=', '+', '-', '@', '\t', '\r']);
        assert!(
            !formula || cell.parse::<f64>().is_ok(),
            "{what}: formula cell {cell:?} in:\n{csv}"
        );
    }
    (header, rows)
}

/// The cells of `column`.
fn column(table: &(Vec<String>, Vec<csv::StringRecord>), column: &str) -> Vec<String> {
    let i = table.0.iter().position(|h| h == column).unwrap();
    table.1.iter().map(|r| r[i].to_string()).collect()
}

/// The runs' names as a text cell holds them: behind a `'`.
fn quoted() -> Vec<String> {
    NAMES.iter().map(|n| format!("'{n}")).collect()
}

/// A column's cells as numbers.
fn numbers(cells: &[String]) -> Vec<f64> {
    let number = |c: &String| {
        c.parse()
            .unwrap_or_else(|_| panic!("not numbers: {cells:?}"))
    };
    cells.iter().map(number).collect()
}

/// The SVG at `path` parses as XML; its texts.
fn svg_texts(path: &Path) -> Vec<String> {
    let svg = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&svg)
        .unwrap_or_else(|e| panic!("{}: not XML: {e}", path.display()));
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or_default().trim().to_string())
        .collect()
}

#[test]
fn hostile_names_give_no_formula_cells_and_well_formed_figures() {
    let t = tempfile::tempdir().unwrap();
    for (seed, name) in NAMES.iter().enumerate() {
        run(t.path(), name, seed);
    }
    // The names as given, after `--` (`-2+3` is no flag).
    let with = |flags: &[&'static str]| -> Vec<&str> {
        let mut args = vec!["compare"];
        args.extend(flags);
        args.push("--");
        args.extend(NAMES);
        args
    };

    let csv = ok(t.path(), &with(&["--per-run", "--format", "csv"]));
    let table = check_csv("per-run", &csv);
    assert_eq!(column(&table, "run"), quoted());
    assert_eq!(
        numbers(&column(&table, "skill")),
        [-1.75; 5],
        "numbers stay numbers"
    );

    let flags = [
        "--group-by",
        "variant",
        "--metric",
        "skill",
        "--format",
        "csv",
    ];
    let csv = ok(t.path(), &with(&flags));
    let table = check_csv("grouped", &csv);
    let variants = column(&table, "variant");
    assert_eq!(variants[..5], quoted(), "then the identity's row");
    assert_eq!(numbers(&column(&table, "skill_mean")[..5]), [-1.75; 5]);

    let csv = ok(
        t.path(),
        &with(&["--against", "identity", "--format", "csv"]),
    );
    let table = check_csv("against", &csv);
    assert_eq!(column(&table, "run"), quoted());
    assert_eq!(numbers(&column(&table, "vs_against_mean")), [1.75; 5]);

    let csv = ok(t.path(), &with(&["--strata", "--format", "csv"]));
    let table = check_csv("strata", &csv);
    assert_eq!(column(&table, "run"), quoted());
    assert_eq!(column(&table, "stratum"), quoted());
    assert_eq!(numbers(&column(&table, "skill")), [-1.75; 5]);

    // Figures: `compare --plot` labels lines with the runs' directories' names (the run at
    // `=HYPERLINK("http://x","y")` is the directory `x","y")`: a legend names no path),
    // `trainer plot` titles the figure and each chart (a metric named with control characters).
    ok(t.path(), &with(&["--plot", "p.svg"]));
    let texts = svg_texts(&t.path().join("p.svg"));
    assert!(
        texts.iter().any(|x| x == "x\",\"y\")") && texts.iter().any(|x| x == "+cmd"),
        "{texts:?}"
    );
    assert!(
        texts.iter().any(|x| x == "x"),
        "the TAB dropped from `\\tx`: {texts:?}"
    );
    let title = "T\u{1}<b>&\"\u{1b}[0m\u{FFFF}\u{202E}";
    let mut args = vec![
        "plot", "--title", title, "--metric", METRIC, "--out", "t.svg",
    ];
    args.push("--");
    args.extend(NAMES);
    ok(t.path(), &args);
    let texts = svg_texts(&t.path().join("t.svg"));
    for want in ["T<b>&\"[0m\u{202E}", "m<&>"] {
        assert!(texts.iter().any(|x| x == want), "no {want:?} in {texts:?}");
    }
}

#[test]
fn against_a_name_of_two_runs_is_refused_naming_both() {
    let t = tempfile::tempdir().unwrap();
    run(&t.path().join("s1"), "fold0", 1);
    run(&t.path().join("s2"), "fold0", 2);
    run(t.path(), "ours", 1);
    let o = run_in(
        t.path(),
        &[
            "compare",
            "s1/fold0",
            "s2/fold0",
            "ours",
            "--against",
            "fold0",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let e = stderr(&o);
    for what in ["s1/fold0", "s2/fold0", "names 2 runs", "--against DIR"] {
        assert!(e.contains(what), "no `{what}` in: {e}");
    }
    // Its directory names one: the run of seed 1 pairs with it.
    let o = run_in(
        t.path(),
        &[
            "compare",
            "s1/fold0",
            "s2/fold0",
            "ours",
            "--against",
            "s1/fold0",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let ours = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["run"] == "ours")
        .unwrap();
    assert_eq!(ours["against"], "s1/fold0", "{v}");
}
