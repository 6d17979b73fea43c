//! `--cuda-graph` (issue 72 item 5) is refused, with exit 2 and a message naming why, wherever it
//! cannot apply, before any data are read or any run directory is made: a backend other than
//! `tch`, a CPU device, several micro-batches, an optimiser other than Adam, a command whose
//! steps change shape (`train-gnn`), and the same through the configuration file's key. (The
//! `tch` cases on the CPU are in tests/backends/tch_fused.rs; the recorded step itself runs in
//! scripts/gpu-check.sh, on a GPU.)

use crate::common::*;
use crate::run_integrity::{fails_with, mnist_args, tiny_data};

#[test]
fn cuda_graph_is_refused_where_it_cannot_apply() {
    let t = tempfile::tempdir().unwrap();
    let data = tiny_data(t.path());
    std::fs::write(t.path().join("g.toml"), "[run]\ncuda_graph = true\n").unwrap();
    let cases: [(&[&str], &[&str]); 6] = [
        (
            &["--cuda-graph"],
            &["--cuda-graph", "--backend tch", "flex"],
        ),
        (
            &["--cuda-graph", "--backend", "flex-plain"],
            &["--cuda-graph", "--backend tch", "flex-plain"],
        ),
        (
            &["--cuda-graph", "--grad-accum", "2"],
            &["--cuda-graph", "one micro-batch", "--grad-accum 2"],
        ),
        (
            &["--cuda-graph", "--optimizer", "sgd"],
            &["--cuda-graph", "--optimizer adam"],
        ),
        (&["--config", "g.toml"], &["--cuda-graph", "--backend tch"]),
        (
            &["--cuda-graph", "--backend", "flex", "--device", "cpu"],
            &["--cuda-graph", "--backend tch"],
        ),
    ];
    for (extra, needles) in cases {
        let o = run_in(t.path(), &mnist_args(&data, "run", extra));
        fails_with(&o, 2, needles);
        assert!(!t.path().join("run").exists(), "{extra:?} left a run");
    }
    // train-gnn: refused for its model whatever the backend, before the cohort is read (the
    // paths do not exist).
    let o = run_in(
        t.path(),
        &[
            "train-gnn",
            "--sc_dir",
            "cohort/sc",
            "--morph_root",
            "cohort/morph",
            "--subject_info_csv",
            "cohort/subject_info_sc.csv",
            "--results_dir",
            "results",
            "--cuda-graph",
        ],
    );
    fails_with(&o, 2, &["--cuda-graph", "train-gnn", "change shape"]);
    assert!(!t.path().join("results").exists());
}
