//! A synthetic ABCD-like cohort written in exactly the on-disk formats of spec §1, with a known
//! developmental rule, so that the whole pipeline can be run and checked without real data.
//!
//! Ground truth (all logs natural, ages in years, `a` = age − 12):
//! * A population template graph: node pairs inside one (hemisphere, network) module are edges
//!   with probability 0.35, other pairs with 0.13 (≈ 13–14 % density in the end).
//!   Each template edge has a log-weight μ ~ N(1.5, 0.7), an age slope g ~ N(0, 0.15) per year,
//!   and with probability 0.12 a developmental fade: half fade **in** (factor σ((age − onset)/0.4),
//!   onset ~ U(10, 14)), half fade **out** (σ((offset − age)/0.4)); a factor below 0.1 removes the
//!   edge (weight exactly 0).
//! * Per subject: each template edge kept with probability 0.92, a few subject-only edges
//!   (probability 0.008, μ ~ N(0.8, 0.4), no slope), a per-edge offset N(0, 0.25) and a global
//!   offset N(0, 0.1).
//! * Per scan: weight = exp(μ + offsets + g·a + ln factor + N(0, 0.05)) on the subject's edges.
//! * Morphology per ROI: base + subject offset + slope·a + small noise, with thickness thinning,
//!   area and GWC growing and curvature flat (per-ROI slopes vary by ±50 %).
//! * 1–3 visits (baseline, then 2- and 4-year follow-ups; a 2-visit subject skips the 2-year
//!   visit with probability 0.15), baseline age ~ U(9, 10.9), +2 years per follow-up visit ± 0.25,
//!   sex M/F, five sites, ICV ~ N(1.45e6, 1.2e5).
//!
//! Everything is drawn from ChaCha8 streams of `seed` (stream 0 for the template, stream s+1 for
//! subject s), so the output is identical for a seed whatever the thread count.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::dataset::CohortPaths;
use super::morph::{DEFAULT_METRICS, MORPH_PREFIX};
use super::naming::{SES_2Y, SES_4Y, SES_BASELINE};
use super::par_map;

const NETWORKS: [&str; 7] = [
    "Vis",
    "SomMot",
    "DorsAttn",
    "SalVentAttn",
    "Limbic",
    "Cont",
    "Default",
];
const SITES: [&str; 5] = ["site01", "site02", "site03", "site04", "site05"];
const SESSIONS: [&str; 3] = [SES_BASELINE, SES_2Y, SES_4Y];
/// Morphology: base, between-ROI spread, subject spread, age slope per year, noise.
const MORPH_RULE: [[f64; 5]; 4] = [
    [2.6, 0.3, 0.1, -0.03, 0.02],    // Thickness (mm): thins
    [900.0, 250.0, 40.0, 8.0, 5.0],  // Area (mm²): grows
    [0.12, 0.02, 0.003, 0.0, 0.002], // Curv: flat
    [0.2, 0.04, 0.01, 0.005, 0.003], // GWC: grows
];

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
}

#[derive(Clone, Copy)]
enum Fade {
    None,
    In(f64),
    Out(f64),
}

impl Fade {
    fn factor(self, age: f64) -> f64 {
        let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
        match self {
            Fade::None => 1.0,
            Fade::In(onset) => sigmoid((age - onset) / 0.4),
            Fade::Out(offset) => sigmoid((offset - age) / 0.4),
        }
    }
}

#[derive(Clone, Copy)]
struct EdgeRule {
    mu: f64,
    slope: f64,
    fade: Fade,
}

struct Template {
    rois: Vec<String>,
    /// Per upper-triangle pair (row-major), `None` when not a template edge.
    edges: Vec<Option<EdgeRule>>,
    /// Per ROI and metric: (base value, age-slope multiplier).
    morph: Vec<[(f64, f64); 4]>,
}

struct SubjectPlan {
    id: String,
    sex: &'static str,
    site: &'static str,
    icv: f64,
    visits: Vec<(usize, f64)>, // (session index, age)
}

