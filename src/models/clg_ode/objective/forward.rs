//! The batch forward of [`Objective::forward`], term family by term family: the decoded
//! predictions' tensors, the reconstruction family (manifold and the log-domain penalties), the
//! latent dynamics (KL, velocity, acceleration), the topology loss, the innovation terms, then
//! every statistic in one host read; of them only the families a [`Part`] asks for.

use burn::prelude::*;
use burn::tensor::TensorData;
use rayon::prelude::*;

use super::device_targets;
use super::dynamics::{acceleration_sum, kl_sum, velocity_sum};
use super::input::{ObjectiveInput, host, i1, t3};
use super::predict::{self, Decoded, Latent, latent, outputs};
use super::staged::{self, Floats};
use super::term::{Part, PerTerm, Term};
use super::terms::PredTensors;
use super::unread::{Finish, Unread};
use super::{Forward, Objective, innovation, topology};
use crate::models::clg_ode::ClgOde;
use crate::models::clg_ode::loss::topk_upper_mask;
use crate::models::clg_ode::shared_ode::SharedOde;

/// Scores a batch shard: every term of `part` (see [`Objective::forward_part`]), its host
/// values read.
pub(super) fn forward_part<B: Backend>(
    obj: &Objective,
    model: &ClgOde<B>,
    x: &ObjectiveInput,
    part: Part,
    epoch: usize,
    device: &B::Device,
    shared: Option<&SharedOde>,
) -> Forward<B> {
    forward_unread(obj, model, x, part, epoch, device, shared).read_now(x)
}

/// [`forward_part`] with its host values left on the device.
pub(super) fn forward_unread<B: Backend>(
    obj: &Objective,
    model: &ClgOde<B>,
    x: &ObjectiveInput,
    part: Part,
    epoch: usize,
    device: &B::Device,
    shared: Option<&SharedOde>,
) -> Unread<B> {
    let counts = obj.counts(x, epoch);
    let penalties = penalties::<B>()
        .iter()
        .any(|&(t, _)| part.owns(t) && counts[t] > 0.0);
    let manifold = part.owns(Term::Manifold);
    let topology = part.owns(Term::Topo);
    let innovations = part.owns(Term::NewEdge) && counts[Term::NewEdge] > 0.0;
    let lat = latent(model, x, device, shared);
    let mut sums = PerTerm::from_fn(|_| Tensor::<B, 1>::zeros([1], device));
    if part.owns(Term::Kl) {
        dynamics(x, &lat, &mut sums);
    }
    // The decoders only for the terms that read their outputs (the rest part of the reference's
    // default objective reads the latent states only).
    let d = (manifold || penalties || topology || innovations)
        .then(|| outputs(obj, model, x, &lat, epoch, device));
    let tensors = match &d {
        Some(d) if manifold || penalties || topology => {
            Some(pred_tensors(obj, x, d, manifold, device))
        }
        _ => None,
    };
    let w = x.floats::<B, 1>(Floats::PredWeight, [x.n_preds()], device);
    let weighted = |v: Tensor<B, 1>| (v * w.clone()).sum();

    let recon = match (&d, &tensors) {
        (Some(d), Some((pt, _))) if manifold || penalties => {
            reconstruction(obj, x, d, pt, &counts, &weighted, &mut sums, part, device)
        }
        _ => None,
    };
    let topo = match &tensors {
        Some((pt, _)) if topology => topology_term(obj, x, pt, &mut sums, device),
        _ => None,
    };
    let q_means = match &d {
        Some(d) if innovations => innovation_terms(obj, x, d, epoch, &mut sums),
        _ => Vec::new(),
    };

    // Host values in one tensor (one read, one sync on a GPU, now or with a step's others):
    // the part's sums, the reconstruction's parts, the topology's raw values, the edge logits
    // of the diagnostics; the statistics from them ([`Finish`]).
    let owned: Vec<Term> = Term::ALL.into_iter().filter(|&t| part.owns(t)).collect();
    let logit = d
        .as_ref()
        .filter(|_| manifold)
        .map(|d| d.conn.logit.clone().detach());
    let logit_len = logit.as_ref().map_or(0, |l| l.shape().num_elements());
    let parts: Vec<Tensor<B, 1>> = owned
        .iter()
        .map(|&t| sums[t].clone())
        .chain(recon.iter().flat_map(|r| {
            [
                r.l_x.clone().sum(),
                r.l_e.clone().sum(),
                r.l_w.clone().sum(),
            ]
        }))
        .chain(topo.as_ref().map(|(_, raw)| raw.clone()))
        .chain(logit.map(|l| l.reshape([logit_len])))
        .map(|t| t.detach())
        .collect();
    let y = match (manifold, tensors) {
        (true, Some((_, y))) => Some(y),
        _ => None,
    };
    Unread {
        sums,
        values: Tensor::cat(parts, 0),
        finish: Finish {
            owned,
            counts,
            recon: recon.is_some(),
            topo: part.owns(Term::Topo),
            raw_rows: topo.map(|(rows, _)| rows).unwrap_or_default(),
            logit_len,
            q_means,
            y,
            auprc: obj.cfg.compute_mask_auprc,
        },
    }
}

