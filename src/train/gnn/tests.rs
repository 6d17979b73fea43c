//! Tests of batch building and the batch loss on a small synthetic cohort.

use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;

use super::batch::{FoldData, HostBatch, LossSettings, Mode, batch_loss, sample_visits};
use super::*;
use crate::data::connectome::{CohortPaths, LoadOptions, load_cohort, write_synthetic_cohort};

type AB = Autodiff<Flex>;

fn cohort(subjects: usize, nodes: usize) -> (tempfile::TempDir, Cohort) {
    let dir = tempfile::tempdir().unwrap();
    write_synthetic_cohort(dir.path(), subjects, nodes, 1).unwrap();
    let (c, _) = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default()).unwrap();
    (dir, c)
}

#[test]
fn clg_gnn_eval_loss_same_on_autodiff_and_valid() {
    let (_d, c) = cohort(12, 20);
    let prep_split = test_split(c.subjects.len(), TEST_SIZE, SPLIT_SEED).unwrap();
    let fold = cv_fold(&prep_split.trainval, 0, CV_FOLDS).unwrap();
    let stats = c.norm_stats(&fold.train).unwrap();
    let data = FoldData::new(&c, &stats);
    let dev = burn::backend::flex::FlexDevice;
    let mut cfg = ClgOdeConfig::new(c.n_metrics(), c.site_vocab);
    cfg.latent_dim = 16;
    cfg.hidden_dim = 32;
    cfg.solver_steps = 3;
    let model = cfg.init::<AB>(&dev);
    let s = LossSettings::default();
    for subjects in [&fold.train, &fold.val] {
        let a = eval_loss(&model, &data, subjects, 2, 25, &s, &dev);
        let b = eval_loss(&model.valid(), &data, subjects, 2, 25, &s, &dev);
        assert!((a.total - b.total).abs() <= 1e-4 * a.total.abs().max(1.0));
    }
    // A training batch and an eval batch of the same subjects score alike (small noise).
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let part = &fold.train[..2];
    let hb = HostBatch::build(&data, part, Mode::Train(&mut rng), 0, &s);
    let (_, t) = batch_loss(&model, &hb, &s, &dev);
    let hb = HostBatch::build::<ChaCha8Rng>(&data, part, Mode::Eval, 0, &s);
    let (_, e) = batch_loss(&model, &hb, &s, &dev);
    assert!((t.total - e.total).abs() < 0.05 * e.total);
    // Training steps lower the training loss and keep the validation loss finite.
    let mut adam = crate::train::optim::Adam::default();
    let mut model = model;
    let before_val = eval_loss(&model.valid(), &data, &fold.val, 2, 0, &s, &dev).mean_total();
    let before = eval_loss(&model.valid(), &data, &fold.train, 2, 0, &s, &dev).mean_total();
    for step in 0..12 {
        let mut rng = ChaCha8Rng::seed_from_u64(step);
        let part = &fold.train[(step as usize * 2) % 6..(step as usize * 2) % 6 + 2];
        let (m, terms) = train_step(model, &mut adam, 1e-3, &data, part, 0, &mut rng, &s, &dev);
        model = m;
        assert!(terms.total.is_finite());
    }
    let after = eval_loss(&model.valid(), &data, &fold.train, 2, 0, &s, &dev).mean_total();
    let after_val = eval_loss(&model.valid(), &data, &fold.val, 2, 0, &s, &dev).mean_total();
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
