//! Passes of the objective that must equal one another bit for bit on the golden batch:
//! GradNorm's three parts against the full forward, and the targets' side computed on the
//! device against the host's.

use super::batch::{golden_input, golden_model};
use super::*;

/// Autodiff over Flex, as training runs.
type AB = burn::backend::Autodiff<Flex>;

/// A golden configuration of `compute_loss`: the reference's tiny model, the golden batch at
/// the case's epoch, and the objective with the golden probes.
struct Case {
    label: String,
    model: crate::models::clg_ode::ClgOde<AB>,
    epoch: usize,
    x: crate::models::clg_ode::objective::ObjectiveInput,
    objective: Objective,
}

/// Every golden configuration of `compute_loss`.
fn autodiff_cases() -> Vec<Case> {
    let gl = golden();
    let g = &gl["compute_loss"];
    let p400 = flat32(&gl["topology"]["probes_n400"]["probes_4_seed42"]);
    let cases = g["configs"].as_array().unwrap().iter().map(|case| {
        let a = args(&case["flags"]);
        let (c, dec) = (a.objective.clone(), a.decoder.clone());
        let epoch = case["epoch"].as_u64().unwrap() as usize;
        let mut objective = Objective::new(c.clone(), dec.fixed_support, a.max_epochs, 42);
        objective.fixed_probes = Some(p400[..c.topology.probes * 6].to_vec());
        Case {
            label: case["label"].as_str().unwrap().to_string(),
            model: golden_model::<AB>(g, dec, &dev()),
            epoch,
            x: golden_input(g, &c, epoch),
            objective,
        }
    });
    cases.collect()
}

/// A copy of `model` with fresh autodiff leaves, for one forward and its backward: a second
/// backward through `model` itself can lose a parameter's gradient to another test's backward
/// (`toolbox::host_parallel` says why), as the training step's passes each take a copy.
fn fresh(model: &crate::models::clg_ode::ClgOde<AB>) -> crate::models::clg_ode::ClgOde<AB> {
    burn::module::AutodiffModule::from_inner(burn::module::AutodiffModule::valid(model))
}

/// GradNorm's step builds its three parts apart ([`Objective::forward_part`]): in every golden
/// configuration, every term's sum and gradients are the full forward's, bit for bit, and the
/// three parts' statistics and raw topology values together are the full forward's (so the
/// passes' losses and gradient norms, hence GradNorm's weights, are unchanged), also when the
/// parts replay one kept integration.
#[test]
fn forward_parts_are_the_full_forward_bit_for_bit() {
    use crate::models::clg_ode::objective::{Part, Stats};
    use burn::optim::GradientsParams;
    let mut compared = std::collections::BTreeSet::new();
    let mut replayed = 0;
    for case in autodiff_cases() {
        let (label, model, epoch, x, obj) = (
            case.label.as_str(),
            &case.model,
            case.epoch,
            &case.x,
            &case.objective,
        );
        let in_graph = |t: &Tensor<AB, 1>| match t.clone().into_primitive() {
            burn::tensor::TensorPrimitive::Float(p) => !p.node.requirement.is_none(),
            _ => false,
        };
        let grad_bits = |m: &crate::models::clg_ode::ClgOde<AB>, loss: Tensor<AB, 1>| -> Vec<u32> {
            let grads = GradientsParams::from_grads(loss.backward(), m);
            let flat = crate::toolbox::ddp::flatten_grads(m, &grads).flat;
            flat.iter().map(|v| v.to_bits()).collect()
        };
        let bits = |s: &Stats| s.v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let mut merged = Stats::default();
        let mut raw = vec![0.0f64; x.n_preds()];
        for part in Part::GRADNORM {
            let fwd = obj.forward_part(model, x, part, epoch, &dev(), None);
            merged.merge(&fwd.stats);
            if part == Part::Topo {
                raw = fwd.topo_raw.clone();
            }
            // One graph at a time: a backward consumes what it reaches, the model's leaves too.
            for term in Term::ALL.into_iter().filter(|&t| part.owns(t)) {
                let at = format!("{label}: {}", term.name());
                let m = fresh(model);
                let fwd = obj.forward_part(&m, x, part, epoch, &dev(), None);
                // A term that is off is a constant zero, outside the graph (no backward).
                let tracked = in_graph(&fwd.sums[term]);
                let grads = tracked.then(|| grad_bits(&m, fwd.sums[term].clone()));
                let m = fresh(model);
                let full = obj.forward(&m, x, epoch, &dev());
                assert_eq!(in_graph(&full.sums[term]), tracked, "{at}");
                if let Some(grads) = grads {
                    assert_eq!(grads, grad_bits(&m, full.sums[term].clone()), "{at}");
                    compared.insert(term.name());
                }
            }
        }
        let full = obj.forward(model, x, epoch, &dev());
        let mut whole = Stats::default();
        whole.merge(&full.stats);
        assert_eq!(bits(&merged), bits(&whole), "{label}: statistics");
        // The same with the forecasts' integration kept once and replayed in each part's graph
        // (`models::clg_ode::shared_ode`): the values are the graph's own, bit for bit.
        let kept = obj.ode_kept(&burn::module::AutodiffModule::valid(model), x, &dev());
        replayed += usize::from(kept.is_some());
        let mut with_kept = Stats::default();
        for part in Part::GRADNORM {
            let fwd = obj.forward_part(model, x, part, epoch, &dev(), kept.as_ref());
            with_kept.merge(&fwd.stats);
        }
        assert_eq!(
            bits(&with_kept),
            bits(&whole),
            "{label}: statistics, integration kept"
        );
        assert_eq!(
            raw.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            full.topo_raw
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>(),
            "{label}: raw topology values"
        );
    }
    // Every term's gradients are compared in some configuration.
    assert_eq!(compared.len(), Term::COUNT, "compared: {compared:?}");
    assert!(replayed > 0, "no configuration integrated a forecast");
}

