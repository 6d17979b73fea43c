//! `--cuda-graph`: the training step captured once per epoch as a CUDA graph and replayed for
//! every full batch. The backend brings the capture ([`StepCapture`], from the launcher); the job
//! fills its inputs into fixed buffers before each step ([`super::Job::fill_graph_inputs`]).
//!
//! Per epoch: two eager warm-up steps on the capture's side stream, then one step captured
//! (recorded, not run) and replayed; every later full batch is one replay. Before each step the
//! job fills its inputs and the optimiser's step count and rate go to the device
//! ([`StepCapture::adam`]); after a replay the step's sums are copied out of the graph's output
//! (the next replay overwrites it) and queued like any deferred step's. A batch of another size
//! (the epoch's last) runs eagerly. The parameters must be updated in place: their addresses are
//! compared before and after the capture, and after every eager step.

use anyhow::{Result, anyhow, bail};
use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;

use super::pending::{DeviceSums, Finish, StepSumsOf};

/// What a backend offers to capture a step on its device (`launch::hooks::step_capture`).
pub trait StepCapture<B: Backend> {
    /// Makes the capture's side stream current (`true`), or the stream before it (`false`).
    fn side_stream(&mut self, on: bool) -> Result<()>;
    /// Starts recording (on the side stream).
    fn begin(&mut self) -> Result<()>;
    /// Ends the recording; the graph is then ready to replay.
    fn end(&mut self) -> Result<()>;
    /// Replays the recorded step.
    fn replay(&mut self) -> Result<()>;
    /// The next Adam update's step count (1 for the first) and learning rate, on the device.
    fn adam(&mut self, time: u64, lr: f64);
    /// The address of a tensor's data on the device.
    fn address(&self, t: Tensor<B, 1>) -> usize;
    /// A copy of `t` in new memory.
    fn snapshot(&self, t: Tensor<B, 1>) -> Tensor<B, 1>;
}

/// Makes a backend's [`StepCapture`] for a device and an Adam ε.
pub(crate) type CaptureFactory<B> =
    fn(&<B as burn_backend::BackendTypes>::Device, f64) -> Result<Box<dyn StepCapture<B>>>;

/// Eager steps before the capture (as `torch.cuda.graph` advises: lazily made per-stream state,
/// such as cuBLAS's workspace, exists before the recording).
const WARM_UP_STEPS: usize = 2;

/// One epoch's graph: its capture, the warm-up steps left, and once captured, the step's output
/// sums and the batch size it was captured for.
pub(super) struct StepGraph<B: Backend, S> {
    capture: Box<dyn StepCapture<B>>,
    warm_up_left: usize,
    output: Option<(Tensor<B, 1>, Finish<S>, usize)>,
    addresses: Vec<usize>,
}

/// What one step of an epoch with a graph does.
pub(super) enum Plan {
    /// An eager step (warm-up, or a batch of another size) on the given stream.
    Eager { side_stream: bool },
    /// Record this step, then replay it.
    Capture,
    /// Replay the recorded step.
    Replay,
}

impl<B: Backend, S> StepGraph<B, S> {
    pub(super) fn new(capture: Box<dyn StepCapture<B>>) -> Self {
        Self {
            capture,
            warm_up_left: WARM_UP_STEPS,
            output: None,
            addresses: Vec::new(),
        }
    }

    /// What the step over a batch of `items` does; sets the optimiser's scalars on the device
    /// for it (`time`: the update's step count).
    pub(super) fn plan(&mut self, items: usize, full: usize, time: u64, lr: f64) -> Plan {
        self.capture.adam(time, lr);
        if items != full {
            return Plan::Eager { side_stream: false };
        }
        if self.output.as_ref().is_some_and(|o| o.2 == items) {
            return Plan::Replay;
        }
        if self.warm_up_left > 0 {
            self.warm_up_left -= 1;
            return Plan::Eager { side_stream: true };
        }
        Plan::Capture
    }

    pub(super) fn side_stream(&mut self, on: bool) -> Result<()> {
        self.capture.side_stream(on)
    }

    /// Starts recording; `model` is the model the step updates.
    pub(super) fn begin<AB, M>(&mut self, model: &M) -> Result<()>
    where
        AB: AutodiffBackend<InnerBackend = B>,
        M: AutodiffModule<AB>,
    {
        self.addresses = addresses(self.capture.as_ref(), model);
        self.capture.begin()
    }

    /// Ends a recording the step failed in (its error is the one to report).
    pub(super) fn abort(&mut self) {
        let _ = self.capture.end();
    }

    /// Ends recording: checks that `model` (after the step) is in the memory the step updated,
    /// keeps the step's output and replays it (the recording ran nothing). Returns the step's
    /// sums.
    pub(super) fn end<AB, M>(
        &mut self,
        model: &M,
        sums: StepSumsOf<B, S>,
        items: usize,
    ) -> Result<DeviceSums<B, S>>
    where
        AB: AutodiffBackend<InnerBackend = B>,
        M: AutodiffModule<AB>,
    {
        self.capture.end()?;
        self.check_in_place(model)?;
        let StepSumsOf::OnDevice(sums) = sums else {
            bail!("--cuda-graph: the captured step read its sums inside the step");
        };
        self.output = Some((sums.values, sums.finish, items));
        self.replay()
    }

    /// Replays the recorded step; returns its sums (copied out of the graph's output).
    pub(super) fn replay(&mut self) -> Result<DeviceSums<B, S>> {
        let (values, finish, _) = self
            .output
            .as_ref()
            .ok_or_else(|| anyhow!("--cuda-graph: no recorded step to replay"))?;
        let (values, finish) = (values.clone(), finish.clone());
        self.capture.replay()?;
        Ok(DeviceSums {
            values: self.capture.snapshot(values),
            finish,
        })
    }

    /// After an eager step: the recorded graph still updates `model`'s memory, or it is dropped
    /// (the next full batch records again).
    pub(super) fn after_eager<AB, M>(&mut self, model: &M)
    where
        AB: AutodiffBackend<InnerBackend = B>,
        M: AutodiffModule<AB>,
    {
        if self.output.is_some() && self.check_in_place(model).is_err() {
            self.output = None;
            self.warm_up_left = 0;
        }
    }

    fn check_in_place<AB, M>(&self, model: &M) -> Result<()>
    where
        AB: AutodiffBackend<InnerBackend = B>,
        M: AutodiffModule<AB>,
    {
        if addresses(self.capture.as_ref(), model) != self.addresses {
            bail!(
                "--cuda-graph: the optimiser did not update the parameters in place (another \
                 reference held them), so a replayed step would not train this model; run \
                 without --cuda-graph"
            );
        }
        Ok(())
    }
}

/// The data addresses of `model`'s float parameters, in visiting order.
pub fn addresses<B, AB, M>(capture: &dyn StepCapture<B>, model: &M) -> Vec<usize>
where
    B: Backend,
    AB: AutodiffBackend<InnerBackend = B>,
    M: AutodiffModule<AB>,
{
    struct Visit<'a, B: Backend> {
        capture: &'a dyn StepCapture<B>,
        out: Vec<usize>,
    }
    impl<B: Backend, AB: AutodiffBackend<InnerBackend = B>> ModuleVisitor<AB> for Visit<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<AB, D>>) {
            let t = param.val().inner();
            let n = t.shape().num_elements();
            self.out.push(self.capture.address(t.reshape([n])));
        }
    }
    let mut v = Visit {
        capture,
        out: Vec::new(),
    };
    model.visit(&mut v);
    v.out
}
