//! The result files of a `train-gnn` run, as types: `test_metrics.json` ([`TestMetricsFile`]:
//! [`TestMetrics`] and what the run adds), `clg_ode_results.json` ([`RunResults`], one
//! [`FoldEntry`] per fold) and `eval-gnn`'s `metrics.json` ([`EvalMetricsFile`]). Training and
//! `eval-gnn` write them, the reports read them back (`crate::report`'s `runs`): a field's name is
//! its JSON key, and the fields' order is the files' key order. A metric that is undefined is
//! `null` in the files and NaN here (`crate::metrics::absent`).
//!
//! Adding a test metric: a field of [`TestMetrics`] (or of `ScMetrics`, a key of every SC
//! table) and its computation (`TestMetrics::of` in `train/gnn/protocol/evaluate.rs`); the
//! files and the reports follow.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::metrics::sc::{ScKey, ScMetrics};
use crate::metrics::skill::Skill;
use crate::metrics::topology::ExactTopology;

/// Test metrics of the model and of the identity baseline, over all test subjects and over the
/// subjects with a visit 1 (forecasts only).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct TestMetrics {
    pub protocol: String,
    pub n_subjects: usize,
    pub model: ScMetrics,
    pub identity_baseline: ScMetrics,
    /// The model against the identity baseline.
    pub skill: Skill,
    pub forecast_only: ForecastOnly,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ForecastOnly {
    pub n_subjects: usize,
    pub model: ScMetrics,
    pub identity_baseline: ScMetrics,
    pub skill: Skill,
}

/// Exact topology (Betti curves at `thresholds` thresholds, degree and strength correlations)
/// of the model's predictions and of the identity forecast, averaged over subjects.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ExactVersus {
    pub thresholds: usize,
    pub model: ExactTopology,
    pub identity_baseline: ExactTopology,
}

/// `test_metrics.json`: the test metrics, the exact topology, the model's test loss and the
/// checkpoint (of the best fold) that made the forecasts.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct TestMetricsFile {
    #[serde(flatten)]
    pub metrics: TestMetrics,
    pub exact_topology: ExactVersus,
    #[serde(deserialize_with = "crate::metrics::absent::null_as_nan")]
    pub test_loss: f64,
    pub best_fold: Option<usize>,
    pub checkpoint: Option<PathBuf>,
    /// `train-gnn --eb-fallback`'s comparison and choice (absent without the flag).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eb_fallback: Option<FallbackChoice>,
}

/// What `--eb-fallback` compared and chose (`test_metrics.json`'s `eb_fallback`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FallbackChoice {
    /// The fold whose validation subjects were forecast.
    pub fold: usize,
    pub val_subjects: usize,
    /// sc_log_mse skill over those subjects of the network's best weights.
    pub clg_ode_val_skill: f64,
    /// The same of eb-drift fitted on the fold's training subjects.
    pub eb_drift_val_skill: f64,
    /// How much better the network had to be.
    pub min_delta: f64,
    /// Whether the run's forecasts are eb-drift's (then `test_loss` is their sc_log_mse, as
    /// for `--model eb-drift`).
    pub used: bool,
    /// The network's own sc_log_mse skill on the test subjects (reported, not used to choose).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clg_ode_test_skill: Option<f64>,
}

impl FallbackChoice {
    /// The console line.
    pub(crate) fn line(&self) -> String {
        format!(
            "--eb-fallback: validation skill over fold {}'s {} subjects: CLG-ODE {:+.4}, \
             eb-drift {:+.4} (min delta {}): {}",
            self.fold,
            self.val_subjects,
            self.clg_ode_val_skill,
            self.eb_drift_val_skill,
            self.min_delta,
            if self.used {
                "the forecasts written are eb-drift's (CLG-ODE did not beat it)"
            } else {
                "CLG-ODE's forecasts kept"
            }
        )
    }
}

