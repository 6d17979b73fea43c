//! What one step asks of the device, read from `trainer bench mnist --json` and `trainer bench
//! gnn --json`: backend operations, uploads and device → host reads per training (and, for
//! MNIST, per inference) step (issue 72's counters).
//! Counts, not timings: the same on every machine.

use std::path::Path;

use super::{run_in, stderr};

/// Per step: (operations, uploads, reads).
pub type Counts = (f64, f64, f64);

/// The training and inference counts of `backend` (`flex`, `tch`) on the CPU, batch 16.
pub fn bench_mnist_counts(dir: &Path, backend: &str) -> (Counts, Counts) {
    let v = bench_json(
        dir,
        backend,
        &[
            "mnist",
            "--steps",
            "3",
            "--warmup",
            "1",
            "--batch-size",
            "16",
        ],
    );
    let row = cpu_row(&v, backend, |_| true);
    (counts(&row["train"]), counts(&row["infer"]))
}

/// The training counts of `backend` (`flex`, `tch`) on the CPU for CLG-ODE's core and default
/// objectives, batch 2, on `trainer bench gnn`'s 12-subject cohort of 20 nodes.
pub fn bench_gnn_counts(dir: &Path, backend: &str) -> (Counts, Counts) {
    let v = bench_json(
        dir,
        backend,
        &[
            "gnn",
            "--subjects",
            "12",
            "--nodes",
            "20",
            "--steps",
            "3",
            "--warmup",
            "1",
        ],
    );
    let objective = |name: &str| counts(&cpu_row(&v, backend, |r| r["objective"] == name));
    (objective("core"), objective("default"))
}

/// `trainer bench ARGS --backends BACKEND` run in `dir`, its `--json` file read.
fn bench_json(dir: &Path, backend: &str, args: &[&str]) -> serde_json::Value {
    let json = dir.join(format!("bench-{}-{backend}.json", args[0]));
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    all.extend(["--backends", backend, "--json", json.to_str().unwrap()]);
    let o = run_in(dir, &all);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

/// The row of `backend` on the CPU that `also` accepts, from a bench's JSON `v`.
fn cpu_row(
    v: &serde_json::Value,
    backend: &str,
    also: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["backend"] == backend && r["device"] == "cpu" && also(r))
        .unwrap_or_else(|| panic!("no such {backend} row in {v}"))
        .clone()
}

/// The counts of one phase's (or row's) JSON object; each must be there (counted).
fn counts(o: &serde_json::Value) -> Counts {
    let n = |k: &str| {
        o[k].as_f64()
            .unwrap_or_else(|| panic!("{k} missing in {o}"))
    };
    (
        n("ops_per_step"),
        n("uploads_per_step"),
        n("host_reads_per_step"),
    )
}
