use super::*;
use crate::data::connectome::test_util::{assert_close, assert_matrix_close, golden, matrix};

#[test]
fn golden_sc_metrics() {
    let g = &golden()["sc_metrics_trainer"];
    let bins = g["topo_bins"].as_u64().unwrap() as usize;
    let got = sc_metrics(
        matrix(&g["pred_weight"]).view(),
        matrix(&g["true_raw"]).view(),
        matrix(&g["a0_raw"]).view(),
        bins,
    );
    let map = got.to_map();
    let want = g["metrics"].as_object().unwrap();
    assert_eq!(want.len(), 19);
    // Host code against the reference's numpy values: see `assert_close` for the
    // tolerance; the worst is printed.
    let mut worst = (0.0f64, "");
    for (name, w) in want {
        let v = map
            .get(name)
            .unwrap_or_else(|| panic!("missing metric {name}"));
        let e = assert_close(*v, w.as_f64().unwrap(), name);
        if e > worst.0 {
            worst = (e, name);
        }
    }
    eprintln!(
        "sc metrics: worst error {:.2e} of the tolerance ({})",
        worst.0, worst.1
    );
    assert_eq!(map.len(), 22);
    assert!(
        got.new_edge_auprc.is_nan(),
        "undefined without the innovation module"
    );
}

#[test]
fn golden_sparsify() {
    let g = &golden()["sc_metrics_trainer"];
    let truth = matrix(&g["true_raw"]);
    let k = upper_triangle(truth.view()).filter(|v| *v > 0.0).count();
    let (sparse, mask) = sparsify_topk(matrix(&g["pred_weight"]).view(), k);
    let s = &golden()["sparsify_pred"];
    assert_matrix_close(&sparse, &matrix(&s["pred_sparse"]), "pred_sparse");
    let want: Vec<bool> = s["mask_triu"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() == 1)
        .collect();
    assert_eq!(mask, want);
    assert_eq!(mask.iter().filter(|b| **b).count(), k);
}

#[test]
fn sparsify_edge_cases() {
    let p = ndarray::array![[9.0f32, 1.0, 2.0], [1.0, 9.0, 2.0], [2.0, 2.0, 9.0]];
    let (s, m) = sparsify_topk(p.view(), 0);
    assert!(s.iter().all(|v| *v == 0.0) && m.iter().all(|b| !b));
    // Tie between (0,2) and (1,2): the earlier position wins; diagonal ignored.
    let (s, m) = sparsify_topk(p.view(), 1);
    assert_eq!(m, [false, true, false]);
    assert_eq!((s[(0, 2)], s[(2, 0)], s[(0, 0)]), (2.0, 2.0, 0.0));
    let (_, m) = sparsify_topk(p.view(), 10);
    assert_eq!(m, [true, true, true]);
}

#[test]
fn helpers() {
    assert_eq!(pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]), 1.0);
    assert_eq!(pearson(&[1.0, 1.0], &[2.0, 4.0]), 0.0);
    assert_eq!(pearson(&[], &[]), 0.0);
    // scipy.stats.ks_2samp([1,2,3,4], [3,4,5,6,7]).statistic == 0.6
    assert!((ks_statistic(&[1.0, 2.0, 3.0, 4.0], &[3.0, 4.0, 5.0, 6.0, 7.0]) - 0.6).abs() < 1e-12);
    assert_eq!(ks_statistic(&[1.0], &[1.0]), 0.0);
    let a = ScMetrics {
        sc_log_mse: 1.0,
        deg_ks: 0.5,
        ..Default::default()
    };
    let b = ScMetrics {
        sc_log_mse: 3.0,
        ..Default::default()
    };
    let m = ScMetrics::mean(&[a, b]);
    assert_eq!((m.sc_log_mse, m.deg_ks), (2.0, 0.25));
    let json = serde_json::to_value(m).unwrap();
    assert_eq!(json.as_object().unwrap().len(), 22);
    let empty = ScMetrics::mean(&[]);
    assert_eq!(empty.sc_log_mse, 0.0);
    assert!(empty.new_edge_recall_at_knew.is_nan());
    // New-edge scores: averaged over the subjects that define them; NaN when none does.
    let c = a.with_new_edges(Some([0.5, 1.0, 0.25]));
    let d = b.with_new_edges(None);
    let m = ScMetrics::mean(&[c, d]);
    assert_eq!((m.sc_log_mse, m.new_edge_precision_at_knew), (2.0, 0.5));
    assert_eq!(m.new_edge_auprc, 0.25);
    assert!(ScMetrics::mean(&[d, d]).new_edge_auprc.is_nan());
    let json = serde_json::to_value(ScMetrics::mean(&[d])).unwrap();
    assert!(json["new_edge_auprc"].is_null(), "NaN is null in JSON");
}

#[test]
fn perfect_prediction() {
    let t = ndarray::array![[0.0f32, 2.0, 0.0], [2.0, 0.0, 1.0], [0.0, 1.0, 0.0]];
    let m = sc_metrics(t.view(), t.view(), t.view(), 4);
    assert_eq!(
        (
            m.sc_log_mse,
            m.sc_log_mae,
            m.ecc_l2,
            m.deg_mae,
            m.strength_rmse
        ),
        (0.0, 0.0, 0.0, 0.0, 0.0)
    );
    assert!((m.sc_log_pearson - 1.0).abs() < 1e-12);
    assert_eq!(m.mse_zero, 0.0);
}
