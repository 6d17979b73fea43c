//! The building blocks of CLG-ODE (docs/clg-ode-model.md §2.2–§2.6), each a Burn module with PyTorch-like init
//! (Linear: U(±1/√fan_in) for weight and bias; Embedding: N(0, 1)).

use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::relu;

/// A Linear layer applied to the last dimension of a rank-3 tensor, through one 2-D matmul
/// (Burn's rank-3 linear would run a batched matmul and a per-batch weight gradient).
pub fn linear3<B: Backend>(layer: &Linear<B>, x: Tensor<B, 3>) -> Tensor<B, 3> {
    let [b, n, d] = x.dims();
    let y = layer.forward(x.reshape([b * n, d]));
    let out = y.dims()[1];
    y.reshape([b, n, out])
}

/// `Â x` with Â = D^{-1/2}(A + I)D^{-1/2}, d_i = Σ_j (A + I)_ij (docs/clg-ode-model.md §2.1), without forming Â:
/// `Â x = d^{-1/2} ⊙ (A (d^{-1/2} ⊙ x) + d^{-1/2} ⊙ x)`. `a` `[B,N,N]`, `x` `[B,N,F]`.
pub fn propagate<B: Backend>(a: Tensor<B, 3>, x: Tensor<B, 3>) -> Tensor<B, 3> {
    let d_inv_sqrt = a
        .clone()
        .sum_dim(2)
        .add_scalar(1.0 + 1e-8)
        .powf_scalar(-0.5); // [B,N,1]
    let y = x * d_inv_sqrt.clone();
    (a.matmul(y.clone()) + y) * d_inv_sqrt
}

/// Â itself, `[B,N,N]` (for tests and inspection; the model uses [`propagate`]).
pub fn normalized_adjacency<B: Backend>(a: Tensor<B, 3>) -> Tensor<B, 3> {
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

/// One branch of [`OdeFunc`] with its first layer split by input block, so that the covariate
/// part (constant along a trajectory) is computed once per integration, not per evaluation.
struct Branch<B: Backend> {
    /// Rows of the first weight that multiply the state z (2L × H).
    w_z: Tensor<B, 2>,
    /// The row that multiplies t, [1,H].
    w_t: Tensor<B, 2>,
    /// `b1 + cov · W_cov`, [B,H].
    base: Tensor<B, 2>,
}

/// [`OdeFunc`] specialised to a batch of trajectories (their covariates and Δt).
pub struct PreparedOde<'a, B: Backend> {
    func: &'a OdeFunc<B>,
    morph: Branch<B>,
    conn: Branch<B>,
}

impl<B: Backend> OdeFunc<B> {
    pub fn new(latent: usize, cov_dim: usize, hidden: usize, device: &B::Device) -> Self {
        let input = 2 * latent + cov_dim + 1;
        Self {
            morph_net: Mlp2::new(input, hidden, latent, device),
            conn_net: Mlp2::new(input, hidden, latent, device),
        }
    }

    /// Splits the first layers for covariates `cov` [B, C].
    pub fn prepare(&self, cov: Tensor<B, 2>) -> PreparedOde<'_, B> {
        let branch = |net: &Mlp2<B>| {
            let w = net.fc1.weight.val(); // [2L + C + 1, H]
            let rows = w.dims()[0];
            let c = cov.dims()[1];
            let z_rows = rows - c - 1;
            let w_z = w.clone().narrow(0, 0, z_rows);
            let w_c = w.clone().narrow(0, z_rows, c);
            let w_t = w.narrow(0, z_rows + c, 1);
            let mut base = cov.clone().matmul(w_c);
            if let Some(b) = &net.fc1.bias {
                base = base + b.val().unsqueeze::<2>();
            }
            Branch { w_z, w_t, base }
        };
        PreparedOde {
            func: self,
            morph: branch(&self.morph_net),
            conn: branch(&self.conn_net),
        }
    }
}

/// `[B·N, B]` one-hot rows: row `b·N + i` selects trajectory b. Multiplying it by a `[B, H]`
/// per-trajectory bias expands the bias to every node with one small matmul (the flex backend
/// has no fast path for a `[B,1,H]` broadcast).
pub fn trajectory_onehot<B: Backend>(b: usize, n: usize, device: &B::Device) -> Tensor<B, 2> {
    let mut v = vec![0.0f32; b * n * b];
    for t in 0..b {
        for i in 0..n {
            v[(t * n + i) * b + t] = 1.0;
        }
    }
    Tensor::from_data(burn::tensor::TensorData::new(v, [b * n, b]), device)
}

impl<B: Backend> PreparedOde<'_, B> {
    /// `f(t, z)` for z `[B,N,2L]` and per-trajectory times `t` `[B,1]` → `[B,N,2L]`; `onehot`
    /// from [`trajectory_onehot`].
    pub fn eval(&self, t: Tensor<B, 2>, z: Tensor<B, 3>, onehot: &Tensor<B, 2>) -> Tensor<B, 3> {
        let [b, n, d] = z.dims();
        let zf = z.reshape([b * n, d]);
        let run = |br: &Branch<B>, net: &Mlp2<B>| {
            let bias = br.base.clone() + t.clone() * br.w_t.clone(); // [B,H]
            let pre = zf.clone().matmul(br.w_z.clone()) + onehot.clone().matmul(bias);
            net.fc2.forward(relu(pre))
        };
        let dm = run(&self.morph, &self.func.morph_net);
        let dc = run(&self.conn, &self.func.conn_net);
        Tensor::cat(vec![dm, dc], 1).reshape([b, n, d])
    }

    /// Fixed-step RK4 from s = 0 to s = 1 of `dz/ds = Δt · f(Δt·s, z)`, i.e. the reference's
    /// integration from t = 0 to t = Δt with `steps` steps of size Δt/steps, for every
    /// trajectory of the batch at once although their Δt differ. `dt` `[B]` → z(Δt) `[B,N,2L]`.
    pub fn integrate(&self, z0: Tensor<B, 3>, dt: Tensor<B, 1>, steps: usize) -> Tensor<B, 3> {
        let [b, n, _] = z0.dims();
        let onehot = trajectory_onehot::<B>(b, n, &z0.device());
        let dt2 = dt.clone().reshape([b, 1]);
        let dt3 = dt.reshape([b, 1, 1]);
        let h = 1.0 / steps.max(1) as f64;
        let f = |s: f64, z: Tensor<B, 3>| {
            self.eval(dt2.clone().mul_scalar(s), z, &onehot) * dt3.clone()
        };
        let mut z = z0;
        for step in 0..steps {
            let s = step as f64 * h;
            let k1 = f(s, z.clone());
            let k2 = f(s + h / 2.0, z.clone() + k1.clone().mul_scalar(h / 2.0));
            let k3 = f(s + h / 2.0, z.clone() + k2.clone().mul_scalar(h / 2.0));
            let k4 = f(s + h, z.clone() + k3.clone().mul_scalar(h));
            z = z + (k1 + (k2 + k3).mul_scalar(2.0) + k4).mul_scalar(h / 6.0);
        }
        z
    }
}
