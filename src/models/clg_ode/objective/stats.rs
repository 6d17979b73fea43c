//! The objective's statistics: for every quantity ([`Stat`]) a sum over the items it is a mean
//! over and their count, so that ranks, batches and epochs add up by plain summation, and every
//! reported value is a sum divided by its count.

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value, json};

use super::indexed::indexed_enum;

/// Where a statistic comes from, which places its columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A sum (with its count) the reference's `compute_loss` accumulates in its metrics under
    /// this key; a column of the reference's metrics.
    ReferenceSum(&'static str),
    /// A mean over predictions of the reference's (the mask diagnostics); a column of the
    /// reference's metrics.
    ReferenceMean,
    /// Ours only: columns after the reference's.
    Ours,
}

/// What a [`Stat`] is beside its variant: its name, its `_count` column and its origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StatInfo {
    /// The name of the statistic and of its metrics column `<prefix>_<name>`.
    pub name: &'static str,
    /// The reference's `<prefix>_<column>_count` metrics column holding its count, if any.
    pub count_column: Option<&'static str>,
    pub origin: Origin,
}

impl StatInfo {
    const fn new(name: &'static str, origin: Origin) -> Self {
        Self {
            name,
            count_column: None,
            origin,
        }
    }

    /// A sum the reference accumulates under `key`.
    const fn sum(name: &'static str, key: &'static str) -> Self {
        Self::new(name, Origin::ReferenceSum(key))
    }

    /// A mean the reference reports.
    const fn mean(name: &'static str) -> Self {
        Self::new(name, Origin::ReferenceMean)
    }

    /// Ours only.
    const fn ours(name: &'static str) -> Self {
        Self::new(name, Origin::Ours)
    }

    /// With the count column `<prefix>_<column>_count`.
    const fn counted(self, column: &'static str) -> Self {
        Self {
            count_column: Some(column),
            ..self
        }
    }
}

indexed_enum! {
    /// A statistic of the objective: a loss term ([`Term::stat`](super::Term::stat)), a part
    /// of one or a diagnostic.
    ///
    /// The declaration is the list: its order is that of the flat [`Stats`] vector (saved in
    /// resume checkpoints) and of the metrics columns ([`Stats::columns`]: the reference's
    /// quantities (porting note §4), their count columns, then ours). Adding a statistic is
    /// one variant with its [`StatInfo`] here, and its value added where it is computed
    /// (`stats.add(Stat::X, sum, count)` in `objective/forward.rs`); its columns
    /// (`train_x`/`val_x`, and the count column if it has one), the vector's size and the
    /// lookup by name ([`Stat::from_name`]) follow. A loss term's statistic comes with its
    /// [`Term`](super::Term) variant.
    pub(crate) enum Stat => fn info(self) -> StatInfo {
        Manifold => StatInfo::sum("manifold", "manifold_sum"),
        Vel => StatInfo::sum("vel", "vel_sum").counted("vel"),
        Acc => StatInfo::sum("acc", "acc_sum").counted("acc"),
        Topo => StatInfo::sum("topo", "topo_sum"),
        /// The topology loss before the scale.
        TopoRaw => StatInfo::sum("topo_raw", "topo_raw_sum"),
        FullLog => StatInfo::sum("full_log", "full_log_sum").counted("full_log"),
        ZeroLog => StatInfo::sum("zero_log", "zero_log_sum").counted("zero_log"),
        DeltaLog => StatInfo::sum("delta_log", "delta_log_sum").counted("delta_log"),
        Density => StatInfo::sum("density", "density_sum").counted("density"),
        NewEdge => StatInfo::sum("new_edge", "new_edge_sum").counted("new_edge"),
        NewSparse => StatInfo::sum("new_sparse", "new_sparse_sum").counted("new_sparse"),
        NewReg => StatInfo::sum("new_reg", "new_reg_sum").counted("new_reg"),
        /// Mean new-edge probability of a forecast the innovation module acts on.
        NewQMean => StatInfo::sum("new_q_mean", "new_q_mean_sum").counted("new_diag"),
        /// Kept edges of such a forecast.
        NewKeptMean => StatInfo::sum("new_kept_mean", "new_kept_sum"),
        MaskRatio => StatInfo::mean("mask_ratio").counted("mask_diag"),
        MaskMeanP => StatInfo::mean("mask_mean_p"),
        MaskP10 => StatInfo::mean("mask_p10"),
        MaskP50 => StatInfo::mean("mask_p50"),
        MaskP90 => StatInfo::mean("mask_p90"),
        MaskPrecisionAtK => StatInfo::mean("mask_precision_at_k"),
        MaskRecallAtK => StatInfo::mean("mask_recall_at_k"),
        MaskAuprc => StatInfo::mean("mask_auprc"),
        Kl => StatInfo::ours("kl"),
        /// The reconstruction's morphology MSE.
        ReconMorph => StatInfo::ours("l_x"),
        /// The reconstruction's edge-existence loss.
        ReconEdge => StatInfo::ours("l_e"),
        /// The reconstruction's weight loss.
        ReconWeight => StatInfo::ours("l_w"),
    }
}

