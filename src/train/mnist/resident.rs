//! The training split on the device. A step used to normalise its batch on the host and upload
//! it (on a GPU a staging copy and a wait, twice a step); now the normalised split is uploaded
//! once, the epoch's order once per epoch, and a step takes its shard by index on the device:
//! no upload in the step. The values are those of [`MnistSplit::batch`], so a run computes the
//! same bits either way. A split above [`RESIDENT_MAX_BYTES`] (normalised, as f32) is streamed
//! from the host per step as before.

use burn::prelude::*;
use burn::tensor::TensorData;

use crate::data::mnist::{MnistSplit, PIXELS};

/// The largest normalised split kept on the device: 1 GiB (MNIST's 60,000 images take 188 MB).
pub(super) const RESIDENT_MAX_BYTES: usize = 1 << 30;

/// A split's images `[n, 1, 28, 28]` (normalised) and labels `[n]` on the device, with the
/// current epoch's order.
pub(super) struct Resident<B: Backend> {
    images: Tensor<B, 4>,
    labels: Tensor<B, 1, Int>,
    /// The order of (stage, epoch), uploaded at its first step.
    order: Option<((usize, usize), Tensor<B, 1, Int>)>,
    /// `--cuda-graph`: the current batch's indices in memory of fixed address, which a
    /// recorded step reads.
    fixed: Option<Tensor<B, 1, Int>>,
}

impl<B: Backend> Resident<B> {
    /// The split on `device`, or `None` when it is larger than [`RESIDENT_MAX_BYTES`].
    pub(super) fn upload(split: &MnistSplit, device: &B::Device) -> Option<Self> {
        let n = split.len();
        if n * PIXELS * size_of::<f32>() > RESIDENT_MAX_BYTES {
            return None;
        }
        let all: Vec<usize> = (0..n).collect();
        let (x, y) = split.batch(&all);
        Some(Self {
            images: Tensor::from_data(TensorData::new(x, [n, 1, 28, 28]), device),
            labels: Tensor::from_data(TensorData::new(y, [n]), device),
            order: None,
            fixed: None,
        })
    }

    /// Items `order[lo..hi]` of epoch `epoch` of stage `stage` (whose whole order is `order`).
    pub(super) fn shard(
        &mut self,
        key: (usize, usize),
        order: &[usize],
        (lo, hi): (usize, usize),
    ) -> (Tensor<B, 4>, Tensor<B, 1, Int>) {
        let idx = self.indices(key, order, (lo, hi));
        self.select(idx)
    }

    /// `--cuda-graph`: copies the indices of `order[lo..hi]` into the fixed buffer (one copy on
    /// the device; the buffer is made at the first call and for another size). `false` when the
    /// backend cannot copy in place (then no graph can record the step).
    pub(super) fn fill_fixed(
        &mut self,
        key: (usize, usize),
        order: &[usize],
        (lo, hi): (usize, usize),
    ) -> bool {
        let idx = self.indices(key, order, (lo, hi));
        let fixed = match &self.fixed {
            Some(f) if f.dims()[0] == hi - lo => f.clone(),
            _ => {
                let f = Tensor::zeros([hi - lo], &self.images.device());
                self.fixed = Some(f.clone());
                f
            }
        };
        crate::launch::copy_into(&fixed, idx)
    }

    /// The items whose indices [`Resident::fill_fixed`] filled in, read from the fixed buffer.
    pub(super) fn fixed_shard(&self) -> Option<(Tensor<B, 4>, Tensor<B, 1, Int>)> {
        self.fixed.clone().map(|idx| self.select(idx))
    }

    fn select(&self, idx: Tensor<B, 1, Int>) -> (Tensor<B, 4>, Tensor<B, 1, Int>) {
        (
            self.images.clone().select(0, idx.clone()),
            self.labels.clone().select(0, idx),
        )
    }

    /// The device indices of `order[lo..hi]` (the epoch's order uploaded at its first step).
    fn indices(
        &mut self,
        (stage, epoch): (usize, usize),
        order: &[usize],
        (lo, hi): (usize, usize),
    ) -> Tensor<B, 1, Int> {
        let device = self.images.device();
        let current = match &self.order {
            Some((key, t)) if *key == (stage, epoch) => t.clone(),
            _ => {
                let o: Vec<i64> = order.iter().map(|&i| i as i64).collect();
                let t = Tensor::from_data(TensorData::new(o, [order.len()]), &device);
                self.order = Some(((stage, epoch), t.clone()));
                t
            }
        };
        current.narrow(0, lo, hi - lo)
    }
}