fn normal(rng: &mut impl Rng) -> f64 {
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Schaefer-like ROI names (`LH_Vis_1`, …, `RH_Default_k`), in atlas order; their lexicographic
/// order differs from the atlas order, as with real data.
fn roi_names(nodes: usize) -> (Vec<String>, Vec<usize>) {
    let half = nodes.div_ceil(2);
    let mut counts = [[0usize; NETWORKS.len()]; 2];
    let mut names = Vec::with_capacity(nodes);
    let mut module = Vec::with_capacity(nodes);
    for i in 0..nodes {
        let (hemi, h, within, size) = if i < half {
            ("LH", 0, i, half)
        } else {
            ("RH", 1, i - half, nodes - half)
        };
        let net = within * NETWORKS.len() / size.max(1);
        counts[h][net] += 1;
        names.push(format!("{hemi}_{}_{}", NETWORKS[net], counts[h][net]));
        module.push(h * NETWORKS.len() + net);
    }
    (names, module)
}

fn template(nodes: usize, rng: &mut ChaCha8Rng) -> Template {
    let (rois, module) = roi_names(nodes);
    let mut edges = Vec::with_capacity(nodes * nodes.saturating_sub(1) / 2);
    for i in 0..nodes {
        for j in i + 1..nodes {
            let p = if module[i] == module[j] { 0.35 } else { 0.13 };
            let edge = rng.random_bool(p).then(|| {
                let fade = if rng.random_bool(0.12) {
                    let at = rng.random_range(10.0..14.0);
                    if rng.random_bool(0.5) {
                        Fade::In(at)
                    } else {
                        Fade::Out(at)
                    }
                } else {
                    Fade::None
                };
                EdgeRule {
                    mu: 1.5 + 0.7 * normal(rng),
                    slope: 0.15 * normal(rng),
                    fade,
                }
            });
            edges.push(edge);
        }
    }
    let morph = (0..nodes)
        .map(|_| {
            std::array::from_fn(|m| {
                let [base, spread, ..] = MORPH_RULE[m];
                (
                    base + spread * normal(rng),
                    1.0 + 0.5 * (2.0 * rng.random::<f64>() - 1.0),
                )
            })
        })
        .collect();
    Template { rois, edges, morph }
}

fn plan_subject(s: usize, rng: &mut ChaCha8Rng) -> SubjectPlan {
    let n_visits = match rng.random::<f64>() {
        x if x < 0.2 => 1,
        x if x < 0.6 => 2,
        _ => 3,
    };
    let sessions: Vec<usize> = match n_visits {
        1 => vec![0],
        2 if rng.random_bool(0.15) => vec![0, 2],
        2 => vec![0, 1],
        _ => vec![0, 1, 2],
    };
    let base_age = rng.random_range(9.0..10.9);
    let visits = sessions
        .into_iter()
        .map(|k| {
            let jitter = if k == 0 {
                0.0
            } else {
                rng.random_range(-0.25..0.25)
            };
            (k, base_age + 2.0 * k as f64 + jitter)
        })
        .collect();
    SubjectPlan {
        id: format!("sub-NDARINVS{:07}", s + 1),
        sex: if rng.random_bool(0.5) { "M" } else { "F" },
        site: SITES[rng.random_range(0..SITES.len())],
        icv: 1.45e6 + 1.2e5 * normal(rng),
        visits,
    }
}

/// Write one subject's SC and morphology files under `root`; returns the density of each scan.
fn write_subject(
    root: &Path,
    t: &Template,
    plan: &SubjectPlan,
    rng: &mut ChaCha8Rng,
) -> anyhow::Result<Vec<f64>> {
    let nodes = t.rois.len();
    // Subject graph: per pair Some((rule, offset)).
    let global = 0.1 * normal(rng);
    let subject_edges: Vec<Option<(EdgeRule, f64)>> = t
        .edges
        .iter()
        .map(|e| match e {
            Some(rule) if rng.random_bool(0.92) => Some((*rule, 0.25 * normal(rng))),
            Some(_) => None,
            None if rng.random_bool(0.008) => Some((
                EdgeRule {
                    mu: 0.8 + 0.4 * normal(rng),
                    slope: 0.0,
                    fade: Fade::None,
                },
                0.0,
            )),
            None => None,
        })
        .collect();
    let morph_offsets: Vec<[f64; 4]> = (0..nodes)
        .map(|_| std::array::from_fn(|m| MORPH_RULE[m][2] * normal(rng)))
        .collect();
    let mut densities = Vec::new();
    for &(session, age) in &plan.visits {
        let a = age - 12.0;
        let mut w = Array2::<f32>::zeros((nodes, nodes));
        let mut k = 0;
        let mut positive = 0usize;
        for i in 0..nodes {
            for j in i + 1..nodes {
                if let Some((rule, offset)) = subject_edges[k] {
                    let factor = rule.fade.factor(age);
                    if factor >= 0.1 {
                        let lw = rule.mu
                            + offset
                            + global
                            + rule.slope * a
                            + factor.ln()
                            + 0.05 * normal(rng);
                        let v = lw.exp() as f32;
                        w[(i, j)] = v;
                        w[(j, i)] = v;
                        positive += 1;
                    }
                }
                k += 1;
            }
        }
        densities.push(positive as f64 / k.max(1) as f64);
        let ses = SESSIONS[session];
        let mut text = String::with_capacity(nodes * nodes * 4);
        for row in w.outer_iter() {
            for (j, v) in row.iter().enumerate() {
                if j > 0 {
                    text.push(',');
                }
                if *v == 0.0 {
                    text.push('0');
                } else {
                    write!(text, "{v}").expect("write to String");
                }
            }
            text.push('\n');
        }
        write_file(
            &root.join("sc").join(format!("{}_{ses}.csv", plan.id)),
            text.as_bytes(),
        )?;

        let mut text = String::from("SubjectID");
        for roi in &t.rois {
            for metric in DEFAULT_METRICS {
                write!(text, ",{roi}_{metric}").expect("write to String");
            }
        }
        write!(text, "\n{}", plan.id).expect("write to String");
        for (roi_rule, offsets) in t.morph.iter().zip(&morph_offsets) {
            for ((&(base, slope_mult), offset), rule) in
                roi_rule.iter().zip(offsets).zip(&MORPH_RULE)
            {
                let [_, _, _, slope, noise] = *rule;
                let v = base + offset + slope * slope_mult * a + noise * normal(rng);
                write!(text, ",{}", v as f32).expect("write to String");
            }
        }
        text.push('\n');
        let dir = root.join("morph").join(ses).join(plan.site);
        write_file(
            &dir.join(format!("{MORPH_PREFIX}{}.csv", plan.id)),
            text.as_bytes(),
        )?;
    }
    Ok(densities)
}

fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let mut f =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    f.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))
}

