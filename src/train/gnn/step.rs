//! One CLG-ODE training step's gradients and the validation loss, on one rank or data-parallel
//! over several.
//!
//! Randomness belongs to subjects, not batches: the subject at position `p` of epoch `e`'s order
//! draws its visits and augmentation from a generator seeded by (seed, fold, e, p). A global
//! batch therefore scores the same inputs whatever the batch size per rank and the number of
//! ranks. Each rank scores its contiguous shard of the global batch with the weights of
//! [`TermWeights`], so the gradients summed over ranks are the gradients of the global batch's
//! loss, and the terms summed over ranks ([`term_sums`]) are the global batch's terms.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::batch::{HostBatch, LossSettings, Mode};
use super::fold_data::FoldData;
use super::objective::{TermWeights, Terms, batch_loss};
use super::{CV_FOLDS, SPLIT_SEED, TEST_SIZE};
use crate::data::connectome::{Cohort, cv_fold, test_split};
use crate::dist::{Collective, Single};
use crate::engine::ddp;
use crate::engine::optim::{Adam, Grads};
use crate::engine::params;
use crate::engine::seed::{epoch_order, mix};
use crate::models::clg_ode::{ClgOde, ClgOdeConfig};

/// Seed of one fold: weight init and the subjects' generators.
pub fn fold_seed(seed: u64, fold: usize) -> u64 {
    mix(seed, 0xC1_0DE0 + fold as u64)
}

/// The generator of the subject at position `pos` of epoch `epoch`'s order.
pub fn subject_rng(seed: u64, fold: usize, epoch: usize, pos: usize) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mix(
        fold_seed(seed, fold),
        ((epoch as u64) << 32) | pos as u64,
    ))
}

/// Sums of a partial epoch's batch terms.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TermSums {
    pub batches: usize,
    pub subjects: usize,
    pub total: f64,
    pub manifold: f64,
    pub kl: f64,
    pub vel: f64,
    pub acc: f64,
    pub l_x: f64,
    pub l_e: f64,
    pub l_w: f64,
    pub vel_count: usize,
    pub acc_count: usize,
    pub vel_batches: usize,
    pub acc_batches: usize,
}

impl TermSums {
    pub fn add(&mut self, t: &Terms, subjects: usize) {
        self.batches += 1;
        self.subjects += subjects;
        self.total += t.total;
        self.manifold += t.manifold;
        self.kl += t.kl;
        self.l_x += t.l_x;
        self.l_e += t.l_e;
        self.l_w += t.l_w;
        if t.vel_count > 0 {
            self.vel += t.vel;
            self.vel_batches += 1;
            self.vel_count += t.vel_count;
        }
        if t.acc_count > 0 {
            self.acc += t.acc;
            self.acc_batches += 1;
            self.acc_count += t.acc_count;
        }
    }

    /// Mean over batches of each term (velocity/acceleration over the batches that had one),
    /// as `<prefix>_<term>` columns.
    pub fn columns(&self, prefix: &str, row: &mut Map<String, Value>) {
        let m = |s: f64, n: usize| if n == 0 { 0.0 } else { s / n as f64 };
        let b = self.batches;
        for (k, v) in [
            ("manifold", m(self.manifold, b)),
            ("kl", m(self.kl, b)),
            ("vel", m(self.vel, self.vel_batches)),
            ("acc", m(self.acc, self.acc_batches)),
            ("l_x", m(self.l_x, b)),
            ("l_e", m(self.l_e, b)),
            ("l_w", m(self.l_w, b)),
        ] {
            row.insert(format!("{prefix}_{k}"), json!(v));
        }
        row.insert(format!("{prefix}_vel_count"), json!(self.vel_count));
        row.insert(format!("{prefix}_acc_count"), json!(self.acc_count));
    }

    /// The sums as a vector (the engine accumulates an epoch's steps as vectors).
    pub fn to_vec(&self) -> Vec<f64> {
        [
            self.batches as f64,
            self.subjects as f64,
            self.total,
            self.manifold,
            self.kl,
            self.vel,
            self.acc,
            self.l_x,
            self.l_e,
            self.l_w,
            self.vel_count as f64,
            self.acc_count as f64,
            self.vel_batches as f64,
            self.acc_batches as f64,
        ]
        .to_vec()
    }

