//! One golden test per term of the objective: the topology terms and GradNorm (the decoder's
//! and the reconstruction terms are in `decoder_terms.rs`).

use super::*;
#[test]
fn topology_thresholds_betti_numbers_and_raw_loss() {
    let g = &golden()["topology"];
    let n = g["n"].as_u64().unwrap() as usize;
    let truth = flat32(&g["true_raw"]);
    for case in g["cases"].as_array().unwrap() {
        let label = case["label"].as_str().unwrap();
        let cfg = objective(&case["flags"]).topology;
        let taus = topology::thresholds(&truth, n, cfg.loss_bins).unwrap();
        // Quantiles of the f32 truth (host code, ours in f64, the reference's torch.quantile
        // in f32): they differ by the f32 rounding of an interpolation, ≤ a few u ≈ 2e-7
        // relative; measured ≤ 8e-8 (0.08 of 1e-6, 12× margin). Host code on one thread: the
        // same on every CPU.
        for (a, b) in taus.iter().zip(flat(&case["thresholds"])) {
            close(*a, b, 1e-6, label);
        }
        let probes = flat(&case["probes"]);
        // The target side (f64) against the reference's f64 re-evaluation.
        let ours = topology::target_betti(&topology::log_weights(&truth), n, &taus, &probes, &cfg);
        let per = case["per_threshold"].as_array().unwrap();
        // The truncated series is rounding-dominated: compare relative to its largest term.
        // Both sides f64 (ours: host code, one thread, the same on every CPU); measured ≤ 6.5e-16
        // of the scale against the allowed 1e-6.
        let scale = if cfg.t >= 10.0 { 4e7 } else { 1.0 };
        for ((beta0, _), p) in ours.iter().zip(per) {
            let want = num(&p["f64"]["beta0_true"]);
            eprintln!(
                "{label}: beta0_true error {:.1e}",
                (beta0 - want).abs() / scale
            );
            assert!(
                (beta0 - want).abs() <= 1e-6 * scale,
                "{label}: {beta0} vs {want}"
            );
        }
        // The prediction side in f64 from the recorded soft W (recorded for some cases).
        let w_pred: Vec<f64> = match &case["W_pred_per_threshold"] {
            Value::Null => Vec::new(),
            w => flat(w),
        };
        for (k, p) in per.iter().enumerate().filter(|_| !w_pred.is_empty()) {
            let w = &w_pred[k * n * n..(k + 1) * n * n];
            let b0 = heat_trace(w, n, &probes, cfg.t, cfg.taylor_order);
            let want = num(&p["f64"]["beta0_pred"]);
            eprintln!(
                "{label}: beta0_pred error {:.1e}",
                (b0 - want).abs() / scale
            );
            assert!(
                (b0 - want).abs() <= 1e-6 * scale,
                "{label} pred: {b0} vs {want}"
            );
        }
        let pred_key = if label.starts_with("default_on_sparsified") {
            "sparsified_pred"
        } else {
            "pred_weight"
        };
        let pred = flat32(&g[pred_key]);
        let log_p = Tensor::<B, 3>::from_data(
            TensorData::new(pred.iter().map(|x| x.max(0.0).ln_1p()).collect(), [1, n, n]),
            &dev(),
        );
        let probes32: Vec<f32> = probes.iter().map(|&x| x as f32).collect();
        let raw: f64 = topology::raw_loss(log_p, &taus, &ours, &probes32, &cfg)
            .into_scalar()
            .elem();
        let want = num(
            &case["raw_loss_f64 (derived: mean huber beta0 + mean huber beta1 of the f64 values)"],
        );
        // Flex (f32: the heat-trace series and Huber means, sums whose order depends on the
        // CPU's SIMD width) against the reference's f64 re-evaluation: f32 rounding of a
        // series of ≤ 12 terms of alternating sign, ≈ 1e-7 relative (×2 for t ≥ 10, whose
        // terms are larger); measured ≤ 9.4e-7, 0.047 of the tolerance (21× margin).
        let tol = if cfg.t >= 10.0 { 2e-5 } else { 1e-5 };
        close(raw, want, tol, label);
    }
}

#[test]
fn topology_scale_normalisation_and_warmup() {
    let g = &golden()["topology"];
    let raw = flat32(&g["normalize"]["raw"]);
    for (name, case) in g["normalize"]["cases"].as_object().unwrap() {
        let compress = !name.contains("disable_topo_log_compress");
        let scale = num(&case["scale_used"]);
        let t = Tensor::<B, 1>::from_data(TensorData::new(raw.clone(), [raw.len()]), &dev());
        let ours: Vec<f32> = topology::normalize(t, scale, compress)
            .into_data()
            .to_vec()
            .unwrap();
        // f32 element-wise (log1p, division by the scale) against the reference's f32: a few
        // u; measured ≤ 3.9e-8 (0.004 of 1e-5). Nothing summed: the same on every CPU.
        for (a, b) in ours.iter().zip(flat(&case["normalized"])) {
            close(*a as f64, b, 1e-5, name);
        }
    }
    for seq in g["scale_ema"]["sequences"].as_array().unwrap() {
        let q = objective(&seq["flags"]).topology.scale_quantile;
        let mut s = num(&seq["initial_scale"]);
        for e in seq["epochs"].as_array().unwrap() {
            s = topology::updated_scale(s, &flat(&e["values"]), q);
            close(s, num(&e["scale_after"]), 1e-12, "scale");
        }
    }
    for case in g["warmup"]["cases"].as_array().unwrap() {
        let a = args(&case["flags"]);
        for (e, want) in flat(&case["factors_epoch_0_to_29"]).iter().enumerate() {
            let f = a.objective.topology.warmup_factor(e, a.max_epochs);
            close(f, *want, 1e-12, "warmup");
        }
    }
}

#[test]
fn gradnorm_updates() {
    let g = &golden()["gradnorm"];
    for sc in g["scenarios"].as_array().unwrap() {
        let c = objective(&sc["flags"]);
        let lambda = [c.lambda_manifold, c.topology.lambda_topo];
        let mut gn = GradNorm::default();
        for step in sc["steps"].as_array().unwrap() {
            let l = [num(&step["L"]["manifold"]), num(&step["L"]["topo"])];
            let gk = "G (autograd.grad over requires_grad params, norm of per-parameter norms)";
            let gr = [num(&step[gk]["manifold"]), num(&step[gk]["topo"])];
            close(
                gn.weights[0],
                num(&step["weights_before"]["manifold"]),
                1e-12,
                "before",
            );
            let w = gn.update(l, gr, lambda);
            close(
                w[0],
                num(&step["weights_after"]["manifold"]),
                1e-12,
                "w_man",
            );
            close(w[1], num(&step["weights_after"]["topo"]), 1e-12, "w_topo");
        }
    }
}
