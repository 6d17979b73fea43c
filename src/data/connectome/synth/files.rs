//! Writing the synthetic cohort's files (docs/clg-ode-model.md §1 formats) and scoring the identity and oracle
//! forecasts on what was written.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::Context;
use rand_chacha::ChaCha8Rng;

use super::truth::{self, MORPH_RULE, SITES, Subject, Template, normal};
use crate::data::connectome::morph::{DEFAULT_METRICS, MORPH_PREFIX};
use crate::data::connectome::naming::{SES_2Y, SES_4Y, SES_BASELINE};

pub(super) const SESSIONS: [&str; 3] = [SES_BASELINE, SES_2Y, SES_4Y];

/// What one subject's files hold, for the summary.
pub(super) struct Written {
    /// Fraction of positive upper-triangle entries, per scan.
    pub densities: Vec<f64>,
    /// With two visits or more: sc_log_mse (log1p domain, mean over the upper triangle) of the
    /// identity forecast and of the oracle forecast of visit 1 from visit 0.
    pub forecast_mse: Option<(f64, f64)>,
}

/// Write one subject's SC and morphology files under `root`.
pub(super) fn write_subject(
    root: &Path,
    t: &Template,
    s: &Subject,
    sigma: f64,
    rng: &mut ChaCha8Rng,
) -> anyhow::Result<Written> {
    let nodes = t.rois.len();
    let mut densities = Vec::new();
    // Observed upper triangles (f32, as written) of the first two visits.
    let mut observed: Vec<Vec<f32>> = Vec::new();
    for &(session, age) in &s.visits {
        let mut upper = Vec::with_capacity(s.edges.len());
        let mut k = 0;
        for i in 0..nodes {
            for j in i + 1..nodes {
                let w = truth::true_log_weight(t, s, k, (i, j), age)
                    .map_or(0.0, |lw| (lw + sigma * normal(rng)).exp() as f32);
                upper.push(w);
                k += 1;
            }
        }
        let positive = upper.iter().filter(|w| **w > 0.0).count();
        densities.push(positive as f64 / upper.len().max(1) as f64);
        let ses = SESSIONS[session];
        write_file(
            &root.join("sc").join(format!("{}_{ses}.csv", s.id)),
            sc_text(nodes, &upper).as_bytes(),
        )?;
        write_file(
            &root
                .join("morph")
                .join(ses)
                .join(SITES[s.site].0)
                .join(format!("{MORPH_PREFIX}{}.csv", s.id)),
            morph_text(t, s, age, rng).as_bytes(),
        )?;
        if observed.len() < 2 {
            observed.push(upper);
        }
    }
    let forecast_mse = (observed.len() == 2).then(|| {
        let (a0, a1) = (s.visits[0].1, s.visits[1].1);
        let dm = truth::maturity(a1) - truth::maturity(a0);
        let (mut identity, mut oracle) = (0.0, 0.0);
        let mut k = 0;
        for i in 0..nodes {
            for j in i + 1..nodes {
                let (w0, w1) = (observed[0][k], observed[1][k]);
                let still = truth::true_log_weight(t, s, k, (i, j), a1).is_some();
                let guess = if w0 > 0.0 && still {
                    (f64::from(w0).ln() + truth::edge_rate(t, (i, j)) * truth::gain(s) * dm).exp()
                        as f32
                } else {
                    0.0
                };
                let target = f64::from(w1.ln_1p());
                identity += (f64::from(w0.ln_1p()) - target).powi(2);
                oracle += (f64::from(guess.ln_1p()) - target).powi(2);
                k += 1;
            }
        }
        let m = k.max(1) as f64;
        (identity / m, oracle / m)
    });
    Ok(Written {
        densities,
        forecast_mse,
    })
}

/// A symmetric N×N CSV matrix from its upper triangle (row-major), zero diagonal.
fn sc_text(nodes: usize, upper: &[f32]) -> String {
    let index = |i: usize, j: usize| i * nodes - i * (i + 1) / 2 + (j - i - 1);
    let mut text = String::with_capacity(nodes * nodes * 4);
    for i in 0..nodes {
        for j in 0..nodes {
            if j > 0 {
                text.push(',');
            }
            let v = match i.cmp(&j) {
                std::cmp::Ordering::Less => upper[index(i, j)],
                std::cmp::Ordering::Greater => upper[index(j, i)],
                std::cmp::Ordering::Equal => 0.0,
            };
            if v == 0.0 {
                text.push('0');
            } else {
                write!(text, "{v}").expect("write to String");
            }
        }
        text.push('\n');
    }
    text
}

