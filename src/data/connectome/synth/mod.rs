//! A synthetic ABCD-like cohort written in exactly the on-disk formats of docs/clg-ode-model.md §1, with known
//! developmental dynamics, so that the whole pipeline can be run, and a forecast judged against
//! the best one possible, without real data.
//!
//! Ground truth ([`truth`]; logs natural, ages in years):
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
//!   **Scan noise** σ follows from `snr` = E[Δ²]/(2σ²), Δ = the true change of an average
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
use files::{write_file, write_subject, write_table};
pub use truth::{NETWORKS, PRUNE_LOG_WEIGHT, SITES};

/// What the generator is asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SynthOptions {
    pub subjects: usize,
    pub nodes: usize,
    pub seed: u64,
    /// Signal-to-noise ratio of the two-year change (see the module docs).
    pub snr: f64,
}

impl SynthOptions {
    /// The default SNR of `trainer synth-connectome`.
    pub const DEFAULT_SNR: f64 = 4.0;
}

/// What [`write_synthetic_cohort`] wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SynthSummary {
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
pub fn write_synthetic_cohort(
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
/// `<out>/synth_summary.json`. See the module docs for the ground truth.
///
/// All files are first written into a hidden staging directory beside `out`, which is renamed
/// to `out` only when complete; on error it is removed, so no partial output is ever left.
/// `out` must not exist or be an empty directory. Deterministic for a seed.
pub fn write_synthetic_cohort_with(out: &Path, o: &SynthOptions) -> anyhow::Result<SynthSummary> {
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
    std::fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let staging = parent.join(format!(".{name}.synth-tmp-{}-{nanos}", std::process::id()));
    std::fs::create_dir(&staging).with_context(|| format!("creating {}", staging.display()))?;

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
        std::fs::rename(&staging, out)
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
mod tests {
    use super::*;
    use crate::data::connectome::dataset::{LoadOptions, load_cohort};
    use crate::data::connectome::morph::DEFAULT_METRICS;

    fn read_tree(root: &Path) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.file_name().unwrap() != "synth_summary.json" {
                    let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                    out.push((rel, std::fs::read(&p).unwrap()));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn round_trips_through_the_readers() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("cohort");
        let summary = write_synthetic_cohort(&out, 24, 40, 11).unwrap();
        assert_eq!(summary.paths, CohortPaths::under(&out));
        assert!(
            summary.density_min >= 0.08 && summary.density_max <= 0.22,
            "{summary:?}"
        );
        assert!(
            summary.density_mean >= 0.10 && summary.density_mean <= 0.20,
            "{summary:?}"
        );
        assert!(summary.sites.len() >= 3);
        let (c, report) = load_cohort(&summary.paths, &LoadOptions::default()).unwrap();
        assert_eq!(c.subjects.len(), 24);
        assert_eq!(c.n_scans(), summary.scans);
        assert_eq!((c.n_nodes, c.n_metrics()), (40, 4));
        assert_eq!(c.metrics, DEFAULT_METRICS);
        assert_eq!(c.site_vocab, summary.sites.len() + 1);
        assert!(report.scans_without_morph.is_empty() && report.subjects_dropped.is_empty());
        assert!(report.scans_not_in_table.is_empty() && report.ages_not_finite.is_empty());
        assert!(report.non_canonical_sessions.is_empty());
        assert_eq!(report.morph_nan_cells, 0);
        let mut lengths = [0usize; 4];
        for s in &c.subjects {
            lengths[s.scans.len()] += 1;
            assert!(s.sex == 1 || s.sex == 2);
            assert!(s.site >= 1);
            for w in s.scans.windows(2) {
                assert!(w[1].age > w[0].age);
            }
            for scan in &s.scans {
                assert!((9.0..15.5).contains(&scan.age), "{}", scan.age);
                assert!(scan.age_from_table);
                assert!(scan.x.column(0).iter().all(|v| (1.0..4.0).contains(v)));
            }
        }
        assert!(
            lengths[1] > 0 && lengths[2] > 0 && lengths[3] > 0,
            "{lengths:?}"
        );
        // Lexicographic ROI order differs from the atlas order.
        let (atlas, _, _) = truth::roi_names(40);
        assert_ne!(c.rois, atlas);
    }

    #[test]
    fn deterministic_and_refuses_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let a = write_synthetic_cohort(&dir.path().join("a"), 5, 16, 9).unwrap();
        let b = write_synthetic_cohort(&dir.path().join("b"), 5, 16, 9).unwrap();
        let c = write_synthetic_cohort(&dir.path().join("c"), 5, 16, 10).unwrap();
        let (ta, tb, tc) = (
            read_tree(&dir.path().join("a")),
            read_tree(&dir.path().join("b")),
            read_tree(&dir.path().join("c")),
        );
        assert_eq!(ta, tb);
        assert_ne!(ta, tc);
        assert_eq!(a.scans, b.scans);
        let _ = c;
        let err = write_synthetic_cohort(&dir.path().join("a"), 5, 16, 9).unwrap_err();
        assert!(err.to_string().contains("not empty"), "{err}");
        // An existing empty directory is fine; no staging directory is left behind.
        std::fs::create_dir(dir.path().join("empty")).unwrap();
        write_synthetic_cohort(&dir.path().join("empty"), 2, 8, 1).unwrap();
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains("synth-tmp")), "{names:?}");
        assert!(write_synthetic_cohort(&dir.path().join("x"), 0, 8, 1).is_err());
    }

    #[test]
    fn ages_drive_the_edges_and_an_oracle_beats_the_identity() {
        // Edges between associative networks (Default, Cont) grow with age, edges between
        // sensory and limbic ones shrink; the oracle forecast (true change) beats the identity
        // by about snr/(1 + snr).
        let dir = tempfile::tempdir().unwrap();
        let s = write_synthetic_cohort(&dir.path().join("c"), 30, 60, 5).unwrap();
        assert!(s.forecast_pairs >= 15, "{s:?}");
        assert!(
            s.noise_sigma > 0.0 && s.rms_change_2y > s.noise_sigma,
            "{s:?}"
        );
        let expected = s.snr / (1.0 + s.snr);
        assert!(
            s.oracle_skill > 0.5 * expected && s.oracle_skill < 1.0,
            "oracle skill {} (about {expected} expected): {s:?}",
            s.oracle_skill
        );
        let (c, _) = load_cohort(&s.paths, &LoadOptions::default()).unwrap();
        // SC rows are in atlas order (c.rois is the morphology's lexicographic order).
        let (_, _, network) = truth::roi_names(c.n_nodes);
        let networks: Vec<&str> = network.iter().map(|&k| NETWORKS[k].0).collect();
        let (mut grow, mut shrink) = ((0.0, 0usize), (0.0, 0usize));
        for subj in c.subjects.iter().filter(|s| s.scans.len() == 3) {
            let (a0, a2) = (subj.scans[0].a_log(), subj.scans[2].a_log());
            for i in 0..c.n_nodes {
                for j in i + 1..c.n_nodes {
                    let (x, y) = (a0[(i, j)], a2[(i, j)]);
                    if x <= 0.0 || y <= 0.0 {
                        continue;
                    }
                    let pair = (networks[i], networks[j]);
                    let d = f64::from(y - x);
                    match pair {
                        ("Default" | "Cont", "Default" | "Cont") => {
                            grow.0 += d;
                            grow.1 += 1;
                        }
                        ("Limbic" | "SomMot", "Limbic" | "SomMot") => {
                            shrink.0 += d;
                            shrink.1 += 1;
                        }
                        _ => {}
                    }
                }
            }
        }
        assert!(grow.1 > 0 && shrink.1 > 0);
        assert!(grow.0 / grow.1 as f64 > 0.05, "{grow:?}");
        assert!(shrink.0 / (shrink.1 as f64) < -0.02, "{shrink:?}");
        // A lower SNR means more scan noise and a lower best skill.
        let noisy = write_synthetic_cohort_with(
            &dir.path().join("noisy"),
            &SynthOptions {
                subjects: 30,
                nodes: 60,
                seed: 5,
                snr: 0.5,
            },
        )
        .unwrap();
        assert!(noisy.noise_sigma > s.noise_sigma);
        assert!(noisy.oracle_skill < s.oracle_skill, "{noisy:?}");
    }

    #[test]
    fn full_size_is_fast() {
        let dir = tempfile::tempdir().unwrap();
        let t = std::time::Instant::now();
        let s = write_synthetic_cohort(&dir.path().join("c"), 60, 400, 42).unwrap();
        let secs = t.elapsed().as_secs_f64();
        assert!(s.scans >= 60);
        // Generous bound for debug builds on two cores; release takes well under a second.
        assert!(secs < 60.0, "{secs} s");
    }
}
