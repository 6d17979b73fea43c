//! What one step asks of the device, read from `trainer bench mnist --json`: backend operations,
//! uploads and device → host reads per training and per inference step (issue 72's counters).
//! Counts, not timings: the same on every machine.

use std::path::Path;

use super::{run_in, stderr};

/// Per step: (operations, uploads, reads).
pub type Counts = (f64, f64, f64);

/// The training and inference counts of `backend` (`flex`, `tch`) on the CPU, batch 16.
pub fn bench_mnist_counts(dir: &Path, backend: &str) -> (Counts, Counts) {
    let json = dir.join(format!("bench-{backend}.json"));
    let o = run_in(
        dir,
        &[
            "bench",
            "mnist",
            "--steps",
            "3",
            "--warmup",
            "1",
            "--batch-size",
            "16",
            "--backends",
            backend,
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let row = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["backend"] == backend && r["device"] == "cpu")
        .unwrap_or_else(|| panic!("no {backend} row in {v}"))
        .clone();
    let counts = |phase: &str| -> Counts {
        let n = |k: &str| {
            row[phase][k]
                .as_f64()
                .unwrap_or_else(|| panic!("{phase}.{k} missing in {row}"))
        };
        (
            n("ops_per_step"),
            n("uploads_per_step"),
            n("host_reads_per_step"),
        )
    };
    (counts("train"), counts("infer"))
}
