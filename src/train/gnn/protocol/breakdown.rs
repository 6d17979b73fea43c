//! Test results broken down: every test subject's metrics for the model and the identity
//! (`per_subject.csv`), and the strata the authors report (`strata.json`): Δt terciles with
//! their thresholds and n, and the visit horizons (baseline → 2-year, baseline → 4-year).

use std::path::Path;

use anyhow::Result;
use ndarray::Array2;
use serde_json::{Value, json};

use super::fold_data::{FoldData, delta_t};
use crate::data::connectome::par_map;
use crate::files::write_atomic;
use crate::metrics::Skill;
use crate::metrics::sc::{ScMetrics, sc_metrics};
use crate::metrics::topology::ExactTopology;

/// A model's predictions of visit 1 (one per subject, as [`per_subject`] takes them) and, for
/// CLG-ODE with the innovation module, each forecast's new-edge precision, recall and AUPRC
/// (empty or `None`: undefined).
#[derive(Debug, Clone, Default)]
pub(crate) struct Predictions {
    pub matrices: Vec<Array2<f32>>,
    pub new_edges: Vec<Option<[f64; 3]>>,
    /// Per prediction, a graph scored instead of the matrix for the topology columns (ECC,
    /// degree, strength, Betti curves): `--forecast graph`. Empty or `None`: the matrix.
    pub graphs: Vec<Option<Array2<f32>>>,
}

impl From<Vec<Array2<f32>>> for Predictions {
    fn from(matrices: Vec<Array2<f32>>) -> Self {
        Self {
            matrices,
            new_edges: Vec::new(),
            graphs: Vec::new(),
        }
    }
}

/// One test subject's prediction, scored.
#[derive(Debug, Clone)]
pub(crate) struct SubjectScore {
    pub subject: String,
    pub start_scan: String,
    pub target_scan: String,
    pub start_session: String,
    pub target_session: String,
    pub start_age: f64,
    /// Years between start and target (0 for a reconstruction).
    pub dt: f64,
    pub n_visits: usize,
    pub sex: usize,
    pub site: usize,
    /// A forecast of visit 1 (else the reconstruction of a one-scan subject's visit 0).
    pub forecast: bool,
    pub model: ScMetrics,
    pub identity: ScMetrics,
}

/// Scores `preds` (one per subject of `subjects`: visit 1 from visit 0, or visit 0 for a
/// subject with one scan) and the identity forecast, subject by subject.
pub(crate) fn per_subject(
    data: &FoldData,
    subjects: &[usize],
    preds: &Predictions,
    topo_bins: usize,
) -> Vec<SubjectScore> {
    let targets: Vec<usize> = subjects
        .iter()
        .map(|&s| usize::from(data.scans(s).len() > 1))
        .collect();
    per_subject_at(data, subjects, &targets, preds, topo_bins)
}

/// The test subjects with three visits or more (those with a visit-0 → visit-2 forecast).
pub(crate) fn three_visit_subjects(data: &FoldData, subjects: &[usize]) -> Vec<usize> {
    subjects
        .iter()
        .copied()
        .filter(|&s| data.scans(s).len() >= 3)
        .collect()
}

/// Scores `preds[i]` as the forecast of visit `targets[i]` of `subjects[i]` from its visit 0
/// (target 0: a reconstruction), beside the identity forecast.
pub(crate) fn per_subject_at(
    data: &FoldData,
    subjects: &[usize],
    targets: &[usize],
    preds: &Predictions,
    topo_bins: usize,
) -> Vec<SubjectScore> {
    let items: Vec<_> = subjects
        .iter()
        .zip(targets)
        .zip(&preds.matrices)
        .enumerate()
        .map(|(i, ((&s, &v), m))| {
            let graph = preds.graphs.get(i).and_then(Option::as_ref);
            (s, v, m, preds.new_edges.get(i).copied().flatten(), graph)
        })
        .collect();
    par_map(&items, |&(sub, visit, pred, new_edges, graph)| {
        let s = &data.cohort.subjects[sub];
        let scans = &s.scans;
        let (start_scan, target_scan) = (&scans[0], &scans[visit]);
        let (start, target) = (start_scan.a_raw.dense(), target_scan.a_raw.dense());
        let forecast = visit > 0;
        SubjectScore {
            subject: s.id.clone(),
            start_scan: start_scan.scan_id.clone(),
            target_scan: target_scan.scan_id.clone(),
            start_session: start_scan.session.clone(),
            target_session: target_scan.session.clone(),
            start_age: start_scan.age,
            dt: if forecast {
                delta_t(scans, 0, visit)
            } else {
                0.0
            },
            n_visits: scans.len(),
            sex: s.sex,
            site: s.site,
            forecast,
            model: {
                let m = sc_metrics(pred.view(), target.view(), start.view(), topo_bins);
                match graph {
                    Some(g) => m.with_topology_of(&sc_metrics(
                        g.view(),
                        target.view(),
                        start.view(),
                        topo_bins,
                    )),
                    None => m,
                }
                .with_new_edges(new_edges)
            },
            identity: sc_metrics(start.view(), target.view(), start.view(), topo_bins),
        }
    })
}

/// The exact Betti-curve distances `per_subject.csv` carries per side, after the SC metrics.
const EXACT: [&str; 2] = ["betti0_l1", "betti1_l1"];

