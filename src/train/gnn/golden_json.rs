//! Reading `tests/fixtures/baselines-golden.json` (values computed by the reference's own code,
//! docs/baselines-surface.md §6) for the baseline goldens: tensors, parameters by the reference's
//! names in Burn's layout, and the tolerance check.

use burn::prelude::*;
use serde_json::Value;

use crate::toolbox::optim::keys::StateKey;

/// Error allowed against the reference's values (absolute, relative where |want| > 1; see
/// [`check`]). Flex (f32) against PyTorch (f32, recorded once on another machine): the forward
/// passes, losses, gradients and two Adam steps of tiny models (the GCN: hidden 5, 6-node
/// graphs; the LSTM: 15 inputs, latent 8) differ by f32 reassociation of short sums (tens of
/// terms: ≤ n·u ≈ 2e-6 worst case for n = 36, ≈ √n·u ≈ 4e-7 typically) and the order of
/// operations in Adam. Measured worst: 3.7e-7 (GCN) and 4.2e-7
/// (LSTM), 24× below. Flex's order depends on the CPU (macerator's sums: 8 lanes on AVX2, 16
/// on AVX-512; gemm's FMA and AVX-512 kernels agree for depths this short), never on the
/// thread count; another order is another draw of the same rounding noise, so 24× holds.
pub(super) const TOL: f64 = 1e-5;

pub(super) fn golden(key: &str) -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/baselines-golden.json"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v[key].clone()
}

pub(super) fn flat(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(a) => a.iter().flat_map(flat).collect(),
        v => vec![v.as_f64().unwrap()],
    }
}

pub(super) fn tensor3<BB: Backend>(v: &Value, dims: [usize; 3]) -> Tensor<BB, 3> {
    let d: Vec<f32> = flat(v).into_iter().map(|x| x as f32).collect();
    Tensor::from_data(TensorData::new(d, dims), &Default::default())
}

pub(super) fn host<BB: Backend, const D: usize>(t: Tensor<BB, D>) -> Vec<f64> {
    t.into_data()
        .convert::<f32>()
        .to_vec::<f32>()
        .unwrap()
        .into_iter()
        .map(f64::from)
        .collect()
}

/// The largest error of `ours` against `want`, relative where |want| > 1; panics above TOL.
pub(super) fn check(what: &str, ours: &[f64], want: &[f64]) -> f64 {
    assert_eq!(ours.len(), want.len(), "{what}: sizes");
    let err = ours
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
        .fold(0.0f64, f64::max);
    eprintln!("{what}: max error {err:.3e}");
    assert!(
        err <= TOL,
        "{what}: error {err:e} > {TOL:e}\nours {ours:?}\nwant {want:?}"
    );
    err
}

/// A PyTorch `[out, in]` weight as Burn's `[in, out]`, flat.
pub(super) fn transposed(v: &Value) -> Vec<f64> {
    let rows = v.as_array().unwrap();
    let (o, i) = (rows.len(), rows[0].as_array().unwrap().len());
    let f = flat(v);
    (0..i)
        .flat_map(|c| (0..o).map(move |r| (r, c)))
        .map(|(r, c)| f[r * i + c])
        .collect()
}

pub(super) fn param(p: &Value) -> (String, Vec<f64>, Vec<usize>) {
    let name = p["name"].as_str().unwrap().to_string();
    let shape: Vec<usize> = p["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap() as usize)
        .collect();
    if shape.len() == 2 {
        (name, transposed(&p["value"]), vec![shape[1], shape[0]])
    } else {
        (name, flat(&p["value"]), shape)
    }
}

/// The golden's parameters, by the reference's names, as Burn lays them out.
pub(super) fn by_name(list: &Value) -> Vec<(String, Vec<f64>)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let (n, v, _) = param(p);
            (n, v)
        })
        .collect()
}

pub(super) fn check_params(what: &str, ours: &[(String, Vec<f64>)], want: &Value) -> f64 {
    let want = by_name(want);
    assert_eq!(ours.len(), want.len());
    let mut worst = 0.0f64;
    for ((n, o), (wn, w)) in ours.iter().zip(&want) {
        assert_eq!(n, wn);
        worst = worst.max(check(&format!("{what} {n}"), o, w));
    }
    worst
}

/// Adam's moments after two steps (torch's `exp_avg`, `exp_avg_sq`; Burn layout) against the
/// golden's `adam_state_after` list; `names` in the order of Adam's slots. Returns the worst
/// error.
pub(super) fn check_adam_moments<B: Backend>(
    adam: &crate::toolbox::optim::Adam<B>,
    names: &[String],
    want: &Value,
) -> f64 {
    let mut ck = crate::toolbox::checkpoint::Checkpoint::default();
    adam.save_into(names, &mut ck);
    let mut worst = 0.0f64;
    for p in want.as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        assert_eq!(ck.counters[&StateKey::AdamTime.of(name)], 2);
        for (state, key) in [
            (StateKey::AdamMoment1, "exp_avg"),
            (StateKey::AdamMoment2, "exp_avg_sq"),
        ] {
            let want = if p[key][0].is_array() {
                transposed(&p[key])
            } else {
                flat(&p[key])
            };
            let ours: Vec<f64> = ck.floats[&state.of(name)]
                .data
                .iter()
                .map(|&x| f64::from(x))
                .collect();
            worst = worst.max(check(&format!("step2 adam {key} {name}"), &ours, &want));
        }
    }
    worst
}
