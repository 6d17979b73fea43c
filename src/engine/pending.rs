//! Step sums left on the device. A step that reads its loss makes a GPU wait for every kernel
//! queued before it (a sync per step); a job that can leave its sums on the device
//! ([`super::Job::step_on_device`]) hands them over as [`DeviceSums`], and the engine reads
//! the values of many steps at once ([`Queue::settle`]: one `cat`, one read) where it needs
//! them: at its progress intervals, before a checkpoint, at a stop and at the epoch's end.
//! The sums are the same numbers as the step would have read (the same f32 values converted to
//! f64, added in step order), so training and every row are the same bits.

use burn::optim::GradientsParams;
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

/// How a step's sums are made from its values once read (as f64, in order). Shared: a step a
/// CUDA graph replays makes its sums the same way every time (`super::graph`).
pub(crate) type Finish<S> = std::rc::Rc<dyn Fn(&[f64]) -> S>;

/// A step's sums still on the device: its `values` (one dimension, f32 on the device), and
/// how to make the sums from them once read (as f64, in order).
pub(crate) struct DeviceSums<B: Backend, S> {
    pub values: Tensor<B, 1>,
    pub finish: Finish<S>,
}

impl<B: Backend, S> DeviceSums<B, S> {
    /// Reads the values now (one read) and makes the sums.
    pub(crate) fn read_now(self) -> S {
        let n = self.values.dims()[0];
        (self.finish)(&read_f64(self.values, n))
    }
}

/// The gradients of a step and its sums, read or on the device.
pub(super) type StepResult<B, S> = (
    crate::toolbox::optim::Grads<B>,
    StepSumsOf<<B as burn::tensor::backend::AutodiffBackend>::InnerBackend, S>,
);

/// What [`super::Job::step_on_device`] returns: the shard's gradients and its sums unread.
pub(crate) struct DeviceStepOut<B: Backend, S> {
    pub grads: GradientsParams,
    pub sums: DeviceSums<B, S>,
}

/// A step's sums as the engine gets them: read by the job, or still on the device.
pub(super) enum StepSumsOf<B: Backend, S> {
    Read(S),
    OnDevice(DeviceSums<B, S>),
}

/// Where a step stands in its epoch, for what the engine does with its sums.
#[derive(Clone, Copy, Debug)]
pub(super) struct StepAt {
    /// 1-based step of the epoch.
    pub step_in_epoch: usize,
    /// Steps done over the run, this one included.
    pub global_step: u64,
    /// Items per second of the epoch so far, when the step ended.
    pub rate: f64,
}

/// The steps whose sums are still on the device, oldest first.
pub(super) struct Queue<B: Backend, S> {
    steps: Vec<(DeviceSums<B, S>, StepAt)>,
}

impl<B: Backend, S> Default for Queue<B, S> {
    fn default() -> Self {
        Self { steps: Vec::new() }
    }
}

impl<B: Backend, S> Queue<B, S> {
    /// Steps held at most before the engine settles anyway (a few KiB on the device).
    pub(super) const MAX_STEPS: usize = 1024;

    pub(super) fn push(&mut self, sums: DeviceSums<B, S>, at: StepAt) {
        self.steps.push((sums, at));
    }

    pub(super) fn is_full(&self) -> bool {
        self.steps.len() >= Self::MAX_STEPS
    }

    /// Reads every held step's values with one read (their `cat`: one operation) and returns
    /// their sums in step order.
    pub(super) fn settle(&mut self) -> Vec<(S, StepAt)> {
        let steps = std::mem::take(&mut self.steps);
        if steps.is_empty() {
            return Vec::new();
        }
        let lens: Vec<usize> = steps.iter().map(|(s, _)| s.values.dims()[0]).collect();
        let total = lens.iter().sum();
        let (tensors, rest): (Vec<_>, Vec<_>) = steps
            .into_iter()
            .map(|(s, at)| (s.values, (s.finish, at)))
            .unzip();
        let all = if tensors.len() == 1 {
            tensors.into_iter().next().expect("one tensor")
        } else {
            Tensor::cat(tensors, 0)
        };
        let values = read_f64(all, total);
        let mut at = 0;
        rest.into_iter()
            .zip(lens)
            .map(|((finish, step), n)| {
                let s = finish(&values[at..at + n]);
                at += n;
                (s, step)
            })
            .collect()
    }
}

/// The values as f64 (one read); NaN where they cannot be read, so that the divergence check
/// stops the run rather than training on made-up sums.
fn read_f64<B: Backend>(t: Tensor<B, 1>, n: usize) -> Vec<f64> {
    crate::host_reads::data(t)
        .convert::<f64>()
        .to_vec::<f64>()
        .ok()
        .filter(|v| v.len() == n)
        .unwrap_or_else(|| vec![f64::NAN; n])
}
