//! The fitted [`EbParams`] as a Burn module, so that checkpoints carry them like any model's
//! weights, and back.

use burn::module::Param;
use burn::prelude::*;

use super::EbParams;
use super::refine::EXIST_FEATURES;

/// Length of the checkpoint's `exist`: the weights, then 1 when there is a regression.
const EXIST_LEN: usize = EXIST_FEATURES + 1;

/// The fitted parameters as a module (per-edge vectors `[M]`, scalars `[1]`), so that
/// checkpoints carry them like any model's weights.
#[derive(Module, Debug)]
pub(crate) struct EbDrift<B: Backend> {
    pub a_bar: Param<Tensor<B, 1>>,
    pub k_g: Param<Tensor<B, 1>>,
    pub k_edge: Param<Tensor<B, 1>>,
    pub alpha: Param<Tensor<B, 1>>,
    pub drift: Param<Tensor<B, 1>>,
    pub seen: Param<Tensor<B, 1>>,
    pub p11: Param<Tensor<B, 1>>,
    pub p01: Param<Tensor<B, 1>>,
    pub nu: Param<Tensor<B, 1>>,
    /// `[β_age, β_sex]`.
    pub drift_factors: Param<Tensor<B, 1>>,
    /// The node similarity of the co-deviations `[N·N]` (zeros: none) and `γ` `[1]`.
    pub node_sim: Param<Tensor<B, 1>>,
    pub codev: Param<Tensor<B, 1>>,
    /// The existence regression's weights and 1, or 7 zeros when there is none.
    pub exist: Param<Tensor<B, 1>>,
    /// `[1]` when the parameters are the global-shrinkage forecaster's (`all_present`), else
    /// `[0]`.
    pub global_shrink: Param<Tensor<B, 1>>,
}

fn param<B: Backend>(v: &[f64], device: &B::Device) -> Param<Tensor<B, 1>> {
    let data: Vec<f32> = v.iter().map(|&x| x as f32).collect();
    let len = data.len();
    Param::from_tensor(Tensor::from_data(TensorData::new(data, [len]), device))
}

impl<B: Backend> EbDrift<B> {
    /// An unfitted model for `n` nodes (the identity forecast on present edges).
    pub(crate) fn new(n: usize, device: &B::Device) -> Self {
        let m = n * n.saturating_sub(1) / 2;
        Self::from_params(
            &EbParams {
                n,
                a_bar: 0.0,
                k_g: 1.0,
                k_edge: vec![1.0; m],
                alpha: vec![0.0; m],
                drift: vec![0.0; m],
                seen: vec![false; m],
                p11: vec![1.0; m],
                p01: vec![0.0; m],
                nu: vec![0.0; m],
                drift_factors: [0.0, 0.0],
                node_sim: vec![0.0; n * n],
                codev: 0.0,
                exist: None,
                all_present: false,
            },
            device,
        )
    }

    pub(crate) fn from_params(p: &EbParams, device: &B::Device) -> Self {
        let seen: Vec<f64> = p.seen.iter().map(|&s| f64::from(u8::from(s))).collect();
        let mut exist = [0.0; EXIST_LEN];
        if let Some(w) = &p.exist {
            exist[..w.len()].copy_from_slice(w);
            exist[w.len()] = 1.0;
        }
        Self {
            a_bar: param(&[p.a_bar], device),
            k_g: param(&[p.k_g], device),
            k_edge: param(&p.k_edge, device),
            alpha: param(&p.alpha, device),
            drift: param(&p.drift, device),
            seen: param(&seen, device),
            p11: param(&p.p11, device),
            p01: param(&p.p01, device),
            nu: param(&p.nu, device),
            drift_factors: param(&p.drift_factors, device),
            node_sim: if p.node_sim.len() == p.n * p.n {
                param(&p.node_sim, device)
            } else {
                param(&vec![0.0; p.n * p.n], device)
            },
            codev: param(&[p.codev], device),
            exist: param(&exist, device),
            global_shrink: param(&[f64::from(u8::from(p.all_present))], device),
        }
    }
}

/// The parameters of named checkpoint tensors `[M]`/`[1]` (`get` returns a tensor's values by
/// its field name), for `n` nodes. A checkpoint written before the drift factors, the
/// co-deviations and the existence regression (docs/eb-drift.md steps 8–10) has none of them:
/// its forecast is the one it was trained with (no factors, no pooling, `p11`); one written
/// before the small-sample check (issue 75) has no `global_shrink`: eb-drift's.
pub(crate) fn params_from(
    n: usize,
    get: impl Fn(&str) -> anyhow::Result<Vec<f32>>,
) -> anyhow::Result<EbParams> {
    let m = n * n.saturating_sub(1) / 2;
    let vec = |name: &str, len: usize| -> anyhow::Result<Vec<f64>> {
        let v = get(name)?;
        anyhow::ensure!(
            v.len() == len,
            "eb-drift checkpoint: {name} has {} values, expected {len} for {n} nodes",
            v.len()
        );
        Ok(v.into_iter().map(f64::from).collect())
    };
    Ok(EbParams {
        n,
        a_bar: vec("a_bar", 1)?[0],
        k_g: vec("k_g", 1)?[0],
        k_edge: vec("k_edge", m)?,
        alpha: vec("alpha", m)?,
        drift: vec("drift", m)?,
        seen: vec("seen", m)?.into_iter().map(|s| s > 0.5).collect(),
        p11: vec("p11", m)?,
        p01: vec("p01", m)?,
        nu: vec("nu", m)?,
        drift_factors: match get("drift_factors") {
            Ok(_) => {
                let v = vec("drift_factors", 2)?;
                [v[0], v[1]]
            }
            Err(_) => [0.0, 0.0],
        },
        node_sim: match get("node_sim") {
            Ok(_) => vec("node_sim", n * n)?,
            Err(_) => Vec::new(),
        },
        codev: match get("codev") {
            Ok(_) => vec("codev", 1)?[0],
            Err(_) => 0.0,
        },
        exist: match get("exist") {
            Ok(_) => {
                let v = vec("exist", EXIST_LEN)?;
                (v[EXIST_FEATURES] > 0.5).then(|| {
                    let mut w = [0.0; EXIST_FEATURES];
                    w.copy_from_slice(&v[..EXIST_FEATURES]);
                    w
                })
            }
            Err(_) => None,
        },
        all_present: match get("global_shrink") {
            Ok(_) => vec("global_shrink", 1)?[0] > 0.5,
            Err(_) => false,
        },
    })
}
