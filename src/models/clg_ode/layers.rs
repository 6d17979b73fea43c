//! The building blocks of CLG-ODE (docs/clg-ode-model.md §2.2–§2.6), each a Burn module with PyTorch-like init
//! (Linear: U(±1/√fan_in) for weight and bias; Embedding: N(0, 1)).

use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::relu;

/// A Linear layer applied to the last dimension of a rank-3 tensor, through one 2-D matmul
/// (Burn's rank-3 linear would run a batched matmul and a per-batch weight gradient).
pub(crate) fn linear3<B: Backend>(layer: &Linear<B>, x: Tensor<B, 3>) -> Tensor<B, 3> {
    let [b, n, d] = x.dims();
    let y = layer.forward(x.reshape([b * n, d]));
    let out = y.dims()[1];
    y.reshape([b, n, out])
}

/// `Â x` with Â = D^{-1/2}(A + I)D^{-1/2}, d_i = Σ_j (A + I)_ij (docs/clg-ode-model.md §2.1), without forming Â:
/// `Â x = d^{-1/2} ⊙ (A (d^{-1/2} ⊙ x) + d^{-1/2} ⊙ x)`. `a` `[B,N,N]`, `x` `[B,N,F]`.
pub(crate) fn propagate<B: Backend>(a: Tensor<B, 3>, x: Tensor<B, 3>) -> Tensor<B, 3> {
    let d_inv_sqrt = a
        .clone()
        .sum_dim(2)
        .add_scalar(1.0 + 1e-8)
        .powf_scalar(-0.5); // [B,N,1]
    let y = x * d_inv_sqrt.clone();
    (a.matmul(y.clone()) + y) * d_inv_sqrt
}

/// Â itself, `[B,N,N]` (for tests and inspection; the model uses [`propagate`]).
#[cfg(test)]
pub(crate) fn normalized_adjacency<B: Backend>(a: Tensor<B, 3>) -> Tensor<B, 3> {
    let [b, n, _] = a.dims();
    let eye = Tensor::<B, 2>::eye(n, &a.device()).unsqueeze::<3>();
    let a_hat = a + eye;
    let d = a_hat.clone().sum_dim(2).add_scalar(1e-8).powf_scalar(-0.5);
    let dt = d.clone().reshape([b, 1, n]);
    a_hat * d * dt
}

/// `GraphEncoder(in = F, hidden = H, latent = L)`: one propagation, then
/// `h = ReLU(fc1(Â x))`, `μ = fc_mu(h)`, `logvar = fc_logvar(h)`.
#[derive(Module, Debug)]
pub struct GraphEncoder<B: Backend> {
    pub fc1: Linear<B>,
    pub fc_mu: Linear<B>,
    pub fc_logvar: Linear<B>,
}

impl<B: Backend> GraphEncoder<B> {
    pub fn new(input: usize, hidden: usize, latent: usize, device: &B::Device) -> Self {
        Self {
            fc1: LinearConfig::new(input, hidden).init(device),
            fc_mu: LinearConfig::new(hidden, latent).init(device),
            fc_logvar: LinearConfig::new(hidden, latent).init(device),
        }
    }

    /// `(μ, logvar)`, each `[B,N,L]`, from the propagated features `Â x` `[B,N,F]`.
    pub fn forward(&self, ax: Tensor<B, 3>) -> (Tensor<B, 3>, Tensor<B, 3>) {
        let h = relu(linear3(&self.fc1, ax));
        (linear3(&self.fc_mu, h.clone()), linear3(&self.fc_logvar, h))
    }
}

/// Sex and site embeddings (dim `cov_embed_dim` each) followed by the numeric covariates.
#[derive(Module, Debug)]
pub struct CovEncoder<B: Backend> {
    pub sex_embed: Embedding<B>,
    pub site_embed: Embedding<B>,
}

impl<B: Backend> CovEncoder<B> {
    pub fn new(sex_vocab: usize, site_vocab: usize, dim: usize, device: &B::Device) -> Self {
        Self {
            sex_embed: EmbeddingConfig::new(sex_vocab, dim).init(device),
            site_embed: EmbeddingConfig::new(site_vocab, dim).init(device),
        }
    }

