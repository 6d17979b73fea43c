//! Adam (Kingma & Ba), with state keyed by parameter position rather than by Burn's random
//! `ParamId`: the state can then be saved under readable names, restored into a fresh model, and
//! paired across data-parallel ranks. The update is the same as `burn::optim::Adam`'s.
//!
//! A backend may bring a one-pass update of its own ([`FusedAdam`], bit for bit the tensor
//! version's): the launcher hands it in (`launch::hooks`), so this loop names no backend.

use anyhow::{Result, bail};
use burn::module::AutodiffModule;
use burn::prelude::*;
use burn::tensor::DType;
use burn::tensor::backend::AutodiffBackend;

use super::keys::{self, StateKey};
use super::{Grads, ParamUpdate, from_host, step_module, to_host};
use crate::toolbox::checkpoint::Checkpoint;

/// Moments of one parameter, flattened.
#[derive(Clone)]
struct Slot<B: Backend> {
    time: u64,
    m: Tensor<B, 1>,
    v: Tensor<B, 1>,
}

/// The scalars of one Adam step of one parameter, in f32 as the tensor version applies them.
#[derive(Clone, Copy, Debug)]
pub struct AdamScalars {
    pub beta1: f32,
    pub beta2: f32,
    /// √(1 − β₂ᵗ) / (1 − β₁ᵗ).
    pub factor: f32,
    /// ε · √(1 − β₂ᵗ).
    pub eps: f32,
    pub lr: f32,
}

/// A backend's Adam update of a flat f32 parameter in one pass: `(m, v, parameter)` after one
/// step from the parameter, its gradient and its moments (`None` at the first step), bit for bit
/// the tensor version's. `applies` says whether it runs now (a backend's kernels can be
/// switched off); otherwise the tensor version runs.
pub struct FusedAdam<B: Backend> {
    pub applies: fn() -> bool,
    #[allow(clippy::type_complexity)]
    pub step: fn(
        Tensor<B, 1>,
        Tensor<B, 1>,
        Option<(Tensor<B, 1>, Tensor<B, 1>)>,
        AdamScalars,
    ) -> (Tensor<B, 1>, Tensor<B, 1>, Tensor<B, 1>),
}

impl<B: Backend> Clone for FusedAdam<B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B: Backend> Copy for FusedAdam<B> {}

pub struct Adam<B: Backend> {
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    slots: Vec<Option<Slot<B>>>,
    /// The backend's one-pass update, when it has one.
    fused: Option<FusedAdam<B>>,
}

impl<B: Backend> Default for Adam<B> {
    fn default() -> Self {
        Self {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            slots: Vec::new(),
            fused: None,
        }
    }
}

impl<B: Backend> Adam<B> {
    /// Adam with the backend's one-pass update (`None`: the tensor version throughout).
    pub fn with_fused(fused: Option<FusedAdam<B>>) -> Self {
        Self {
            fused,
            ..Self::default()
        }
    }

    /// One optimiser step over every float parameter of `module`.
    pub fn step<AB, M>(&mut self, lr: f64, module: M, grads: Grads<AB>) -> M
    where
        AB: AutodiffBackend<InnerBackend = B>,
        M: AutodiffModule<AB>,
    {
        step_module(self, lr, module, grads)
    }

    /// The step count the next update takes (1 for the first), when every parameter's state
    /// is at the same step (`None` otherwise): what a replayed update reads from the device
    /// (`--cuda-graph`).
    pub fn next_time(&self) -> Option<u64> {
        let mut times = self.slots.iter().map(|s| s.as_ref().map_or(0, |s| s.time));
        let first = times.next().unwrap_or(0);
        times.all(|t| t == first).then_some(first + 1)
    }

    /// Counts an update that ran on the device without this loop (a CUDA graph's replay: the
    /// parameters and moments changed in place): every parameter's step count + 1.
    pub fn count_replayed_step(&mut self) {
        for s in self.slots.iter_mut().flatten() {
            s.time += 1;
        }
    }