impl TestMetricsFile {
    /// Test metric `name` (the reports' `--metric`): a metric of the model (`sc_log_mse`), the
    /// exact Betti-curve distances (`betti0_l1`, `betti1_l1`), `identity_<metric>`,
    /// `forecast_only.<metric>`, `skill`, `pearson_gain`, `skill_<error metric>` (1 − the
    /// model's / the identity's, for a metric where lower is better: `skill_ecc_l2`,
    /// `skill_betti0_l1`; > 0 closer to the truth than the start scan), or a number of the file
    /// (`test_loss`, `n_subjects`, `best_fold`); `None` for another name or an undefined value.
    pub(crate) fn metric(&self, name: &str) -> Option<f64> {
        if let Some(base) = name.strip_prefix("skill_") {
            let (m, i) = (
                self.metric(base)?,
                self.metric(&format!("identity_{base}"))?,
            );
            return (is_error_metric(base) && i > 0.0).then(|| 1.0 - m / i);
        }
        let exact = |t: &ExactTopology, key: &str| match key {
            "betti0_l1" => Some(t.betti0_l1),
            "betti1_l1" => Some(t.betti1_l1),
            _ => None,
        };
        let topo = &self.exact_topology;
        if let Some(v) = exact(&topo.model, name) {
            return Some(v).filter(|v| !v.is_nan());
        }
        if let Some(v) = name
            .strip_prefix("identity_")
            .and_then(|k| exact(&topo.identity_baseline, k))
        {
            return Some(v).filter(|v| !v.is_nan());
        }
        let t = &self.metrics;
        let sc = |m: &ScMetrics, key: &str| ScKey::from_name(key).map(|k| m.get(k));
        let value = if let Some(rest) = name.strip_prefix("forecast_only.") {
            sc(&t.forecast_only.model, rest)
        } else if let Some(rest) = name.strip_prefix("identity_") {
            sc(&t.identity_baseline, rest)
        } else {
            match name {
                "skill" => Some(t.skill.skill),
                "pearson_gain" => Some(t.skill.pearson_gain),
                "n_subjects" => Some(t.n_subjects as f64),
                "test_loss" => Some(self.test_loss),
                "best_fold" => self.best_fold.map(|f| f as f64),
                _ => sc(&t.model, name),
            }
        };
        value.filter(|v| !v.is_nan())
    }

    /// The names [`Self::metric`] answers with a value among the model's metrics and the
    /// skills (`skill`, `pearson_gain`, `pearson_sparse_gain`).
    pub(crate) fn defined(&self) -> Vec<String> {
        let t = &self.metrics;
        let skill = &t.skill;
        let skills = [
            ("skill", skill.skill),
            ("pearson_gain", skill.pearson_gain),
            ("pearson_sparse_gain", skill.pearson_sparse_gain),
        ];
        let model = ScKey::ALL.iter().map(|&k| (k.name(), t.model.get(k)));
        model
            .chain(skills)
            .filter(|(_, v)| !v.is_nan())
            .map(|(n, _)| n.to_string())
            .collect()
    }
}

/// Whether lower is better for test metric `name` (an error or a distance, whose
/// `skill_<name>` is defined): the mse/mae/rmse/ks/l1/l2 metrics and the three `mse_*`.
pub(crate) fn is_error_metric(name: &str) -> bool {
    ["_mse", "_mae", "_rmse", "_ks", "_l1", "_l2"]
        .iter()
        .any(|end| name.ends_with(end))
        || name.starts_with("mse_")
}

/// `metrics.json` of an `eval-gnn` re-scoring: the test metrics of the subjects of a split, the
/// exact topology, the fold and checkpoint, the split, what changed in it since training, and
/// the paired comparison with the identity per metric.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EvalMetricsFile {
    #[serde(flatten)]
    pub metrics: TestMetrics,
    pub exact_topology: ExactVersus,
    pub fold: usize,
    pub checkpoint: PathBuf,
    pub split: String,
    pub split_changes: Vec<String>,
    pub paired_vs_identity: serde_json::Value,
}

