//! A synthetic ABCD-like cohort written in exactly the on-disk formats of docs/clg-ode-model.md §1, with known
//! developmental dynamics, so that the whole pipeline can be run, and a forecast judged against
//! the best one possible, without real data.
//!
//! Ground truth (`truth`; logs natural, ages in years):
//! * Each node has a maturity v (by network: Default 0.85, Cont 0.8, SalVentAttn 0.65,
//!   DorsAttn 0.6, Vis 0.45, SomMot 0.35, Limbic 0.3, ± N(0, 0.05)); mature nodes are hubs,
//!   with hub factor f = (0.5 + v)/1.07.
//! * A population template graph on Schaefer-like ROIs (two hemispheres × seven networks):
//!   pairs inside one module are edges with probability 0.35·f_i·f_j, others with 0.13·f_i·f_j
//!   (≈ 14 % density); each template edge has a base log weight
//!   N(1.2, 0.7) + 0.4·ln(f_i·f_j).
//! * **Dynamics**: an edge's log weight changes at `0.06 + 0.25·(v_i·v_j − 0.45)` per year at
//!   age 9: every connection strengthens a little (white matter matures as a whole), edges
//!   between associative networks **grow** faster, edges between sensory and limbic ones
//!   **decline**. The rate is scaled by the subject's **sex**
//!   (females ×1.3, males ×0.7) and **site** (×0.8 … ×1.2 over five sites), and slowing with
//!   **age** (rate ∝ exp(−(age − 9)/6)). An edge whose true log weight falls below −0.9 is
//!   **pruned** (weight 0).
//! * Per subject: each template edge kept with probability 0.92, a few subject-only edges
//!   (probability 0.008, log weight N(0.5, 0.4)), per-edge offsets N(0, 0.25) and a global
//!   offset N(0, 0.1).
//! * Per scan: observed log weight = true log weight + N(0, σ) on the subject's present edges.
//!   **Scan noise** σ follows from `snr` = E\[Δ²\]/(2σ²), Δ = the true change of an average
//!   template edge over two years from age 10: σ = rms(Δ)/√(2·snr). A forecast that knew the
//!   true change would err by the two scans' noise only, the identity by the change too, so the
//!   best skill is about snr/(1 + snr). The summary records the exact figures on the written
//!   cohort: `identity_sc_log_mse`, `oracle_sc_log_mse` (the observed first visit moved by the
//!   true change, pruned edges removed) and `oracle_skill`, over the 0→1 forecasts.
//! * Morphology per ROI: base + subject offset + slope·(age − 12) + small noise (thickness
//!   thins, area and GWC grow, curvature flat).
//! * 1–3 visits (baseline, then 2- and 4-year follow-ups; a 2-visit subject skips the 2-year
//!   visit with probability 0.15), baseline age ~ U(9, 10.9), +2 years per follow-up ± 0.25,
//!   sex M/F, five sites, ICV ~ N(1.45e6, 1.2e5).
//!
//! Everything is drawn from ChaCha8 streams of `seed` (stream 0 for the template, stream s+1 for
//! subject s), so the output is identical for a seed whatever the thread count.

mod files;
mod truth;

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::dataset::CohortPaths;
use super::par_map;
pub(crate) use files::stop_writes;
use files::{write_file, write_subject, write_table, write_truth};
#[cfg(test)]
use truth::NETWORKS;
pub(crate) use truth::SITES;

/// What the generator is asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SynthOptions {
    pub subjects: usize,
    pub nodes: usize,
    pub seed: u64,
    /// Signal-to-noise ratio of the two-year change (see the module docs).
    pub snr: f64,
}

impl SynthOptions {
    /// The default SNR of `trainer synth-connectome`.
    pub(crate) const DEFAULT_SNR: f64 = 4.0;
}

/// What [`write_synthetic_cohort`] wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SynthSummary {
    /// The three inputs to pass to the loader.
    pub paths: CohortPaths,
    pub subjects: usize,
    pub scans: usize,
    pub nodes: usize,
    pub seed: u64,
    /// Sites that occur in the subject table.
    pub sites: Vec<String>,
    /// Fraction of positive upper-triangle entries per scan: mean, min, max.
    pub density_mean: f64,
    pub density_min: f64,
    pub density_max: f64,
    pub snr: f64,
    /// Scan noise σ (log weight) and the rms two-year change it was derived from.
    pub noise_sigma: f64,
    pub rms_change_2y: f64,
    /// Over the subjects with two visits or more (visit 0 → visit 1), averaged over subjects:
    /// sc_log_mse of the identity forecast and of the oracle forecast, and the oracle's skill
    /// 1 − oracle/identity (the best a forecast from the noisy first scan can expect).
    pub forecast_pairs: usize,
    pub identity_sc_log_mse: f64,
    pub oracle_sc_log_mse: f64,
    pub oracle_skill: f64,
}

