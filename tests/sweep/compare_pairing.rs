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

/// Issue 75 item 4: `--against MODEL --group-by KEY` gives one row per configuration: each
/// subject's figure averaged over the configuration's folds (and its partners' over the same
/// runs), then one paired test over the subjects, Holm over the rows; runs without a partner
/// are named; every format carries the same rows; a key no run has is refused.
#[test]
fn against_grouped_by_configuration_averages_each_subject_over_folds() {
    use trainer::metrics::paired::{SEED, paired_values};
    let t = tempfile::tempdir().unwrap();
    let ones = ["1"; 6];
    let twos = ["2"; 6];
    let eb0 = run(t.path(), "eb0", "eb-drift", 0, 1, "c", &ones);
    let eb1 = run(t.path(), "eb1", "eb-drift", 1, 1, "c", &twos);
    let up: Vec<String> = CELLS
        .iter()
        .map(|c| (c.parse::<f64>().unwrap() + 1.0).to_string())
        .collect();
    let up: Vec<&str> = up.iter().map(String::as_str).collect();
    let clg0 = run(t.path(), "clg0", "clg-ode", 0, 1, "c", &CELLS);
    let clg1 = run(t.path(), "clg1", "clg-ode", 1, 1, "c", &up);
    let ld0 = run(
        t.path(),
        "ld0",
        "linear-drift",
        0,
        1,
        "c",
        &["2", "2", "2", "2", "2", "3"],
    );
    // Seed 2: no eb-drift run of its fold and seed.
    let ld1 = run(t.path(), "ld1", "linear-drift", 1, 2, "c", &CELLS);
    let all: [&Path; 6] = [&eb0, &eb1, &clg0, &clg1, &ld0, &ld1];
    let o = compare(
        t.path(),
        &all,
        &["--against", "eb-drift", "--group-by", "model", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(out["group_by"], json!(["model"]), "{out}");
    let rows = out["configurations"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["configuration"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["model=eb-drift", "model=clg-ode", "model=linear-drift"],
        "one row per configuration, in the inputs' order"
    );
    let row = |c: &str| rows.iter().find(|r| r["configuration"] == c).unwrap();

    // clg-ode: subject i is (c_i + (c_i + 1)) / 2 against eb-drift's (1 + 2) / 2.
    let clg = row("model=clg-ode");
    assert_eq!(clg["runs"].as_array().unwrap().len(), 2, "{clg}");
    assert_eq!(clg["folds"], json!(["0", "1"]), "{clg}");
    let pairs: Vec<(f64, f64)> = CELLS
        .iter()
        .map(|c| (c.parse::<f64>().unwrap() + 0.5, 1.5))
        .collect();
    let want = paired_values(&pairs, SEED);
    let vs = &clg["vs_against"];
    assert_eq!(vs["n"], 6, "{clg}");
    assert!((vs["mean"].as_f64().unwrap() - 1.75).abs() < 1e-12, "{clg}");
    assert_eq!(vs["p_wilcoxon"].as_f64().unwrap(), want.p_wilcoxon, "{clg}");
    assert_eq!(vs["ci_low"].as_f64().unwrap(), want.ci_low, "{clg}");
    assert_eq!(vs["ci_high"].as_f64().unwrap(), want.ci_high, "{clg}");
    // Against the identity (1 for every subject): c_i + 0.5 − 1.
    assert!((clg["vs_identity"]["mean"].as_f64().unwrap() - 2.25).abs() < 1e-12);

    // linear-drift: the seed-2 run has no partner (named); fold 0 alone is paired.
    let ld = row("model=linear-drift");
    assert_eq!(ld["unpaired"].as_array().unwrap().len(), 1, "{ld}");
    assert!(
        ld["unpaired"][0]
            .as_str()
            .unwrap()
            .starts_with(&format!("{}: ", ld1.display())),
        "{ld}"
    );
    assert_eq!(ld["against"], json!([eb0.to_str().unwrap()]), "{ld}");
    assert!((ld["vs_against"]["mean"].as_f64().unwrap() - 7.0 / 6.0).abs() < 1e-12);
    assert!(stderr(&o).contains("unpaired") && stderr(&o).contains(ld1.to_str().unwrap()));
    // The model's own row: against the identity only.
    let eb = row("model=eb-drift");
    assert!(eb["is_against"].as_bool().unwrap() && eb["vs_against"].is_null());

    // Holm over the rows that have a test (statsmodels' rule for two p-values).
    let p: Vec<f64> = [clg, ld]
        .iter()
        .map(|r| r["vs_against"]["p_wilcoxon"].as_f64().unwrap())
        .collect();
    let holm: Vec<f64> = [clg, ld]
        .iter()
        .map(|r| r["vs_against"]["p_holm"].as_f64().unwrap())
        .collect();
    let (lo, hi) = if p[0] <= p[1] { (0, 1) } else { (1, 0) };
    assert!(
        (holm[lo] - (2.0 * p[lo]).min(1.0)).abs() < 1e-12,
        "{p:?} {holm:?}"
    );
    assert!(
        (holm[hi] - p[hi].max(holm[lo]).min(1.0)).abs() < 1e-12,
        "{p:?} {holm:?}"
    );

    // The table: one row per configuration; CSV: the same rows.
    let o = compare(
        t.path(),
        &all,
        &["--against", "eb-drift", "--group-by", "model"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("one row per configuration (model)"), "{text}");
    for c in ["model=eb-drift", "model=clg-ode", "model=linear-drift"] {
        let n = text
            .lines()
            .filter(|l| l.starts_with(&format!("| {c} |")))
            .count();
        assert_eq!(n, 1, "{c}: {text}");
    }
    assert!(text.contains("(the --against runs)") && text.contains("1 run(s) unpaired"));
    let o = compare(
        t.path(),
        &all,
        &[
            "--against",
            "eb-drift",
            "--group-by",
            "model",
            "--format",
            "csv",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = stdout(&o);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header[0], "configuration");
    let mean = header.iter().position(|h| *h == "vs_against_mean").unwrap();
    let clg_line = lines.find(|l| l.starts_with("model=clg-ode,")).unwrap();
    assert_eq!(clg_line.split(',').nth(mean), Some("1.75"), "{csv}");

    // A key no run has: refused, not ignored.
    let o = compare(
        t.path(),
        &all,
        &["--against", "eb-drift", "--group-by", "no_such_key"],
    );
    fails_with_code(&o, 1, "--group-by no_such_key");
}

fn fails_with_code(o: &std::process::Output, code: i32, needle: &str) {
    assert_eq!(o.status.code(), Some(code), "{}", stderr(o));
    assert!(stderr(o).contains(needle), "{}", stderr(o));
}
