//! One epoch's row of `metrics.csv` / `metrics.jsonl`, its engine columns named here and nowhere
//! else.
//!
//! A row is, in this order: the stage's settings columns (`fold`, a sweep's varied settings),
//! `epoch` and `train_loss`, the job's headline metrics, the monitor's (`monitor_metric`,
//! `monitor_value`), the job's detail metrics, then the engine's bookkeeping (`best_<metric>`,
//! `is_best`, `lr`, `steps`, `<unit>_per_s`, `seconds`, `allreduce_seconds`, and with CPU
//! columns `epoch_steps`, `train_cpu_seconds`, `train_cpu_seconds_per_item`, `eval_seconds`).
//! The job's columns are its own (named by its `JobMetric`s), so a row is a typed frame around
//! named values: [`EpochColumns`] writes it (the one place that orders the columns) and
//! [`MetricsRow`], the row as written and read back, answers the engine's columns by name.

use std::ops::Deref;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// Named values in column order: part of a metrics row (a job's metrics, a stage's columns).
pub(crate) type Row = Map<String, Value>;

/// The 1-based epoch.
pub(crate) const EPOCH: &str = "epoch";
/// The mean training loss of the epoch.
pub(crate) const TRAIN_LOSS: &str = "train_loss";
/// The monitored metric's name, when the evaluation measured it.
pub(crate) const MONITOR_METRIC: &str = "monitor_metric";
/// The monitored metric's value.
pub(crate) const MONITOR_VALUE: &str = "monitor_value";
/// Whether the epoch's model is the stage's best so far.
pub(crate) const IS_BEST: &str = "is_best";
/// The learning rate of the epoch.
pub(crate) const LR: &str = "lr";
/// Optimiser steps since the run began.
pub(crate) const STEPS: &str = "steps";
/// Wall seconds of the epoch's training.
pub(crate) const SECONDS: &str = "seconds";
/// Seconds spent in the all-reduce of gradients.
pub(crate) const ALLREDUCE_SECONDS: &str = "allreduce_seconds";
/// Steps per epoch (CPU columns).
pub(crate) const EPOCH_STEPS: &str = "epoch_steps";
/// CPU seconds of the epoch's training (CPU columns).
pub(crate) const TRAIN_CPU_SECONDS: &str = "train_cpu_seconds";
/// CPU seconds per training item (CPU columns).
pub(crate) const TRAIN_CPU_SECONDS_PER_ITEM: &str = "train_cpu_seconds_per_item";
/// Wall seconds of the epoch's evaluation (CPU columns).
pub(crate) const EVAL_SECONDS: &str = "eval_seconds";

/// `best_<metric>`: the column of the stage's best monitored value (it keeps the run's metric
/// name, so every row has the same columns).
pub(crate) fn best_column(metric: &str) -> String {
    format!("best_{metric}")
}

/// `<unit>_per_s`: the training throughput (`images_per_s`, `subjects_per_s`).
pub(crate) fn per_s_column(unit: &str) -> String {
    format!("{unit}_per_s")
}

/// The monitor's columns: the best value so far and whether this epoch made it.
pub(crate) struct Best<'a> {
    pub metric: &'a str,
    pub value: Option<f64>,
    pub is_best: bool,
}

/// The columns a run asks for with CPU accounting (`OutputSpec::cpu_columns`).
pub(crate) struct CpuColumns {
    pub epoch_steps: usize,
    pub train_cpu_seconds: f64,
    pub train_cpu_seconds_per_item: f64,
    pub eval_seconds: f64,
}

/// What the engine knows at an epoch's end: [`EpochColumns::row`] orders it into a row.
pub(crate) struct EpochColumns<'a> {
    /// The stage's settings columns (first in the row).
    pub stage: &'a Row,
    /// 1-based.
    pub epoch: usize,
    pub train_loss: f64,
    /// The job's headline metrics.
    pub head: &'a Row,
    /// The monitored metric's name and value, when measured.
    pub monitored: Option<(&'a str, f64)>,
    /// The job's detail metrics.
    pub detail: &'a Row,
    /// With a monitor: its best value and whether this epoch improved it.
    pub best: Option<Best<'a>>,
    pub lr: f64,
    pub steps: u64,
    /// The throughput's unit (`images`) and value.
    pub per_s: (&'a str, f64),
    pub seconds: f64,
    pub allreduce_seconds: f64,
    pub cpu: Option<CpuColumns>,
}

impl EpochColumns<'_> {
    /// The row, its columns in the order of the module's doc. A job column of an engine
    /// column's name takes that column's place (the map keeps the first position of a key).
    pub(crate) fn row(&self) -> MetricsRow {
        let mut row = self.stage.clone();
        row.insert(EPOCH.into(), json!(self.epoch));
        row.insert(TRAIN_LOSS.into(), json!(self.train_loss));
        row.extend(self.head.clone());
        if let Some((metric, v)) = self.monitored {
            row.insert(MONITOR_METRIC.into(), json!(metric));
            row.insert(MONITOR_VALUE.into(), json!(v));
        }
        row.extend(self.detail.clone());
        if let Some(b) = &self.best {
            row.insert(best_column(b.metric), json!(b.value));
            row.insert(IS_BEST.into(), json!(b.is_best));
        }
        row.insert(LR.into(), json!(self.lr));
        row.insert(STEPS.into(), json!(self.steps));
        row.insert(per_s_column(self.per_s.0), json!(self.per_s.1));
        row.insert(SECONDS.into(), json!(self.seconds));
        row.insert(ALLREDUCE_SECONDS.into(), json!(self.allreduce_seconds));
        if let Some(c) = &self.cpu {
            row.insert(EPOCH_STEPS.into(), json!(c.epoch_steps));
            row.insert(TRAIN_CPU_SECONDS.into(), json!(c.train_cpu_seconds));
            row.insert(
                TRAIN_CPU_SECONDS_PER_ITEM.into(),
                json!(c.train_cpu_seconds_per_item),
            );
            row.insert(EVAL_SECONDS.into(), json!(c.eval_seconds));
        }
        MetricsRow(row)
    }
}

