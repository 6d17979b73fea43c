//! The VectorLSTM baseline against the reference's own values
//! (`tests/fixtures/baselines-golden.json`, key `vector_lstm`: D = 15 (6 nodes), H = 8, a batch
//! of 4 padded sequences, docs/baselines-surface.md §1): the forward (encoder, LSTM outputs and
//! final state, prediction), the masked loss, two Adam steps (loss, every gradient, the
//! parameters after each step, Adam's moments) and the test-time forward of every subject.

use burn::backend::{Autodiff, Flex};
use burn::module::{AutodiffModule, Param};
use burn::nn::Linear;
use burn::optim::GradientsParams;
use burn::prelude::*;
use serde_json::Value;

use super::super::golden_json::{
    check, check_adam_moments, check_params, flat, golden, host, param, tensor3,
};
use crate::models::vector_lstm::{VectorLstm, loss};
use crate::toolbox::optim::{Adam, Grads};

type AB = Autodiff<Flex>;
type IB = Flex;

/// The reference's parameter names, in `state_dict` order, and our Linear for each pair.
const NAMES: [&str; 8] = [
    "encoder.weight",
    "encoder.bias",
    "lstm.weight_ih_l0",
    "lstm.weight_hh_l0",
    "lstm.bias_ih_l0",
    "lstm.bias_hh_l0",
    "decoder.weight",
    "decoder.bias",
];

fn layer_of<'a, BB: Backend>(m: &'a mut VectorLstm<BB>, name: &str) -> &'a mut Linear<BB> {
    match name {
        n if n.starts_with("encoder") => &mut m.encoder,
        n if n.starts_with("decoder") => &mut m.decoder,
        n if n.ends_with("ih_l0") => &mut m.lstm.input,
        _ => &mut m.lstm.hidden,
    }
}

fn golden_model<BB: Backend>(g: &Value) -> VectorLstm<BB> {
    let dev = Default::default();
    let d = g["model"]["input_dim"].as_u64().unwrap() as usize;
    let h = g["model"]["latent_dim"].as_u64().unwrap() as usize;
    let mut m = VectorLstm::<BB>::new(d, h, &dev);
    for p in g["model"]["init_params"].as_array().unwrap() {
        let (name, v, shape) = param(p);
        let v: Vec<f32> = v.into_iter().map(|x| x as f32).collect();
        let layer = layer_of(&mut m, &name);
        if name.contains("weight") {
            let t = Tensor::<BB, 2>::from_data(TensorData::new(v, [shape[0], shape[1]]), &dev);
            layer.weight = Param::from_tensor(t);
        } else {
            let t = Tensor::<BB, 1>::from_data(TensorData::new(v, [shape[0]]), &dev);
            layer.bias = Some(Param::from_tensor(t));
        }
    }
    m
}

fn linears<BB: Backend>(m: &VectorLstm<BB>) -> [&Linear<BB>; 4] {
    [&m.encoder, &m.lstm.input, &m.lstm.hidden, &m.decoder]
}

/// The model's parameters by the reference's names (Burn layout), in `state_dict` order.
fn params_of<BB: Backend>(m: &VectorLstm<BB>) -> Vec<(String, Vec<f64>)> {
    let [enc, ih, hh, dec] = linears(m);
    let bias = |l: &Linear<BB>| host(l.bias.as_ref().unwrap().val());
    let values = [
        host(enc.weight.val()),
        bias(enc),
        host(ih.weight.val()),
        host(hh.weight.val()),
        bias(ih),
        bias(hh),
        host(dec.weight.val()),
        bias(dec),
    ];
    NAMES.iter().map(|n| n.to_string()).zip(values).collect()
}

fn grads_of(m: &VectorLstm<AB>, g: &GradientsParams) -> Vec<(String, Vec<f64>)> {
    let [enc, ih, hh, dec] = linears(m);
    let w = |l: &Linear<AB>| host(g.get::<IB, 2>(l.weight.id).unwrap());
    let b = |l: &Linear<AB>| host(g.get::<IB, 1>(l.bias.as_ref().unwrap().id).unwrap());
    let values = [w(enc), b(enc), w(ih), w(hh), b(ih), b(hh), w(dec), b(dec)];
    NAMES.iter().map(|n| n.to_string()).zip(values).collect()
}

