//! The ground truth of the synthetic cohort: a population template, node maturation rates, and
//! every subject's true log weights at any age (see the module docs of [`super`]).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Networks of the Schaefer-like atlas, with their maturity v: an edge's log weight changes at
/// GLOBAL_RATE + RATE·(v_i·v_j − THETA) per year (at age 9), so edges between associative networks
/// strengthen and edges between sensory or limbic nodes weaken (and may be pruned).
pub(crate) const NETWORKS: [(&str, f64); 7] = [
    ("Vis", 0.45),
    ("SomMot", 0.35),
    ("DorsAttn", 0.6),
    ("SalVentAttn", 0.65),
    ("Limbic", 0.3),
    ("Cont", 0.8),
    ("Default", 0.85),
];
/// Log weight per year at age 9 of an edge with v_i·v_j − THETA = 1.
pub(super) const RATE: f64 = 0.25;
/// Log weight per year at age 9 that every edge gains (white matter matures as a whole).
pub(super) const GLOBAL_RATE: f64 = 0.06;
pub(super) const THETA: f64 = 0.45;
/// Sites and their gain on the rate of change (scanner and protocol differences).
pub(crate) const SITES: [(&str, f64); 5] = [
    ("site01", 0.8),
    ("site02", 0.9),
    ("site03", 1.0),
    ("site04", 1.1),
    ("site05", 1.2),
];
/// Females mature this much faster, males this much slower.
pub(super) const SEX_EFFECT: f64 = 0.3;
/// The rate decays with age: rate(a) = rate(9)·exp(−(a − 9)/AGE_SCALE).
pub(super) const AGE_SCALE: f64 = 6.0;
/// An edge whose true log weight falls below this is pruned (weight 0).
pub(crate) const PRUNE_LOG_WEIGHT: f64 = -0.9;
/// A subject keeps each template edge with this probability.
pub(super) const EDGE_KEEP: f64 = 0.92;
/// Sd of a subject's own offset on a template edge's log weight.
pub(super) const EDGE_OFFSET_SD: f64 = 0.25;
/// Sd of a subject's global offset on every template edge.
pub(super) const GLOBAL_OFFSET_SD: f64 = 0.1;
/// A pair outside the template is a subject-only edge with this probability, its base log
/// weight N(EXTRA_EDGE_MEAN, EXTRA_EDGE_SD²) (no global offset).
pub(super) const EXTRA_EDGE_PROB: f64 = 0.008;
pub(super) const EXTRA_EDGE_MEAN: f64 = 0.5;
pub(super) const EXTRA_EDGE_SD: f64 = 0.4;

