//! The latent-dynamics terms (docs/clg-ode-model.md §3.6): KL of the start visits' encodings, and the velocity
//! and acceleration of forecast trajectories against the observed encodings (stop-gradient).
//! Each returns its sum over items.

use burn::prelude::*;

use super::input::ObjectiveInput;
use super::staged::{Floats, Ints};
use crate::models::clg_ode::Encoded;
use crate::models::clg_ode::loss::{huber, kl_mean};

/// Σ over the batch's subjects of KL(μ_m, lv_m) + KL(μ_c, lv_c) of the clean start visits.
pub(crate) fn kl_sum<B: Backend>(enc: &Encoded<B>, nb: usize) -> Tensor<B, 1> {
    (kl_mean(
        enc.mu_m.clone().narrow(0, 0, nb),
        enc.logvar_m.clone().narrow(0, 0, nb),
    ) + kl_mean(
        enc.mu_c.clone().narrow(0, 0, nb),
        enc.logvar_c.clone().narrow(0, 0, nb),
    ))
    .sum()
}

fn select<B: Backend>(x: &ObjectiveInput, t: &Tensor<B, 3>, which: Ints) -> Tensor<B, 3> {
    t.clone().select(0, x.ints(which, &t.device()))
}

fn column<B: Backend>(
    x: &ObjectiveInput,
    which: Floats,
    items: usize,
    device: &B::Device,
) -> Tensor<B, 3> {
    x.floats::<B, 3>(which, [items, 1, 1], device)
}

/// Σ over velocity items of Huber-mean((z_j^pred − z_i)/Δt − sg((z_j^obs − z_i)/Δt)).
/// `z_fore` are the trajectories' end states, `z_clean` the start encodings, `z_all` every
/// encoder row.
pub(crate) fn velocity_sum<B: Backend>(
    x: &ObjectiveInput,
    z_fore: &Tensor<B, 3>,
    z_clean: &Tensor<B, 3>,
    z_all: &Tensor<B, 3>,
) -> Tensor<B, 1> {
    let device = z_fore.device();
    let it = &x.vel;
    let zpj = select(x, z_fore, Ints::VelTraj);
    let zei = select(x, z_clean, Ints::VelSubject);
    let zej = select(x, z_all, Ints::VelEnc).detach();
    let dt = column::<B>(x, Floats::VelDt, it.len(), &device);
    let v_model = (zpj - zei.clone()) / dt.clone();
    let v_obs = ((zej - zei) / dt).detach();
    let items = it.len();
    huber(v_model - v_obs)
        .reshape([items as i32, -1])
        .mean_dim(1)
        .sum()
}

/// Σ over acceleration items of Huber-mean(a_model − sg(a_obs)),
/// a = 2(v_jk − v_ij)/(Δt_ij + Δt_jk).
pub(crate) fn acceleration_sum<B: Backend>(
    x: &ObjectiveInput,
    z_fore: &Tensor<B, 3>,
    z_clean: &Tensor<B, 3>,
    z_all: &Tensor<B, 3>,
) -> Tensor<B, 1> {
    let device = z_fore.device();
    let it = &x.acc;
    let zpj = select(x, z_fore, Ints::AccTrajJ);
    let zpk = select(x, z_fore, Ints::AccTrajK);
    let zei = select(x, z_clean, Ints::AccSubject);
    let zej = select(x, z_all, Ints::AccEncJ).detach();
    let zek = select(x, z_all, Ints::AccEncK).detach();
    let dij = column::<B>(x, Floats::AccDtIj, it.len(), &device);
    let djk = column::<B>(x, Floats::AccDtJk, it.len(), &device);
    let denom = (dij.clone() + djk.clone()).mul_scalar(0.5);
    let accel = |zi: Tensor<B, 3>, zj: Tensor<B, 3>, zk: Tensor<B, 3>| {
        let v_ij = (zj.clone() - zi) / dij.clone();
        let v_jk = (zk - zj) / djk.clone();
        (v_jk - v_ij) / denom.clone()
    };
    let a_model = accel(zei.clone(), zpj, zpk);
    let a_obs = accel(zei.detach(), zej, zek).detach();
    let items = it.len();
    huber(a_model - a_obs)
        .reshape([items as i32, -1])
        .mean_dim(1)
        .sum()
}
