//! The optimisers of the loop, with state keyed by parameter position rather than by Burn's
//! random `ParamId` (saved under readable names, restored into a fresh model, paired across
//! data-parallel ranks): Adam (`adam.rs`, the default; a backend's one-pass update plugs in as
//! [`FusedAdam`]) and SGD with momentum (`sgd.rs`). A job chooses one in its plan
//! ([`OptimizerSpec`], `crate::engine::TrainPlan::optimizer`); the engine runs it as an
//! [`Optimizer`]. An optimiser is one file implementing [`ParamUpdate`] (a flat parameter after
//! one step) plus its state's save and load (under the keys of `keys.rs`), and one variant of
//! each enum here.

mod adam;
mod choice;
pub mod keys;
mod sgd;

use anyhow::{Result, bail};
use burn::module::{AutodiffModule, ModuleMapper, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;
use serde::Serialize;

use super::checkpoint::Checkpoint;
use super::params::HostTensor;

pub use adam::Adam;
pub(crate) use adam::{AdamScalars, FusedAdam};
pub(crate) use choice::OptimizerChoice;
pub(crate) use sgd::Sgd;

/// Where the gradients of one step come from.
pub enum Grads<B: AutodiffBackend> {
    /// Straight from `backward()`.
    Params(GradientsParams),
    /// One flat gradient per parameter in visiting order (e.g. after an all-reduce); `None`
    /// for a parameter that no rank computed a gradient for, which is left alone as
    /// `Params` leaves a parameter without gradient.
    Flat(Vec<Option<Tensor<B::InnerBackend, 1>>>),
}

/// A flat state tensor as the checkpoint's F32 host tensor.
fn to_host<B: Backend>(t: &Tensor<B, 1>) -> HostTensor {
    let data = crate::host_reads::data(t.clone())
        .convert::<f32>()
        .to_vec::<f32>()
        .unwrap_or_default();
    HostTensor {
        shape: vec![data.len()],
        data,
    }
}

/// A checkpoint's host tensor as a flat state tensor on `device`.
fn from_host<B: Backend>(h: &HostTensor, device: &B::Device) -> Tensor<B, 1> {
    Tensor::from_data(TensorData::new(h.data.clone(), [h.data.len()]), device)
}

/// One optimiser's update of flat parameter `i` (its visiting order in the module).
pub trait ParamUpdate<B: Backend> {
    /// Parameter `i` (flat) after one step with its flat gradient at learning rate `lr`.
    fn updated(
        &mut self,
        i: usize,
        param: Tensor<B, 1>,
        grad: Tensor<B, 1>,
        lr: f64,
    ) -> Tensor<B, 1>;
}

/// One step of `update` over every float parameter of `module` that has a gradient.
pub(crate) fn step_module<AB, M, U>(update: &mut U, lr: f64, module: M, mut grads: Grads<AB>) -> M
where
    AB: AutodiffBackend,
    M: AutodiffModule<AB>,
    U: ParamUpdate<AB::InnerBackend>,
{
    let mut mapper = StepMapper {
        update,
        grads: &mut grads,
        lr,
        index: 0,
    };
    module.map(&mut mapper)
}

struct StepMapper<'a, AB: AutodiffBackend, U> {
    update: &'a mut U,
    grads: &'a mut Grads<AB>,
    lr: f64,
    index: usize,
}

impl<AB: AutodiffBackend, U: ParamUpdate<AB::InnerBackend>> ModuleMapper<AB>
    for StepMapper<'_, AB, U>
{
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
        let require_grad = tensor.is_require_grad();
        let flat = tensor.inner().reshape([n]);
        let updated = self.update.updated(i, flat, grad, self.lr).reshape(dims);
        let mut t = Tensor::from_inner(updated);
        if require_grad {
            t = t.require_grad();
        }
        Param::from_mapped_value(id, t, mapper)
    }
}

/// The optimiser a job chooses, with its constants (what `args.json` and a checkpoint record).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub(crate) enum OptimizerSpec {
    /// Adam (Kingma & Ba), `burn::optim::Adam`'s update.
    Adam { beta1: f32, beta2: f32, eps: f32 },
    /// SGD with momentum, PyTorch's `torch.optim.SGD` (no dampening, no Nesterov): `buf =
    /// momentum × buf + grad` (`grad` at the first step), `param −= lr × buf`.
    Sgd { momentum: f32 },
}

