//! SGD with momentum, PyTorch's `torch.optim.SGD` without dampening, Nesterov or weight decay:
//! `buf = grad` at a parameter's first step, then `buf = momentum × buf + grad`, and
//! `param −= lr × buf` (momentum 0: `param −= lr × grad`, no state).

use anyhow::{Result, bail};
use burn::prelude::*;

use super::keys::{self, StateKey};
use super::{ParamUpdate, from_host, to_host};
use crate::toolbox::checkpoint::Checkpoint;

/// SGD with momentum; the momentum buffers keyed by parameter position.
pub(crate) struct Sgd<B: Backend> {
    pub momentum: f32,
    buffers: Vec<Option<Tensor<B, 1>>>,
}

impl<B: Backend> Sgd<B> {
    pub(crate) fn new(momentum: f32) -> Self {
        Self {
            momentum,
            buffers: Vec::new(),
        }
    }

    /// Saves the momentum buffers as `optim.sgd.momentum_buffer.<param name>` (F32).
    pub(crate) fn save_into(&self, names: &[String], ckpt: &mut Checkpoint) {
        for (buf, name) in self.buffers.iter().zip(names) {
            let Some(b) = buf else { continue };
            ckpt.floats
                .insert(StateKey::SgdMomentum.of(name), to_host(b));
        }
    }

    /// Restores the buffers saved by [`Sgd::save_into`] for parameters `names`.
    pub(crate) fn load_from(
        &mut self,
        names: &[String],
        ckpt: &Checkpoint,
        device: &B::Device,
    ) -> Result<()> {
        if ckpt.floats.keys().any(|k| k.starts_with(keys::ADAM)) {
            bail!("optimiser: the checkpoint holds Adam's state, this run is SGD");
        }
        self.buffers = names
            .iter()
            .map(|name| {
                ckpt.floats
                    .get(&StateKey::SgdMomentum.of(name))
                    .map(|h| from_host(h, device))
            })
            .collect();
        Ok(())
    }
}

impl<B: Backend> ParamUpdate<B> for Sgd<B> {
    fn updated(
        &mut self,
        i: usize,
        param: Tensor<B, 1>,
        grad: Tensor<B, 1>,
        lr: f64,
    ) -> Tensor<B, 1> {
        if self.momentum == 0.0 {
            return param - grad.mul_scalar(lr);
        }
        if self.buffers.len() <= i {
            self.buffers.resize(i + 1, None);
        }
        let buf = match self.buffers[i].take() {
            Some(b) => b.mul_scalar(self.momentum).add(grad),
            None => grad,
        };
        self.buffers[i] = Some(buf.clone());
        param - buf.mul_scalar(lr)
    }
}
