//! The CNN of PyTorch's examples/mnist: conv 32 → conv 64 → max-pool → dropout 0.25 → fc 128 →
//! dropout 0.5 → fc 10. Default initialisation matches PyTorch's (uniform ±1/√fan_in).
//!
//! After the second convolution the reference applies relu, then the max-pool; this model
//! pools first and applies relu to the pooled values, a quarter as many. The two orders give
//! the same values and the same gradients bit for bit (relu and the maximum of a window
//! commute, and both only select values; the test below checks it), and relu's two passes
//! over the 64-channel activations cost about 0.4 ms of a 20 ms training step on 2 cores.

use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{Dropout, DropoutConfig, Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::relu;

#[derive(Module, Debug)]
pub struct MnistCnn<B: Backend> {
    conv1: Conv2d<B>,
    conv2: Conv2d<B>,
    pool: MaxPool2d,
    dropout1: Dropout,
    fc1: Linear<B>,
    dropout2: Dropout,
    fc2: Linear<B>,
}

impl<B: Backend> MnistCnn<B> {
    /// A freshly initialised network; `dropout = false` sets both dropout rates to 0.
    pub fn new(device: &B::Device, dropout: bool) -> Self {
        let (p1, p2) = if dropout { (0.25, 0.5) } else { (0.0, 0.0) };
        Self {
            conv1: Conv2dConfig::new([1, 32], [3, 3]).init(device),
            conv2: Conv2dConfig::new([32, 64], [3, 3]).init(device),
            pool: MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init(),
            dropout1: DropoutConfig::new(p1).init(),
            fc1: LinearConfig::new(9216, 128).init(device),
            dropout2: DropoutConfig::new(p2).init(),
            fc2: LinearConfig::new(128, 10).init(device),
        }
    }

    /// Logits `[batch, 10]` for images `[batch, 1, 28, 28]`.
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 2> {
        self.forward_with(x, &BurnKernels)
    }

    /// [`MnistCnn::forward`] with the convolution and dropout layers run by `k` (a backend's
    /// own kernels: `launch::BackendKernels`).
    pub fn forward_with(&self, x: Tensor<B, 4>, k: &impl LayerKernels<B>) -> Tensor<B, 2> {
        let x = relu(k.conv2d(x, &self.conv1));
        let x = relu(self.pool.forward(k.conv2d(x, &self.conv2)));
        let x = k.dropout(x, &self.dropout1);
        let x = x.flatten::<2>(1, 3);
        let x = k.dropout(relu(self.fc1.forward(x)), &self.dropout2);
        self.fc2.forward(x)
    }
}

/// How a network runs its convolution and dropout layers: Burn's own layers ([`BurnKernels`],
/// the defaults), or a backend's own kernels with the layers' parameters.
pub trait LayerKernels<B: Backend> {
    /// `layer.forward(x)`.
    fn conv2d(&self, x: Tensor<B, 4>, layer: &Conv2d<B>) -> Tensor<B, 4> {
        layer.forward(x)
    }
    /// `layer.forward(x)` (active in training, the identity in evaluation).
    fn dropout<const D: usize>(&self, x: Tensor<B, D>, layer: &Dropout) -> Tensor<B, D> {
        layer.forward(x)
    }
}

/// Burn's `Conv2d::forward` and `Dropout::forward`.
pub struct BurnKernels;

impl<B: Backend> LayerKernels<B> for BurnKernels {}

#[cfg(test)]
mod tests {
    use burn::backend::Autodiff;
    use burn::tensor::Distribution;

    use super::*;
    use crate::backend::fast_cpu::FastCpu;

    type B = Autodiff<FastCpu>;

    /// The reference's order: relu on the second convolution's output, then the max-pool.
    fn reference_forward(m: &MnistCnn<B>, x: Tensor<B, 4>) -> Tensor<B, 2> {
        let x = relu(m.conv1.forward(x));
        let x = relu(m.conv2.forward(x));
        let x = m.dropout1.forward(m.pool.forward(x));
        let x = x.flatten::<2>(1, 3);
        let x = m.dropout2.forward(relu(m.fc1.forward(x)));
        m.fc2.forward(x)
    }

    /// Logits and every parameter's gradient, as host values.
    fn logits_and_grads(
        m: &MnistCnn<B>,
        x: Tensor<B, 4>,
        weights: Tensor<B, 2>,
        forward: fn(&MnistCnn<B>, Tensor<B, 4>) -> Tensor<B, 2>,
    ) -> Vec<Vec<f32>> {
        // Fresh leaves for this backward (a second backward through the same leaves can race
        // another test's: `toolbox::host_parallel` says why).
        let m: &MnistCnn<B> =
            &burn::module::AutodiffModule::from_inner(burn::module::AutodiffModule::valid(m));
        let logits = forward(m, x);
        let grads = (logits.clone() * weights).sum().backward();
        let mut out = vec![logits.into_data().to_vec::<f32>().unwrap()];
        for p in [&m.conv1.weight, &m.conv2.weight] {
            out.push(p.grad(&grads).unwrap().into_data().to_vec::<f32>().unwrap());
        }
        for p in [&m.fc1.weight, &m.fc2.weight] {
            out.push(p.grad(&grads).unwrap().into_data().to_vec::<f32>().unwrap());
        }
        for b in [&m.conv1.bias, &m.conv2.bias, &m.fc1.bias, &m.fc2.bias] {
            let b = b.as_ref().unwrap();
            out.push(b.grad(&grads).unwrap().into_data().to_vec::<f32>().unwrap());
        }
        out
    }

    /// Pooling before relu changes no bit of the logits or of any gradient. Inputs of both
    /// signs make windows whose values are all negative (relu's gradient is zero there in
    /// both orders) as well as mixed ones.
    #[test]
    fn pooling_before_relu_is_exact() {
        let device = Default::default();
        B::seed(&device, 7);
        let m = MnistCnn::<B>::new(&device, false);
        let x = Tensor::<B, 4>::random([5, 1, 28, 28], Distribution::Normal(0.0, 1.0), &device);
        let w = Tensor::<B, 2>::random([5, 10], Distribution::Normal(0.0, 1.0), &device);
        let ours = logits_and_grads(&m, x.clone(), w.clone(), MnistCnn::forward);
        let reference = logits_and_grads(&m, x, w, reference_forward);
        let bits = |v: &Vec<Vec<f32>>| -> Vec<Vec<u32>> {
            v.iter()
                .map(|t| t.iter().map(|f| f.to_bits()).collect())
                .collect()
        };
        assert!(
            ours[1].iter().any(|&g| g != 0.0),
            "no gradient reached conv1"
        );
        assert_eq!(bits(&ours), bits(&reference));
    }
}