    /// The inverse of [`TermSums::to_vec`] (missing values are 0).
    pub fn from_vec(v: &[f64]) -> Self {
        let g = |i: usize| v.get(i).copied().unwrap_or(0.0);
        Self {
            batches: g(0) as usize,
            subjects: g(1) as usize,
            total: g(2),
            manifold: g(3),
            kl: g(4),
            vel: g(5),
            acc: g(6),
            l_x: g(7),
            l_e: g(8),
            l_w: g(9),
            vel_count: g(10) as usize,
            acc_count: g(11) as usize,
            vel_batches: g(12) as usize,
            acc_batches: g(13) as usize,
        }
    }

    pub fn mean_total(&self) -> f64 {
        if self.batches == 0 {
            f64::NAN
        } else {
            self.total / self.batches as f64
        }
    }
}

/// Number of values of [`term_sums`].
pub const TERM_SUMS: usize = 11;

/// A shard's terms as sums that add up over ranks to the global batch's: each mean times the
/// count it is a mean over (`subjects` for the manifold and KL terms, items for velocity and
/// acceleration, predictions for l_x/l_e/l_w), then the counts.
pub fn term_sums(t: &Terms, subjects: usize) -> Vec<f64> {
    let (nb, vc, ac, p) = (
        subjects as f64,
        t.vel_count as f64,
        t.acc_count as f64,
        t.predictions as f64,
    );
    let part = |mean: f64, n: f64| if n > 0.0 { mean * n } else { 0.0 };
    vec![
        part(t.manifold, nb),
        part(t.kl, nb),
        part(t.vel, vc),
        part(t.acc, ac),
        part(t.l_x, p),
        part(t.l_e, p),
        part(t.l_w, p),
        nb,
        vc,
        ac,
        p,
    ]
}

/// The global batch's terms and subject count from [`term_sums`] summed over ranks.
pub fn terms_from_sums(v: &[f64], s: &LossSettings) -> (Terms, usize) {
    let mean = |sum: f64, n: f64| if n > 0.0 { sum / n } else { 0.0 };
    let (nb, vc, ac, p) = (v[7], v[8], v[9], v[10]);
    let terms = Terms {
        total: f64::NAN,
        manifold: mean(v[0], nb),
        kl: mean(v[1], nb),
        vel: mean(v[2], vc),
        acc: mean(v[3], ac),
        l_x: mean(v[4], p),
        l_e: mean(v[5], p),
        l_w: mean(v[6], p),
        vel_count: vc as usize,
        acc_count: ac as usize,
        predictions: p as usize,
    }
    .with_total(s);
    (terms, nb as usize)
}

/// Mean validation/test loss over batches of `subjects` (clean inputs, visits 0/1/2), with the
/// loss schedule of epoch `epoch`. Each batch of `batch_size × ranks` subjects is shared out
/// over the ranks of `comm` and its terms reduced, so every rank returns the same sums.
#[allow(clippy::too_many_arguments)]
pub fn eval_loss<B: Backend>(
    model: &ClgOde<B>,
    data: &FoldData,
    subjects: &[usize],
    batch_size: usize,
    epoch: usize,
    settings: &LossSettings,
    device: &B::Device,
    comm: &dyn Collective,
) -> Result<TermSums> {
    let (rank, world) = (comm.rank(), comm.size());
    let mut sums = TermSums::default();
    for part in subjects.chunks(batch_size.max(1) * world) {
        let (lo, hi) = ddp::shard(0, part.len(), rank, world);
        let mut v = if lo < hi {
            let hb =
                HostBatch::build::<ChaCha8Rng>(data, &part[lo..hi], Mode::Eval, epoch, settings);
            let (_, terms) = batch_loss(model, &hb, settings, TermWeights::ONE, device);
            term_sums(&terms, hi - lo)
        } else {
            vec![0.0; TERM_SUMS]
        };
        comm.all_reduce_sum_f64(&mut v)?;
        let (terms, n) = terms_from_sums(&v, settings);
        sums.add(&terms, n);
    }
    Ok(sums)
}

/// What every training step of one fold shares.
pub struct StepContext<'a, B: Backend> {
    pub data: &'a FoldData,
    pub settings: &'a LossSettings,
    pub device: &'a B::Device,
    pub comm: &'a dyn Collective,
    pub seed: u64,
    pub fold: usize,
}