    /// `concat(E_sex[sex], E_site[site], numeric)` → [B, C].
    pub fn forward(
        &self,
        sex: Tensor<B, 1, Int>,
        site: Tensor<B, 1, Int>,
        numeric: Tensor<B, 2>,
    ) -> Tensor<B, 2> {
        let [b] = sex.dims();
        let e_sex = self.sex_embed.forward(sex.reshape([b, 1]));
        let e_site = self.site_embed.forward(site.reshape([b, 1]));
        let d = e_sex.dims()[2];
        let mut parts = vec![e_sex.reshape([b, d]), e_site.reshape([b, d])];
        if numeric.dims()[1] > 0 {
            parts.push(numeric);
        }
        Tensor::cat(parts, 1)
    }
}

/// Two Linear layers with a ReLU between them (`net.0`, `net.2` in the reference).
#[derive(Module, Debug)]
pub struct Mlp2<B: Backend> {
    pub fc1: Linear<B>,
    pub fc2: Linear<B>,
}

impl<B: Backend> Mlp2<B> {
    pub fn new(input: usize, hidden: usize, output: usize, device: &B::Device) -> Self {
        Self {
            fc1: LinearConfig::new(input, hidden).init(device),
            fc2: LinearConfig::new(hidden, output).init(device),
        }
    }

    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        linear3(&self.fc2, relu(linear3(&self.fc1, x)))
    }
}

/// The coupled ODE function (docs/clg-ode-model.md §2.4): two 2-layer MLPs on `concat(z_m, z_c, cov, t)`.
#[derive(Module, Debug)]
pub struct OdeFunc<B: Backend> {
    pub morph_net: Mlp2<B>,
    pub conn_net: Mlp2<B>,
}

/// [`OdeFunc`] specialised to a batch of trajectories (their covariates and Δt) and run as one
/// network of width W = 2(H + 1), so that an evaluation is five backend operations whatever the
/// batch (matmul, ReLU, a matmul per branch, cat; docs/clg-ode-model.md §2.4 is the function,
/// this its layout):
///
/// * both branches' first layers side by side, `[W_z^m | 0 | W_z^c | 0]`, one product;
/// * the covariate and time blocks as a per-trajectory bias, `[b1^m + … | 1 | b1^c + … | 1]`
///   (`b1 + cov·W_cov + Δt·s·w_t` per branch), in the same product: the state carries B more
///   columns, its trajectory's one-hot indicator, and the first weight B more rows, the biases
///   at the evaluation's time (the covariate part computed once per integration, the time part
///   once per distinct time; no broadcast);
/// * each second layer with its bias as the last row, met by its branch's hidden unit that is
///   constantly ReLU(1) = 1; the two outputs and B zero columns for the indicators (which stay
///   exactly 1) concatenated: `[dz_m | dz_c | 0]`.
///
/// (One block-diagonal second layer would save two more operations but cost the second
/// layer's FLOPs twice, measured slower on the CPU.)
pub struct PreparedOde<B: Backend> {
    /// First layer's state rows of both branches side by side, each then a zero column:
    /// `[2L, W]`.
    pub(crate) w1: Tensor<B, 2>,
    /// Per-trajectory bias at s = 0, `[b1 + cov·W_cov | 1]` per branch: `[B, W]`.
    pub(crate) base: Tensor<B, 2>,
    /// Its change per unit of s, `[Δt·w_t | 0]` per branch: `[B, W]`.
    pub(crate) slope: Tensor<B, 2>,
    /// Each second layer with its bias as the last row: `[H+1, L]`.
    pub(crate) w2_m: Tensor<B, 2>,
    pub(crate) w2_c: Tensor<B, 2>,
    /// Δt `[B,1]`, folded into the RK4 coefficients.
    pub(crate) dt: Tensor<B, 2>,
}

impl<B: Backend> OdeFunc<B> {
    pub fn new(latent: usize, cov_dim: usize, hidden: usize, device: &B::Device) -> Self {
        let input = 2 * latent + cov_dim + 1;
        Self {
            morph_net: Mlp2::new(input, hidden, latent, device),
            conn_net: Mlp2::new(input, hidden, latent, device),
        }
    }

