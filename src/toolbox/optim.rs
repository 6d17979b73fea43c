//! Adam (Kingma & Ba), with state keyed by parameter position rather than by Burn's random
//! `ParamId`: the state can then be saved under readable names, restored into a fresh model, and
//! paired across data-parallel ranks. The update is the same as `burn::optim::Adam`'s.

use anyhow::{Result, bail};
use burn::module::{AutodiffModule, ModuleMapper, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;

use super::checkpoint::Checkpoint;
use super::params::HostTensor;

/// Moments of one parameter, flattened.
#[derive(Clone)]
struct Slot<B: Backend> {
    time: u64,
    m: Tensor<B, 1>,
    v: Tensor<B, 1>,
}

/// Where the gradients of one step come from.
pub enum Grads<B: AutodiffBackend> {
    /// Straight from `backward()`.
    Params(GradientsParams),
    /// One flat gradient per parameter in visiting order (e.g. after an all-reduce); `None`
    /// for a parameter that no rank computed a gradient for, which is left alone as
    /// `Params` leaves a parameter without gradient.
    Flat(Vec<Option<Tensor<B::InnerBackend, 1>>>),
}

pub struct Adam<B: Backend> {
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    slots: Vec<Option<Slot<B>>>,
}

impl<B: Backend> Default for Adam<B> {
    fn default() -> Self {
        Self {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            slots: Vec::new(),
        }
    }
}

struct StepMapper<'a, AB: AutodiffBackend> {
    adam: &'a mut Adam<AB::InnerBackend>,
    grads: &'a mut Grads<AB>,
    lr: f64,
    index: usize,
}

impl<AB: AutodiffBackend> ModuleMapper<AB> for StepMapper<'_, AB> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<AB, D>>) -> Param<Tensor<AB, D>> {
        let (id, tensor, mapper) = param.consume();
        let i = self.index;
        self.index += 1;
        let dims = tensor.dims();
        let n: usize = dims.iter().product();
        let grad: Option<Tensor<AB::InnerBackend, 1>> = match self.grads {
            Grads::Params(g) => g.remove::<AB::InnerBackend, D>(id).map(|g| g.reshape([n])),
            Grads::Flat(v) => v.get(i).cloned().flatten(),
        };
        let Some(grad) = grad else {
            return Param::from_mapped_value(id, tensor, mapper);
        };
        let delta = self.adam.update(i, grad, self.lr).reshape(dims);
        let require_grad = tensor.is_require_grad();
        let mut t = Tensor::from_inner(tensor.inner() - delta);
        if require_grad {
            t = t.require_grad();
        }
        Param::from_mapped_value(id, t, mapper)
    }
}

impl<B: Backend> Adam<B> {
    /// The step to subtract from parameter `i` given its flat gradient.
    fn update(&mut self, i: usize, grad: Tensor<B, 1>, lr: f64) -> Tensor<B, 1> {
        if self.slots.len() <= i {
            self.slots.resize(i + 1, None);
        }
        let (b1, b2) = (self.beta1, self.beta2);
        let slot = match self.slots[i].take() {
            Some(s) => Slot {
                time: s.time + 1,
                m: s.m.mul_scalar(b1).add(grad.clone().mul_scalar(1.0 - b1)),
                v: s.v.mul_scalar(b2).add(grad.square().mul_scalar(1.0 - b2)),
            },
            None => Slot {
                time: 1,
                m: grad.clone().mul_scalar(1.0 - b1),
                v: grad.square().mul_scalar(1.0 - b2),
            },
        };
        let t = slot.time as i32;
        let bc2_sqrt = (1.0 - b2.powi(t)).sqrt();
        let factor = bc2_sqrt / (1.0 - b1.powi(t));
        let step = slot
            .m
            .clone()
            .mul_scalar(factor)
            .div(slot.v.clone().sqrt().add_scalar(self.eps * bc2_sqrt))
            .mul_scalar(lr);
        self.slots[i] = Some(slot);
        step
    }

    /// One optimiser step over every float parameter of `module`.
    pub fn step<AB, M>(&mut self, lr: f64, module: M, mut grads: Grads<AB>) -> M
    where
        AB: AutodiffBackend<InnerBackend = B>,
        M: AutodiffModule<AB>,
    {
        let mut mapper = StepMapper {
            adam: self,
            grads: &mut grads,
            lr,
            index: 0,
        };
        module.map(&mut mapper)
    }

    /// Saves the state as `optim.adam.{moment_1,moment_2}.<param name>` (F32) and
    /// `optim.adam.time.<param name>` (I64).
    pub fn save_into(&self, names: &[String], ckpt: &mut Checkpoint) {
        for (slot, name) in self.slots.iter().zip(names) {
            let Some(s) = slot else { continue };
            for (kind, t) in [("moment_1", &s.m), ("moment_2", &s.v)] {
                let data = crate::host_reads::data(t.clone())
                    .convert::<f32>()
                    .to_vec::<f32>()
                    .unwrap_or_default();
                let shape = vec![data.len()];
                ckpt.floats.insert(
                    format!("optim.adam.{kind}.{name}"),
                    HostTensor { shape, data },
                );
            }
            ckpt.counters
                .insert(format!("optim.adam.time.{name}"), s.time as i64);
        }
    }

    /// Restores the state saved by [`Adam::save_into`] for parameters `names` (visiting order).
    pub fn load_from(
        &mut self,
        names: &[String],
        ckpt: &Checkpoint,
        device: &B::Device,
    ) -> Result<()> {
        self.slots = Vec::with_capacity(names.len());
        for name in names {
            let m = ckpt.floats.get(&format!("optim.adam.moment_1.{name}"));
            let v = ckpt.floats.get(&format!("optim.adam.moment_2.{name}"));
            let t = ckpt.counters.get(&format!("optim.adam.time.{name}"));
            match (m, v, t) {
                (Some(m), Some(v), Some(&t)) => {
                    if m.data.len() != v.data.len() {
                        bail!("optimiser state of `{name}`: moment sizes differ");
                    }
                    let mk = |h: &HostTensor| {
                        Tensor::<B, 1>::from_data(
                            TensorData::new(h.data.clone(), [h.data.len()]),
                            device,
                        )
                    };
                    self.slots.push(Some(Slot {
                        time: t.max(0) as u64,
                        m: mk(m),
                        v: mk(v),
                    }));
                }
                (None, None, None) => self.slots.push(None),
                _ => bail!("optimiser state of `{name}` is incomplete"),
            }
        }
        Ok(())
    }
}
