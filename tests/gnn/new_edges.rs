//! `plot-sc --new-edges` (issue 58, item 4): how each run's forecast ranks the edges that appear,
//! checked against the run's own files. numpy reads the exported scores beside `trainer
//! predict`'s matrices of the same run and the cohort's scans: every candidate is an edge absent
//! from the start scan, scored by the predicted log1p weight, marked by its presence in the
//! true next scan; and the average precision (scikit-learn's definition, written out in numpy)
//! is the one the command reports. Needs python3 with numpy (scripts/setup.sh).

use crate::common;

use std::process::Command;

use common::*;

/// Reads the scores CSV, predict's output of one run and the cohort; checks every row and
/// prints the average precision of the run's rows.
const CHECK: &str = r#"
import csv, sys
import numpy as np
scores, pred_dir, sc_dir, run = sys.argv[1:5]
rows = [r for r in csv.DictReader(open(scores)) if r["run"] == run]
by_subject = {}
for r in rows:
    by_subject.setdefault(r["subject"], []).append(r)
def scan(name):
    m = np.loadtxt(f"{sc_dir}/{name}.csv", delimiter=",", dtype=np.float32)
    m = (0.5 * (m + m.T)).astype(np.float32)
    np.fill_diagonal(m, 0)
    return m
checked = 0
for p in csv.DictReader(open(f"{pred_dir}/predictions.csv")):
    if not p["true_scan"]:
        continue
    pred = np.loadtxt(f"{pred_dir}/{p['file']}", delimiter=",", dtype=np.float64)
    start, true = scan(p["start_scan"]), scan(p["true_scan"])
    iu = np.triu_indices(pred.shape[0], 1)
    absent = start[iu] <= 0
    want_i, want_j = iu[0][absent], iu[1][absent]
    got = by_subject.pop(p["subject"])
    assert [(int(r["i"]), int(r["j"])) for r in got] == list(zip(want_i, want_j)), p["subject"]
    score = np.array([float(r["score"]) for r in got])
    want = np.log1p(np.maximum(pred[want_i, want_j], 0))
    # predict writes the f32 forecast in decimals within half an f32 ulp; log1p keeps that.
    assert np.allclose(score, want, rtol=1e-6, atol=1e-7), (p["subject"], np.abs(score - want).max())
    appeared = np.array([r["appeared"] == "1" for r in got])
    assert (appeared == (true[want_i, want_j] > 0)).all(), p["subject"]
    checked += 1
assert checked > 0 and not by_subject, (checked, list(by_subject))
s = np.array([float(r["score"]) for r in rows])
y = np.array([r["appeared"] == "1" for r in rows])
order = np.argsort(-s, kind="stable")
s, y = s[order], y[order]
last = np.r_[np.nonzero(np.diff(s))[0], len(s) - 1]   # the last row of each distinct score
tp = np.cumsum(y)[last]
precision, recall = tp / (last + 1), tp / y.sum()
ap = np.sum(np.diff(np.r_[0, recall]) * precision)
print(f"{ap:.4f} {checked}")
"#;