pub(super) fn normal(rng: &mut impl Rng) -> f64 {
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Schaefer-like ROI names (`LH_Vis_1`, …, `RH_Default_k`), in atlas order, and each node's
/// network index; their lexicographic order differs from the atlas order, as with real data.
pub(super) fn roi_names(nodes: usize) -> (Vec<String>, Vec<usize>, Vec<usize>) {
    let half = nodes.div_ceil(2);
    let mut counts = [[0usize; NETWORKS.len()]; 2];
    let (mut names, mut module, mut network) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..nodes {
        let (hemi, h, within, size) = if i < half {
            ("LH", 0, i, half)
        } else {
            ("RH", 1, i - half, nodes - half)
        };
        let net = within * NETWORKS.len() / size.max(1);
        counts[h][net] += 1;
        names.push(format!("{hemi}_{}_{}", NETWORKS[net].0, counts[h][net]));
        module.push(h * NETWORKS.len() + net);
        network.push(net);
    }
    (names, module, network)
}

/// The population: ROI names, template edges with their base log weight, node rates, and the
/// morphology rule of each ROI.
pub(super) struct Template {
    pub rois: Vec<String>,
    /// Per upper-triangle pair (row-major): the base log weight of a template edge.
    pub edges: Vec<Option<f64>>,
    /// Maturity v of each node.
    pub v: Vec<f64>,
    /// Per ROI and metric: (base value, age-slope multiplier).
    pub morph: Vec<[(f64, f64); 4]>,
}

/// Morphology: base, between-ROI spread, subject spread, age slope per year, noise.
pub(super) const MORPH_RULE: [[f64; 5]; 4] = [
    [2.6, 0.3, 0.1, -0.03, 0.02],    // Thickness (mm): thins
    [900.0, 250.0, 40.0, 8.0, 5.0],  // Area (mm²): grows
    [0.12, 0.02, 0.003, 0.0, 0.002], // Curv: flat
    [0.2, 0.04, 0.01, 0.005, 0.003], // GWC: grows
];

pub(super) fn template(nodes: usize, seed: u64) -> Template {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (rois, module, network) = roi_names(nodes);
    let mut edges = Vec::with_capacity(nodes * nodes.saturating_sub(1) / 2);
    let v: Vec<f64> = network
        .iter()
        .map(|&k| (NETWORKS[k].1 + 0.05 * normal(&mut rng)).clamp(0.0, 1.0))
        .collect();
    // Mature (associative) nodes are hubs: more and stronger edges.
    let hub: Vec<f64> = v.iter().map(|v| (0.5 + v) / 1.07).collect();
    for i in 0..nodes {
        for j in i + 1..nodes {
            let p = if module[i] == module[j] { 0.35 } else { 0.13 };
            let p = (p * hub[i] * hub[j]).min(0.9);
            let strength = 0.4 * (hub[i] * hub[j]).ln();
            edges.push(
                rng.random_bool(p)
                    .then(|| 1.2 + strength + 0.7 * normal(&mut rng)),
            );
        }
    }
    let morph = (0..nodes)
        .map(|_| {
            std::array::from_fn(|m| {
                let [base, spread, ..] = MORPH_RULE[m];
                (
                    base + spread * normal(&mut rng),
                    1.0 + 0.5 * (2.0 * rng.random::<f64>() - 1.0),
                )
            })
        })
        .collect();
    Template {
        rois,
        edges,
        v,
        morph,
    }
}

/// One subject: demographics, visits and its own edges.
pub(super) struct Subject {
    pub id: String,
    pub female: bool,
    pub site: usize,
    pub icv: f64,
    /// (session index, age).
    pub visits: Vec<(usize, f64)>,
    /// Per upper-triangle pair: the subject's base log weight (template + own offsets), if the
    /// subject has the edge.
    pub edges: Vec<Option<f64>>,
    /// Per ROI and metric: the subject's morphology offset.
    pub morph_offsets: Vec<[f64; 4]>,
}

pub(super) fn subject(t: &Template, s: usize, rng: &mut ChaCha8Rng) -> Subject {
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
    let female = rng.random_bool(0.5);
    let site = rng.random_range(0..SITES.len());
    let icv = 1.45e6 + 1.2e5 * normal(rng);
    let global = GLOBAL_OFFSET_SD * normal(rng);
    let edges = t
        .edges
        .iter()
        .map(|e| match e {
            Some(mu) if rng.random_bool(EDGE_KEEP) => {
                Some(mu + global + EDGE_OFFSET_SD * normal(rng))
            }
            Some(_) => None,
            None if rng.random_bool(EXTRA_EDGE_PROB) => {
                Some(EXTRA_EDGE_MEAN + EXTRA_EDGE_SD * normal(rng))
            }
            None => None,
        })
        .collect();
    let morph_offsets = (0..t.rois.len())
        .map(|_| std::array::from_fn(|m| MORPH_RULE[m][2] * normal(rng)))
        .collect();
    Subject {
        id: format!("sub-NDARINVS{:07}", s + 1),
        female,
        site,
        icv,
        visits,
        edges,
        morph_offsets,
    }
}

/// ∫_9^a exp(−(x − 9)/AGE_SCALE) dx: the developmental time elapsed by age `a`.
pub(super) fn maturity(a: f64) -> f64 {
    AGE_SCALE * (1.0 - (-(a - 9.0) / AGE_SCALE).exp())
}

/// The rate multiplier of a subject (sex and site).
pub(super) fn gain(s: &Subject) -> f64 {
    let sex = if s.female { SEX_EFFECT } else { -SEX_EFFECT };
    (1.0 + sex) * SITES[s.site].1
}

/// The yearly rate (at age 9, before the subject's gain) of pair (i, j).
pub(super) fn edge_rate(t: &Template, (i, j): (usize, usize)) -> f64 {
    GLOBAL_RATE + RATE * (t.v[i] * t.v[j] - THETA)
}

/// The true log weight of pair `k` = (i, j) of subject `s` at age `a`, `None` when absent or
/// pruned.
pub(super) fn true_log_weight(
    t: &Template,
    s: &Subject,
    k: usize,
    ij: (usize, usize),
    a: f64,
) -> Option<f64> {
    let base = s.edges[k]?;
    let lw = base + edge_rate(t, ij) * gain(s) * maturity(a);
    (lw >= PRUNE_LOG_WEIGHT).then_some(lw)
}

/// The root-mean-square change of the true log weight over `years` starting at age 10, over the
/// template edges of an average subject: the "signal" of the SNR.
pub(super) fn rms_change(t: &Template, years: f64) -> f64 {
    let n = t.rois.len();
    let dm = maturity(10.0 + years) - maturity(10.0);
    let mut sum = 0.0;
    let mut count = 0usize;
    let mut k = 0;
    for i in 0..n {
        for j in i + 1..n {
            if t.edges[k].is_some() {
                let d = edge_rate(t, (i, j)) * dm;
                sum += d * d;
                count += 1;
            }
            k += 1;
        }
    }
    (sum / count.max(1) as f64).sqrt()
}