/// Writes `per_subject.csv`: the subject columns, then `model_<metric>` and
/// `identity_<metric>` for every metric of `test_sc_metrics.json` and the exact Betti-curve
/// distances of `exact` (row by row, as `test_metrics.json`'s `exact_topology` averages them;
/// a row without one: empty cells).
pub(crate) fn write_per_subject(
    path: &Path,
    rows: &[SubjectScore],
    exact: &[(ExactTopology, ExactTopology)],
) -> Result<()> {
    write_atomic(path, |w| {
        let mut csv = csv::Writer::from_writer(w);
        let mut header: Vec<String> = [
            "subject",
            "start_scan",
            "target_scan",
            "start_age",
            "dt_years",
            "n_visits",
            "sex",
            "site",
            "forecast",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for side in ["model", "identity"] {
            header.extend(ScMetrics::NAMES.iter().map(|n| format!("{side}_{n}")));
            header.extend(EXACT.iter().map(|n| format!("{side}_{n}")));
        }
        csv.write_record(&header)?;
        for (i, r) in rows.iter().enumerate() {
            // Ids come from file names: a spreadsheet must not evaluate one as a formula.
            let text = |t: &str| crate::outputs::text::csv_cell(t).into_owned();
            let mut rec = vec![
                text(&r.subject),
                text(&r.start_scan),
                text(&r.target_scan),
                r.start_age.to_string(),
                r.dt.to_string(),
                r.n_visits.to_string(),
                r.sex.to_string(),
                r.site.to_string(),
                u8::from(r.forecast).to_string(),
            ];
            // Undefined (NaN) is an empty cell (NaN to pandas).
            let cell = |v: &f64| {
                if v.is_nan() {
                    String::new()
                } else {
                    v.to_string()
                }
            };
            let exact = exact.get(i);
            for (m, side) in [(&r.model, 0), (&r.identity, 1)] {
                rec.extend(m.values().iter().map(cell));
                let t = exact.map(|e| if side == 0 { &e.0 } else { &e.1 });
                let betti = t.map_or([f64::NAN; 2], |t| [t.betti0_l1, t.betti1_l1]);
                rec.extend(betti.iter().map(cell));
            }
            csv.write_record(&rec)?;
        }
        csv.flush()?;
        Ok(())
    })
}

/// numpy's default (linear) percentile of sorted values.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q / 100.0 * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Model, identity and skill over `rows` (nulls when empty).
fn stratum(rows: &[&SubjectScore]) -> Value {
    if rows.is_empty() {
        return json!({ "n": 0, "model": null, "identity": null, "skill": null });
    }
    let m: Vec<ScMetrics> = rows.iter().map(|r| r.model).collect();
    let b: Vec<ScMetrics> = rows.iter().map(|r| r.identity).collect();
    let (m, b) = (ScMetrics::mean(&m), ScMetrics::mean(&b));
    json!({
        "n": rows.len(), "model": m.to_map(), "identity": b.to_map(), "skill": Skill::of(&m, &b),
    })
}

/// The strata of the forecasts among `rows`: Δt terciles (short ≤ P33, long ≥ P67, with the
/// thresholds) and horizons by the start and target sessions; `far`: the visit-0 → visit-2
/// forecasts of the subjects with three visits (`None`: a model without a time input).
pub(crate) fn strata(rows: &[SubjectScore], far: Option<&[SubjectScore]>) -> Value {
    let forecasts: Vec<&SubjectScore> = rows.iter().filter(|r| r.forecast).collect();
    let mut dts: Vec<f64> = forecasts.iter().map(|r| r.dt).collect();
    dts.sort_by(f64::total_cmp);
    let (p33, p67) = (percentile(&dts, 100.0 / 3.0), percentile(&dts, 200.0 / 3.0));
    let pick = |f: &dyn Fn(f64) -> bool| -> Vec<&SubjectScore> {
        forecasts.iter().copied().filter(|r| f(r.dt)).collect()
    };
    let horizon = |from: &str, to: &str| -> Vec<&SubjectScore> {
        forecasts
            .iter()
            .copied()
            .filter(|r| r.start_session == from && r.target_session == to)
            .collect()
    };
    use crate::data::connectome::naming::{SES_2Y, SES_4Y, SES_BASELINE};
    json!({
        "population": "test subjects with a forecast (>= 2 visits): visit 0 -> visit 1",
        "n_forecasts": forecasts.len(),
        "dt_terciles": {
            "p33_years": p33, "p67_years": p67,
            "short": stratum(&pick(&|d| d <= p33)),
            "middle": stratum(&pick(&|d| d > p33 && d < p67)),
            "long": stratum(&pick(&|d| d >= p67)),
        },
        "horizons": {
            "note": "by the sessions of visit 0 and visit 1 (a subject whose visit 1 is the \
                     4-year scan counts as baseline->4-year; subjects with all three visits \
                     are scored on visit 1 here, and from visit 0 to visit 2 under \
                     baseline_to_4year_skipping_2year)",
            "baseline_to_2year": stratum(&horizon(SES_BASELINE, SES_2Y)),
            "baseline_to_4year": stratum(&horizon(SES_BASELINE, SES_4Y)),
            "baseline_to_4year_skipping_2year": match far {
                Some(far) => {
                    let far: Vec<&SubjectScore> = far
                        .iter()
                        .filter(|r| r.start_session == SES_BASELINE && r.target_session == SES_4Y)
                        .collect();
                    stratum(&far)
                }
                None => json!({
                    "n": 0, "model": null, "identity": null, "skill": null,
                    "note": "this model has no time input: it predicts only the next visit",
                }),
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentiles_interpolate_as_numpy() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 50.0), 2.5);
        assert!((percentile(&v, 100.0 / 3.0) - 2.0).abs() < 1e-12);
        assert_eq!(percentile(&v, 100.0), 4.0);
    }
}