    /// Saves the state as `optim.adam.{moment_1,moment_2}.<param name>` (F32) and
    /// `optim.adam.time.<param name>` (I64).
    pub fn save_into(&self, names: &[String], ckpt: &mut Checkpoint) {
        for (slot, name) in self.slots.iter().zip(names) {
            let Some(s) = slot else { continue };
            for (key, t) in [(StateKey::AdamMoment1, &s.m), (StateKey::AdamMoment2, &s.v)] {
                ckpt.floats.insert(key.of(name), to_host(t));
            }
            ckpt.counters
                .insert(StateKey::AdamTime.of(name), s.time as i64);
        }
    }

    /// Restores the state saved by [`Adam::save_into`] for parameters `names` (visiting order).
    pub fn load_from(
        &mut self,
        names: &[String],
        ckpt: &Checkpoint,
        device: &B::Device,
    ) -> Result<()> {
        if ckpt.floats.keys().any(|k| k.starts_with(keys::SGD)) {
            bail!("optimiser: the checkpoint holds SGD's state, this run is Adam");
        }
        self.slots = Vec::with_capacity(names.len());
        for name in names {
            let m = ckpt.floats.get(&StateKey::AdamMoment1.of(name));
            let v = ckpt.floats.get(&StateKey::AdamMoment2.of(name));
            let t = ckpt.counters.get(&StateKey::AdamTime.of(name));
            match (m, v, t) {
                (Some(m), Some(v), Some(&t)) => {
                    if m.data.len() != v.data.len() {
                        bail!("optimiser state of `{name}`: moment sizes differ");
                    }
                    self.slots.push(Some(Slot {
                        time: t.max(0) as u64,
                        m: from_host(m, device),
                        v: from_host(v, device),
                    }));
                }
                (None, None, None) => self.slots.push(None),
                _ => bail!("optimiser state of `{name}` is incomplete"),
            }
        }
        Ok(())
    }
}

impl<B: Backend> ParamUpdate<B> for Adam<B> {
    /// Parameter `i` (flat) after one step with its flat gradient. With the backend's
    /// [`FusedAdam`] (the `flex` backend's fast kernels) the step is one pass, bit for bit the
    /// same.
    fn updated(
        &mut self,
        i: usize,
        param: Tensor<B, 1>,
        grad: Tensor<B, 1>,
        lr: f64,
    ) -> Tensor<B, 1> {
        if self.slots.len() <= i {
            self.slots.resize(i + 1, None);
        }
        let (b1, b2) = (self.beta1, self.beta2);
        let previous = self.slots[i].take();
        let time = previous.as_ref().map_or(1, |s| s.time + 1);
        let t = time as i32;
        let bc2_sqrt = (1.0 - b2.powi(t)).sqrt();
        let factor = bc2_sqrt / (1.0 - b1.powi(t));
        let fused = self.fused.filter(|f| (f.applies)());
        if let Some(fused) = fused
            && param.dtype() == DType::F32
        {
            let scalars = AdamScalars {
                beta1: b1,
                beta2: b2,
                factor,
                eps: self.eps * bc2_sqrt,
                lr: lr as f32,
            };
            let moments = previous.map(|s| (s.m, s.v));
            let (m, v, param) = (fused.step)(param, grad, moments, scalars);
            self.slots[i] = Some(Slot { time, m, v });
            return param;
        }
        let slot = match previous {
            Some(s) => Slot {
                time,
                m: s.m.mul_scalar(b1).add(grad.clone().mul_scalar(1.0 - b1)),
                v: s.v.mul_scalar(b2).add(grad.square().mul_scalar(1.0 - b2)),
            },
            None => Slot {
                time,
                m: grad.clone().mul_scalar(1.0 - b1),
                v: grad.square().mul_scalar(1.0 - b2),
            },
        };
        let step = slot
            .m
            .clone()
            .mul_scalar(factor)
            .div(slot.v.clone().sqrt().add_scalar(self.eps * bc2_sqrt))
            .mul_scalar(lr);
        self.slots[i] = Some(slot);
        param - step
    }
}