/// The symmetric top-k keep masks of every prediction (k = the target's edge count), the
/// predictions in parallel (each its own selection), laid out in prediction order.
fn keep_masks(x: &ObjectiveInput, a_pred: &[f32]) -> Vec<f32> {
    let (n, nn) = (x.n, x.n * x.n);
    let masks: Vec<Vec<f32>> = (0..x.n_preds())
        .into_par_iter()
        .map(|q| {
            let mut m = topk_upper_mask(&a_pred[q * nn..(q + 1) * nn], n, x.npos(q));
            for i in 0..n {
                for j in i + 1..n {
                    m[j * n + i] = m[i * n + j];
                }
            }
            m
        })
        .collect();
    masks.concat()
}

/// The predictions' tensors the terms read, and the targets' upper-triangle edge indicators
/// on the host when the diagnostics read them (`with_y`). With [`Objective::targets_on_device`]
/// the keep masks, indicators and log targets are computed from the raw targets uploaded once
/// ([`device_targets`]); otherwise on the host from the predictions read back. Equal values.
fn pred_tensors<B: Backend>(
    obj: &Objective,
    x: &ObjectiveInput,
    d: &Decoded<B>,
    with_y: bool,
    device: &B::Device,
) -> (PredTensors<B>, Vec<f32>) {
    let (n, p) = (x.n, x.n_preds());
    let nn = n * n;
    let upper_host: Vec<f32> = (0..nn)
        .map(|ij| if ij / n < ij % n { 1.0 } else { 0.0 })
        .collect();
    let y_host = || -> Vec<f32> {
        x.target_raw
            .iter()
            .enumerate()
            .map(|(k, &r)| {
                if r > 0.0 && upper_host[k % nn] > 0.0 {
                    1.0
                } else {
                    0.0
                }
            })
            .collect()
    };
    let (upper, keep, y, target_log, y_read) = if obj.targets_on_device {
        // What depends on the targets only, once a batch; the keep masks every pass.
        let triangle = x.uploaded("triangle", || device_targets::triangle::<B>(n, device));
        let upper = x.uploaded("upper", || triangle.0.clone().float());
        let (y, target_log) = x.uploaded("edge_targets", || {
            let raw = x.floats::<B, 3>(Floats::TargetRaw, [p, n, n], device);
            device_targets::edge_targets(raw, &upper)
        });
        let k = x.uploaded("edge_counts", || device_targets::edge_counts(&y));
        let keep = device_targets::keep_masks(d.a_pred.clone().detach(), k, &triangle);
        let y_read = if with_y { y_host() } else { Vec::new() };
        (upper, keep, y, target_log, y_read)
    } else {
        let upper = x.uploaded("upper", || {
            Tensor::from_data(TensorData::new(upper_host.clone(), [1, nn]), device)
        });
        let a_host = host(d.a_pred.clone().detach());
        let keep = t3(keep_masks(x, &a_host), [p, n, n], device);
        let y_t = x.uploaded("y", || t3(y_host(), [p, n, n], device));
        let target_log = x.uploaded("target_log", || {
            let log: Vec<f32> = x.target_raw.iter().map(|&r| r.max(0.0).ln_1p()).collect();
            t3(log, [p, n, n], device)
        });
        let y_read = if with_y { y_host() } else { Vec::new() };
        (upper, keep, y_t, target_log, y_read)
    };
    let pt = PredTensors {
        n,
        logit: d.conn.logit.clone(),
        a_pred: d.a_pred.clone(),
        sparse: d.a_pred.clone() * keep,
        y,
        target_log,
        start_log: predict::start_log(x, device),
        upper,
    };
    (pt, y_read)
}

