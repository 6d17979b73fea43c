//! `trainer bench mnist`'s measured job on one backend and device: the CNN's training and
//! inference steps on batches held on the device, timed after the warm-up, with their
//! operation, upload and host-read counts.

use std::time::Instant;

use anyhow::{Result, bail};
use burn::module::AutodiffModule;
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;

use super::BenchSettings as BenchArgs;
use super::report::{Measure, Rate};
use crate::backend::profile as op_profile;
use crate::backend::{BackendJob, Placement};
use crate::data::mnist::MnistSplit;
use crate::host_reads::{Counts, PerStep};
use crate::models::cnn::MnistCnn;
use crate::toolbox::optim::{Adam, Grads};

pub(super) struct BenchJob<'a> {
    pub batch: usize,
    pub data: &'a MnistSplit,
    pub args: &'a BenchArgs,
    /// The step recorded as a CUDA graph and replayed (`--cuda-graph`'s row).
    pub graph: bool,
}

/// The bench's batches, resident on the device: every image its steps use, normalised and
/// uploaded once before the clock starts (PyTorch's bench keeps its data on the GPU too), and
/// the steps' index list with them; a step takes its batch by index on the device, so it makes
/// no upload. Step `s` holds images `(s·bs + i) mod n`, as a host-fed loop would.
struct DeviceBatches<B: Backend> {
    images: Tensor<B, 4>,
    labels: Tensor<B, 1, Int>,
    order: Tensor<B, 1, Int>,
    bs: usize,
}

impl<B: Backend> DeviceBatches<B> {
    fn new(data: &MnistSplit, bs: usize, steps: usize, device: &B::Device) -> Self {
        let n = data.len();
        let used: Vec<usize> = (0..n.min(steps * bs)).collect();
        let (x, y) = data.batch(&used);
        let order: Vec<i64> = (0..steps * bs).map(|k| (k % n) as i64).collect();
        Self {
            images: Tensor::from_data(TensorData::new(x, [used.len(), 1, 28, 28]), device),
            labels: Tensor::from_data(TensorData::new(y, [used.len()]), device),
            order: Tensor::from_data(TensorData::new(order, [steps * bs]), device),
            bs,
        }
    }

    fn batch(&self, step: usize) -> (Tensor<B, 4>, Tensor<B, 1, Int>) {
        self.select(self.order.clone().narrow(0, step * self.bs, self.bs))
    }

    fn select(&self, idx: Tensor<B, 1, Int>) -> (Tensor<B, 4>, Tensor<B, 1, Int>) {
        (
            self.images.clone().select(0, idx.clone()),
            self.labels.clone().select(0, idx),
        )
    }
}

/// The bench's step recorded as a CUDA graph (`--cuda-graph`'s row): the batch's indices copied
/// into a fixed buffer, two eager warm-up steps on the side stream, the third recorded, every
/// step from then on one replay (as `train-mnist --cuda-graph` runs, `engine::graph`).
struct BenchGraph<B: AutodiffBackend> {
    capture: Box<dyn crate::engine::graph::StepCapture<B::InnerBackend>>,
    fixed: Tensor<B, 1, Int>,
    steps: usize,
}

impl<B: AutodiffBackend> BenchGraph<B> {
    fn new(device: &B::Device, bs: usize) -> Result<Self> {
        let make = crate::launch::capture::step_capture::<B::InnerBackend>()
            .ok_or_else(|| anyhow::anyhow!("this backend records no CUDA graph"))?;
        Ok(Self {
            capture: make(device, 1e-8)?,
            fixed: Tensor::zeros([bs], device),
            steps: 0,
        })
    }

    fn step(
        &mut self,
        model: MnistCnn<B>,
        adam: &mut Adam<B::InnerBackend>,
        data: &DeviceBatches<B>,
        step: usize,
        once: impl Fn(
            MnistCnn<B>,
            &mut Adam<B::InnerBackend>,
            (Tensor<B, 4>, Tensor<B, 1, Int>),
        ) -> MnistCnn<B>,
    ) -> Result<MnistCnn<B>> {
        let idx = data.order.clone().narrow(0, step * data.bs, data.bs);
        if !crate::launch::copy_into(&self.fixed, idx) {
            bail!("this backend cannot fill a fixed buffer");
        }
        let time = adam.next_time().unwrap_or(1);
        self.capture.adam(time, 1e-3);
        let fixed = || data.select(self.fixed.clone());
        self.steps += 1;
        match self.steps {
            1 | 2 => {
                self.capture.side_stream(true)?;
                let model = once(model, adam, fixed());
                self.capture.side_stream(false)?;
                Ok(model)
            }
            3 => {
                let before = crate::engine::graph::addresses(self.capture.as_ref(), &model);
                self.capture.begin()?;
                let model = once(model, adam, fixed());
                self.capture.end()?;
                if crate::engine::graph::addresses(self.capture.as_ref(), &model) != before {
                    bail!("the recorded step did not update the parameters in place");
                }
                self.capture.replay()?;
                Ok(model)
            }
            _ => {
                self.capture.replay()?;
                adam.count_replayed_step();
                Ok(model)
            }
        }
    }
}

