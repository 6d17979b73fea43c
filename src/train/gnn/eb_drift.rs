//! `train-gnn --model eb-drift` (docs/eb-drift.md): a closed-form forecaster ([`ClosedFormFit`])
//! run as a [`Fitted`](super::closed_form::Fitted) forecaster on the loader, split, folds,
//! validation columns, test protocol and result files of every model; one epoch per fold whose steps add up the
//! identity's error over the training subjects' visit pairs, and whose end fits the
//! empirical-Bayes forecaster on the fold's training subjects (on every rank alike: a closed
//! form on data every rank holds).

use anyhow::{Context, Result};
use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;

use super::closed_form::{ClosedFormFit, Forecast, from_visit_0};
use super::cv::{Cv, CvFold};
use super::fits::training_scans;
use super::kind::ModelKind;
use super::protocol::fold_data::FoldData;
use super::protocol::fold_data::delta_t;
use super::settings::GnnSettings;
use crate::data::connectome::SymMatrix;
use crate::engine::LossSums;
use crate::models::eb_drift::{CHECK_UP_TO, Choice, EbDrift, EbParams, MODEL_NAME, params_from};
use crate::toolbox::checkpoint::Checkpoint;

/// `--model eb-drift`.
pub(super) struct EbDriftModel;

impl ClosedFormFit for EbDriftModel {
    const KIND: ModelKind = ModelKind::EbDrift;
    const MODEL_NAME: &'static str = MODEL_NAME;
    type Module<B: AutodiffBackend> = EbDrift<B>;
    type Sums = LossSums;
    type Params = EbParams;

    fn init<B: AutodiffBackend>(n: usize, device: &B::Device) -> EbDrift<B> {
        EbDrift::new(n, device)
    }

    /// The identity's error over the subjects' training pairs (what the forecaster improves
    /// on).
    fn sums(data: &FoldData, subjects: impl Iterator<Item = usize>) -> LossSums {
        let mut sums = LossSums::default();
        for s in subjects {
            let scans = data.scans(s);
            for v in 1..scans.len() {
                let (sum, count) =
                    squared_error(scans[v - 1].a_raw.upper(), scans[v].a_raw.upper());
                sums.sum += sum;
                sums.count += count;
            }
        }
        sums
    }

    fn fit<B: AutodiffBackend>(
        cv: &Cv,
        fold: &CvFold,
        _sums: &LossSums,
        device: &B::Device,
    ) -> Result<(EbDrift<B>, f64)> {
        let (data, train) = (&fold.data, &fold.items);
        let (params, choice) = EbParams::fit_checked(&training_scans(data, train));
        let mut err = (0.0, 0.0);
        for &s in train {
            let scans = data.scans(s);
            for v in 1..scans.len() {
                let dt = delta_t(scans, v - 1, v);
                let (start, sex) = (&scans[v - 1], data.cohort.subjects[s].sex);
                let f = params.forecast(
                    start.a_raw.upper(),
                    start.age,
                    start.age + dt,
                    sex,
                    cv.settings.drift.forecast,
                );
                let (sum, count) =
                    squared_error(SymMatrix::from_dense(&f).upper(), scans[v].a_raw.upper());
                err = (err.0 + sum, err.1 + count);
            }
        }
        let train_loss = if err.1 > 0.0 { err.0 / err.1 } else { f64::NAN };
        if cv.main {
            let [age, sex] = params.drift_factors;
            eprintln!(
                "[train-gnn] eb-drift fit: subject offset kept {:.3}, edge deviations kept \
                 {:.3}..{:.3}; drift x(1 {age:+.3}/year from age {:.2}, {sex:+.3} for males, \
                 {:+.3} for females); co-deviations of edges sharing a node x{:.3}; existence {}",
                params.k_g,
                params.k_edge.iter().copied().fold(f64::INFINITY, f64::min),
                params
                    .k_edge
                    .iter()
                    .copied()
                    .fold(f64::NEG_INFINITY, f64::max),
                params.a_bar,
                -sex,
                params.codev,
                if params.exist.is_some() {
                    "by the forecast level (a logistic regression)"
                } else {
                    "per edge (p11)"
                },
            );
            eprintln!(
                "[train-gnn] eb-drift {}",
                check_line(choice, train.len(), params.k_g)
            );
        }
        Ok((EbDrift::from_params(&params, device), train_loss))
    }

    fn valid_params<B: AutodiffBackend>(
        m: &<EbDrift<B> as AutodiffModule<B>>::InnerModule,
        n: usize,
    ) -> Result<EbParams> {
        params_from(n, |name| {
            let t = match name {
                "a_bar" => m.a_bar.val(),
                "k_g" => m.k_g.val(),
                "k_edge" => m.k_edge.val(),
                "alpha" => m.alpha.val(),
                "drift" => m.drift.val(),
                "seen" => m.seen.val(),
                "p11" => m.p11.val(),
                "p01" => m.p01.val(),
                "drift_factors" => m.drift_factors.val(),
                "node_sim" => m.node_sim.val(),
                "codev" => m.codev.val(),
                "exist" => m.exist.val(),
                "global_shrink" => m.global_shrink.val(),
                _ => m.nu.val(),
            };
            Ok(crate::host_reads::data(t)
                .convert::<f32>()
                .to_vec()
                .unwrap_or_default())
        })
    }

    fn checkpoint_params(ck: &Checkpoint, n: usize) -> Result<EbParams> {
        let weights = ck.model();
        params_from(n, |name| {
            Ok(weights
                .get(name)
                .with_context(|| format!("the eb-drift model file has no {name}"))?
                .data
                .clone())
        })
    }

    fn forecaster(params: EbParams, settings: &GnnSettings) -> impl Forecast {
        let form = settings.drift.forecast;
        move |data: &FoldData, subjects: &[usize], dts: Option<&[f64]>| {
            from_visit_0(data, subjects, dts, |scan, dt, sex| {
                params.forecast(scan.a_raw.upper(), scan.age, scan.age + dt, sex, form)
            })
        }
    }
}

/// What the small-sample check (`models::eb_drift::fallback`) did, for the fit log.
fn check_line(choice: Choice, subjects: usize, k: f64) -> String {
    match choice {
        Choice::Unchecked => format!(
            "small-sample check skipped ({subjects} training subjects, above {CHECK_UP_TO} or \
             fewer than 5 with two visits): eb-drift kept"
        ),
        Choice::Checked { eb, global } => format!(
            "small-sample check (5 groups of the {subjects} training subjects, each forecast by \
             fits on the others): held-out squared error eb-drift {eb:.4}, one global factor \
             {global:.4}: {}",
            if choice.global() {
                format!(
                    "the global-shrinkage forecaster is used (one persistence factor {k:.3} for \
                     every edge; eb-drift's per-edge parts are more than the data support)"
                )
            } else {
                "eb-drift kept".to_string()
            }
        ),
    }
}

/// Squared log1p error summed over two upper triangles, and the number of entries.
fn squared_error(pred: &[f32], truth: &[f32]) -> (f64, f64) {
    let mut sum = 0.0;
    for (&p, &t) in pred.iter().zip(truth) {
        let p = f64::from(p.max(0.0)).ln_1p();
        let t = f64::from(t.max(0.0)).ln_1p();
        sum += (p - t) * (p - t);
    }
    (sum, pred.len() as f64)
}
