//! doctor's CPU-or-GPU advice for small connectomes, from the newest GPU check committed
//! (`benches/gpu/`, written by `scripts/gpu-check.sh`): its `trainer bench gnn` rows (and
//! `bench-gnn-batch64`'s where they measured the same shape), CLG-ODE's default objective at
//! the measured size, the GPU under `tch` at its best batch against `flex` on all the host's
//! cores at its best batch. The advice follows the numbers: a new check committed and named
//! here changes it.

use serde_json::Value;

/// The newest GPU check committed, and its path in the repository.
const REPORT: &str = include_str!("../../../benches/gpu/gpu-check-h200-2026-12-04.json");
const REPORT_PATH: &str = "benches/gpu/gpu-check-h200-2026-12-04.json";

/// A GPU pays for a model when it trains an epoch at least this many times faster than all
/// the host's cores: a GPU queue slot is scarcer than a CPU node, and waits longer for it.
pub(crate) const GPU_PAYS: f64 = 1.5;

/// What a GPU check measured of CLG-ODE: one objective at one size.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Measured {
    pub gpu: String,
    pub nodes: u64,
    pub subjects: u64,
    /// Seconds per epoch and batch of the GPU (`tch`) and of `flex` on `threads` cores.
    pub gpu_epoch: (f64, u64),
    pub cpu_epoch: (f64, u64),
    pub threads: u64,
}

impl Measured {
    /// How many times faster the GPU trained an epoch than all the host's cores.
    pub(crate) fn speedup(&self) -> f64 {
        self.cpu_epoch.0 / self.gpu_epoch.0
    }
}

/// The default objective's best GPU and best all-cores rows of a GPU check's report `json`
/// (`None` when it has no such pair).
pub(crate) fn measured(json: &str) -> Option<Measured> {
    let v: Value = serde_json::from_str(json).ok()?;
    let bench = &v["bench_gnn"];
    // The GPU's larger batches (`bench-gnn-batch64`) count where they measured the same shape.
    let same_shape = |b: &Value| b["nodes"] == bench["nodes"] && b["subjects"] == bench["subjects"];
    let rows: Vec<&Value> = [bench, &v["bench_gnn_batch64"]]
        .into_iter()
        .filter(|b| same_shape(b))
        .filter_map(|b| b["rows"].as_array())
        .flatten()
        .collect();
    let best = |cuda: bool| {
        rows.iter()
            .filter(|r| r["objective"] == "default" && r["error"].is_null())
            .filter(|r| {
                let device = r["device"].as_str().unwrap_or("");
                match cuda {
                    true => r["backend"] == "tch" && device.starts_with("cuda"),
                    false => r["backend"] == "flex" && device == "cpu",
                }
            })
            .filter_map(|r| Some((r["seconds_per_epoch"].as_f64()?, r["batch_size"].as_u64()?)))
            .filter(|(s, _)| s.is_finite() && *s > 0.0)
            .min_by(|a, b| a.0.total_cmp(&b.0))
    };
    let gpu = v["doctor"]["driver"]["gpus"][0]["name"]
        .as_str()
        .unwrap_or("GPU")
        .trim_start_matches("NVIDIA ")
        .to_string();
    Some(Measured {
        gpu,
        nodes: bench["nodes"].as_u64()?,
        subjects: bench["subjects"][0].as_u64()?,
        gpu_epoch: best(true)?,
        cpu_epoch: best(false)?,
        threads: bench["threads"].as_u64()?,
    })
}

/// The advice of `m`, measured as `source` says.
pub(crate) fn advice(m: &Measured, source: &str) -> String {
    let facts = format!(
        "a {}-node CLG-ODE epoch of {} subjects (default objective) took {:.0} s on an {} under \
         tch (batch {}) and {:.0} s on {} CPU cores (batch {}): {:.2}x ({source})",
        m.nodes,
        m.subjects,
        m.gpu_epoch.0,
        m.gpu,
        m.gpu_epoch.1,
        m.cpu_epoch.0,
        m.threads,
        m.cpu_epoch.1,
        m.speedup()
    );
    if m.speedup() < GPU_PAYS {
        format!(
            "CPU is enough for small models (connectomes up to ~{} nodes: {facts}; graph metrics, \
             MNIST smoke tests): `--device cpu` on a CPU queue with more cores leaves the GPU \
             queue to others",
            m.nodes
        )
    } else {
        format!(
            "a GPU pays for CLG-ODE from ~{} nodes ({facts}, over the {GPU_PAYS}x at which a GPU \
             slot pays); CPU is enough for graph metrics and MNIST smoke tests: `--device cpu` \
             on a CPU queue leaves the GPU queue to others",
            m.nodes
        )
    }
}