/// [`write_synthetic_cohort_with`] at the default SNR.
pub(crate) fn write_synthetic_cohort(
    out: &Path,
    subjects: usize,
    nodes: usize,
    seed: u64,
) -> anyhow::Result<SynthSummary> {
    write_synthetic_cohort_with(
        out,
        &SynthOptions {
            subjects,
            nodes,
            seed,
            snr: SynthOptions::DEFAULT_SNR,
        },
    )
}

/// Write a synthetic cohort of `subjects` subjects with `nodes`-node SC matrices under `out`:
/// `<out>/sc/<sub>_<ses>.csv`, `<out>/morph/<ses>/<site>/Schaefer400_Morphology_<sub>.csv`,
/// `<out>/subject_info_sc.csv` (columns `subid,sesid,scanid,age,sex,siteid,icv`) and
/// `<out>/synth_summary.json` and `<out>/synth_truth.json` (the template and constants it was
/// drawn from). See the module docs for the ground truth.
///
/// All files are first written into a hidden staging directory beside `out`, which is renamed
/// to `out` only when complete; on error it is removed, so no partial output is ever left.
/// `out` must not exist or be an empty directory. Deterministic for a seed.
pub(crate) fn write_synthetic_cohort_with(
    out: &Path,
    o: &SynthOptions,
) -> anyhow::Result<SynthSummary> {
    let (subjects, nodes) = (o.subjects, o.nodes);
    if subjects == 0 || nodes < 2 {
        bail!("a synthetic cohort needs at least 1 subject and 2 nodes (got {subjects}, {nodes})");
    }
    if !(o.snr > 0.0 && o.snr.is_finite()) {
        bail!("--snr must be a positive number, got {}", o.snr);
    }
    if out.exists() {
        let empty = std::fs::read_dir(out)
            .with_context(|| format!("{} exists and is not a readable directory", out.display()))?
            .next()
            .is_none();
        if !empty {
            bail!(
                "{} exists and is not empty; refusing to overwrite it",
                out.display()
            );
        }
    }
    let name = out
        .file_name()
        .with_context(|| format!("{} has no final path component", out.display()))?
        .to_string_lossy()
        .into_owned();
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    files::gated(|| std::fs::create_dir_all(&parent))
        .with_context(|| format!("creating {}", parent.display()))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let staging = parent.join(format!(".{name}.synth-tmp-{}-{nanos}", std::process::id()));
    files::gated(|| std::fs::create_dir(&staging))
        .with_context(|| format!("creating {}", staging.display()))?;

    let result = write_into(&staging, o).and_then(|mut summary| {
        summary.paths = CohortPaths::under(out);
        write_file(
            &staging.join("synth_summary.json"),
            serde_json::to_string_pretty(&summary)?.as_bytes(),
        )?;
        if out.exists() {
            std::fs::remove_dir(out)
                .with_context(|| format!("replacing empty {}", out.display()))?;
        }
        files::gated(|| std::fs::rename(&staging, out))
            .with_context(|| format!("renaming {} to {}", staging.display(), out.display()))?;
        Ok(summary)
    });
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    result
}

fn write_into(root: &Path, o: &SynthOptions) -> anyhow::Result<SynthSummary> {
    let t = truth::template(o.nodes, o.seed);
    let rms = truth::rms_change(&t, 2.0);
    let sigma = rms / (2.0 * o.snr).sqrt();
    let streams: Vec<usize> = (0..o.subjects).collect();
    let results = par_map(
        &streams,
        |&s| -> anyhow::Result<(truth::Subject, files::Written)> {
            let mut rng = ChaCha8Rng::seed_from_u64(o.seed);
            rng.set_stream(s as u64 + 1);
            let subject = truth::subject(&t, s, &mut rng);
            let written = write_subject(root, &t, &subject, sigma, &mut rng)?;
            Ok((subject, written))
        },
    );
    let mut subjects = Vec::new();
    let (mut densities, mut identity, mut oracle) = (Vec::new(), Vec::new(), Vec::new());
    for r in results {
        let (subject, w) = r?;
        densities.extend(w.densities);
        if let Some((i, o)) = w.forecast_mse {
            identity.push(i);
            oracle.push(o);
        }
        subjects.push(subject);
    }
    write_table(root, &subjects)?;
    write_truth(root, &t, o.seed, sigma)?;
    let sites: std::collections::BTreeSet<String> = subjects
        .iter()
        .map(|s| SITES[s.site].0.to_string())
        .collect();
    let scans = densities.len();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let (id, or) = (mean(&identity), mean(&oracle));
    Ok(SynthSummary {
        paths: CohortPaths::under(root),
        subjects: o.subjects,
        scans,
        nodes: o.nodes,
        seed: o.seed,
        sites: sites.into_iter().collect(),
        density_mean: mean(&densities),
        density_min: densities.iter().copied().fold(f64::INFINITY, f64::min),
        density_max: densities.iter().copied().fold(0.0, f64::max),
        snr: o.snr,
        noise_sigma: sigma,
        rms_change_2y: rms,
        forecast_pairs: identity.len(),
        identity_sc_log_mse: id,
        oracle_sc_log_mse: or,
        oracle_skill: if id > 0.0 { 1.0 - or / id } else { f64::NAN },
    })
}

#[cfg(test)]
mod tests;
