//! `trainer compare … --against MODEL`: paired statistics over test subjects
//! (`src/metrics/paired.rs`, `src/report/against.rs`), checked against scipy: the Wilcoxon
//! signed-rank p-value (exact and normal-approximation paths, ties and zeros) and the percentile
//! bootstrap interval, on fixtures and on two real runs' `per_subject.csv`. Needs python3 with
//! numpy and scipy (scripts/setup.sh installs them).

use crate::common;

use std::process::Command;

use common::*;
use trainer::metrics::paired::{bootstrap_ci, wilcoxon};

/// scipy's answers for `cases` (JSON lists): `[[p_wilcoxon, ci_low, ci_high, sd_of_mean], …]`.
fn scipy(cases: &[Vec<f64>]) -> Vec<[f64; 4]> {
    let program = r#"
import json, sys
import numpy as np
from scipy import stats
out = []
for d in json.load(sys.stdin):
    d = np.array(d, dtype=float)
    p = stats.wilcoxon(d).pvalue
    ci = stats.bootstrap((d,), np.mean, n_resamples=10000, method="percentile",
                         random_state=np.random.default_rng(7)).confidence_interval
    out.append([float(p), float(ci.low), float(ci.high), float(d.std(ddof=1) / np.sqrt(len(d)))])
print(json.dumps(out))
"#;
    let mut child = Command::new("python3")
        .args(["-c", program])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(cases).unwrap().as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "scipy (scripts/setup.sh installs it): {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A deterministic pseudo-random sequence in [-1, 1).
fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

/// The Wilcoxon p-value equals scipy's: to 1e-9 on the exact path (the same sums of the same
/// null distribution), to 1e-6 relative on the normal approximation (our erfc is accurate to
/// 1.2e-7 relative). The bootstrap interval is another random draw of the same estimator: its
/// endpoints agree within 0.2 standard errors of the mean (each endpoint's Monte-Carlo error at
/// 10,000 resamples is ≈ 0.027 standard errors; a 90 % instead of a 95 % interval would be off
/// by 0.3).
#[test]
fn wilcoxon_and_bootstrap_match_scipy() {
    let exact: Vec<f64> = noise(20, 1).iter().map(|x| x + 0.3).collect();
    let approx_ties: Vec<f64> = noise(60, 2)
        .iter()
        .map(|x| (x * 8.0).round() / 8.0 + 0.1)
        .collect();
    let with_zeros: Vec<f64> = noise(30, 3)
        .iter()
        .enumerate()
        .map(|(i, x)| if i % 7 == 0 { 0.0 } else { x - 0.2 })
        .collect();
    let tiny_n: Vec<f64> = vec![-0.5, 1.0, 2.0, 3.5, 0.25];
    let cases = vec![exact, approx_ties, with_zeros, tiny_n];
    let theirs = scipy(&cases);
    for (d, [p, lo, hi, se]) in cases.iter().zip(theirs) {
        let ours = wilcoxon(d);
        let tol = if d.len() <= 50 && !d.contains(&0.0) {
            1e-9
        } else {
            1e-6 * p
        };
        assert!(
            (ours - p).abs() <= tol,
            "n={}: wilcoxon {ours} vs scipy {p}",
            d.len()
        );
        let (ol, oh) = bootstrap_ci(d, 0x5eed, 10_000);
        assert!(
            (ol - lo).abs() <= 0.2 * se && (oh - hi).abs() <= 0.2 * se,
            "n={}: bootstrap [{ol}, {oh}] vs scipy [{lo}, {hi}] (se {se})",
            d.len()
        );
    }
}

/// Two real runs on one cohort and split (linear-drift and eb-drift): `compare --against
/// eb-drift --json` gives, per run, the paired differences that scipy computes from the two
/// `per_subject.csv` files.
#[test]
fn compare_against_pairs_real_runs_by_subject() {
    let t = tempfile::tempdir().unwrap();
    noisy_cohort(
        t.path(),
        &["--subjects", "40", "--nodes", "20", "--seed", "4"],
    );
    for model in ["linear-drift", "eb-drift"] {
        train_model(t.path(), model, "res");
    }
    let runs = t.path().join("res/runs");
    let (drift_run, eb_run) = (runs.join("linear-drift"), runs.join("eb-drift"));
    let args = [
        "compare",
        drift_run.to_str().unwrap(),
        eb_run.to_str().unwrap(),
        "--against",
        "eb-drift",
    ];
    let o = run_in(t.path(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("(the --against run)"), "{text}");
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let o = run_in(t.path(), &json_args);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let lines = json["runs"].as_array().unwrap();
    let drift = lines.iter().find(|l| l["model"] == "linear-drift").unwrap();
    // The same differences from the files, in Python, and scipy's test of them.
    let program = r#"
import csv, sys
from scipy import stats
rows = lambda p: {r["subject"]: r for r in csv.DictReader(open(p)) if r["forecast"] == "1"}
a, b = rows(sys.argv[1]), rows(sys.argv[2])
d = [float(a[s]["model_sc_log_mse"]) - float(b[s]["model_sc_log_mse"]) for s in sorted(a)]
print(len(d), sum(d) / len(d), stats.wilcoxon(d).pvalue)
"#;
    let o = Command::new("python3")
        .args(["-c", program])
        .arg(runs.join("linear-drift/per_subject.csv"))
        .arg(runs.join("eb-drift/per_subject.csv"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Vec<f64> = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let vs = &drift["vs_against"];
    assert_eq!(vs["n"].as_f64().unwrap(), v[0], "{drift}");
    // Means of the same f64 values in another order; the p-value as in the fixtures test.
    assert!((vs["mean"].as_f64().unwrap() - v[1]).abs() <= 1e-12 * v[1].abs().max(1e-12));
    assert!((vs["p_wilcoxon"].as_f64().unwrap() - v[2]).abs() <= 1e-6 * v[2]);
    eprintln!("{text}");
}

/// Issue 75 item 4 on real runs: linear-drift and eb-drift on folds 0 and 1 of one cohort;
/// `compare --against eb-drift --group-by model --json` gives linear-drift's row the paired
/// test that scipy computes from the four `per_subject.csv` files, each subject's figure
/// averaged over the two folds first.
#[test]
fn compare_against_grouped_by_model_averages_real_runs_over_folds() {
    let t = tempfile::tempdir().unwrap();
    noisy_cohort(
        t.path(),
        &["--subjects", "40", "--nodes", "20", "--seed", "4"],
    );
    let mut dirs = Vec::new();
    for model in ["linear-drift", "eb-drift"] {
        for fold in ["0", "1"] {
            let name = format!("{model}-{fold}");
            let o = run_in(
                t.path(),
                &[
                    "train-gnn",
                    "--model",
                    model,
                    "--sc_dir",
                    "cohort/sc",
                    "--morph_root",
                    "cohort/morph",
                    "--subject_info_csv",
                    "cohort/subject_info_sc.csv",
                    "--results_dir",
                    "res",
                    "--run_name",
                    &name,
                    "--cv_fold",
                    fold,
                ],
            );
            assert!(o.status.success(), "{name}: {}", stderr(&o));
            dirs.push(t.path().join("res/runs").join(name));
        }
    }
    let mut args: Vec<&str> = vec!["compare"];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    args.extend(["--against", "eb-drift", "--group-by", "model", "--json"]);
    let o = run_in(t.path(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let rows = json["configurations"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{json}");
    let drift = rows
        .iter()
        .find(|r| r["configuration"] == "model=linear-drift")
        .unwrap();
    assert_eq!(drift["folds"], serde_json::json!(["0", "1"]), "{drift}");
    let program = r#"
import csv, sys
from scipy import stats
rows = lambda p: {r["subject"]: float(r["model_sc_log_mse"]) for r in csv.DictReader(open(p)) if r["forecast"] == "1"}
a0, a1, b0, b1 = (rows(p) for p in sys.argv[1:5])
subjects = sorted(set(a0) | set(a1))
d = [(a0[s] + a1[s]) / 2 - (b0[s] + b1[s]) / 2 for s in subjects]
print(len(d), sum(d) / len(d), stats.wilcoxon(d).pvalue)
"#;
    let o = Command::new("python3")
        .args(["-c", program])
        .args(dirs.iter().map(|d| d.join("per_subject.csv")))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Vec<f64> = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let vs = &drift["vs_against"];
    assert_eq!(vs["n"].as_f64().unwrap(), v[0], "{drift}");
    assert!(
        (vs["mean"].as_f64().unwrap() - v[1]).abs() <= 1e-12 * v[1].abs().max(1e-12),
        "{drift} {v:?}"
    );
    assert!((vs["p_wilcoxon"].as_f64().unwrap() - v[2]).abs() <= 1e-6 * v[2]);
}
