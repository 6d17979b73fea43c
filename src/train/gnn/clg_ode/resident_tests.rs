//! The scans held on the device (`resident.rs`, `models::clg_ode::objective::resident`): a
//! batch's encoder inputs (edge dropout included), start visits and targets gathered there are
//! the host's values bit for bit, and a training step with them is the same step.

use std::sync::Arc;

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::batch::{Mode, build};
use super::resident::CohortScans;
use super::step::{Pieces, grads};
use super::tests::{cohort, setup};
use crate::data::connectome::Cohort;
use crate::dist::Single;
use crate::models::clg_ode::objective::input::host;
use crate::models::clg_ode::objective::resident::Resident;
use crate::models::clg_ode::objective::staged::{Floats, Ints, Pack, stage};
use crate::models::clg_ode::objective::{Objective, ObjectiveConfig};
use crate::toolbox::ddp::flatten_grads;
use crate::train::gnn::settings::Sampling;

fn resident(c: &Arc<Cohort>) -> Arc<Resident> {
    Arc::new(Resident::new(Arc::new(CohortScans::new(c.clone()))))
}

/// Half the positive edges of each augmented input dropped, so that every batch has some.
fn dropping() -> Sampling {
    Sampling {
        sc_pos_edge_drop_prob: 0.5,
        ..Sampling::default()
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

#[test]
fn scans_on_the_device_give_the_staged_inputs_bit_for_bit() {
    type AB = Autodiff<Flex>;
    let (_d, c) = cohort(12, 20);
    let (fold, data, _) = setup(&c);
    let dev = FlexDevice;
    let cfg = ObjectiveConfig::default();
    let subjects = &fold.train;
    let mut rngs: Vec<ChaCha8Rng> = (0..subjects.len() as u64)
        .map(ChaCha8Rng::seed_from_u64)
        .collect();
    // Epoch 20: the velocity and acceleration encodings too (clean rows of visits j and k).
    let x = build(
        &data,
        subjects,
        Mode::Train(&mut rngs),
        20,
        &cfg,
        &dropping(),
    );
    let ids = x.scan_ids.clone().expect("a built batch records its scans");
    assert!(!ids.dropped.is_empty(), "no edge dropped");
    assert_eq!(ids.enc.len(), x.enc_rows);
    assert!(x.enc_rows > 2 * subjects.len(), "no velocity rows");
    let mut obj = Objective::new(cfg, false, 120, 1);
    obj.targets_on_device = true;
    obj.resident = Some(resident(&c));
    stage::<AB>(&obj, &x, &dev);
    // Staged by index: the matrices are not in the pack, their scans' indices are.
    let pack = x.held::<Pack<Flex>>("pack").expect("staged");
    assert!(pack.floats(Floats::EncA).is_none() && pack.ints(Ints::EncScan).is_some());
    assert!(pack.ints(Ints::Dropped).is_some());
    let (n, p) = (x.n, x.n_preds());
    for (which, values, rows) in [
        (Floats::EncA, &x.enc_a, x.enc_rows),
        (Floats::StartLog, &x.start_log, p),
        (Floats::TargetRaw, &x.target_raw, p),
    ] {
        let inner = x.floats::<Flex, 3>(which, [rows, n, n], &dev);
        assert_eq!(
            bits(&host(inner)),
            bits(values),
            "{which:?} on the inner backend"
        );
        let outer = x.floats::<AB, 3>(which, [rows, n, n], &dev);
        assert_eq!(
            bits(&host(outer.inner())),
            bits(values),
            "{which:?} for autodiff"
        );
    }
}

/// One pass with the keep masks on the device (what `tch` runs on a GPU), with and without the
/// scans held there (the batch then built without its encoder inputs' and start visits' logs
/// on the host): the same gradients, statistics and topology values bit for bit (the same
/// values staged, the same operations after), and no more uploads a step once they are held.
/// Also with the eb-drift head (`--preset eb-residual`) and with the innovation module
/// (`--fixed-support --innovation-enabled`), which read the start visits on the host.
#[test]
fn a_step_with_the_scans_on_the_device_is_the_same_step() {
    use crate::backend::fast_cpu::FastCpu;
    use crate::host_reads::Counts;
    type F = Autodiff<FastCpu>;
    let (_d, c) = cohort(12, 20);
    let (fold, data, mut cfg) = setup(&c);
    let dev = FlexDevice;
    let held = resident(&c);
    held.scans::<FastCpu>(&dev);
    for (eb, innovation) in [(false, false), (true, false), (false, true)] {
        cfg.decoder.eb_head = eb;
        cfg.decoder.fixed_support = innovation;
        let model = cfg.init::<F>(&dev);
        let mut objective = ObjectiveConfig::default();
        objective.innovation.enabled = innovation;
        let step = |resident: Option<Arc<Resident>>| {
            let mut obj = Objective::new(objective.clone(), innovation, 120, 1);
            obj.targets_on_device = true;
            obj.resident = resident;
            obj.eb_forecaster = eb.then(|| super::super::fits::fit_arc(&data, &fold.train));
            let before = Counts::now();
            let r = grads(
                &model,
                &mut obj,
                &data,
                &dropping(),
                (42, 0, 20),
                &fold.train,
                0,
                (0, 4),
                Pieces::Whole,
                &dev,
                &Single,
            )
            .unwrap();
            let uploads = before.elapsed().uploads;
            let flat = flatten_grads(&model, &r.grads).flat;
            (bits(&flat), r.stats.v, r.topo_raw, uploads)
        };
        // A pool of its own, as `clg_training_step_ops_on_flex` runs one pass (why there).
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let (plain, on_device) = pool.install(|| (step(None), step(Some(held.clone()))));
        assert!(
            plain.0.iter().any(|&g| g != 0),
            "eb {eb}, innovation {innovation}: no gradient"
        );
        assert!(
            plain.0 == on_device.0,
            "eb {eb}, innovation {innovation}: gradients differ"
        );
        assert!(
            plain.1 == on_device.1,
            "eb {eb}, innovation {innovation}: statistics differ"
        );
        assert!(
            plain.2 == on_device.2,
            "eb {eb}, innovation {innovation}: topology values differ"
        );
        eprintln!(
            "eb {eb}, innovation {innovation}: uploads a step: {} -> {}",
            plain.3, on_device.3
        );
        assert!(
            on_device.3 <= plain.3,
            "{} uploads, {} before",
            on_device.3,
            plain.3
        );
    }
}
