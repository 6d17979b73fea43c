//! `trainer predict` and `trainer plot-sc` on a finished run: predicted matrices in the input
//! format, re-scored independently in Python (numpy) against the true scans to the run's own
//! `per_subject.csv`; trajectories and population means; heatmaps that are not blank; and
//! errors that are one clear line with nothing written.

use crate::common;

use std::path::Path;

use common::*;

/// A 16-subject cohort and a 2-epoch CLG-ODE run (`res/runs/clg`) and a linear-drift run.
fn trained() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 16, 12, 3);
    for (name, extra) in [
        (
            "clg",
            &[
                "--max_epochs",
                "2",
                "--latent_dim",
                "8",
                "--hidden_dim",
                "16",
            ][..],
        ),
        ("drift", &["--model", "linear-drift"][..]),
    ] {
        let mut args = vec![
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
            "--run-name",
            name,
        ];
        args.extend(extra);
        let o = run_in(t.path(), &args);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
    }
    t
}

/// numpy recomputes sc_log_mse of every prediction from the written CSV and the true scan and
/// compares it with the run's per_subject.csv, within 1e-5 relative (floor 1e-3).
///
/// Across processes and implementations: the run scored its f32 prediction with its own host
/// code and summation order; numpy re-reads the prediction from its CSV decimals (each within
/// half an f32 ulp, 3e-8 relative, of the run's value), takes log1p in f64 and averages the 66
/// pairs of a 12-node scan pairwise. The gap is f32 rounding: ≤ 66·u ≈ 4e-6 relative for the
/// sum, plus the inputs' 3e-8 amplified where prediction and truth nearly agree (the 1e-3
/// floor bounds that). Measured worst (printed): 3.3e-7 (the linear-drift run), 6.8e-9
/// (CLG-ODE): 30× inside. Both sides are host code, so the gap depends neither on the CPU's
/// SIMD nor on the thread count.
const RESCORE: &str = r#"
import csv, sys
import numpy as np
pred_dir, sc_dir, per_subject = sys.argv[1:4]
want = {r["subject"]: float(r["model_sc_log_mse"]) for r in csv.DictReader(open(per_subject))}
n, worst = 0, 0.0
for r in csv.DictReader(open(f"{pred_dir}/predictions.csv")):
    p = np.loadtxt(f"{pred_dir}/{r['file']}", delimiter=",", dtype=np.float64)
    t = np.loadtxt(f"{sc_dir}/{r['true_scan']}.csv", delimiter=",", dtype=np.float32)
    t = (0.5 * (t + t.T)).astype(np.float32)
    np.fill_diagonal(t, 0)
    assert np.allclose(p, p.T) and not p.diagonal().any(), r["file"]
    iu = np.triu_indices(p.shape[0], 1)
    mse = np.mean((np.log1p(p[iu]) - np.log1p(t[iu].astype(np.float64))) ** 2)
    w = want[r["subject"]]
    assert abs(mse - w) <= 1e-5 * max(abs(w), 1e-3), (r["subject"], mse, w)
    worst = max(worst, abs(mse - w) / max(abs(w), 1e-3))
    n += 1
print(f"numpy rescore: worst relative gap {worst:.1e}", file=sys.stderr)
print(n)
"#;

