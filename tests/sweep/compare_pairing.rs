//! `trainer compare` counts what pairs right: runs of different cohorts are not pooled unless
//! `--pool-cohorts`, `--against MODEL` pairs each run with that model's run of the same fold and
//! seed and names it, a run given twice (another spelling, a symbolic link) is refused, and a
//! per-subject value missing or not finite on either side is dropped and counted, never a
//! panic or a number. The tables a paper takes: every `--format` of every view parses (CSV with
//! Python's csv module, JSON with json.loads), `--against identity` pairs each run with its own
//! identity forecast, p-values are Holm-adjusted over the table (as statsmodels), rows keep the
//! inputs' order and one value is shown alone. The run directories are written by hand: only
//! the files `compare` reads.

use crate::common;

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
    let mean = cells
        .iter()
        .filter_map(|c| c.parse::<f64>().ok())
        .sum::<f64>()
        / cells.len() as f64;
    let sc = |mse: f64| json!({"sc_log_mse": mse, "sc_log_pearson_sparse": 0.5});
    write(
        "clg_ode_results.json",
        json!({"model": model, "cv_fold": fold, "best_fold": fold,
               "cv_folds": [{"fold": fold, "best_epoch": 1}],
               "test_sc_metrics": sc(mean), "test_identity_baseline_sc_metrics": sc(1.0),
               "test_skill": {"skill": 1.0 - mean, "pearson_sparse_gain": 0.0}}),
    );
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

/// Runs `program` in python3 with `args` and `input` on standard input; its standard output.
fn python(program: &str, args: &[&str], input: &str) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "python3: {}\non:\n{input}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(&o)
}

/// Python reads a table printed as `argv[1]`: CSV with the csv module (every row as wide as the
/// header), JSON with json.loads, Markdown as its first block of `|` rows (one width, a rule
/// under the header). Prints `{"header": […], "rows": [[…], …]}` or `{"json": …}`.
const PARSE: &str = r#"
import csv, io, json, sys
fmt, text = sys.argv[1], sys.stdin.read()
if fmt == "json":
    print(json.dumps({"json": json.loads(text)}))
    sys.exit()
if fmt == "csv":
    rows = list(csv.reader(io.StringIO(text)))
else:
    block = []
    for line in text.splitlines():
        if line.startswith("|"):
            block.append(line)
        elif block:
            break
    rows = [[c.strip() for c in l.strip().strip("|").split("|")] for l in block]
    assert set("".join(rows[1])) <= set("-: "), rows[1]
    del rows[1]
assert rows and all(len(r) == len(rows[0]) for r in rows), rows
print(json.dumps({"header": rows[0], "rows": rows[1:]}))
"#;