/// One fold of `clg_ode_results.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct FoldEntry {
    pub fold: Option<usize>,
    #[serde(deserialize_with = "crate::metrics::absent::null_as_nan")]
    pub best_val_loss: f64,
    /// The monitored metric's name (`val_loss`).
    pub best_monitor_metric: String,
    #[serde(deserialize_with = "crate::metrics::absent::null_as_nan")]
    pub best_monitor: f64,
    pub best_epoch: Option<usize>,
    pub epochs_run: usize,
    pub stopped_early: bool,
    pub best_model_path: Option<PathBuf>,
    pub last_model_path: Option<PathBuf>,
}

/// `clg_ode_results.json` (the reference's name and keys, for every model): the folds, the best
/// one, the test figures and the cohort's sizes. The SC metrics are written with sorted keys
/// (as `test_sc_metrics.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct RunResults {
    /// The model's kind (`clg-ode`).
    pub model: Option<String>,
    pub cv_folds: Vec<FoldEntry>,
    /// `--cv-fold` (-1: every fold).
    pub cv_fold: Option<i64>,
    pub cv_folds_total: usize,
    #[serde(deserialize_with = "crate::metrics::absent::null_as_nan")]
    pub best_cv_score: f64,
    pub best_fold: Option<usize>,
    pub best_model_path: Option<PathBuf>,
    #[serde(deserialize_with = "crate::metrics::absent::null_as_nan")]
    pub test_loss: f64,
    #[serde(serialize_with = "ScMetrics::serialize_sorted")]
    pub test_sc_metrics: ScMetrics,
    #[serde(serialize_with = "ScMetrics::serialize_sorted")]
    pub test_identity_baseline_sc_metrics: ScMetrics,
    pub test_skill: Skill,
    pub test_exact_topology: ExactVersus,
    pub n_subjects: usize,
    pub n_trainval: usize,
    pub n_test: usize,
    /// CPU seconds of the whole run (NaN when a file leaves it out).
    #[serde(deserialize_with = "crate::metrics::absent::null_as_nan")]
    pub cpu_seconds: f64,
}

impl RunResults {
    /// The best fold's entry, else the first.
    pub(crate) fn best_fold_entry(&self) -> Option<&FoldEntry> {
        let folds = &self.cv_folds;
        folds
            .iter()
            .find(|f| f.fold == self.best_fold)
            .or(folds.first())
    }
}

// What a file leaves out reads as undefined: NaN, `None`, empty (an older or hand-written file
// reads, and its missing figures are missing, never 0).

fn undefined_skill() -> Skill {
    Skill {
        skill: f64::NAN,
        pearson_gain: f64::NAN,
        pearson_sparse_gain: f64::NAN,
    }
}

impl Default for TestMetrics {
    fn default() -> Self {
        Self {
            protocol: String::new(),
            n_subjects: 0,
            model: ScMetrics::undefined(),
            identity_baseline: ScMetrics::undefined(),
            skill: undefined_skill(),
            forecast_only: ForecastOnly::default(),
        }
    }
}

impl Default for ForecastOnly {
    fn default() -> Self {
        Self {
            n_subjects: 0,
            model: ScMetrics::undefined(),
            identity_baseline: ScMetrics::undefined(),
            skill: undefined_skill(),
        }
    }
}

impl Default for ExactVersus {
    fn default() -> Self {
        let t = ExactTopology {
            betti0_l1: f64::NAN,
            betti1_l1: f64::NAN,
            degree_pearson: f64::NAN,
            strength_pearson: f64::NAN,
        };
        Self {
            thresholds: 0,
            model: t,
            identity_baseline: t,
        }
    }
}

impl Default for TestMetricsFile {
    fn default() -> Self {
        Self {
            metrics: TestMetrics::default(),
            exact_topology: ExactVersus::default(),
            test_loss: f64::NAN,
            best_fold: None,
            checkpoint: None,
            eb_fallback: None,
        }
    }
}