/// The objective with its keep masks, edge indicators and log targets computed on the device
/// (`Objective::targets_on_device`, what `tch` runs) is the host computation's, bit for bit:
/// every statistic (the mask diagnostics read the indicators), the raw topology values and
/// the gradient of every term, in each golden configuration. Its inputs staged as `tch` stages
/// them (`objective/staged.rs`: two uploads, each input a slice).
#[test]
fn targets_on_the_device_give_the_host_objective_bit_for_bit() {
    use crate::models::clg_ode::objective::Part;
    use crate::models::clg_ode::objective::staged::{Pack, stage};
    use burn::optim::GradientsParams;
    let mut terms = std::collections::BTreeSet::new();
    for case in autodiff_cases() {
        let (label, model, epoch, x) = (case.label.as_str(), &case.model, case.epoch, &case.x);
        let host = case.objective.clone();
        let mut device = case.objective.clone();
        device.targets_on_device = true;
        let xd = x.clone();
        stage::<AB>(&device, &xd, &dev());
        assert!(xd.held::<Pack<AB>>("pack").is_some(), "{label}: not staged");
        let grad_bits = |m: &crate::models::clg_ode::ClgOde<AB>, loss: Tensor<AB, 1>| -> Vec<u32> {
            let grads = GradientsParams::from_grads(loss.backward(), m);
            let flat = crate::toolbox::ddp::flatten_grads(m, &grads).flat;
            flat.iter().map(|v| v.to_bits()).collect()
        };
        for part in Part::GRADNORM {
            let (h, d) = (
                host.forward_part(model, x, part, epoch, &dev(), None),
                device.forward_part(model, &xd, part, epoch, &dev(), None),
            );
            let bits = |v: &[f64]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&h.stats.v), bits(&d.stats.v), "{label}: statistics");
            assert_eq!(
                bits(&h.topo_raw),
                bits(&d.topo_raw),
                "{label}: raw topology"
            );
            for term in Term::ALL.into_iter().filter(|&t| part.owns(t)) {
                // One graph at a time (a backward consumes what it reaches, the model's
                // leaves too): each forward's backward before the next forward.
                let mut seen = Vec::new();
                for (obj, x) in [(&host, x), (&device, &xd)] {
                    let m = fresh(model);
                    let sum = obj.forward_part(&m, x, part, epoch, &dev(), None).sums[term].clone();
                    let value = sum.clone().inner().into_scalar();
                    let grads = (value != 0.0).then(|| grad_bits(&m, sum));
                    seen.push((value.to_bits(), grads));
                }
                assert_eq!(seen[0], seen[1], "{label}: {}", term.name());
                if seen[0].1.is_some() {
                    terms.insert(term.name());
                }
            }
        }
    }
    // The terms that read the masks, indicators or log targets are among those compared.
    for term in [
        Term::Manifold,
        Term::Topo,
        Term::FullLog,
        Term::ZeroLog,
        Term::Density,
    ] {
        assert!(
            terms.contains(term.name()),
            "{} not compared: {terms:?}",
            term.name()
        );
    }
}
