//! The objective's statistics: for every named quantity a sum over the items it is a mean over
//! and their count, so that ranks, batches and epochs add up by plain summation, and every
//! reported value is a sum divided by its count.

use serde_json::{Map, Value, json};

/// The quantities, in the order of the reference's metrics columns (porting note §4), then
/// ours (`kl` and the three parts of each reconstruction).
pub const STATS: [&str; 26] = [
    "manifold",
    "vel",
    "acc",
    "topo",
    "topo_raw",
    "full_log",
    "zero_log",
    "delta_log",
    "density",
    "new_edge",
    "new_sparse",
    "new_reg",
    "new_q_mean",
    "new_kept_mean",
    "mask_ratio",
    "mask_mean_p",
    "mask_p10",
    "mask_p50",
    "mask_p90",
    "mask_precision_at_k",
    "mask_recall_at_k",
    "mask_auprc",
    "kl",
    "l_x",
    "l_e",
    "l_w",
];

/// The reference's `_count` columns and the statistic whose count each one is.
const COUNTS: [(&str, &str); 11] = [
    ("vel", "vel"),
    ("acc", "acc"),
    ("full_log", "full_log"),
    ("zero_log", "zero_log"),
    ("delta_log", "delta_log"),
    ("density", "density"),
    ("new_edge", "new_edge"),
    ("new_sparse", "new_sparse"),
    ("new_reg", "new_reg"),
    ("new_diag", "new_q_mean"),
    ("mask_diag", "mask_ratio"),
];

/// Index of a statistic.
pub fn stat(name: &str) -> usize {
    STATS
        .iter()
        .position(|s| *s == name)
        .unwrap_or_else(|| panic!("unknown statistic {name}"))
}

/// Sums and counts of every statistic (`2 × STATS.len()` values: all sums, then all counts).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    pub v: Vec<f64>,
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            v: vec![0.0; 2 * STATS.len()],
        }
    }
}

impl Stats {
    pub const LEN: usize = 2 * STATS.len();

    /// Adds `value` to the sum of `name` and `count` to its count.
    pub fn add(&mut self, name: &str, value: f64, count: f64) {
        let i = stat(name);
        self.v[i] += value;
        self.v[STATS.len() + i] += count;
    }

    pub fn sum(&self, name: &str) -> f64 {
        self.v[stat(name)]
    }

    pub fn count(&self, name: &str) -> f64 {
        self.v[STATS.len() + stat(name)]
    }

    /// Sum / count, 0 when the count is 0.
    pub fn mean(&self, name: &str) -> f64 {
        let c = self.count(name);
        if c > 0.0 { self.sum(name) / c } else { 0.0 }
    }

    pub fn merge(&mut self, other: &Stats) {
        for (a, b) in self.v.iter_mut().zip(&other.v) {
            *a += b;
        }
    }

    /// From a vector of [`Stats::LEN`] values (missing ones are 0).
    pub fn from_slice(v: &[f64]) -> Self {
        let mut s = Self::default();
        for (a, b) in s.v.iter_mut().zip(v) {
            *a = *b;
        }
        s
    }

    /// The metrics columns `<prefix>_<stat>` (means) and `<prefix>_<name>_count`, in the
    /// reference's order, then ours.
    pub fn columns(&self, prefix: &str, row: &mut Map<String, Value>) {
        for name in &STATS[..22] {
            row.insert(format!("{prefix}_{name}"), json!(self.mean(name)));
        }
        for (col, of) in COUNTS {
            row.insert(format!("{prefix}_{col}_count"), json!(self.count(of)));
        }
        for name in &STATS[22..] {
            row.insert(format!("{prefix}_{name}"), json!(self.mean(name)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_counts_and_columns() {
        let mut a = Stats::default();
        a.add("vel", 3.0, 2.0);
        let mut b = Stats::default();
        b.add("vel", 1.0, 2.0);
        b.add("mask_ratio", 4.0, 2.0);
        a.merge(&b);
        assert_eq!(a.mean("vel"), 1.0);
        assert_eq!(a.mean("acc"), 0.0);
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
}