/// Write a synthetic cohort of `subjects` subjects with `nodes`-node SC matrices under `out`:
/// `<out>/sc/<sub>_<ses>.csv`, `<out>/morph/<ses>/<site>/Schaefer400_Morphology_<sub>.csv`,
/// `<out>/subject_info_sc.csv` (columns `subid,sesid,scanid,age,sex,siteid,icv`) and
/// `<out>/synth_summary.json`. See the module docs for the ground-truth rule.
///
/// All files are first written into a hidden staging directory beside `out`, which is renamed
/// to `out` only when complete; on error it is removed, so no partial output is ever left.
/// `out` must not exist or be an empty directory. Deterministic for a seed.
pub fn write_synthetic_cohort(
    out: &Path,
    subjects: usize,
    nodes: usize,
    seed: u64,
) -> anyhow::Result<SynthSummary> {
    if subjects == 0 || nodes < 2 {
        bail!("a synthetic cohort needs at least 1 subject and 2 nodes (got {subjects}, {nodes})");
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

    let result = write_into(&staging, subjects, nodes, seed).and_then(|mut summary| {
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

fn write_into(
    root: &Path,
    subjects: usize,
    nodes: usize,
    seed: u64,
) -> anyhow::Result<SynthSummary> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let t = template(nodes, &mut rng);
    let streams: Vec<usize> = (0..subjects).collect();
    let results = par_map(&streams, |&s| -> anyhow::Result<(SubjectPlan, Vec<f64>)> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(s as u64 + 1);
        let plan = plan_subject(s, &mut rng);
        let densities = write_subject(root, &t, &plan, &mut rng)?;
        Ok((plan, densities))
    });
    let mut table = String::from("subid,sesid,scanid,age,sex,siteid,icv\n");
    let mut densities = Vec::new();
    let mut sites = std::collections::BTreeSet::new();
    for r in results {
        let (plan, d) = r?;
        densities.extend(d);
        sites.insert(plan.site.to_string());
        for &(session, age) in &plan.visits {
            let ses = SESSIONS[session];
            writeln!(
                table,
                "{id},{ses},{id}_{ses},{age:.4},{sex},{site},{icv:.0}",
                id = plan.id,
                sex = plan.sex,
                site = plan.site,
                icv = plan.icv
            )
            .expect("write to String");
        }
    }
    write_file(&root.join("subject_info_sc.csv"), table.as_bytes())?;
    let scans = densities.len();
    Ok(SynthSummary {
        paths: CohortPaths::under(root),
        subjects,
        scans,
        nodes,
        seed,
        sites: sites.into_iter().collect(),
        density_mean: densities.iter().sum::<f64>() / scans as f64,
        density_min: densities.iter().copied().fold(f64::INFINITY, f64::min),
        density_max: densities.iter().copied().fold(0.0, f64::max),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::connectome::dataset::{LoadOptions, load_cohort};

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
        let (atlas, _) = roi_names(40);
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
    fn ages_drive_the_edges() {
        // Forecasting should beat "nothing changes": the true change between visits is larger
        // than the measurement noise, and it follows the per-edge slope (same sign on average).
        let dir = tempfile::tempdir().unwrap();
        let s = write_synthetic_cohort(&dir.path().join("c"), 30, 30, 5).unwrap();
        let (c, _) = load_cohort(&s.paths, &LoadOptions::default()).unwrap();
        let mut changes = 0.0;
        let mut count = 0;
        for subj in c.subjects.iter().filter(|s| s.scans.len() == 3) {
            let (a0, a2) = (subj.scans[0].a_log(), subj.scans[2].a_log());
            for (x, y) in a0.iter().zip(a2.iter()) {
                if *x > 0.0 && *y > 0.0 {
                    changes += f64::from((y - x).abs());
                    count += 1;
                }
            }
        }
        assert!(count > 0);
        // 4 years × |slope| (0.15·√(2/π) ≈ 0.12/yr) in log-weight ≫ noise 0.05·√2: in log1p
        // units the mean absolute change must clearly exceed the noise-only level (~0.05).
        assert!(changes / count as f64 > 0.12, "{}", changes / count as f64);
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