impl Stat {
    /// The statistic's name (and metrics column `<prefix>_<name>`).
    pub(crate) const fn name(self) -> &'static str {
        self.info().name
    }

    /// Whether its columns are the reference's (they come before ours).
    pub(crate) const fn is_reference(self) -> bool {
        !matches!(self.info().origin, Origin::Ours)
    }

    /// The statistic called `name`; the error lists the valid names.
    pub(crate) fn from_name(name: &str) -> Result<Stat, UnknownStat> {
        Stat::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| UnknownStat(name.to_string()))
    }
}

impl fmt::Display for Stat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Stat {
    type Err = UnknownStat;
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Stat::from_name(name)
    }
}

/// A name that is no [`Stat`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown statistic `{0}`; the statistics are: {names}", names = Stat::ALL.map(Stat::name).join(", "))]
pub(crate) struct UnknownStat(pub String);

/// Sums and counts of every statistic (`2 × Stat::COUNT` values: all sums, then all counts, in
/// [`Stat::ALL`] order).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Stats {
    pub v: Vec<f64>,
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            v: vec![0.0; Self::LEN],
        }
    }
}

impl Stats {
    pub(crate) const LEN: usize = 2 * Stat::COUNT;

    /// Adds `value` to the sum of `stat` and `count` to its count.
    pub(crate) fn add(&mut self, stat: impl Into<Stat>, value: f64, count: f64) {
        let i = stat.into().index();
        self.v[i] += value;
        self.v[Stat::COUNT + i] += count;
    }

    pub(crate) fn sum(&self, stat: impl Into<Stat>) -> f64 {
        self.v[stat.into().index()]
    }

    pub(crate) fn count(&self, stat: impl Into<Stat>) -> f64 {
        self.v[Stat::COUNT + stat.into().index()]
    }

    /// Sum / count, 0 when the count is 0.
    pub(crate) fn mean(&self, stat: impl Into<Stat>) -> f64 {
        let stat = stat.into();
        let c = self.count(stat);
        if c > 0.0 { self.sum(stat) / c } else { 0.0 }
    }

    pub(crate) fn merge(&mut self, other: &Stats) {
        for (a, b) in self.v.iter_mut().zip(&other.v) {
            *a += b;
        }
    }

    /// From a vector of [`Stats::LEN`] values (missing ones are 0).
    pub(crate) fn from_slice(v: &[f64]) -> Self {
        let mut s = Self::default();
        for (a, b) in s.v.iter_mut().zip(v) {
            *a = *b;
        }
        s
    }