/// The golden's batch: x, y `[B, T, D]` and the step mask `[B, T]`.
fn batch0<BB: Backend>(g: &Value) -> (Tensor<BB, 3>, Tensor<BB, 3>, Tensor<BB, 2>) {
    let b = &g["dataset"]["batches"][0];
    let x = b["x"].as_array().unwrap();
    let dims = [
        x.len(),
        x[0].as_array().unwrap().len(),
        x[0][0].as_array().unwrap().len(),
    ];
    let mask: Vec<f32> = flat(&b["mask"]).into_iter().map(|v| v as f32).collect();
    let mask = Tensor::from_data(
        TensorData::new(mask, [dims[0], dims[1]]),
        &Default::default(),
    );
    (tensor3(&b["x"], dims), tensor3(&b["y"], dims), mask)
}

#[test]
fn forward_and_loss_match_the_reference() {
    let g = golden("vector_lstm");
    let f = &g["forward"];
    let m = golden_model::<IB>(&g);
    let (x, y, mask) = batch0::<IB>(&g);
    let o = m.forward_with(x);
    check(
        "encoder_out",
        &host(o.encoder_out),
        &flat(&f["encoder_out"]),
    );
    check("lstm_out", &host(o.lstm.h.clone()), &flat(&f["lstm_out"]));
    let [b, t, h] = o.lstm.h.dims();
    let h_n = o.lstm.h.narrow(1, t - 1, 1).reshape([b, h]);
    check("lstm_h_n", &host(h_n), &flat(&f["lstm_h_n"]));
    check("lstm_c_n", &host(o.lstm.c_last), &flat(&f["lstm_c_n"]));
    check("y_pred", &host(o.y_pred.clone()), &flat(&f["y_pred"]));
    check(
        "loss",
        &host(loss(o.y_pred, y, mask)),
        &[f["loss_eval (Trainer._evaluate return value)"]
            .as_f64()
            .unwrap()],
    );
}

#[test]
fn two_adam_steps_match_the_reference() {
    let g = golden("vector_lstm");
    let t = &g["train_step"];
    let lr = t["optimizer"]["lr"].as_f64().unwrap();
    assert_eq!(lr, 1e-4, "the reference CLI's default");
    let mut adam = Adam::<IB>::default();
    let mut model = golden_model::<AB>(&g);
    let (x, y, mask) = batch0::<AB>(&g);
    let mut worst = 0.0f64;
    for step in ["step1", "step2"] {
        let s = &t[step];
        let pred = model.forward(x.clone());
        worst = worst.max(check(
            &format!("{step} y_pred"),
            &host(pred.clone()),
            &flat(&s["y_pred"]),
        ));
        let l = loss(pred, y.clone(), mask.clone());
        worst = worst.max(check(
            &format!("{step} loss"),
            &host(l.clone()),
            &[s["loss"].as_f64().unwrap()],
        ));
        let grads = GradientsParams::from_grads(l.backward(), &model);
        worst = worst.max(check_params(
            &format!("{step} grad"),
            &grads_of(&model, &grads),
            &s["grads"],
        ));
        model = adam.step(lr, model, Grads::Params(grads));
        worst = worst.max(check_params(
            &format!("{step} params"),
            &params_of(&model.valid()),
            &s["params_after"],
        ));
    }
    // As for the GCN golden: `step1.adam_state_after` holds the moments after step 2 (the
    // generator kept references to tensors the second step updated in place).
    // Adam's slots follow the module's parameter order (each Linear's weight, then bias).
    let names: Vec<String> = [0, 1, 2, 4, 3, 5, 6, 7]
        .iter()
        .map(|&i| NAMES[i].to_string())
        .collect();
    worst = worst.max(check_adam_moments(
        &adam,
        &names,
        &t["step1"]["adam_state_after"],
    ));
    eprintln!("VectorLSTM golden: worst error {worst:.3e}");
}

/// The test-time forward: each subject's symmetrised scan 0 as a one-step sequence.
#[test]
fn test_time_predictions_match_the_reference() {
    let g = golden("vector_lstm");
    let m = golden_model::<IB>(&g);
    for call in g["test_metrics"]["calls"].as_array().unwrap() {
        let d = call["x"][0][0].as_array().unwrap().len();
        let x = tensor3::<IB>(&call["x"], [1, 1, d]);
        let subject = call["subject"].as_str().unwrap();
        check(
            &format!("test y_pred {subject}"),
            &host(m.forward(x)),
            &flat(&call["y_pred"]),
        );
    }
}
