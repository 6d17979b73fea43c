use super::*;

#[test]
fn python_json_non_finite_numbers_are_null() {
    let v = parse_python_json(
        r#"{"a": NaN, "b": [-Infinity, Infinity], "c": "NaN \"x\" Infinity", "d": 1.5}"#,
    )
    .unwrap();
    assert!(v["a"].is_null());
    assert!(v["b"][0].is_null() && v["b"][1].is_null());
    assert_eq!(v["c"], "NaN \"x\" Infinity");
    assert_eq!(v["d"], 1.5);
}

fn fold(csv: &str, args: Value, results: Value, fold: i64) -> RefFold {
    let mut lines = csv
        .lines()
        .map(|l| l.split(',').map(String::from).collect::<Vec<_>>());
    let header = lines.next().unwrap();
    RefFold {
        run: Rc::new(RefRun {
            args,
            results: Some(results),
            header,
            rows: lines.collect(),
        }),
        fold: Some(fold),
    }
}

#[test]
fn the_best_epoch_follows_the_monitor_and_sc_columns_need_an_evaluation() {
    let csv = "fold,epoch,monitor_value,val_loss,val_sc_log_mse\n\
               0,1,0.5,9,0.7\n0,2,0.8,8,0.0\n0,3,0.8,7,0.6\n1,1,0.1,6,0.0\n";
    let results = serde_json::json!({
        "cv_folds": [
            {"fold": 0, "best_monitor_metric": "val_sc_log_pearson_sparse", "best_monitor": 0.8},
            {"fold": 1, "best_monitor_metric": "val_sc_log_pearson_sparse", "best_monitor": 0.1}],
        "best_model_path": "", "test_sc_metrics": {"sc_log_mse": 2.0}});
    let args = serde_json::json!({"early_stop_metric": "val_sc_log_pearson_sparse"});
    let f0 = fold(csv, args.clone(), results.clone(), 0);
    // Higher is better: epoch 2 (the first 0.8), not epoch 3.
    assert_eq!(f0.metric("val_loss"), Some(8.0));
    assert_eq!(
        f0.metric("sc_log_mse"),
        Some(2.0),
        "fold 0 scores best: tested"
    );
    assert_eq!(f0.metric("skill"), None);
    let f1 = fold(csv, args, results.clone(), 1);
    assert_eq!(f1.metric("sc_log_mse"), None, "fold 1 was not tested");
    assert_eq!(f1.metric("val_loss"), Some(6.0));
    // Monitoring the loss without SC evaluations: the 0.0 it writes is no value.
    let f1 = fold(
        csv,
        serde_json::json!({"early_stop_metric": "val_loss"}),
        results,
        1,
    );
    assert_eq!(f1.metric("val_sc_log_mse"), None);
}

#[test]
fn a_folds_line_has_its_epochs_and_test_figures_only_when_tested() {
    let csv = "fold,epoch,monitor_value\n0,1,0.5\n0,2,0.4\n0,3,0.6\n1,1,0.1\n";
    let results = serde_json::json!({
        "cv_folds": [{"fold": 0, "best_monitor": 0.4}, {"fold": 1, "best_monitor": 0.1}],
        "best_model_path": "x/clg_ode_fold0_best.pt",
        "test_sc_metrics": {"sc_log_mse": 2.0, "sc_log_pearson_sparse": 0.9}});
    let s = fold(csv, Value::Null, results.clone(), 0).summary("r");
    assert_eq!((s.run.as_str(), s.fold, s.epochs), ("r", Some(0), 3));
    assert_eq!(s.best_epoch, Some(2));
    assert_eq!(s.test_sc_log_mse, Some(2.0));
    assert_eq!(s.test_pearson_sparse, Some(0.9));
    assert!(s.identity_sc_log_mse.is_none() && s.skill.is_none() && s.cpu_seconds.is_none());
    let s = fold(csv, Value::Null, results, 1).summary("r");
    assert_eq!(
        (s.epochs, s.best_epoch, s.test_sc_log_mse),
        (1, Some(1), None)
    );
}