#[test]
fn new_edge_scores_and_their_curves_are_the_runs_forecasts_of_absent_edges() {
    let t = tempfile::tempdir().unwrap();
    noisy_cohort(
        t.path(),
        &["--subjects", "40", "--nodes", "20", "--seed", "5"],
    );
    for model in ["eb-drift", "linear-drift"] {
        train_model(t.path(), model, "res");
        let o = run_in(
            t.path(),
            &[
                "predict",
                &format!("res/runs/{model}"),
                "--next-visit",
                "--split",
                "test",
                "--out",
                &format!("pred-{model}"),
            ],
        );
        assert!(o.status.success(), "{model}: {}", stderr(&o));
    }
    let o = run_in(
        t.path(),
        &[
            "plot-sc",
            "res/runs/eb-drift",
            "res/runs/linear-drift",
            "--new-edges",
            "--scores",
            "out/scores.csv",
            "--title",
            "New edges",
            "--out",
            "out/pr.svg",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let log = stderr(&o);
    let svg = std::fs::read_to_string(t.path().join("out/pr.svg")).unwrap();
    assert!(
        svg.contains("New edges") && svg.contains("chance "),
        "{svg}"
    );
    for model in ["eb-drift", "linear-drift"] {
        let o = Command::new("python3")
            .args([
                "-c",
                CHECK,
                "out/scores.csv",
                &format!("pred-{model}"),
                "cohort/sc",
                model,
            ])
            .current_dir(t.path())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{model}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let out = String::from_utf8_lossy(&o.stdout);
        let (ap, subjects) = out.trim().split_once(' ').unwrap();
        assert!(subjects.parse::<usize>().unwrap() > 0);
        let said = log
            .lines()
            .find(|l| l.starts_with(&format!("[plot-sc] {model}:")))
            .unwrap_or_else(|| panic!("{log}"));
        assert!(
            said.ends_with(&format!("average precision {ap}")),
            "{said} vs numpy {ap}"
        );
        assert!(
            svg.contains(&format!("{model} (AP ")),
            "{model} in the legend"
        );
    }

    // --label names a run in the legend (the other keeps its directory's name), in either order.
    for (order, out) in [
        (["res/runs/eb-drift", "res/runs/linear-drift"], "out/l1.svg"),
        (["res/runs/linear-drift", "res/runs/eb-drift"], "out/l2.svg"),
    ] {
        let o = run_in(
            t.path(),
            &[
                "plot-sc",
                order[0],
                order[1],
                "--new-edges",
                "--label",
                "EB (dense)=res/runs/eb-drift",
                "--out",
                out,
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let svg = std::fs::read_to_string(t.path().join(out)).unwrap();
        assert!(
            svg.contains("EB (dense) (AP ")
                && svg.contains("linear-drift (AP ")
                && !svg.contains("eb-drift (AP ")
                && !svg.contains("res/runs"),
            "{svg}"
        );
    }

    // Two folds given one --label name: one line, their mean precision with its band, the mean
    // average precision (that of the two runs' own, to the four decimals printed) and its
    // interval in the legend.
    let flags = ["--model", "eb-drift", "--cv_fold", "1"];
    let o = train_gnn_in(t.path(), "res", "eb-fold1", &flags);
    assert!(o.status.success(), "{}", stderr(&o));
    let ap_of = |run: &str| -> f64 {
        let o = run_in(
            t.path(),
            &["plot-sc", run, "--new-edges", "--out", "out/one.svg"],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let log = stderr(&o);
        let line = log
            .lines()
            .find(|l| l.contains("average precision"))
            .unwrap();
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let mean = 0.5 * (ap_of("res/runs/eb-drift") + ap_of("res/runs/eb-fold1"));
    let o = run_in(
        t.path(),
        &[
            "plot-sc",
            "res/runs/eb-drift",
            "res/runs/eb-fold1",
            "res/runs/linear-drift",
            "--new-edges",
            "--label",
            "EB=res/runs/eb-drift",
            "--label",
            "EB=res/runs/eb-fold1",
            "--out",
            "out/pooled.svg",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let log = stderr(&o);
    let said = log
        .lines()
        .find(|l| l.starts_with("[plot-sc] EB: 2 runs pooled"))
        .unwrap_or_else(|| panic!("{log}"));
    let pooled: f64 = said
        .split("mean average precision ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    // Each printed AP is rounded to 1e-4: their mean within 1e-4 of the pooled one.
    assert!((pooled - mean).abs() <= 1e-4, "{said} vs {mean}");
    let svg = std::fs::read_to_string(t.path().join("out/pooled.svg")).unwrap();
    assert!(
        svg.contains("2 runs)") && svg.contains("linear-drift (AP ") && svg.contains("<polygon"),
        "{svg}"
    );
    // --scores names rows by run: a shared name is refused there, before anything is written.
    let o = run_in(
        t.path(),
        &[
            "plot-sc",
            "res/runs/eb-drift",
            "res/runs/eb-fold1",
            "--new-edges",
            "--label",
            "EB=res/runs/eb-drift",
            "--label",
            "EB=res/runs/eb-fold1",
            "--scores",
            "out/s2.csv",
            "--out",
            "out/p2.svg",
        ],
    );
    assert!(!o.status.success() && stderr(&o).contains("--scores names each row"));
    assert!(!t.path().join("out/p2.svg").exists() && !t.path().join("out/s2.csv").exists());

    // A cohort where edges are only pruned (trainer synth-connectome's) has no curve: one error
    // line, no figure, no scores.
    let p = t.path().join("pruned");
    std::fs::create_dir(&p).unwrap();
    synth_cohort(&p, 16, 12, 1);
    train_model(&p, "linear-drift", "res");
    let o = run_in(
        &p,
        &[
            "plot-sc",
            "res/runs/linear-drift",
            "--new-edges",
            "--scores",
            "s.csv",
            "--out",
            "x.svg",
        ],
    );
    assert!(
        !o.status.success() && stderr(&o).contains("there is no precision–recall curve"),
        "{}",
        stderr(&o)
    );
    assert!(!p.join("x.svg").exists() && !p.join("s.csv").exists());
    // --scores without --new-edges is refused.
    let o = run_in(
        t.path(),
        &[
            "plot-sc",
            "res/runs/eb-drift",
            "--scores",
            "s.csv",
            "--out",
            "y.svg",
        ],
    );
    assert!(
        !o.status.success() && stderr(&o).contains("--new-edges"),
        "{}",
        stderr(&o)
    );
    assert!(!t.path().join("y.svg").exists() && !t.path().join("s.csv").exists());
}
