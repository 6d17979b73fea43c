//! Tests of batch building and the batch loss on a small synthetic cohort.

use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;

use std::sync::Arc;

use super::batch::{HostBatch, LossSettings, Mode, sample_visits};
use super::fold_data::FoldData;
use super::objective::{TermWeights, batch_loss};
use super::step::{StepContext, term_sums, terms_from_sums};
use super::*;
use crate::data::connectome::Cohort;
use crate::data::connectome::{CohortPaths, LoadOptions, load_cohort, write_synthetic_cohort};
use crate::dist::Single;
use crate::engine::ddp::flatten_grads;
use crate::engine::optim::Grads;
use crate::models::clg_ode::{ClgOde, ClgOdeConfig};
use burn::optim::GradientsParams;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

type AB = Autodiff<Flex>;

fn cohort(subjects: usize, nodes: usize) -> (tempfile::TempDir, Arc<Cohort>) {
    let dir = tempfile::tempdir().unwrap();
    write_synthetic_cohort(dir.path(), subjects, nodes, 1).unwrap();
    let (c, _) = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default()).unwrap();
    (dir, Arc::new(c))
}

#[test]
fn clg_gnn_eval_loss_same_on_autodiff_and_valid() {
    let (_d, c) = cohort(12, 20);
    let prep_split = test_split(c.subjects.len(), TEST_SIZE, SPLIT_SEED).unwrap();
    let fold = cv_fold(&prep_split.trainval, 0, CV_FOLDS).unwrap();
    let stats = c.norm_stats(&fold.train).unwrap();
    let data = FoldData::new(c.clone(), &stats);
    let dev = burn::backend::flex::FlexDevice;
    let mut cfg = ClgOdeConfig::new(c.n_metrics(), c.site_vocab);
    cfg.latent_dim = 16;
    cfg.hidden_dim = 32;
    cfg.solver_steps = 3;
    let model = cfg.init::<AB>(&dev);
    let s = LossSettings::default();
    for subjects in [&fold.train, &fold.val] {
        let a = eval_loss(&model, &data, subjects, 2, 25, &s, &dev, &Single).unwrap();
        let b = eval_loss(&model.valid(), &data, subjects, 2, 25, &s, &dev, &Single).unwrap();
        assert!((a.total - b.total).abs() <= 1e-4 * a.total.abs().max(1.0));
    }
    // A training batch and an eval batch of the same subjects score alike (small noise).
    let mut rngs = [1, 2].map(ChaCha8Rng::seed_from_u64);
    let part = &fold.train[..2];
    let hb = HostBatch::build(&data, part, Mode::Train(&mut rngs), 0, &s);
    let (_, t) = batch_loss(&model, &hb, &s, TermWeights::ONE, &dev);
    let hb = HostBatch::build::<ChaCha8Rng>(&data, part, Mode::Eval, 0, &s);
    let (_, e) = batch_loss(&model, &hb, &s, TermWeights::ONE, &dev);
    assert!((t.total - e.total).abs() < 0.05 * e.total);
    // Training steps lower the training loss and keep the validation loss finite.
    let mut adam = crate::engine::optim::Adam::default();
    let mut model = model;
    let loss = |m: &ClgOde<Flex>, subjects: &[usize]| {
        eval_loss(m, &data, subjects, 2, 0, &s, &dev, &Single)
            .unwrap()
            .mean_total()
    };
    let before_val = loss(&model.valid(), &fold.val);
    let before = loss(&model.valid(), &fold.train);
    let ctx = StepContext::<AB> {
        data: &data,
        settings: &s,
        device: &dev,
        comm: &Single,
        seed: 1,
        fold: 0,
    };
    for step in 0..12usize {
        let start = (step * 2) % 6;
        let (grads, terms, n) = ctx
            .grads(
                &model,
                0,
                &fold.train,
                (start, start + 2),
                (start, start + 2),
            )
            .unwrap();
        model = adam.step(1e-3, model, Grads::Params(grads));
        assert_eq!(n, 2);
        assert!(terms.total.is_finite());
    }
    let after = loss(&model.valid(), &fold.train);
    let after_val = loss(&model.valid(), &fold.val);
    assert!(after < before, "train loss {before} -> {after}");
    assert!(after_val.is_finite() && before_val.is_finite());
}

