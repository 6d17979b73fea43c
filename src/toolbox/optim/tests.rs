//! The optimisers' updates against hand-computed steps, their state through a checkpoint, and
//! a checkpoint of another optimiser refused.

use burn::backend::Autodiff;
use burn::nn::{Linear, LinearConfig};
use burn_flex::{Flex, FlexDevice};

use super::*;

type B = Flex;
type AB = Autodiff<Flex>;

fn flat(v: &[f32]) -> Tensor<B, 1> {
    Tensor::from_data(TensorData::new(v.to_vec(), [v.len()]), &FlexDevice)
}

fn values(t: Tensor<B, 1>) -> Vec<f32> {
    t.into_data().to_vec::<f32>().unwrap()
}

use burn::tensor::TensorData;

/// PyTorch's SGD with momentum 0.5 at lr 0.1 over three steps of gradient g (all small binary
/// fractions, so every product is exact in f32 and the comparison is bit for bit):
/// buf₁ = g, buf₂ = 0.5·g + g, buf₃ = 0.5·buf₂ + g; p −= 0.1·buf each step.
#[test]
fn sgd_with_momentum_steps_as_pytorch() {
    let mut sgd = Sgd::<B>::new(0.5);
    let (g, mut p) = ([1.0f32, -2.0], flat(&[0.5, 0.25]));
    let mut expected = [0.5f32, 0.25];
    let mut buf = [0.0f32; 2];
    for step in 0..3 {
        p = sgd.updated(0, p, flat(&g), 0.125);
        for k in 0..2 {
            buf[k] = if step == 0 { g[k] } else { 0.5 * buf[k] + g[k] };
            expected[k] -= 0.125 * buf[k];
        }
        assert_eq!(values(p.clone()), expected, "step {step}");
    }
    let mut plain = Sgd::<B>::new(0.0);
    let p = plain.updated(0, flat(&[1.0]), flat(&[2.0]), 0.25);
    assert_eq!(values(p), [0.5]);
    let mut ck = Checkpoint::default();
    plain.save_into(&["w".into()], &mut ck);
    assert!(ck.floats.is_empty(), "momentum 0 keeps no state");
}

/// Two steps in one go equal one step, a checkpoint, a fresh optimiser restored from it and the
/// second step, bit for bit, for both optimisers; the spec is recorded and a checkpoint of
/// another optimiser (or other constants) is refused.
#[test]
fn optimiser_state_resumes_exactly_and_other_optimisers_are_refused() {
    let specs = [
        OptimizerSpec::default(),
        OptimizerSpec::Sgd { momentum: 0.9 },
    ];
    for spec in specs {
        let model: Linear<AB> = LinearConfig::new(3, 2).init(&FlexDevice);
        // Lazily initialised parameters would draw again in each clone.
        crate::toolbox::params::materialize(&model);
        let names: Vec<String> = vec!["weight".into(), "bias".into()];
        let grads = || {
            Grads::<AB>::Flat(vec![
                Some(flat(&[0.5, -1.0, 0.25, 2.0, -0.75, 1.5])),
                Some(flat(&[1.0, -0.5])),
            ])
        };
        let mut one = Optimizer::<B>::new(spec, None);
        let once = one.step(0.01, model.clone(), grads());
        let straight = one.step(0.01, once, grads());
        let mut first = Optimizer::<B>::new(spec, None);
        let after_one = first.step(0.01, model, grads());
        let mut ck = Checkpoint::default();
        first.save_into(&names, &mut ck);
        assert_eq!(ck.metadata.get("optimizer"), Some(&spec.to_string()));
        let mut second = Optimizer::<B>::new(spec, None);
        second.load_from(&names, &ck, &FlexDevice).unwrap();
        let resumed = second.step(0.01, after_one, grads());
        let w = |m: &Linear<AB>| m.weight.val().into_data().to_vec::<f32>().unwrap();
        assert_eq!(w(&straight), w(&resumed), "{spec}");
        for other in [
            OptimizerSpec::Sgd { momentum: 0.5 },
            OptimizerSpec::default(),
            OptimizerSpec::Adam {
                beta1: 0.8,
                beta2: 0.999,
                eps: 1e-8,
            },
        ] {
            if other == spec {
                continue;
            }
            let e = Optimizer::<B>::new(other, None)
                .load_from(&names, &ck, &FlexDevice)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("checkpoint {spec}, this run {other}")),
                "{e}"
            );
        }
    }
    assert_eq!(
        OptimizerSpec::default().to_string(),
        "adam(beta1=0.9, beta2=0.999, eps=1e-8)"
    );
}
