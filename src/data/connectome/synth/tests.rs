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

#[test]
fn the_truth_file_holds_the_template_it_was_drawn_from() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c");
    let s = write_synthetic_cohort(&out, 3, 12, 4).unwrap();
    let text = std::fs::read_to_string(out.join("synth_truth.json")).unwrap();
    let truth: serde_json::Value = serde_json::from_str(&text).unwrap();
    let t = truth::template(12, 4);
    let edges: Vec<Option<f64>> =
        serde_json::from_value(truth["template_log_weight"].clone()).unwrap();
    assert_eq!(edges, t.edges);
    assert_eq!(edges.len(), 12 * 11 / 2);
    let v: Vec<f64> = serde_json::from_value(truth["maturity_v"].clone()).unwrap();
    assert_eq!(v, t.v);
    assert_eq!(truth["noise_sigma"].as_f64(), Some(s.noise_sigma));
    assert_eq!(
        truth["constants"]["edge_keep"].as_f64(),
        Some(truth::EDGE_KEEP)
    );
    assert_eq!(truth["site_gain"]["site05"].as_f64(), Some(SITES[4].1));
}
