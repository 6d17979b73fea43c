//! `train-gnn --eb-fallback` (set by `--preset residual` and `drift-residual`): CLG-ODE's
//! forecasts are the closed-form eb-drift's unless the network beats it on the best fold's
//! validation subjects; the run says which, keeps both skills, and a saved run's commands
//! repeat the choice. The rule itself: `clg_ode::fallback`'s unit test.

use crate::common::*;

use std::path::Path;

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// The model columns of a run's per_subject.csv: (subject:column, value), in order.
fn model_columns(run: &Path) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = per_subject_csv(run)
        .into_iter()
        .flat_map(|row| {
            let subject = row["subject"].clone();
            row.into_iter()
                .filter(|(h, _)| h.starts_with("model_"))
                .map(move |(h, v)| (format!("{subject}:{h}"), v))
        })
        .collect();
    out.sort();
    out
}

/// Two printed numbers equal to 1e-5 relative (both empty: undefined alike).
fn close(a: &str, b: &str, what: &str) {
    if a.is_empty() || b.is_empty() {
        assert_eq!(a, b, "{what}");
        return;
    }
    let (x, y): (f64, f64) = (a.parse().unwrap(), b.parse().unwrap());
    assert!(
        (x - y).abs() <= 1e-5 * y.abs().max(1e-6),
        "{what}: fallback {x}, eb-drift run {y}"
    );
}

/// `--preset residual` with a min delta no network reaches: the forecasts written are
/// eb-drift's, value for value (to the f32 rounding of its parameters) those of `--model eb-drift` on the same split (the same fit of
/// the same training subjects, the same forecaster code); the log and test_metrics.json say so
/// with both validation skills; eval-gnn repeats the choice and the per-subject file byte for
/// byte.
#[test]
fn a_network_that_does_not_beat_eb_drift_on_validation_gives_eb_drifts_forecasts() {
    let t = tempfile::tempdir().unwrap();
    noisy_cohort(
        t.path(),
        &["--subjects", "40", "--nodes", "24", "--seed", "3"],
    );
    train_model(t.path(), "eb-drift", "results");
    let flags = [
        "--preset",
        "residual",
        "--cv_fold",
        "0",
        "--max_epochs",
        "2",
        "--min_delta",
        "10",
    ];
    let o = train_gnn_in(t.path(), "results", "residual", &flags);
    assert!(o.status.success(), "{}", stderr(&o));
    let log = stderr(&o);
    assert!(
        log.contains("--eb-fallback: validation skill over fold 0's")
            && log.contains("the forecasts written are eb-drift's")
            && log.contains("forecasts of eb-drift: --eb-fallback"),
        "{log}"
    );
    let run = t.path().join("results/runs/residual");
    let test = json(&run.join("test_metrics.json"));
    let fb = &test["eb_fallback"];
    assert_eq!(fb["used"], true, "{test}");
    assert_eq!(fb["fold"], 0, "{test}");
    assert_eq!(fb["min_delta"], 10.0, "{test}");
    for key in [
        "clg_ode_val_skill",
        "eb_drift_val_skill",
        "clg_ode_test_skill",
    ] {
        assert!(
            fb[key].as_f64().is_some_and(f64::is_finite),
            "{key}: {test}"
        );
    }
    let eb = t.path().join("results/runs/eb-drift");
    let eb_test = json(&eb.join("test_metrics.json"));
    assert!(eb_test.get("eb_fallback").is_none(), "{eb_test}");
    // The test forecasts are the eb-drift run's, every model column of every subject, up to
    // the rounding of the fit's parameters: the eb-drift run forecasts from its model file's
    // f32 parameters, the fallback from the same f64 fit unrounded (measured: 1e-7 relative at
    // most, element-wise functions of f32-rounded inputs, no long sums: the same on every CPU
    // and thread count). 1e-5 as the eb-residual test. The integer columns (Betti, degree)
    // equal.
    let (mine, theirs) = (model_columns(&run), model_columns(&eb));
    assert!(!mine.is_empty());
    assert_eq!(mine.len(), theirs.len());
    for ((k, a), (k2, b)) in mine.iter().zip(&theirs) {
        assert_eq!(k, k2);
        close(a, b, k);
    }
    for key in ["sc_log_mse", "sc_log_pearson", "ecc_l2", "strength_mae"] {
        close(
            &test["model"][key].to_string(),
            &eb_test["model"][key].to_string(),
            key,
        );
    }
    close(
        &test["test_loss"].to_string(),
        &eb_test["test_loss"].to_string(),
        "test_loss",
    );
    let o = run_in(t.path(), &["eval-gnn", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = stderr(&o)
        .matches("--eb-fallback: validation skill")
        .count();
    assert_eq!(said, 1, "said once per process: {}", stderr(&o));
    // compare says why the two runs are one result, and which run fell back.
    let o = run_in(
        t.path(),
        &["compare", run.to_str().unwrap(), eb.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("residual: its forecasts are eb-drift's (--eb-fallback")
            && err.contains("wrote eb-drift's forecasts (--eb-fallback), which is why")
            && !err.contains("had no effect"),
        "{err}"
    );
    let a = std::fs::read(run.join("per_subject.csv")).unwrap();
    let b = std::fs::read(run.join("eval-test-best/per_subject.csv")).unwrap();
    assert!(a == b, "eval-gnn's per_subject.csv differs from the run's");
}

/// The flag applies to a trained network only.
#[test]
fn eb_fallback_is_refused_for_the_closed_form_models() {
    let t = tempfile::tempdir().unwrap();
    noisy_cohort(
        t.path(),
        &["--subjects", "12", "--nodes", "8", "--seed", "3"],
    );
    let flags = ["--model", "eb-drift", "--eb-fallback", "--cv_fold", "0"];
    let o = train_gnn_in(t.path(), "results", "x", &flags);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--eb-fallback applies to --model clg-ode only"),
        "{}",
        stderr(&o)
    );
    assert!(!t.path().join("results/runs/x").exists());
}