/// `compare runs… extra… --format format`, checked to parse: the header and rows (CSV, Markdown)
/// or the JSON (`{"json": …}`); a `table` is checked to be no Markdown, and returns its lines.
fn parsed(cwd: &Path, runs: &[&Path], extra: &[&str], format: &str) -> Value {
    let mut args = extra.to_vec();
    args.extend(["--format", format]);
    let o = compare(cwd, runs, &args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    let text = stdout(&o);
    if format == "table" {
        assert!(
            !text.lines().any(|l| l.starts_with('|')),
            "{args:?}: {text}"
        );
        return json!({"lines": text.lines().collect::<Vec<_>>()});
    }
    let out = python(PARSE, &[format], &text);
    serde_json::from_str(&out).unwrap()
}

/// The values of column `name` of a parsed CSV or Markdown table.
fn column(t: &Value, name: &str) -> Vec<String> {
    let header: Vec<&str> = t["header"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    let i = header
        .iter()
        .position(|h| *h == name)
        .unwrap_or_else(|| panic!("no column {name} in {header:?}"));
    t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[i].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn every_format_of_every_view_parses() {
    let t = tempfile::tempdir().unwrap();
    let ones = ["1"; 6];
    let eb0 = run(t.path(), "eb0", "eb-drift", 0, 1, "c", &ones);
    let eb1 = run(t.path(), "eb1", "eb-drift", 1, 1, "c", &["2"; 6]);
    let ours0 = run(t.path(), "ours0", "clg-ode", 0, 1, "c", &CELLS);
    let ours1 = run(t.path(), "ours1", "clg-ode", 1, 1, "c", &CELLS);
    let runs = [eb0.as_path(), &eb1, &ours0, &ours1];
    let views: [(&[&str], usize, &str); 5] = [
        (&["--per-run"], 4, "test_sc_log_mse"),
        (&[], 3, "sc_log_mse_mean"),
        (&["--group-by", "model"], 3, "sc_log_mse_mean"),
        (&["--against", "eb-drift"], 4, "vs_against_p_holm"),
        (&["--against", "identity"], 4, "vs_against_p_holm"),
    ];
    for (extra, n, numeric) in views {
        let csv = parsed(t.path(), &runs, extra, "csv");
        let values = column(&csv, numeric);
        assert_eq!(values.len(), n, "{extra:?}: {csv}");
        let numbers = values.iter().filter(|v| v.parse::<f64>().is_ok()).count();
        assert!(numbers >= 2, "{extra:?}: {numeric} is numbers: {csv}");
        let json = &parsed(t.path(), &runs, extra, "json")["json"];
        let records = json.get("runs").unwrap_or(json);
        assert_eq!(records.as_array().unwrap().len(), n, "{extra:?}: {json}");
        let md = parsed(t.path(), &runs, extra, "md");
        assert_eq!(md["rows"].as_array().unwrap().len(), n, "{extra:?}: {md}");
        let table = parsed(t.path(), &runs, extra, "table");
        assert!(table["lines"].as_array().unwrap().len() > n, "{extra:?}");
    }
    // `--json` is `--format json` in every view.
    for extra in [&["--per-run"][..], &["--against", "eb-drift"]] {
        let mut args = extra.to_vec();
        args.push("--json");
        let o = compare(t.path(), &runs, &args);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_str::<Value>(&stdout(&o)).expect("JSON");
    }
}

#[test]
fn against_identity_pairs_each_run_with_its_own_identity_forecast() {
    let t = tempfile::tempdir().unwrap();
    let ours = run(t.path(), "ours", "clg-ode", 0, 1, "c", &CELLS);
    let seed2 = run(t.path(), "seed2", "clg-ode", 0, 2, "c", &["0.5"; 6]);
    let o = compare(
        t.path(),
        &[&ours, &seed2],
        &["--against", "identity", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("unpaired"), "{}", stderr(&o));
    let out: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let lines = out["runs"].as_array().unwrap();
    assert_eq!(lines.len(), 2, "{out}");
    for (l, mean) in lines.iter().zip([1.75, -0.5]) {
        assert_eq!(l["against"], "identity", "{l}");
        assert_eq!(l["vs_against"]["n"], 6, "{l}");
        assert_eq!(l["vs_against"]["mean"], mean, "{l}");
        assert_eq!(l["vs_against"], l["vs_identity"], "{l}");
    }
    // The identity's columns once, the partner said in words.
    let o = compare(t.path(), &[&ours, &seed2], &["--against", "identity"]);
    let text = stdout(&o);
    assert_eq!(text.matches("| − identity |").count(), 1, "{text}");
    assert!(text.contains("(its own identity)"), "{text}");
}

/// Four runs against one eb-drift run: each table's p-values Holm-adjusted as statsmodels'
/// `multipletests(method="holm")` (by hand where statsmodels is not installed).
#[test]
fn p_values_are_holm_adjusted_over_the_table() {
    let t = tempfile::tempdir().unwrap();
    let eb = run(t.path(), "eb", "eb-drift", 0, 1, "c", &["1.25"; 6]);
    let cells: [[&str; 6]; 4] = [
        ["2", "2.5", "3", "3.5", "4", "4.5"],
        ["1.5", "2", "2.5", "3", "3.5", "-2"],
        ["0.5", "2", "3", "4", "5", "6"],
        ["2", "-1", "4", "-3", "6", "7"],
    ];
    let mut runs = vec![eb.clone()];
    for (i, c) in cells.iter().enumerate() {
        runs.push(run(t.path(), &format!("r{i}"), "clg-ode", 0, 1, "c", c));
    }
    let refs: Vec<&Path> = runs.iter().map(PathBuf::as_path).collect();
    let o = compare(t.path(), &refs, &["--against", "eb-drift", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let lines = out["runs"].as_array().unwrap();
    let program = r#"
import json, sys
p = json.load(sys.stdin)
try:
    from statsmodels.stats.multitest import multipletests
    print(json.dumps(list(multipletests(p, method="holm")[1])))
except ImportError:
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * len(p), 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - k) * p[i]))
        out[i] = running
    print(json.dumps(out))
"#;
    for side in ["vs_against", "vs_identity"] {
        let compared: Vec<&Value> = lines.iter().filter(|l| !l[side].is_null()).collect();
        assert_eq!(compared.len(), if side == "vs_against" { 4 } else { 5 });
        let p: Vec<f64> = compared
            .iter()
            .map(|l| l[side]["p_wilcoxon"].as_f64().unwrap())
            .collect();
        let distinct: std::collections::BTreeSet<u64> = p.iter().map(|x| x.to_bits()).collect();
        assert!(distinct.len() >= 3, "{p:?}");
        let theirs: Vec<f64> =
            serde_json::from_str(&python(program, &[], &serde_json::to_string(&p).unwrap()))
                .unwrap();
        for (l, h) in compared.iter().zip(&theirs) {
            let ours = l[side]["p_holm"].as_f64().unwrap();
            assert!((ours - h).abs() <= 1e-12, "{side}: {ours} vs {h}: {l}");
        }
    }
    // Beside the p-value in the tables.
    let csv = parsed(t.path(), &refs, &["--against", "eb-drift"], "csv");
    let holm: Vec<String> = column(&csv, "vs_against_p_holm");
    let first = lines[1]["vs_against"]["p_holm"].as_f64().unwrap();
    assert_eq!(holm[1].parse::<f64>().unwrap(), first);
    let md = parsed(t.path(), &refs, &["--against", "eb-drift"], "md");
    let header = md["header"].as_array().unwrap();
    let p = header.iter().position(|h| h == "p").unwrap();
    assert_eq!(header[p + 1], "p_holm", "{md}");
}

/// Groups in the order of the inputs (not alphabetical), the identity last, and a group of one
/// run shows its value alone (no `± N/A`).
#[test]
fn rows_keep_the_inputs_order_and_one_value_stands_alone() {
    let t = tempfile::tempdir().unwrap();
    let lin = run(t.path(), "a_lin", "linear-drift", 0, 1, "c", &["2"; 6]);
    let eb = run(t.path(), "b_eb", "eb-drift", 0, 2, "c", &["1"; 6]);
    let ours = run(t.path(), "c_ours", "clg-ode", 0, 3, "c", &CELLS);
    let runs = [ours.as_path(), &lin, &eb];
    let csv = parsed(t.path(), &runs, &["--group-by", "model"], "csv");
    assert_eq!(
        column(&csv, "model"),
        ["clg-ode", "linear-drift", "eb-drift", "identity"]
    );
    let csv = parsed(
        t.path(),
        &[&lin, &eb, &ours],
        &["--group-by", "model"],
        "csv",
    );
    assert_eq!(
        column(&csv, "model"),
        ["linear-drift", "eb-drift", "clg-ode", "identity"]
    );
    for format in ["md", "table"] {
        let o = compare(
            t.path(),
            &runs,
            &[
                "--group-by",
                "model",
                "--metric",
                "sc_log_mse",
                "--format",
                format,
            ],
        );
        let text = stdout(&o);
        assert!(!text.contains("N/A"), "{text}");
        assert!(text.contains("2.750"), "{text}");
    }
    let md = parsed(t.path(), &runs, &["--group-by", "model"], "md");
    assert_eq!(column(&md, "sc_log_mse mean ± sd")[0], "2.750");
}