/// doctor's line on CPU or GPU for small models, from the committed GPU check.
pub(crate) fn small_model_hint() -> String {
    match measured(REPORT) {
        Some(m) => advice(&m, &format!("measured by {REPORT_PATH}")),
        None => "CPU is enough for graph metrics and MNIST smoke tests: `--device cpu` on a CPU \
                 queue leaves the GPU queue to others"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed check (2026-12-04, after issue 74): an H200 under tch at batch 64 took
    /// 4.41 s an epoch, flex on 16 cores at its best batch (128) 44.5 s: 10x, so the GPU is
    /// advised for CLG-ODE at 400 nodes. (The check before it, 2026-11-30, measured 68.1 s
    /// against 67.6 s and advised the CPU.)
    #[test]
    fn the_committed_check_advises_the_gpu_from_its_numbers() {
        let m = measured(REPORT).expect("the committed GPU check has CLG-ODE rows");
        assert_eq!((m.nodes, m.subjects, m.threads), (400, 1000, 16));
        assert_eq!(m.gpu, "H200");
        assert_eq!((m.gpu_epoch.1, m.cpu_epoch.1), (64, 128));
        assert!((m.gpu_epoch.0 - 4.41).abs() < 0.005, "{m:?}");
        assert!((m.cpu_epoch.0 - 44.48).abs() < 0.005, "{m:?}");
        let hint = small_model_hint();
        assert!(
            hint.starts_with("a GPU pays for CLG-ODE from ~400 nodes"),
            "{hint}"
        );
        for part in [
            "400-node",
            "4 s on an H200",
            "44 s on 16 CPU cores",
            "10.08x",
            REPORT_PATH,
        ] {
            assert!(hint.contains(part), "{part:?} not in {hint}");
        }
    }

    /// A check where the GPU is 10x the cores turns the advice; one without a GPU row gives
    /// none (the generic line stands).
    #[test]
    fn a_faster_gpu_turns_the_advice_and_a_report_without_rows_gives_none() {
        let row = |backend: &str, device: &str, batch: u64, secs: f64| {
            serde_json::json!({"backend": backend, "device": device, "objective": "default",
                "batch_size": batch, "seconds_per_epoch": secs, "error": null})
        };
        let report = |rows: Vec<Value>| {
            serde_json::json!({"bench_gnn": {"nodes": 200, "subjects": [500], "threads": 32,
                "rows": rows}, "doctor": {"driver": {"gpus": [{"name": "NVIDIA A100"}]}}})
            .to_string()
        };
        let fast = report(vec![
            row("flex", "cpu", 2, 40.0),
            row("flex", "cpu", 16, 20.0),
            row("tch", "cuda:0", 16, 4.0),
            row("tch", "cuda:0", 64, 2.0),
            row("tch", "cpu", 16, 1.0),
        ]);
        let m = measured(&fast).unwrap();
        assert_eq!((m.gpu_epoch, m.cpu_epoch), ((2.0, 64), (20.0, 16)));
        // The batch-64 bench of the same shape counts; one of another shape does not.
        let mut with64: Value = serde_json::from_str(&fast).unwrap();
        with64["bench_gnn_batch64"] = serde_json::json!({"nodes": 200, "subjects": [500],
            "rows": [row("tch", "cuda:0", 64, 1.5)]});
        let m = measured(&with64.to_string()).unwrap();
        assert_eq!(m.gpu_epoch, (1.5, 64));
        with64["bench_gnn_batch64"]["nodes"] = serde_json::json!(400);
        let m = measured(&with64.to_string()).unwrap();
        assert_eq!(m.gpu_epoch, (2.0, 64));
        let hint = advice(&m, "test");
        assert!(
            hint.starts_with("a GPU pays for CLG-ODE from ~200 nodes"),
            "{hint}"
        );
        assert!(hint.contains("10.00x"), "{hint}");
        assert!(measured(&report(vec![row("flex", "cpu", 2, 40.0)])).is_none());
    }
}
