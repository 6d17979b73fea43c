//! Result files written before they had types still read: `trainer compare` over the runs of
//! `tests/fixtures/result-files` (written by an earlier binary) prints what that binary printed,
//! byte for byte, in every view.

use crate::common::*;

use std::path::PathBuf;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/result-files")
}

#[test]
fn compare_reads_runs_written_before_and_prints_the_same() {
    let dir = fixture();
    let views = std::fs::read_to_string(dir.join("views.txt")).unwrap();
    let mut n = 0;
    for line in views.lines().filter(|l| !l.trim().is_empty()) {
        let (expected, args) = line.split_once('\t').unwrap();
        let args: Vec<&str> = args.split_whitespace().collect();
        let o = run_in(&dir, &args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let want = std::fs::read_to_string(dir.join("expected").join(expected)).unwrap();
        assert_eq!(stdout(&o), want, "trainer {}", args.join(" "));
        n += 1;
    }
    assert!(n >= 8, "{n} views");
}

#[test]
fn an_unknown_metric_names_the_same_metrics() {
    let dir = fixture();
    let o = run_in(
        &dir,
        &[
            "compare",
            "runs/eb-drift",
            "runs/linear-drift",
            "--group-by",
            "model",
            "--metric",
            "nope",
        ],
    );
    assert!(!o.status.success());
    let want = std::fs::read_to_string(dir.join("expected/metric-nope.err")).unwrap();
    assert_eq!(stderr(&o), want);
}