    /// The metrics columns: `<prefix>_<stat>` (means) of the reference's statistics, their
    /// `<prefix>_<column>_count` columns, then the means of ours.
    pub(crate) fn columns(&self, prefix: &str, row: &mut Map<String, Value>) {
        let (reference, ours): (Vec<Stat>, Vec<Stat>) =
            Stat::ALL.into_iter().partition(|s| s.is_reference());
        for s in reference {
            row.insert(format!("{prefix}_{s}"), json!(self.mean(s)));
        }
        for s in Stat::ALL {
            if let Some(col) = s.info().count_column {
                row.insert(format!("{prefix}_{col}_count"), json!(self.count(s)));
            }
        }
        for s in ours {
            row.insert(format!("{prefix}_{s}"), json!(self.mean(s)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::clg_ode::objective::Term;

    #[test]
    fn sums_counts_and_columns() {
        let mut a = Stats::default();
        a.add(Stat::Vel, 3.0, 2.0);
        let mut b = Stats::default();
        b.add(Term::Vel, 1.0, 2.0);
        b.add(Stat::MaskRatio, 4.0, 2.0);
        a.merge(&b);
        assert_eq!(a.mean(Stat::Vel), 1.0);
        assert_eq!(a.mean(Term::Acc), 0.0);
        assert_eq!(Stats::from_slice(&a.v), a);
        let mut row = Map::new();
        a.columns("train", &mut row);
        assert_eq!(row.len(), 22 + 11 + 4);
        assert_eq!(row["train_vel_count"], 4.0);
        assert_eq!(row["train_mask_diag_count"], 2.0);
        assert_eq!(row["train_mask_ratio"], 2.0);
        let keys: Vec<&String> = row.keys().collect();
        assert_eq!(keys[0], "train_manifold");
        assert_eq!(keys[22], "train_vel_count");
    }

    /// The columns of the reference's metrics and ours, byte for byte and in order (metrics
    /// files, results JSON and the golden comparisons read them).
    #[test]
    fn column_names_are_the_reference_ones() {
        let mut row = Map::new();
        Stats::default().columns("val", &mut row);
        let keys: Vec<&str> = row.keys().map(String::as_str).collect();
        let want = "val_manifold val_vel val_acc val_topo val_topo_raw val_full_log \
            val_zero_log val_delta_log val_density val_new_edge val_new_sparse val_new_reg \
            val_new_q_mean val_new_kept_mean val_mask_ratio val_mask_mean_p val_mask_p10 \
            val_mask_p50 val_mask_p90 val_mask_precision_at_k val_mask_recall_at_k \
            val_mask_auprc val_vel_count val_acc_count val_full_log_count val_zero_log_count \
            val_delta_log_count val_density_count val_new_edge_count val_new_sparse_count \
            val_new_reg_count val_new_diag_count val_mask_diag_count val_kl val_l_x val_l_e \
            val_l_w";
        assert_eq!(keys, want.split_whitespace().collect::<Vec<_>>());
    }

    #[test]
    fn names_are_unique_and_parse_back() {
        for s in Stat::ALL {
            assert_eq!(Stat::from_name(s.name()), Ok(s));
            assert_eq!(s.name().parse::<Stat>(), Ok(s));
            assert_eq!(Stat::ALL[s.index()], s);
        }
        let err = Stat::from_name("velocity").unwrap_err().to_string();
        assert!(err.contains("`velocity`"), "{err}");
        assert!(
            err.contains("manifold, vel, acc,") && err.ends_with("l_w"),
            "{err}"
        );
    }

    #[test]
    fn every_term_is_a_statistic_of_its_name() {
        let mut stats: Vec<Stat> = Term::ALL.iter().map(|t| t.stat()).collect();
        stats.sort_by_key(|s| s.index());
        stats.dedup();
        assert_eq!(stats.len(), Term::COUNT);
        for t in Term::ALL {
            assert_eq!(Stat::from(t).name(), t.name());
        }
    }
}