impl Default for OptimizerSpec {
    /// Adam with β₁ 0.9, β₂ 0.999, ε 1e-8.
    fn default() -> Self {
        OptimizerSpec::Adam {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        }
    }
}

impl std::fmt::Display for OptimizerSpec {
    /// `adam(beta1=0.9, beta2=0.999, eps=1e-8)`, `sgd(momentum=0.9)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OptimizerSpec::Adam { beta1, beta2, eps } => {
                write!(f, "adam(beta1={beta1}, beta2={beta2}, eps={eps:e})")
            }
            OptimizerSpec::Sgd { momentum } => write!(f, "sgd(momentum={momentum})"),
        }
    }
}

/// The checkpoint metadata key of the optimiser that wrote the state.
const META_KEY: &str = "optimizer";

/// The optimiser of a run, as its plan chose it.
pub(crate) enum Optimizer<B: Backend> {
    Adam(Adam<B>),
    Sgd(Sgd<B>),
}

impl<B: Backend> Optimizer<B> {
    /// The optimiser of `spec`; Adam with the backend's one-pass update when it has one.
    pub(crate) fn new(spec: OptimizerSpec, fused: Option<FusedAdam<B>>) -> Self {
        match spec {
            OptimizerSpec::Adam { beta1, beta2, eps } => {
                let mut adam = Adam::with_fused(fused);
                (adam.beta1, adam.beta2, adam.eps) = (beta1, beta2, eps);
                Optimizer::Adam(adam)
            }
            OptimizerSpec::Sgd { momentum } => Optimizer::Sgd(Sgd::new(momentum)),
        }
    }

    /// The Adam optimiser, when it is one.
    pub(crate) fn adam_mut(&mut self) -> Option<&mut Adam<B>> {
        match self {
            Optimizer::Adam(a) => Some(a),
            Optimizer::Sgd(_) => None,
        }
    }

    /// What it is, with its constants.
    pub(crate) fn spec(&self) -> OptimizerSpec {
        match self {
            Optimizer::Adam(a) => OptimizerSpec::Adam {
                beta1: a.beta1,
                beta2: a.beta2,
                eps: a.eps,
            },
            Optimizer::Sgd(s) => OptimizerSpec::Sgd {
                momentum: s.momentum,
            },
        }
    }

    /// One optimiser step over every float parameter of `module`.
    pub(crate) fn step<AB, M>(&mut self, lr: f64, module: M, grads: Grads<AB>) -> M
    where
        AB: AutodiffBackend<InnerBackend = B>,
        M: AutodiffModule<AB>,
    {
        match self {
            Optimizer::Adam(a) => step_module(a, lr, module, grads),
            Optimizer::Sgd(s) => step_module(s, lr, module, grads),
        }
    }

    /// Saves the state under the names of the parameters (`names`, visiting order) and which
    /// optimiser wrote it.
    pub(crate) fn save_into(&self, names: &[String], ckpt: &mut Checkpoint) {
        ckpt.metadata
            .insert(META_KEY.into(), self.spec().to_string());
        match self {
            Optimizer::Adam(a) => a.save_into(names, ckpt),
            Optimizer::Sgd(s) => s.save_into(names, ckpt),
        }
    }

    /// Restores the state saved by [`Optimizer::save_into`]; a checkpoint written by another
    /// optimiser (or the same one with other constants) is refused, naming both.
    pub(crate) fn load_from(
        &mut self,
        names: &[String],
        ckpt: &Checkpoint,
        device: &B::Device,
    ) -> Result<()> {
        let ours = self.spec().to_string();
        match ckpt.metadata.get(META_KEY) {
            Some(theirs) if *theirs != ours => {
                bail!("optimiser: checkpoint {theirs}, this run {ours} (resume with the same one)")
            }
            _ => {}
        }
        match self {
            Optimizer::Adam(a) => a.load_from(names, ckpt, device),
            Optimizer::Sgd(s) => s.load_from(names, ckpt, device),
        }
    }
}

#[cfg(test)]
mod tests;
