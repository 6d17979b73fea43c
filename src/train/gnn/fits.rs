//! The closed-form fits on a fold's training pairs: linear drift's population drift and
//! eb-drift's parameters. Shared by those models, CLG-ODE's `--drift-head`/`--eb-head`
//! starts and the test set's baseline columns.

use std::sync::Arc;

use super::protocol::fold_data::FoldData;
use super::protocol::fold_data::delta_t;
use crate::models::eb_drift::{EbParams, EbScan};
use crate::models::linear_drift::DriftStats;

/// The closed-form population drift per year (row-major N×N) of the consecutive visit pairs of
/// `subjects` (what `--model linear-drift` fits; CLG-ODE's `--drift-head` starts from it).
pub(super) fn fit_population_drift(data: &FoldData, subjects: &[usize]) -> Vec<f32> {
    pair_stats(data, subjects.iter().copied()).drift()
}

/// The fit's statistics over the consecutive visit pairs of `subjects`.
pub(super) fn pair_stats(data: &FoldData, subjects: impl Iterator<Item = usize>) -> DriftStats {
    let n = data.n_nodes();
    let mut s = DriftStats {
        xy: vec![0.0; n * n],
        yy: vec![0.0; n * n],
        ..Default::default()
    };
    for sub in subjects {
        let scans = data.scans(sub);
        for v in 1..scans.len() {
            s.add_pair(
                &scans[v - 1].a_raw.dense(),
                &scans[v].a_raw.dense(),
                delta_t(scans, v - 1, v),
            );
        }
    }
    s
}

/// The training subjects' scans, in visit order, as the fit takes them.
pub(super) fn training_scans<'a>(data: &'a FoldData, subjects: &[usize]) -> Vec<Vec<EbScan<'a>>> {
    subjects
        .iter()
        .map(|&s| {
            data.scans(s)
                .iter()
                .map(|scan| EbScan {
                    age: scan.age,
                    n: scan.a_raw.n(),
                    a_raw: scan.a_raw.upper(),
                    sex: data.cohort.subjects[s].sex,
                })
                .collect()
        })
        .collect()
}

/// The forecaster fitted on `subjects` of the fold as `--model eb-drift` fits it, the
/// small-sample check included (what CLG-ODE's `--eb-head` starts from).
pub(super) fn fit_arc(data: &FoldData, subjects: &[usize]) -> Arc<EbParams> {
    Arc::new(EbParams::fit_checked(&training_scans(data, subjects)).0)
}