#[test]
fn clg_gnn_visit_sampling() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for len in 1..6 {
        for _ in 0..50 {
            let v = sample_visits(len, 0.7, &mut rng);
            match (v.j, v.k) {
                (Some(j), Some(k)) => assert!(v.i < j && j < k && k < len),
                (Some(j), None) => assert!(len == 2 && v.i == 0 && j == 1),
                (None, None) => assert!(len == 1 && v.i == 0),
                _ => panic!("k without j"),
            }
        }
    }
}

/// The data-parallel decomposition: scoring two shards of a batch with their [`TermWeights`]
/// and adding the gradients (what the all-reduce does) gives the whole batch's gradient, and
/// the shards' [`term_sums`] add up to the whole batch's terms. Epoch 25 turns the velocity and
/// acceleration terms on, whose means run over items rather than subjects; their gradients are
/// also compared alone (subject terms weighted 0), since the manifold term dwarfs them.
#[test]
fn clg_gnn_shards_add_up_to_the_batch() {
    let (_d, c) = cohort(12, 20);
    let split = test_split(c.subjects.len(), TEST_SIZE, SPLIT_SEED).unwrap();
    let fold = cv_fold(&split.trainval, 0, CV_FOLDS).unwrap();
    let stats = c.norm_stats(&fold.train).unwrap();
    let data = FoldData::new(c.clone(), &stats);
    let dev = burn::backend::flex::FlexDevice;
    let mut cfg = ClgOdeConfig::new(c.n_metrics(), c.site_vocab);
    cfg.latent_dim = 8;
    cfg.hidden_dim = 16;
    cfg.solver_steps = 2;
    let model = cfg.init::<AB>(&dev);
    let s = LossSettings::default();
    let epoch = 25;
    let subjects = &fold.train[..3];
    let build = |lo: usize, hi: usize| {
        let mut r: Vec<ChaCha8Rng> = (lo..hi)
            .map(|p| step::subject_rng(9, 0, epoch, p))
            .collect();
        HostBatch::build(&data, &subjects[lo..hi], Mode::Train(&mut r), epoch, &s)
    };
    let grads = |hb: &HostBatch, w: TermWeights| {
        let (loss, t) = batch_loss(&model, hb, &s, w, &dev);
        let g = GradientsParams::from_grads(loss.backward(), &model);
        (flatten_grads(&model, &g).flat, t)
    };
    let full = build(0, 3);
    let shards = [(build(0, 1), 1usize), (build(1, 3), 2)];
    let items = |f: fn(&HostBatch) -> usize| shards.iter().map(|(h, _)| f(h)).sum::<usize>();
    let (vel_all, acc_all) = (items(HostBatch::vel_items), items(HostBatch::acc_items));
    assert!(
        vel_all > 0 && acc_all > 0,
        "the test needs velocity and acceleration items"
    );
    for subject_terms in [1.0, 0.0] {
        let one = TermWeights {
            subjects: subject_terms,
            ..TermWeights::ONE
        };
        let (g_full, whole) = grads(&full, one);
        let mut g_sum = vec![0.0f32; g_full.len()];
        let mut sums = vec![0.0; step::TERM_SUMS];
        for (hb, n) in &shards {
            let w = TermWeights {
                subjects: subject_terms * *n as f64 / 3.0,
                vel: hb.vel_items() as f64 / vel_all as f64,
                acc: hb.acc_items() as f64 / acc_all as f64,
            };
            let (g, t) = grads(hb, w);
            g_sum.iter_mut().zip(&g).for_each(|(a, b)| *a += b);
            let part = term_sums(&t, *n);
            sums.iter_mut().zip(part).for_each(|(a, b)| *a += b);
        }
        let (summed, n) = terms_from_sums(&sums, &s);
        assert_eq!((n, summed.vel_count), (3, whole.vel_count));
        assert!((summed.total - whole.total).abs() <= 1e-5 * whole.total.abs());
        let norm = |v: &[f32]| v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
        let diff: Vec<f32> = g_full.iter().zip(&g_sum).map(|(a, b)| a - b).collect();
        assert!(norm(&g_full) > 0.0);
        assert!(
            norm(&diff) <= 1e-5 * norm(&g_full),
            "gradients differ by {} (norm {}) with subject terms x{subject_terms}",
            norm(&diff),
            norm(&g_full)
        );
    }
}
