//! `trainer bench gnn`'s night plan: the wall time of a whole study at the authors' shape
//! (4,566 subjects, 5 folds × 120 epochs: `--plan-subjects`, `--plan-folds`, `--plan-epochs`),
//! projected from each row's measured epoch.
//!
//! The rule, stated: a fold's training subjects come from the same split as the bench's (the
//! test split, then fold 0 of the cross-validation: 2,922 of 4,566); an epoch costs the row's
//! measured seconds per training subject times that count (the cost of a step grows with its
//! subjects, not with the cohort); validation and test passes are left out (a forward pass each,
//! a few percent of an epoch), and so is the synthetic cohort's visit mix against the real one.

use anyhow::Result;
use serde::Serialize;

use super::gnn::GnnBenchRow;
use crate::data::connectome::{cv_fold, test_split};
use crate::train::gnn::TEST_SIZE;

/// The study a plan projects.
#[derive(Clone, Copy, Debug, Serialize)]
pub(super) struct Shape {
    pub subjects: usize,
    pub folds: usize,
    pub epochs: usize,
    /// Training subjects of one fold (the split's rule).
    pub training_subjects: usize,
}

impl Shape {
    /// The shape of a study of `subjects` subjects over `folds` folds × `epochs` epochs.
    pub(super) fn new(subjects: usize, folds: usize, epochs: usize) -> Result<Self> {
        let split = test_split(subjects, TEST_SIZE, 42)?;
        let fold = cv_fold(&split.trainval, 0, folds)?;
        Ok(Self {
            subjects,
            folds,
            epochs,
            training_subjects: fold.train.len(),
        })
    }
}

/// One row's projection.
#[derive(Clone, Debug, Serialize)]
pub(super) struct PlanRow {
    pub backend: String,
    pub device: String,
    pub objective: &'static str,
    pub batch_size: usize,
    /// The row's measured seconds per training subject per epoch.
    pub seconds_per_subject_epoch: f64,
    /// The study's wall hours on that backend and device.
    pub hours: f64,
}

/// The projection of every measured row (rows with an error have none).
pub(super) fn project(rows: &[GnnBenchRow], shape: &Shape) -> Vec<PlanRow> {
    rows.iter()
        .filter(|r| r.error.is_none() && r.training_subjects > 0)
        .map(|r| {
            let per = r.seconds_per_epoch / r.training_subjects as f64;
            let secs = per * (shape.training_subjects * shape.epochs * shape.folds) as f64;
            PlanRow {
                backend: r.backend.clone(),
                device: r.device.clone(),
                objective: r.objective,
                batch_size: r.batch_size,
                seconds_per_subject_epoch: per,
                hours: secs / 3600.0,
            }
        })
        .collect()
}

/// The plan under the table.
pub(super) fn print(shape: &Shape, plan: &[PlanRow]) {
    println!(
        "plan: a study of {} subjects ({} training per fold), {} folds x {} epochs, from each \
         row's seconds per training subject:",
        shape.subjects, shape.training_subjects, shape.folds, shape.epochs
    );
    for p in plan {
        println!(
            "  {:<12} {:<8} {:>9} batch {:>4}: {:>8.1} h",
            p.backend, p.device, p.objective, p.batch_size, p.hours
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_authors_shape_trains_on_the_split_rule_and_scales_by_subjects() {
        let s = Shape::new(4566, 5, 120).unwrap();
        // 20 % held out for test, then 4 of 5 folds of the rest train.
        assert!((2900..=2950).contains(&s.training_subjects), "{s:?}");
        let row = |secs: f64, error: Option<String>| GnnBenchRow {
            backend: "flex".into(),
            device: "cpu".into(),
            objective: "default",
            subjects: 1000,
            batch_size: 2,
            training_subjects: 640,
            steps_per_epoch: 320,
            timed_steps: 6,
            seconds_per_epoch: secs,
            cpu_seconds_per_subject: 0.0,
            counts: Default::default(),
            error,
        };
        let plan = project(&[row(64.0, None), row(1.0, Some("x".into()))], &s);
        assert_eq!(plan.len(), 1, "rows with an error have no projection");
        let expect = 0.1 * (s.training_subjects * 120 * 5) as f64 / 3600.0;
        assert!((plan[0].hours - expect).abs() < 1e-9, "{plan:?}");
    }
}