/// One morphology row: `SubjectID,<roi>_<metric>,…`.
fn morph_text(t: &Template, s: &Subject, age: f64, rng: &mut ChaCha8Rng) -> String {
    let mut text = String::from("SubjectID");
    for roi in &t.rois {
        for metric in DEFAULT_METRICS {
            write!(text, ",{roi}_{metric}").expect("write to String");
        }
    }
    write!(text, "\n{}", s.id).expect("write to String");
    for (roi_rule, offsets) in t.morph.iter().zip(&s.morph_offsets) {
        for ((&(base, slope_mult), offset), rule) in roi_rule.iter().zip(offsets).zip(&MORPH_RULE) {
            let [_, _, _, slope, noise] = *rule;
            let v = base + offset + slope * slope_mult * (age - 12.0) + noise * normal(rng);
            write!(text, ",{}", v as f32).expect("write to String");
        }
    }
    text.push('\n');
    text
}

/// `subject_info_sc.csv`: `subid,sesid,scanid,age,sex,siteid,icv`, one row per scan.
pub(super) fn write_table(root: &Path, subjects: &[Subject]) -> anyhow::Result<()> {
    let mut table = String::from("subid,sesid,scanid,age,sex,siteid,icv\n");
    for s in subjects {
        for &(session, age) in &s.visits {
            let ses = SESSIONS[session];
            writeln!(
                table,
                "{id},{ses},{id}_{ses},{age:.4},{sex},{site},{icv:.0}",
                id = s.id,
                sex = if s.female { "F" } else { "M" },
                site = SITES[s.site].0,
                icv = s.icv
            )
            .expect("write to String");
        }
    }
    write_file(&root.join("subject_info_sc.csv"), table.as_bytes())
}

pub(super) fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    gated(|| {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        let mut f =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        f.write_all(bytes)
            .with_context(|| format!("writing {}", path.display()))
    })
}

/// Every change a cohort writer makes to the file system passes this gate (shared: writers
/// run side by side); [`stop_writes`] closes it for good.
static GATE: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Runs `f`, one change of a cohort being written, unless [`stop_writes`] was called: then it
/// waits for the end of the process.
pub(super) fn gated<R>(f: impl FnOnce() -> R) -> R {
    let _open = GATE
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    f()
}

/// Stops every cohort write of this process for good, once the writes in flight are done: for
/// a signal handler that removes a cohort being written and ends the process (no writer can
/// create a folder again after the removal).
pub(crate) fn stop_writes() {
    std::mem::forget(
        GATE.write()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
}

/// `synth_truth.json`: what the cohort was drawn from, for scripts/ceiling.py's Bayes ceiling.
/// The template's base log weights are per upper-triangle pair in atlas order (row-major, the
/// order of the written matrices), `null` off the template; every constant of the subject and
/// scan draws is named, so the posterior never copies a number from the Rust source.
pub(super) fn write_truth(root: &Path, t: &Template, seed: u64, sigma: f64) -> anyhow::Result<()> {
    use super::truth::*;
    let truth = serde_json::json!({
        "generator": "trainer synth-connectome",
        "seed": seed,
        "nodes": t.rois.len(),
        "noise_sigma": sigma,
        "constants": {
            "global_rate": GLOBAL_RATE,
            "rate": RATE,
            "theta": THETA,
            "sex_effect": SEX_EFFECT,
            "age_scale": AGE_SCALE,
            "age_origin": 9.0,
            "prune_log_weight": PRUNE_LOG_WEIGHT,
            "edge_keep": EDGE_KEEP,
            "edge_offset_sd": EDGE_OFFSET_SD,
            "global_offset_sd": GLOBAL_OFFSET_SD,
            "extra_edge_prob": EXTRA_EDGE_PROB,
            "extra_edge_mean": EXTRA_EDGE_MEAN,
            "extra_edge_sd": EXTRA_EDGE_SD,
        },
        "site_gain": SITES.iter().map(|(s, g)| (s.to_string(), *g)).collect::<std::collections::BTreeMap<_, _>>(),
        "maturity_v": t.v,
        "template_log_weight": t.edges,
    });
    write_file(
        &root.join("synth_truth.json"),
        serde_json::to_string(&truth)?.as_bytes(),
    )
}