/// A row of `metrics.jsonl` as written and read back: its columns in order (it reads as the
/// map of them), the engine's by name. Serialised as the JSON object itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct MetricsRow(Row);

impl MetricsRow {
    /// The 1-based epoch (`None` in a row without one).
    pub(crate) fn epoch(&self) -> Option<u64> {
        self.0.get(EPOCH).and_then(Value::as_u64)
    }

    /// The monitored metric's value, when the epoch measured it.
    pub(crate) fn monitor_value(&self) -> Option<f64> {
        self.0.get(MONITOR_VALUE).and_then(Value::as_f64)
    }

    /// A number column (`None` when missing or not a number).
    pub(crate) fn number(&self, column: &str) -> Option<f64> {
        self.0.get(column).and_then(Value::as_f64)
    }

    /// The stage's settings columns: those before `epoch`.
    pub(crate) fn stage_columns(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter().take_while(|(k, _)| k.as_str() != EPOCH)
    }

    /// The columns that identify a row: the stage columns and `epoch` (everything before
    /// `train_loss`).
    pub(crate) fn key_columns(&self) -> Vec<String> {
        self.0
            .keys()
            .take_while(|k| k.as_str() != TRAIN_LOSS)
            .cloned()
            .collect()
    }
}

impl Deref for MetricsRow {
    type Target = Row;

    fn deref(&self) -> &Row {
        &self.0
    }
}

impl From<Row> for MetricsRow {
    /// A row read from elsewhere (a test's, a resume file's): its columns as they are.
    fn from(row: Row) -> Self {
        MetricsRow(row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cpu: bool) -> MetricsRow {
        let mut stage = Row::new();
        stage.insert("fold".into(), json!(0));
        let mut head = Row::new();
        head.insert("val_loss".into(), json!(0.5));
        let mut detail = Row::new();
        detail.insert("val_mae".into(), json!(f64::NAN));
        EpochColumns {
            stage: &stage,
            epoch: 3,
            train_loss: 0.25,
            head: &head,
            monitored: Some(("val_loss", 0.5)),
            detail: &detail,
            best: Some(Best {
                metric: "val_loss",
                value: Some(0.5),
                is_best: true,
            }),
            lr: 1e-3,
            steps: 30,
            per_s: ("images", 100.0),
            seconds: 2.0,
            allreduce_seconds: 0.0,
            cpu: cpu.then_some(CpuColumns {
                epoch_steps: 10,
                train_cpu_seconds: 4.0,
                train_cpu_seconds_per_item: 0.04,
                eval_seconds: 0.5,
            }),
        }
        .row()
    }

    #[test]
    fn a_row_orders_its_columns_and_reads_them_back_by_name() {
        let r = row(true);
        let keys: Vec<&str> = r.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "fold",
                "epoch",
                "train_loss",
                "val_loss",
                "monitor_metric",
                "monitor_value",
                "val_mae",
                "best_val_loss",
                "is_best",
                "lr",
                "steps",
                "images_per_s",
                "seconds",
                "allreduce_seconds",
                "epoch_steps",
                "train_cpu_seconds",
                "train_cpu_seconds_per_item",
                "eval_seconds",
            ]
        );
        // NaN is written null, never a literal JSON cannot read.
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"val_mae\":null"), "{text}");
        let back: MetricsRow = serde_json::from_str(&text).unwrap();
        assert_eq!(back.epoch(), Some(3));
        assert_eq!(back.monitor_value(), Some(0.5));
        assert_eq!(back.number(EVAL_SECONDS), Some(0.5));
        assert_eq!(back.key_columns(), ["fold", "epoch"]);
        assert_eq!(back.stage_columns().count(), 1);
        assert_eq!(row(false).len(), 14);
    }
}