impl Default for FoldEntry {
    fn default() -> Self {
        Self {
            fold: None,
            best_val_loss: f64::NAN,
            best_monitor_metric: String::new(),
            best_monitor: f64::NAN,
            best_epoch: None,
            epochs_run: 0,
            stopped_early: false,
            best_model_path: None,
            last_model_path: None,
        }
    }
}

impl Default for RunResults {
    fn default() -> Self {
        Self {
            model: None,
            cv_folds: Vec::new(),
            cv_fold: None,
            cv_folds_total: 0,
            best_cv_score: f64::NAN,
            best_fold: None,
            best_model_path: None,
            test_loss: f64::NAN,
            test_sc_metrics: ScMetrics::undefined(),
            test_identity_baseline_sc_metrics: ScMetrics::undefined(),
            test_skill: undefined_skill(),
            test_exact_topology: ExactVersus::default(),
            n_subjects: 0,
            n_trainval: 0,
            n_test: 0,
            cpu_seconds: f64::NAN,
        }
    }
}

#[cfg(test)]
pub(crate) mod examples {
    //! Result files for the reports' tests: what is not given is undefined (NaN, `null`).
    use super::*;

    /// No skill: undefined.
    pub(crate) fn no_skill() -> Skill {
        undefined_skill()
    }

    /// `test_metrics.json` of a run with these test metrics.
    pub(crate) fn test_metrics(
        model: ScMetrics,
        identity: ScMetrics,
        skill: Skill,
    ) -> TestMetricsFile {
        TestMetricsFile {
            metrics: TestMetrics {
                model,
                identity_baseline: identity,
                skill,
                ..TestMetrics::default()
            },
            ..TestMetricsFile::default()
        }
    }

    /// `clg_ode_results.json` of a run of `model` whose folds had these best epochs
    /// (`(fold, best_epoch)`), `best_fold` the best, with these test metrics.
    pub(crate) fn results(
        model: &str,
        folds: &[(usize, usize)],
        best_fold: usize,
        test: (ScMetrics, ScMetrics, Skill),
    ) -> RunResults {
        let entry = |&(fold, best_epoch): &(usize, usize)| FoldEntry {
            fold: Some(fold),
            best_epoch: Some(best_epoch),
            ..FoldEntry::default()
        };
        RunResults {
            model: Some(model.into()),
            cv_folds: folds.iter().map(entry).collect(),
            best_fold: Some(best_fold),
            test_sc_metrics: test.0,
            test_identity_baseline_sc_metrics: test.1,
            test_skill: test.2,
            ..RunResults::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skills_of_errors_and_the_betti_distances_are_metrics() {
        let mut f = TestMetricsFile::default();
        f.metrics.model.ecc_l2 = 30.0;
        f.metrics.identity_baseline.ecc_l2 = 40.0;
        f.metrics.model.sc_log_pearson = 0.9;
        f.metrics.identity_baseline.sc_log_pearson = 0.8;
        f.exact_topology.model.betti0_l1 = 6.0;
        f.exact_topology.identity_baseline.betti0_l1 = 3.0;
        assert_eq!(f.metric("skill_ecc_l2"), Some(0.25));
        assert_eq!(f.metric("betti0_l1"), Some(6.0));
        assert_eq!(f.metric("identity_betti0_l1"), Some(3.0));
        // Twice the identity's distance: skill −1.
        assert_eq!(f.metric("skill_betti0_l1"), Some(-1.0));
        // A correlation (higher is better) has no such skill; an undefined value is none.
        assert_eq!(f.metric("skill_sc_log_pearson"), None);
        assert_eq!(f.metric("skill_betti1_l1"), None);
        assert_eq!(f.metric("betti1_l1"), None);
        // An identity of distance 0: no skill (not infinite).
        f.exact_topology.identity_baseline.betti0_l1 = 0.0;
        assert_eq!(f.metric("skill_betti0_l1"), None);
        assert!(is_error_metric("strength_mae") && is_error_metric("mse_zero"));
        assert!(!is_error_metric("deg_pearson") && !is_error_metric("skill"));
    }
}
