//! `scripts/ceiling_topology.py` (docs/frontier.md, "Both axes"): the Bayes ceiling's own
//! forecast scored on the topology axis as the trainer scores a forecast, on a run's split.
//! Needs python3 with numpy and scipy (scripts/setup.sh).

use crate::common::*;

use std::path::Path;
use std::process::Command;

fn ceiling(dir: &Path) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ceiling_topology.py");
    let o = Command::new("python3")
        .arg(&script)
        .args(["--cohort", "cohort", "--run", "results/runs/eb-drift"])
        .args(["--sweeps", "40", "--boot", "300", "--json", "ceiling.json"])
        .current_dir(dir)
        .output()
        .expect("python3 runs (scripts/setup.sh installs numpy and scipy)");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // The identity scored by the script is the trainer's (the script stops otherwise).
    assert!(
        err.contains("identity ecc_l2 scored here = the trainer's on"),
        "{err}"
    );
    let text = std::fs::read_to_string(dir.join("ceiling.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Without visit noise the ceiling forecasts each next scan (up to the files' %.6g digits), so
/// the trainer's topology scoring finds (almost) nothing to fault: its β0, ECC and strength
/// errors a small fraction of the identity's (0 but for a weight rounded across a quantile
/// threshold), log-MSE skill 1. With noise the script runs on the sampler (40 sweeps: a check that
/// it runs, not a measurement) and gives an interval around each difference.
#[test]
fn the_ceilings_forecast_is_scored_on_the_trainers_topology_scale() {
    let t = tempfile::tempdir().unwrap();
    let exact = t.path().join("no-noise");
    std::fs::create_dir(&exact).unwrap();
    let size = ["--subjects", "40", "--nodes", "24", "--seed", "3"];
    noisy_cohort(&exact, &[&size[..], &["--no-noise"]].concat());
    train_model(&exact, "eb-drift", "results");
    let c = ceiling(&exact);
    assert!(c["skill"].as_f64().unwrap() > 1.0 - 1e-6, "{c}");
    for col in ["betti0_l1", "ecc_l2", "strength_mae"] {
        let (mine, id) = (
            c["ceiling"][col].as_f64().unwrap(),
            c["identity"][col].as_f64().unwrap(),
        );
        assert!(
            id > 0.0 && mine <= 0.05 * id,
            "{col}: ceiling {mine}, identity {id}"
        );
    }

    noisy_cohort(t.path(), &size);
    train_model(t.path(), "eb-drift", "results");
    let c = ceiling(t.path());
    let skill = c["skill"].as_f64().unwrap();
    assert!(skill > 0.0 && skill < 1.0, "{c}");
    for col in ["betti0_l1", "ecc_l2", "strength_mae"] {
        let p = &c["minus_identity"][col];
        let (m, lo, hi) = (
            p["mean"].as_f64().unwrap(),
            p["ci_low"].as_f64().unwrap(),
            p["ci_high"].as_f64().unwrap(),
        );
        assert!(lo <= m && m <= hi, "{col}: {m} not in [{lo}, {hi}]");
    }
}