    /// The merged network for covariates `cov` `[B, C]` and intervals `dt` `[B]` (> 0).
    pub fn prepare(&self, cov: Tensor<B, 2>, dt: Tensor<B, 1>) -> PreparedOde<B> {
        let (m, c) = (&self.morph_net, &self.conn_net);
        let device = cov.device();
        let [b, cov_dim] = cov.dims();
        let w = Tensor::cat(vec![m.fc1.weight.val(), c.fc1.weight.val()], 1); // [2L+C+1, 2H]
        let [rows, h2] = w.dims();
        let z_rows = rows - cov_dim - 1;
        let bias = |l: &Linear<B>, width: usize| {
            l.bias
                .as_ref()
                .map_or_else(|| Tensor::zeros([width], &device), |b| b.val())
        };
        let (h, l) = (h2 / 2, m.fc2.weight.dims()[1]);
        // Each branch's H hidden units, then its unit that is constantly ReLU(1) = 1.
        let split = |t: Tensor<B, 2>, one: Tensor<B, 2>| {
            Tensor::cat(
                vec![
                    t.clone().narrow(1, 0, h),
                    one.clone(),
                    t.narrow(1, h, h),
                    one,
                ],
                1,
            )
        };
        let w1 = split(
            w.clone().narrow(0, 0, z_rows),
            Tensor::zeros([z_rows, 1], &device),
        );
        let b1 = Tensor::cat(vec![bias(&m.fc1, h), bias(&c.fc1, h)], 0).unsqueeze::<2>();
        let base = cov.matmul(w.clone().narrow(0, z_rows, cov_dim)) + b1;
        let base = split(base, Tensor::ones([b, 1], &device));
        let dt = dt.reshape([b, 1]);
        let slope = dt.clone() * w.narrow(0, z_rows + cov_dim, 1);
        let slope = split(slope, Tensor::zeros([b, 1], &device));
        let second = |net: &Mlp2<B>| {
            Tensor::cat(
                vec![net.fc2.weight.val(), bias(&net.fc2, l).unsqueeze::<2>()],
                0,
            )
        };
        let (w2_m, w2_c) = (second(m), second(c));
        PreparedOde {
            w1,
            base,
            slope,
            w2_m,
            w2_c,
            dt,
        }
    }
}

/// One evaluation of the ODE function in an integration: its input state `[B·N, 2L]` (without
/// the trajectory indicators) and hidden activations after the ReLU `[B·N, W]`.
#[derive(Clone, Debug)]
pub(crate) struct Stage<B: Backend> {
    pub y: Tensor<B, 2>,
    pub hidden: Tensor<B, 2>,
}

/// `[B·N, B]` one-hot rows: row `b·N + i` selects trajectory b. Made on the device (no upload).
pub(crate) fn trajectory_onehot<B: Backend>(
    b: usize,
    n: usize,
    device: &B::Device,
) -> Tensor<B, 2> {
    let rows = Tensor::<B, 1, Int>::arange(0..(b * n) as i64, device)
        .div_scalar(n as i64)
        .reshape([b * n, 1])
        .expand([b * n, b]);
    let cols = Tensor::<B, 1, Int>::arange(0..b as i64, device)
        .reshape([1, b])
        .expand([b * n, b]);
    rows.equal(cols).float()
}

impl<B: Backend> PreparedOde<B> {
    /// The first layer's weight at s, `[2L+B, W]`: the state rows, then the biases at s.
    fn first_layer(&self, s: f64) -> Tensor<B, 2> {
        let bias = match s {
            0.0 => self.base.clone(),
            s => self.base.clone() + self.slope.clone().mul_scalar(s),
        };
        Tensor::cat(vec![self.w1.clone(), bias], 0)
    }

