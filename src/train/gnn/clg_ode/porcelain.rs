//! `--porcelain`: the reference's console line per epoch on stdout, for scripts that parse it.

use serde_json::Value;

use crate::engine::Row;

/// `Fold f/F, epoch e/E, train_loss=…, val_loss=…, monitor(name)=…`, 1-based; the monitor's
/// value is looked up in the rows in order (NaN when absent).
pub(super) fn epoch_line(
    (fold, folds): (usize, usize),
    (epoch, epochs): (usize, usize),
    train_loss: f64,
    val_loss: f64,
    (name, rows): (&str, [&Row; 2]),
) -> String {
    let value = rows
        .iter()
        .find_map(|r| r.get(name))
        .and_then(Value::as_f64)
        .unwrap_or(f64::NAN);
    format!(
        "Fold {}/{folds}, epoch {}/{epochs}, train_loss={train_loss:.4}, val_loss={val_loss:.4}, \
         monitor({name})={value:.6}",
        fold + 1,
        epoch + 1,
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_reference_line() {
        let mut head = Row::new();
        head.insert("val_loss".into(), json!(0.5));
        let mut detail = Row::new();
        detail.insert("val_skill".into(), json!(0.25));
        let rows = [&head, &detail];
        assert_eq!(
            epoch_line((0, 5), (2, 120), 1.0, 0.5, ("val_skill", rows)),
            "Fold 1/5, epoch 3/120, train_loss=1.0000, val_loss=0.5000, monitor(val_skill)=0.250000"
        );
        assert!(epoch_line((0, 5), (2, 120), 1.0, 0.5, ("nope", rows)).ends_with("=NaN"));
    }
}