/// One of [`PredTensors`]' per-prediction terms.
type PredTerm<B> = fn(&PredTensors<B>) -> Tensor<B, 1>;

/// The three parts of every reconstruction `[P]`.
struct Recon<B: Backend> {
    l_x: Tensor<B, 1>,
    l_e: Tensor<B, 1>,
    l_w: Tensor<B, 1>,
}

/// The reconstruction family: the manifold term (morphology, edges, weights of every
/// prediction) when `part` has it, and the log-domain penalties that are on and in `part`.
/// Returns the reconstruction's parts (with the manifold term).
#[allow(clippy::too_many_arguments)]
fn reconstruction<B: Backend>(
    obj: &Objective,
    x: &ObjectiveInput,
    d: &Decoded<B>,
    pt: &PredTensors<B>,
    counts: &PerTerm<f64>,
    weighted: &impl Fn(Tensor<B, 1>) -> Tensor<B, 1>,
    sums: &mut PerTerm<Tensor<B, 1>>,
    part: Part,
    device: &B::Device,
) -> Option<Recon<B>> {
    let c = &obj.cfg;
    let (n, f, p) = (x.n, x.f, x.n_preds());
    let recon = part.owns(Term::Manifold).then(|| {
        let target_x = x.floats(Floats::TargetX, [p, n, f], device);
        let l_x = (d.x_hat.clone() - target_x)
            .square()
            .reshape([p, n * f])
            .mean_dim(1)
            .reshape([p]);
        let l_e = pt.edge(c, obj.fixed_support);
        let l_w = pt.weight(obj.fixed_support);
        let recon = l_x.clone() + l_e.clone() + l_w.clone().mul_scalar(c.lambda_weight);
        sums[Term::Manifold] = weighted(recon);
        Recon { l_x, l_e, l_w }
    });
    for (term, value) in penalties::<B>() {
        if counts[term] > 0.0 && part.owns(term) {
            sums[term] = weighted(value(pt));
        }
    }
    recon
}

/// The log-domain penalties of the reconstruction family.
fn penalties<B: Backend>() -> [(Term, PredTerm<B>); 4] {
    [
        (Term::FullLog, PredTensors::full_log),
        (Term::ZeroLog, PredTensors::zero_log),
        (Term::DeltaLog, PredTensors::delta_log),
        (Term::Density, PredTensors::density),
    ]
}

/// The latent-dynamics family: KL of the start visits' encodings, velocity and acceleration
/// of the forecasts.
fn dynamics<B: Backend>(x: &ObjectiveInput, d: &Latent<B>, sums: &mut PerTerm<Tensor<B, 1>>) {
    sums[Term::Kl] = kl_sum(&d.enc, x.nb);
    if let Some(zf) = &d.z_fore {
        if !x.vel.is_empty() {
            sums[Term::Vel] = velocity_sum(x, zf, &d.z_clean, &d.z_all);
        }
        if !x.acc.is_empty() {
            sums[Term::Acc] = acceleration_sum(x, zf, &d.z_clean, &d.z_all);
        }
    }
}

/// The most elements of the `[predictions × thresholds, N, N]` soft-thresholded graphs one call
/// of [`topology::raw_loss`] builds (its backward holds a few such temporaries): 2^26, 256 MB
/// of f32 each: 52 predictions at N = 400 and 8 thresholds (a subject has at most 3).
const TOPO_BATCH_ELEMENTS: usize = 1 << 26;

/// Rows `qs` (ascending) of `t` `[P,N,N]`: a slice when they are consecutive (no operation),
/// else one gather.
fn rows_of<B: Backend>(t: Tensor<B, 3>, qs: &[usize], device: &B::Device) -> Tensor<B, 3> {
    let first = qs.first().copied().unwrap_or(0);
    if qs.iter().enumerate().all(|(i, &q)| q == first + i) {
        t.narrow(0, first, qs.len())
    } else {
        t.select(0, i1(qs.iter().map(|&q| q as i64).collect(), device))
    }
}

