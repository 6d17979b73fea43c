//! The CNN of PyTorch's examples/mnist: conv 32 → conv 64 → max-pool → dropout 0.25 → fc 128 →
//! dropout 0.5 → fc 10. Default initialisation matches PyTorch's (uniform ±1/√fan_in).

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
        let x = relu(self.conv1.forward(x));
        let x = relu(self.conv2.forward(x));
        let x = self.dropout1.forward(self.pool.forward(x));
        let x = x.flatten::<2>(1, 3);
        let x = self.dropout2.forward(relu(self.fc1.forward(x)));
        self.fc2.forward(x)
    }
}