/// Runs `step` for `warmup + steps` steps, threading `state` through them; the clock, the
/// operation counts and the operation profile restart after the warm-up, so that what it
/// returns with the final state covers the timed steps only.
fn timed_steps<S>(
    warmup: usize,
    steps: usize,
    mut state: S,
    mut step: impl FnMut(S, usize) -> Result<S>,
) -> Result<(S, Clock, Counts)> {
    let (mut clock, mut counts) = (Clock::start(), Counts::now());
    for s in 0..warmup + steps {
        if s == warmup {
            (clock, counts) = (Clock::start(), Counts::now());
            op_profile::reset();
        }
        state = step(state, s)?;
    }
    Ok((state, clock, counts))
}

/// Wall and process CPU time since a start.
struct Clock(Instant, f64);

impl Clock {
    fn start() -> Self {
        Self(Instant::now(), op_profile::cpu_seconds())
    }

    fn rate(&self, images: usize, counts: PerStep) -> Rate {
        let wall = self.0.elapsed().as_secs_f64();
        Rate {
            img_per_s: images as f64 / wall,
            threads: (op_profile::cpu_seconds() - self.1) / wall,
            counts: Some(counts),
        }
    }
}

impl BackendJob for BenchJob<'_> {
    type Output = Measure;
    fn run<B: AutodiffBackend>(self, device: B::Device, p: Placement) -> Result<Measure> {
        let (bs, steps, warmup) = (self.batch, self.args.steps, self.args.warmup);
        let conv_before = conv_passes();
        op_profile::enable(op_profile::requested());
        B::seed(&device, 1);
        let model = MnistCnn::<B>::new(&device, true);
        crate::toolbox::params::materialize(&model);
        // The update train-mnist runs on this backend (one pass on `flex`).
        let mut adam = Adam::<B::InnerBackend>::with_fused(crate::launch::fused_adam());
        let data = DeviceBatches::<B>::new(self.data, bs, warmup + steps, &device);
        let step_once = |model: MnistCnn<B>, adam: &mut Adam<B::InnerBackend>, (x, y)| {
            op_profile::phase("forward");
            let loss = crate::launch::cross_entropy(
                model.forward_with(x, &crate::launch::BackendKernels),
                y,
            );
            op_profile::phase("backward");
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            op_profile::phase("optimizer");
            adam.step(1e-3, model, Grads::Params(grads))
        };
        let mut graph = match self.graph {
            true => Some(BenchGraph::new(&device, bs)?),
            false => None,
        };
        let (model, clock, counts) = timed_steps(warmup, steps, model, |model, step| {
            op_profile::phase("data");
            match graph.as_mut() {
                Some(g) => g.step(model, &mut adam, &data, step, step_once),
                None => Ok(step_once(model, &mut adam, data.batch(step))),
            }
        })?;
        drop(graph);
        let counts = counts.elapsed();
        let counts = counts.per_step(steps as u64, counts.ops > 0);
        // Reading a value waits for queued device work.
        let _ = crate::toolbox::params::collect(&model);
        let train = clock.rate(bs * steps, counts);
        let label = format!("{} training step, batch {bs}", p.backend.name());
        super::profile::print(&label, &op_profile::take(), steps);

        let eval = model.valid();
        drop(data);
        let data = DeviceBatches::<B::InnerBackend>::new(self.data, bs, warmup + steps, &device);
        let ((), clock, counts) = timed_steps(warmup, steps, (), |(), step| {
            op_profile::phase("inference");
            let (x, _) = data.batch(step);
            // One read per batch: the predicted classes, as an evaluation needs them.
            let k = &crate::launch::BackendKernels;
            let _ = crate::host_reads::data(eval.forward_with(x, k).argmax(1));
            Ok(())
        })?;
        let counts = counts.elapsed();
        let infer = clock.rate(bs * steps, counts.per_step(steps as u64, counts.ops > 0));
        let report = op_profile::take();
        op_profile::enable(false);
        if !report.ops.is_empty() {
            let ms = 1e3 * report.phases.iter().map(|p| p.1).sum::<f64>() / steps as f64;
            eprintln!(
                "\n### {} inference, batch {bs}: {ms:.1} ms per batch",
                p.backend.name()
            );
            super::profile::print_ops(&report, steps, 12);
        }
        let conv = [0, 1].map(|i| conv_passes()[i] - conv_before[i]);
        let conv_implicit_gemm = (conv[1] > 0).then(|| conv[0] as f64 / conv[1] as f64);
        Ok(Measure {
            train,
            infer,
            conv_implicit_gemm,
        })
    }
}

/// The convolution passes run so far by implicit GEMM, and in all (`cuda`, `wgpu`:
/// `backend::fast_cube`; none elsewhere).
fn conv_passes() -> [u64; 2] {
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    {
        let c = crate::backend::fast_cube::counts();
        [c.implicit_gemm, c.implicit_gemm + c.direct]
    }
    #[cfg(not(any(feature = "cuda", feature = "wgpu")))]
    [0, 0]
}