    /// `[f(t, z) | 0]` for the augmented states `[z | e_b]` `[B·N, 2L+B]` (trajectory-major)
    /// and the first layer at t ([`PreparedOde::first_layer`]).
    /// With `keep`, the evaluation's input and hidden activations are pushed to it (for
    /// [`super::shared_ode`]'s backward); the values are the same either way.
    fn eval(
        &self,
        w1: &Tensor<B, 2>,
        z: Tensor<B, 2>,
        zeros: &Tensor<B, 2>,
        keep: &mut Option<&mut Vec<Stage<B>>>,
    ) -> Tensor<B, 2> {
        let hidden = relu(z.clone().matmul(w1.clone()));
        let width = hidden.dims()[1] / 2;
        let dm = hidden.clone().narrow(1, 0, width).matmul(self.w2_m.clone());
        let dc = hidden
            .clone()
            .narrow(1, width, width)
            .matmul(self.w2_c.clone());
        if let Some(kept) = keep {
            let d = dm.dims()[1] + dc.dims()[1];
            kept.push(Stage {
                y: z.narrow(1, 0, d),
                hidden,
            });
        }
        Tensor::cat(vec![dm, dc, zeros.clone()], 1)
    }

    /// Fixed-step RK4 from s = 0 to s = 1 of `dz/ds = Δt · f(Δt·s, z)`, i.e. the reference's
    /// integration from t = 0 to t = Δt with `steps` steps of size Δt/steps, for every
    /// trajectory of the batch at once although their Δt differ; Δt is folded into the stages'
    /// coefficients (`z + (Δt·h/2)·f`, each coefficient one value per row of the state). z0
    /// `[B,N,2L]` → z(Δt) `[B,N,2L]`.
    pub fn integrate(&self, z0: Tensor<B, 3>, steps: usize) -> Tensor<B, 3> {
        self.integrate_keeping(z0, steps, None)
    }

    /// [`PreparedOde::integrate`], pushing every evaluation's [`Stage`] to `keep` (four per
    /// step, in order) when given.
    pub(crate) fn integrate_keeping(
        &self,
        z0: Tensor<B, 3>,
        steps: usize,
        mut keep: Option<&mut Vec<Stage<B>>>,
    ) -> Tensor<B, 3> {
        let [b, n, d] = z0.dims();
        let device = z0.device();
        let onehot = trajectory_onehot::<B>(b, n, &device);
        let steps = steps.max(1);
        let h = 1.0 / steps as f64;
        // Δt of every row and column of the state, [B·N, 2L+B].
        let dt_rows = onehot
            .clone()
            .matmul(self.dt.clone() * Tensor::ones([1, d + b], &device));
        let (half, full, sixth) = (
            dt_rows.clone().mul_scalar(h / 2.0),
            dt_rows.clone().mul_scalar(h),
            dt_rows.mul_scalar(h / 6.0),
        );
        // The first layer at s = i·h/2: s takes 2·steps + 1 values, each built once.
        let mut layers: Vec<Option<Tensor<B, 2>>> = vec![None; 2 * steps + 1];
        let mut layer = |i: usize| {
            layers[i]
                .get_or_insert_with(|| self.first_layer(i as f64 * h / 2.0))
                .clone()
        };
        let zeros = Tensor::<B, 2>::zeros([b * n, b], &device);
        let mut z = Tensor::cat(vec![z0.reshape([b * n, d]), onehot], 1);
        for step in 0..steps {
            let (w0, w_mid, w_end) = (layer(2 * step), layer(2 * step + 1), layer(2 * step + 2));
            let k1 = self.eval(&w0, z.clone(), &zeros, &mut keep);
            let k2 = self.eval(
                &w_mid,
                z.clone() + k1.clone() * half.clone(),
                &zeros,
                &mut keep,
            );
            let k3 = self.eval(
                &w_mid,
                z.clone() + k2.clone() * half.clone(),
                &zeros,
                &mut keep,
            );
            let k4 = self.eval(
                &w_end,
                z.clone() + k3.clone() * full.clone(),
                &zeros,
                &mut keep,
            );
            z = z + (k1 + (k2 + k3).mul_scalar(2.0) + k4) * sixth.clone();
        }
        z.narrow(1, 0, d).reshape([b, n, d])
    }
}
