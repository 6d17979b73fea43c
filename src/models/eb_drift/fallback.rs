//! The rule that keeps eb-drift from overfitting a small training set (issue 75, item 2):
//! eb-drift's ten fitted parts against the one-factor global-shrinkage forecaster, chosen by
//! cross-validation inside the training subjects.
//!
//! The **global-shrinkage** forecaster (`scripts/frontier.py`'s "global-shrink EB"): per edge a
//! population line `m(t) = α + β·(t − ā)`, least squares over every training scan with absent
//! entries counted as 0, and one persistence factor `k = Σ r0·r1 / Σ r0²` (clamped to [0, 1])
//! over the training pairs' residuals `r = y − m(t)` of every edge; the forecast
//! `max(m(t1) + k·(y0 − m(t0)), 0)` for every edge, present or not. As [`EbParams`] it is a
//! forecaster whose every edge counts as present (`all_present`), `k_g = k_edge = k`, `p = 1`.
//!
//! The **check**: the training subjects dealt into [`FOLDS`] groups by their position (subject
//! `i` to group `i mod 5`); for each group both forecasters are fitted on the other groups and
//! forecast the group's consecutive visit pairs; the squared log1p errors of the dense forecasts
//! are summed over all groups; eb-drift is kept unless the global factor's sum is lower. Only
//! with at most [`CHECK_UP_TO`] training subjects: the check costs ten more fits (minutes at
//! 1,000 × 400), and at 1,000 subjects eb-drift led the global factor on all five generators
//! (docs/frontier.md).

use rayon::prelude::*;

use super::pooling::{TINY, persistence};
use super::visits::{for_all, for_pairs, mean_age, visits};
use super::{EbParams, EbScan, ForecastForm, nodes};

/// Groups of the check.
pub(super) const FOLDS: usize = 5;
/// Training subjects above which the check is skipped (eb-drift kept).
pub(crate) const CHECK_UP_TO: usize = 500;

/// Which forecaster the check kept, with the summed held-out errors it saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Choice {
    /// More training subjects than [`CHECK_UP_TO`]: eb-drift without a check.
    Unchecked,
    /// The check ran: the summed squared errors of eb-drift and of the global factor.
    Checked { eb: f64, global: f64 },
}

impl Choice {
    /// Whether the global factor was chosen.
    pub(crate) fn global(self) -> bool {
        matches!(self, Choice::Checked { eb, global } if global < eb)
    }
}

impl EbParams {
    /// eb-drift, or the global-shrinkage forecaster where the check inside the training
    /// subjects prefers it (the module doc's rule).
    pub(crate) fn fit_checked(subjects: &[Vec<EbScan<'_>>]) -> (Self, Choice) {
        let with_pairs = subjects.iter().filter(|s| s.len() >= 2).count();
        if subjects.len() > CHECK_UP_TO || with_pairs < FOLDS {
            return (Self::fit(subjects), Choice::Unchecked);
        }
        // The groups in parallel (each fit's arrays are a few per edge; the scans are shared),
        // their errors summed in group order: the same sums at any thread count.
        let per_group: Vec<(f64, f64)> = (0..FOLDS)
            .into_par_iter()
            .map(|f| {
                let (mut train, mut held) = (Vec::new(), Vec::new());
                for (i, s) in subjects.iter().enumerate() {
                    if i % FOLDS == f {
                        held.push(s.clone());
                    } else {
                        train.push(s.clone());
                    }
                }
                (
                    Self::fit(&train).held_out_error(&held),
                    Self::fit_global_shrink(&train).held_out_error(&held),
                )
            })
            .collect();
        let (mut eb, mut global) = (0.0, 0.0);
        for (e, g) in per_group {
            eb += e;
            global += g;
        }
        let choice = Choice::Checked { eb, global };
        if choice.global() {
            (Self::fit_global_shrink(subjects), choice)
        } else {
            (Self::fit(subjects), choice)
        }
    }

    /// The global-shrinkage forecaster of the module doc, fitted on `subjects`.
    pub(crate) fn fit_global_shrink(subjects: &[Vec<EbScan<'_>>]) -> Self {
        let scans = visits(subjects);
        let n = nodes(subjects);
        let m = n * n.saturating_sub(1) / 2;
        let n_scans = scans.iter().flatten().count().max(1) as f64;
        let a_bar = mean_age(&scans);
        let (mut sy, mut sty, mut stt) = (vec![0.0; m], vec![0.0; m], 0.0);
        for_all(&scans, |v, s| {
            let tc = v.age - a_bar;
            stt += tc * tc;
            for e in 0..m {
                sy[e] += s.y[e];
                sty[e] += tc * s.y[e];
            }
        });
        let drift: Vec<f64> = sty
            .iter()
            .map(|&x| if stt > TINY { x / stt } else { 0.0 })
            .collect();
        let alpha: Vec<f64> = sy.iter().map(|&x| x / n_scans).collect();
        let line = |e: usize, age: f64| alpha[e] + drift[e] * (age - a_bar);
        let (mut r01, mut r00) = (0.0, 0.0);
        for_pairs(&scans, |v0, s0, v1, s1, _| {
            for e in 0..m {
                let r0 = s0.y[e] - line(e, v0.age);
                r01 += r0 * (s1.y[e] - line(e, v1.age));
                r00 += r0 * r0;
            }
        });
        let k = persistence(r01, r00);
        EbParams {
            n,
            a_bar,
            k_g: k,
            k_edge: vec![k; m],
            alpha,
            drift,
            seen: vec![true; m],
            p11: vec![1.0; m],
            p01: vec![1.0; m],
            nu: vec![0.0; m],
            drift_factors: [0.0, 0.0],
            node_sim: Vec::new(),
            codev: 0.0,
            exist: None,
            all_present: true,
        }
    }

    /// The summed squared log1p error of the dense forecasts of every consecutive visit pair
    /// of `subjects`.
    fn held_out_error(&self, subjects: &[Vec<EbScan<'_>>]) -> f64 {
        let mut sum = 0.0;
        for_pairs(&visits(subjects), |v0, s0, _, s1, dt| {
            let (age0, target) = (v0.age, v0.age + dt);
            let f = self.expected(&s0.y, &s0.z, age0, target, v0.sex, ForecastForm::Dense);
            sum += f
                .iter()
                .zip(&s1.y)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>();
        });
        sum
    }
}