#[test]
fn next_visit_predictions_rescore_in_numpy_to_the_runs_per_subject_scores() {
    let t = trained();
    for run in ["clg", "drift"] {
        let dir = t.path().join("res/runs").join(run);
        let out = format!("pred-{run}");
        let o = run_in(
            t.path(),
            &[
                "predict",
                dir.to_str().unwrap(),
                "--next-visit",
                "--split",
                "test",
                "--out",
                &out,
            ],
        );
        assert!(o.status.success(), "{run}: {}", stderr(&o));
        let py = std::process::Command::new("python3")
            .args(["-c", RESCORE, &out, "cohort/sc"])
            .arg(dir.join("per_subject.csv"))
            .current_dir(t.path())
            .output()
            .expect("python3 with numpy (scripts/setup.sh)");
        assert!(
            py.status.success(),
            "{run}: {}",
            String::from_utf8_lossy(&py.stderr)
        );
        eprint!("{run}: {}", String::from_utf8_lossy(&py.stderr));
        let n: usize = String::from_utf8_lossy(&py.stdout).trim().parse().unwrap();
        assert!(n >= 2, "{run}: only {n} predictions checked");
        // Our own SC reader reads the predictions back.
        let first = std::fs::read_dir(t.path().join(&out).join("sc"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let m = trainer::data::connectome::sc::read_sc_matrix(&first).unwrap();
        assert_eq!(m.dim(), (12, 12));
    }
}

#[test]
fn trajectories_population_means_and_errors() {
    let t = trained();
    let run = t.path().join("res/runs/clg");
    let run = run.to_str().unwrap();
    let o = run_in(
        t.path(),
        &[
            "predict",
            run,
            "--ages",
            "8,9,10,11,12,13",
            "--population",
            "--plot",
            "--out",
            "traj",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let index = std::fs::read_to_string(t.path().join("traj/predictions.csv")).unwrap();
    let rows = index.lines().count() - 1;
    assert!(rows >= 16, "{index}");
    let pop = std::fs::read_to_string(t.path().join("traj/population.csv")).unwrap();
    assert!(pop.lines().count() >= 3, "{pop}");
    // --dt-years predicts one-scan subjects too.
    let o = run_in(
        t.path(),
        &["predict", run, "--dt-years", "2", "--out", "dt2"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = std::fs::read_to_string(t.path().join("dt2/predictions.csv")).unwrap();
    assert_eq!(rows.lines().count() - 1, 16, "{rows}");

    // Errors: one line, exit != 0, no output directory, no staging directory left.
    let before: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    for (args, needle) in [
        (
            vec!["predict", run, "--target-age", "1", "--out", "bad"],
            "before the start scan",
        ),
        (
            vec![
                "predict",
                run,
                "--next-visit",
                "--subjects",
                "sub-nobody",
                "--out",
                "bad",
            ],
            "sub-nobody",
        ),
        (
            vec!["predict", "cohort", "--next-visit", "--out", "bad"],
            "not a train-gnn run directory",
        ),
        (
            vec![
                "predict",
                run,
                "--next-visit",
                "--checkpoint",
                "res/none.safetensors",
                "--out",
                "bad",
            ],
            "does not exist",
        ),
        (
            vec!["predict", run, "--dt-years", "1", "--out", "traj"],
            "not empty",
        ),
    ] {
        let o = run_in(t.path(), &args);
        assert!(!o.status.success(), "{args:?}");
        let err = stderr(&o);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    let after: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before, after, "nothing written by a failed predict");
}

/// Fraction of pixels that are not white, and the number of distinct colours.
fn ink(png: &Path) -> (f64, usize) {
    let img = image::open(png).unwrap().to_rgb8();
    let mut colours = std::collections::HashSet::new();
    let mut inked = 0usize;
    for p in img.pixels() {
        colours.insert(p.0);
        inked += usize::from(p.0 != [255, 255, 255]);
    }
    (
        inked as f64 / (img.width() * img.height()) as f64,
        colours.len(),
    )
}

#[test]
fn plot_sc_draws_heatmaps_and_the_strata_chart() {
    let t = trained();
    let run = t.path().join("res/runs/clg");
    let run = run.to_str().unwrap();
    let names: String = (0..12)
        .map(|i| {
            format!(
                "7Networks_LH_{}_{i}\n",
                if i < 5 { "Vis" } else { "Default" }
            )
        })
        .collect();
    std::fs::write(t.path().join("rois.txt"), names).unwrap();
    let o = run_in(
        t.path(),
        &[
            "plot-sc",
            run,
            "--roi-names",
            "rois.txt",
            "--out",
            "sub.png",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let (inked, colours) = ink(&t.path().join("sub.png"));
    assert!(
        inked > 0.5 && colours > 20,
        "blank heatmap: {inked} inked, {colours} colours"
    );
    let o = run_in(t.path(), &["plot-sc", run, "--out", "sub.svg"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(t.path().join("sub.svg")).unwrap();
    assert!(
        svg.matches("<rect").count() > 5 * 144,
        "every cell of five 12×12 panels"
    );
    let o = run_in(
        t.path(),
        &["plot-sc", run, "--strata", "--out", "strata.png"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let (inked, _) = ink(&t.path().join("strata.png"));
    assert!(inked > 0.02, "blank strata chart: {inked}");
    // Trajectories (issue 58, item 4): two chosen subjects in two panels, each subject's
    // scans as dots and one forecast line per subject and panel, the subjects in the legend.
    let cohort: Vec<String> = std::fs::read_to_string(t.path().join("cohort/subject_info_sc.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().to_string())
        .collect();
    let scans = |id: &str| cohort.iter().filter(|s| *s == id).count();
    let mut two: Vec<&String> = cohort.iter().filter(|id| scans(id) >= 2).collect();
    two.dedup();
    let (a, b) = (two[0], two[1]);
    let o = run_in(
        t.path(),
        &[
            "plot-sc",
            run,
            "--trajectories",
            "--subject",
            &format!("{a},{b}"),
            "--measure",
            "mean",
            "--measure",
            "edge:0-1",
            "--out",
            "traj.svg",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(t.path().join("traj.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(|t| t.trim().to_string()))
        .collect();
    for want in [
        a.as_str(),
        b.as_str(),
        "mean log1p weight (all edges)",
        "log1p weight of edge 0–1",
    ] {
        assert!(texts.iter().any(|t| t == want), "{want}: {texts:?}");
    }
    let dots = doc
        .descendants()
        .filter(|n| n.has_tag_name("circle"))
        .count();
    assert_eq!(
        dots,
        2 * (scans(a) + scans(b)),
        "every scan a dot in both panels"
    );
    let forecasts = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke-width") == Some("2"))
        .filter(|n| n.attribute("points").unwrap().split_whitespace().count() > 2)
        .count();
    assert_eq!(forecasts, 4, "one forecast line per subject and panel");
    let o = run_in(
        t.path(),
        &[
            "plot-sc",
            run,
            "--trajectories",
            "--measure",
            "edge:0-12",
            "--out",
            "x.png",
        ],
    );
    assert!(
        !o.status.success() && stderr(&o).contains("--measure edge:0-12: node 12"),
        "{}",
        stderr(&o)
    );
    let o = run_in(
        t.path(),
        &["plot-sc", run, "--subject", "sub-nobody", "--out", "x.png"],
    );
    assert!(
        !o.status.success() && stderr(&o).contains("sub-nobody"),
        "{}",
        stderr(&o)
    );
    assert!(!t.path().join("x.png").exists());
}

/// Predictions are always valid matrices and their files never collide: a horizon beyond what
/// the fold's training subjects cover is refused unless `--extrapolate`, and then a forecast
/// that is not finite is refused (nothing written); negative values are values (the range
/// error, not "unexpected argument"); `--dt-years` takes a list; two ages that round alike get
/// two files; `predictions.csv` says which part of the split each subject was in; an empty or
/// missing `--subjects` file is named; a staging directory a killed run left is removed.
#[test]
fn horizons_are_checked_files_are_distinct_and_staging_is_cleaned() {
    let t = trained();
    let run = t.path().join("res/runs/drift");
    let run = run.to_str().unwrap();
    let ok = |args: &[&str]| {
        let o = run_in(t.path(), args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    };
    let fails = |args: &[&str], needle: &str| {
        let o = run_in(t.path(), args);
        assert!(!o.status.success(), "{args:?}");
        let err = stderr(&o);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!t.path().join("bad").exists(), "{args:?}: wrote bad/");
    };
    // A stale staging directory of a process that is gone.
    let stale = t.path().join(".predict-999999999.tmp");
    std::fs::create_dir_all(stale.join("sc")).unwrap();

    ok(&["predict", run, "--dt-years", "0.5,1,2", "--out", "list"]);
    assert!(
        !stale.exists(),
        "the stale staging directory is still there"
    );
    let index = std::fs::read_to_string(t.path().join("list/predictions.csv")).unwrap();
    assert_eq!(index.lines().count() - 1, 3 * 16, "{index}");
    let header: Vec<&str> = index.lines().next().unwrap().split(',').collect();
    let split = header
        .iter()
        .position(|h| *h == "split")
        .expect("split column");
    let splits: std::collections::BTreeSet<&str> = index
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(split).unwrap())
        .collect();
    assert!(
        splits.contains("test") && splits.contains("train"),
        "{splits:?}"
    );

    let subject = index.lines().nth(1).unwrap().split(',').next().unwrap();
    ok(&[
        "predict",
        run,
        "--subjects",
        subject,
        "--ages",
        "12,12.0004,12.001",
        "--extrapolate",
        "--out",
        "ages",
    ]);
    let files: std::collections::BTreeSet<String> = std::fs::read_dir(t.path().join("ages/sc"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let rows = std::fs::read_to_string(t.path().join("ages/predictions.csv")).unwrap();
    assert_eq!(files.len(), rows.lines().count() - 1, "{files:?}\n{rows}");

    fails(
        &["predict", run, "--dt-years", "1e6", "--out", "bad"],
        "--extrapolate",
    );
    fails(
        &[
            "predict",
            run,
            "--dt-years",
            "1e6",
            "--extrapolate",
            "--out",
            "bad",
        ],
        "not finite",
    );
    fails(
        &["predict", run, "--dt-years", "-1", "--out", "bad"],
        "at least 0",
    );
    std::fs::write(t.path().join("empty.txt"), "\n").unwrap();
    fails(
        &[
            "predict",
            run,
            "--next-visit",
            "--subjects",
            "empty.txt",
            "--out",
            "bad",
        ],
        "names no subject",
    );
    fails(
        &[
            "predict",
            run,
            "--next-visit",
            "--subjects",
            "ids/none.txt",
            "--out",
            "bad",
        ],
        "no such file",
    );
}