impl<B: AutodiffBackend> StepContext<'_, B> {
    /// Gradients of this rank's shard `order[lo..hi]` of the global batch `order[start..end]` of
    /// epoch `epoch` (`order` holds subject indices), with this rank's terms and subject
    /// count. The subject at position `p` draws from [`subject_rng`]; the shard's loss is
    /// weighted so that gradients summed over ranks are the global batch's.
    pub fn grads(
        &self,
        model: &ClgOde<B>,
        epoch: usize,
        order: &[usize],
        (start, end): (usize, usize),
        (lo, hi): (usize, usize),
    ) -> Result<(GradientsParams, Terms, usize)> {
        let hb = (lo < hi).then(|| {
            let mut rngs: Vec<ChaCha8Rng> = (lo..hi)
                .map(|pos| subject_rng(self.seed, self.fold, epoch, pos))
                .collect();
            HostBatch::build(
                self.data,
                &order[lo..hi],
                Mode::Train(&mut rngs),
                epoch,
                self.settings,
            )
        });
        // Velocity and acceleration items of the whole global batch, for this shard's weights.
        let local = hb.as_ref().map_or([0.0, 0.0], |hb| {
            [hb.vel_items() as f64, hb.acc_items() as f64]
        });
        let mut all = local;
        self.comm.all_reduce_sum_f64(&mut all)?;
        let share = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        let w = TermWeights {
            subjects: (hi - lo) as f64 / (end - start).max(1) as f64,
            vel: share(local[0], all[0]),
            acc: share(local[1], all[1]),
        };
        Ok(match &hb {
            Some(hb) => {
                let (loss, terms) = batch_loss(model, hb, self.settings, w, self.device);
                (
                    GradientsParams::from_grads(loss.backward(), model),
                    terms,
                    hi - lo,
                )
            }
            None => (GradientsParams::new(), Terms::default(), 0),
        })
    }
}

/// Timing of one training epoch, for `trainer bench gnn`.
#[derive(Debug, Clone, Serialize)]
pub struct EpochBench {
    pub subjects: usize,
    pub steps: usize,
    pub seconds: f64,
    pub seconds_per_subject: f64,
    pub mean_loss: f64,
}

/// Runs one training epoch (fold 0's training subjects, default settings, `epoch` selects the
/// loss schedule: 0 = manifold + KL only, ≥ 20 = all terms) in this process and times it. No
/// files are written.
pub fn bench_epoch<B: AutodiffBackend>(
    cohort: Arc<Cohort>,
    model_cfg: &ClgOdeConfig,
    batch_size: usize,
    epoch: usize,
    seed: u64,
    device: &B::Device,
) -> Result<EpochBench> {
    let split = test_split(cohort.subjects.len(), TEST_SIZE, SPLIT_SEED)?;
    let fold = cv_fold(&split.trainval, 0, CV_FOLDS)?;
    let stats = cohort.norm_stats(&fold.train)?;
    let data = FoldData::new(cohort, &stats);
    let settings = LossSettings::default();
    let ctx = StepContext::<B> {
        data: &data,
        settings: &settings,
        device,
        comm: &Single,
        seed,
        fold: 0,
    };
    B::seed(device, fold_seed(seed, 0));
    let mut model = model_cfg.init::<B>(device);
    params::materialize(&model);
    let mut adam = Adam::<B::InnerBackend>::default();
    let order: Vec<usize> = epoch_order(fold.train.len(), seed, epoch as u64)
        .into_iter()
        .map(|i| fold.train[i])
        .collect();
    let t0 = Instant::now();
    let mut sums = TermSums::default();
    let batch = batch_size.max(1);
    for start in (0..order.len()).step_by(batch) {
        let end = (start + batch).min(order.len());
        let (grads, terms, n) = ctx.grads(&model, epoch, &order, (start, end), (start, end))?;
        model = adam.step(5e-5, model, Grads::Params(grads));
        sums.add(&terms, n);
    }
    let seconds = t0.elapsed().as_secs_f64();
    Ok(EpochBench {
        subjects: order.len(),
        steps: sums.batches,
        seconds,
        seconds_per_subject: seconds / order.len().max(1) as f64,
        mean_loss: sums.mean_total(),
    })
}
