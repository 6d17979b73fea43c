//! A configuration's strata over its runs (its folds, its seeds): what `plot-sc --strata` draws
//! for runs that share a `--label` name.
//!
//! Per stratum (by label, in order of first appearance): the skill is the mean of the runs'
//! skills (each fold's test subjects scored by that fold's model), with a 95% interval of that
//! mean over the runs, Student's t with k − 1 degrees of freedom (k runs with a finite skill; no
//! interval for k = 1); n is the fewest forecasts of any of its runs (the folds of a split
//! usually score the same test subjects, so adding their n would count a subject once per
//! fold, and a stratum small in one run stays marked small); the mse and identity mse are
//! the runs' means; the Δt range is kept where every run gives the same one, else it reads
//! `folds differ` (each fold's terciles come from its own test subjects).

use super::Stratum;

/// Student's t quantile at 0.975 for `df` degrees of freedom (df ≥ 1): tabled to 30, then the
/// normal's 1.96 approached as 1.96 + 2.4/df (within 0.1% of the exact quantile past 30).
pub(crate) fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::NAN,
        1..=30 => T[df - 1],
        _ => 1.96 + 2.4 / df as f64,
    }
}

/// The mean of `values` and its 95% t-interval (`None` with fewer than two).
pub(crate) fn mean_interval(values: &[f64]) -> (f64, Option<(f64, f64)>) {
    let k = values.len();
    let mean = values.iter().sum::<f64>() / k as f64;
    if k < 2 {
        return (mean, None);
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (k - 1) as f64;
    let half = t975(k - 1) * (var / k as f64).sqrt();
    (mean, Some((mean - half, mean + half)))
}

/// The pooled strata of `runs` (each run's strata as read from its `strata.json`).
pub(crate) fn pool(runs: &[&[Stratum]]) -> Vec<Stratum> {
    let mut labels: Vec<&str> = Vec::new();
    for s in runs.iter().flat_map(|r| r.iter()) {
        if !labels.contains(&s.label.as_str()) {
            labels.push(&s.label);
        }
    }
    labels
        .into_iter()
        .map(|label| {
            let of: Vec<&Stratum> = runs
                .iter()
                .filter_map(|r| r.iter().find(|s| s.label == label))
                .collect();
            let finite = |f: fn(&Stratum) -> Option<f64>| -> Vec<f64> {
                of.iter()
                    .filter_map(|s| f(s))
                    .filter(|v| v.is_finite())
                    .collect()
            };
            let mean = |v: Vec<f64>| (!v.is_empty()).then(|| mean_interval(&v).0);
            let skills = finite(|s| s.skill);
            let (skill, interval) = if skills.is_empty() {
                (None, None)
            } else {
                let (m, i) = mean_interval(&skills);
                (Some(m), i)
            };
            let same_range = of.iter().all(|s| s.range == of[0].range);
            Stratum {
                label: label.to_string(),
                range: if same_range {
                    of[0].range.clone()
                } else {
                    "folds differ".into()
                },
                n: of.iter().map(|s| s.n).min().unwrap_or(0),
                mse: mean(finite(|s| s.mse)),
                identity_mse: mean(finite(|s| s.identity_mse)),
                skill,
                interval,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(label: &str, range: &str, n: u64, skill: Option<f64>) -> Stratum {
        Stratum {
            label: label.into(),
            range: range.into(),
            n,
            mse: Some(1.0),
            identity_mse: Some(2.0),
            skill,
            interval: None,
        }
    }

    #[test]
    fn strata_pool_to_a_mean_with_a_t_interval_over_the_runs() {
        let a = [
            s("Δt short", "≤ 1 y", 4, Some(0.1)),
            s("h1", "", 6, Some(0.3)),
        ];
        let b = [s("Δt short", "≤ 2 y", 5, Some(0.3))];
        let c = [s("Δt short", "≤ 1 y", 3, Some(0.2)), s("h1", "", 2, None)];
        let p = pool(&[&a, &b, &c]);
        assert_eq!(p.len(), 2);
        // Mean 0.2, sd 0.1, k = 3: half width 4.303 · 0.1 / √3.
        let short = &p[0];
        assert!((short.skill.unwrap() - 0.2).abs() < 1e-12);
        let (lo, hi) = short.interval.unwrap();
        let half = 4.303 * 0.1 / 3f64.sqrt();
        assert!((hi - 0.2 - half).abs() < 1e-12 && (0.2 - lo - half).abs() < 1e-12);
        assert_eq!((short.n, short.range.as_str()), (3, "folds differ"));
        // One run with a skill: its value, no interval; n is the smallest run's.
        assert_eq!((p[1].skill, p[1].interval, p[1].n), (Some(0.3), None, 2));
        assert_eq!(p[1].range, "");
    }

    #[test]
    fn t_quantiles_fall_towards_the_normal() {
        assert_eq!(t975(1), 12.706);
        assert_eq!(t975(30), 2.042);
        assert!((t975(60) - 2.000).abs() < 0.002, "{}", t975(60));
        assert!((t975(120) - 1.980).abs() < 0.002, "{}", t975(120));
        assert!(t975(0).is_nan());
    }
}
