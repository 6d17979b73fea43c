//! The live view of a sweep: every run's TensorBoard event files (`src/outputs/tensorboard.rs`)
//! read back by the `tensorboard` Python package's own reader (which checks the records'
//! CRC-32C), and `trainer plot SWEEP_DIR` with legends from the varied settings. Needs python3
//! with tensorboard (scripts/setup.sh installs it).

use crate::common;
use crate::sweep_helpers as sweep;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::Value;
use sweep::{plan, setup_with};

/// Columns that are no scalar in the event files (the x axis, a flag, position counters).
const NOT_SCALARS: &[&str] = &["epoch", "is_best", "steps", "epoch_steps"];

/// What TensorBoard's multiplexer finds under `logdir`, as `tensorboard --logdir` would:
/// `{run: {tag: [[step, value, wall_time], …]}}`.
fn tensorboard_scalars(logdir: &Path) -> BTreeMap<String, BTreeMap<String, Vec<[f64; 3]>>> {
    let program = r#"
import json, sys
from tensorboard.backend.event_processing import event_multiplexer
m = event_multiplexer.EventMultiplexer()
m.AddRunsFromDirectory(sys.argv[1])
m.Reload()
out = {}
for run, tags in m.Runs().items():
    out[run] = {t: [[e.step, e.value, e.wall_time] for e in m.Scalars(run, t)]
                for t in tags["scalars"]}
print(json.dumps(out))
"#;
    let o = Command::new("python3")
        .args(["-c", program])
        .arg(logdir)
        .output()
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "tensorboard's reader (scripts/setup.sh installs it): {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Each run's scalars equal its metrics.jsonl column by column: TensorBoard stores a
/// `simple_value` as float32, so a value agrees to float32 rounding (relative 1e-6 > 2^-24);
/// the steps are the epochs; wall times never go back.
#[test]
fn a_sweeps_event_files_hold_every_epochs_metrics_and_plot_labels_the_tasks() {
    let t = tempfile::tempdir().unwrap();
    setup_with(t.path(), "", "[grid]\nlearning_rate = [1e-3, 1e-4]\n");
    let spec = std::fs::read_to_string(t.path().join("spec.toml")).unwrap();
    std::fs::write(
        t.path().join("spec.toml"),
        spec.replace("max_epochs = 1", "max_epochs = 3"),
    )
    .unwrap();
    plan(t.path(), "local", None);

    // Before any task ran: nothing to plot, and the message says where to look.
    let o = run_in(t.path(), &["plot", "S", "--out", "early.svg"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("none of the sweep's 2 task(s) has a metrics row yet"),
        "{}",
        stderr(&o)
    );

    let o = run_in(t.path(), &["sweep", "run", "S", "--jobs", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));

    let seen = tensorboard_scalars(&t.path().join("S"));
    let runs = t.path().join("S/runs");
    let mut checked = 0;
    for task in std::fs::read_dir(&runs).unwrap() {
        let task = task.unwrap().path();
        let rows = common_rows(&task);
        let name = task.file_name().unwrap().to_string_lossy().into_owned();
        // Each stage (the columns before `epoch`: the fold) has its own event file under
        // runs/<task>/tensorboard/<stage>, a TensorBoard run of its own.
        let mut stages: BTreeMap<String, Vec<&serde_json::Map<String, Value>>> = BTreeMap::new();
        for row in &rows {
            stages.entry(stage_folder(row)).or_default().push(row);
        }
        assert!(stages.len() > 1, "{}: one stage only", task.display());
        for (stage, rows) in stages {
            let run = format!("runs/{name}/tensorboard/{stage}");
            let scalars = seen
                .get(run.trim_end_matches('/'))
                .unwrap_or_else(|| panic!("no TensorBoard run {run}: {:?}", seen.keys()));
            assert_eq!(rows.len(), 3, "{run}: three epochs");
            checked += compare(&run, &rows, scalars);
            assert!(scalars.contains_key("train_loss") && scalars.contains_key("val_loss"));
        }
    }
    assert!(checked > 20, "only {checked} values compared");

    // `trainer plot SWEEP_DIR`: a line per task and fold, labelled by the learning rate.
    let o = run_in(t.path(), &["plot", "S", "--out", "sweep.svg"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(t.path().join("sweep.svg")).unwrap();
    for lr in [
        "learning_rate=0.001 (fold 0)",
        "learning_rate=0.0001 (fold 4)",
    ] {
        assert!(svg.contains(lr), "no legend {lr} in the plot");
    }
    // An unknown metric names the ones the runs have.
    let o = run_in(
        t.path(),
        &["plot", "S", "--metric", "nope", "--out", "x.svg"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no run has a metric `nope`") && stderr(&o).contains("train_loss"),
        "{}",
        stderr(&o)
    );
}

/// The folder of a row's stage: "fold 0" → "fold_0" (empty for a run of one stage).
fn stage_folder(row: &serde_json::Map<String, Value>) -> String {
    let stage: Vec<String> = row
        .iter()
        .take_while(|(k, _)| *k != "epoch")
        .map(|(k, v)| format!("{k} {}", v.to_string().trim_matches('"')))
        .collect();
    let alnum = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
    stage
        .join(" ")
        .chars()
        .map(|c| if alnum(c) { c } else { '_' })
        .collect()
}

/// Compares one stage's rows with its TensorBoard scalars; returns how many values it compared.
fn compare(
    run: &str,
    rows: &[&serde_json::Map<String, Value>],
    scalars: &BTreeMap<String, Vec<[f64; 3]>>,
) -> usize {
    let mut checked = 0;
    for (i, row) in rows.iter().enumerate() {
        let past_stage = row.keys().skip_while(|k| *k != "epoch");
        for col in past_stage.filter(|c| !NOT_SCALARS.contains(&c.as_str())) {
            let Some(want) = row[col].as_f64() else {
                continue;
            };
            let got = &scalars
                .get(col)
                .unwrap_or_else(|| panic!("{run}: no tag {col}"))[i];
            assert_eq!(got[0], row["epoch"].as_f64().unwrap(), "{run} {col} step");
            assert!(
                (got[1] - want).abs() <= 1e-6 * want.abs(),
                "{run} {col} epoch {}: {} vs {want}",
                i + 1,
                got[1]
            );
            if i > 0 {
                assert!(got[2] >= scalars[col][i - 1][2], "{run} {col}: wall time");
            }
            checked += 1;
        }
    }
    checked
}

/// The metrics rows of a run directory.
fn common_rows(run: &Path) -> Vec<serde_json::Map<String, Value>> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| v.as_object().unwrap().clone())
        .collect()
}

/// A resumed run keeps one event stream per stage: one event file (the resume rewrites
/// `run_meta.json`'s `created_at`, a second later here), steps 1, 2, 3 once each as TensorBoard
/// reads them, and the first epoch's wall time as it was before the resume.
#[test]
fn a_resumed_run_extends_its_event_stream() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 12, 16, 3);
    let train = |extra: &[&str]| {
        let mut args = vec![
            "train-gnn",
            "--sc_dir",
            "cohort/sc",
            "--morph_root",
            "cohort/morph",
            "--subject_info_csv",
            "cohort/subject_info_sc.csv",
            "--results_dir",
            "results",
            "--run_name",
            "split",
            "--cv_fold",
            "0",
            "--max_epochs",
            "3",
            "--latent_dim",
            "8",
            "--hidden_dim",
            "16",
            "--solver_steps",
            "3",
        ];
        args.extend_from_slice(extra);
        run_in(t.path(), &args)
    };
    // 12 subjects → fold 0 trains 7 → 4 steps per epoch: stopped in epoch 2.
    let o = train(&["--stop-after-steps", "6"]);
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    let run = t.path().join("results/runs/split");
    let rows = common_rows(&run);
    assert_eq!(rows.len(), 1, "one epoch before the stop");
    let stage = stage_folder(&rows[0]);
    let name = format!("tensorboard/{stage}");
    let name = name.trim_end_matches('/');
    let before = tensorboard_scalars(&run)[name]["train_loss"].clone();
    assert_eq!(before.len(), 1);

    std::thread::sleep(std::time::Duration::from_millis(1100));
    let o = train(&["--resume", "auto"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let folder = run.join(name);
    let files: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("tfevents"))
        .collect();
    assert_eq!(files.len(), 1, "{}: {files:?}", folder.display());

    let seen = tensorboard_scalars(&run);
    let scalars = &seen[name];
    let steps: Vec<f64> = scalars["train_loss"].iter().map(|s| s[0]).collect();
    assert_eq!(
        steps,
        [1.0, 2.0, 3.0],
        "{name}: {:?}",
        scalars["train_loss"]
    );
    assert_eq!(
        scalars["train_loss"][0], before[0],
        "epoch 1 as before the resume"
    );
    let rows = common_rows(&run);
    let rows: Vec<_> = rows.iter().collect();
    assert_eq!(rows.len(), 3);
    assert!(compare(name, &rows, scalars) > 6);
}