/// The topology term: the raw loss of every prediction (weighted), normalised by the scale,
/// summed. Returns the predictions that have one (targets without thresholds have none) and
/// their raw values, on the device (the caller reads them with the other statistics).
fn topology_term<B: Backend>(
    obj: &Objective,
    x: &ObjectiveInput,
    pt: &PredTensors<B>,
    sums: &mut PerTerm<Tensor<B, 1>>,
    device: &B::Device,
) -> Option<(Vec<usize>, Tensor<B, 1>)> {
    let n = x.n;
    let plan = staged::topo_plan(obj, x)?;
    let (t, rows) = (&obj.cfg.topology, &plan.rows);
    let gk = plan.sides.0.len();
    let sides = [Floats::TopoShift, Floats::TopoBeta0, Floats::TopoBeta1]
        .map(|which| x.floats::<B, 1>(which, [gk], device));
    let probes = x.floats::<B, 2>(Floats::Probes, [plan.probes.len() / n, n], device);
    let weights = x.floats::<B, 1>(Floats::TopoWeight, [rows.len()], device);
    // The predictions in as few calls as fit [`TOPO_BATCH_ELEMENTS`] (one on every shard of the
    // reference's batches), each call weighting its predictions by one product.
    let log_p = pt.sparse.clone().clamp_min(0.0).log1p();
    let k = t.loss_bins;
    let chunk = (TOPO_BATCH_ELEMENTS / (k * n * n).max(1)).max(1);
    let raw: Vec<Tensor<B, 1>> = rows
        .chunks(chunk)
        .enumerate()
        .map(|(c, qs)| {
            let (first, len) = (c * chunk, qs.len());
            let sides = sides.clone().map(|s| s.narrow(0, first * k, len * k));
            let preds = rows_of(log_p.clone(), qs, device);
            topology::raw_loss_on(preds, sides, probes.clone(), t)
                * weights.clone().narrow(0, first, len)
        })
        .collect();
    let raw = Tensor::cat(raw, 0);
    sums[Term::Topo] =
        topology::normalize(raw.clone(), obj.state.topo_scale, t.log_compress()).sum();
    Some((rows.clone(), raw))
}

/// The innovation family on the forecasts it acts on. Returns each such forecast's mean
/// new-edge probability and number of kept edges.
fn innovation_terms<B: Backend>(
    obj: &Objective,
    x: &ObjectiveInput,
    d: &Decoded<B>,
    epoch: usize,
    sums: &mut PerTerm<Tensor<B, 1>>,
) -> Vec<(f64, usize)> {
    let mut q_means = Vec::new();
    if !d.plans.iter().any(Option::is_some) {
        return q_means;
    }
    let (p, nn) = (x.n_preds(), x.n * x.n);
    let c = &obj.cfg.innovation;
    let l_new = d.conn.l_new.clone().reshape([p, nn]);
    let w_new = d.conn.w_new.clone().reshape([p, nn]);
    let factor =
        super::config::linear_factor(epoch, c.new_sparse_warmup_epochs, c.new_sparse_ramp_epochs);
    for (q, plan) in d.plans.iter().enumerate() {
        let Some(plan) = plan else { continue };
        let row = |t: &Tensor<B, 2>| t.clone().narrow(0, q, 1).reshape([nn]);
        let terms = innovation::terms(plan, row(&l_new), row(&w_new), x.target(q), factor, c);
        let wq = x.preds[q].weight as f64;
        for (term, value) in [
            (Term::NewEdge, terms.new_edge),
            (Term::NewSparse, terms.new_sparse),
            (Term::NewReg, terms.new_reg),
        ] {
            sums[term] = sums[term].clone() + value.mul_scalar(wq);
        }
        let qv = host(terms.q.detach());
        q_means.push((
            qv.iter().map(|&v| v as f64).sum::<f64>() / qv.len().max(1) as f64,
            plan.keep.len(),
        ));
    }
    q_means
}
