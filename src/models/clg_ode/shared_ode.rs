//! The forecasts' RK4 integration run once for the three graphs of GradNorm's step (issue 74).
//!
//! GradNorm's step scores three parts of the objective in graphs of their own (the manifold
//! term, the topology term, the rest: `train/gnn/clg_ode/step.rs`) and Burn's backward consumes
//! its graph, so each part ran the integration forward again: three forwards for three backward
//! passes, where PyTorch retains one graph. Here a piece's integration runs once, on the inner
//! backend, keeping every evaluation's input and hidden activations ([`SharedOde::forward`]);
//! each part's graph then holds it as one operation ([`replay`]) whose output is that
//! integration's result, bit for bit, and whose backward is the integration's vector-Jacobian
//! product, written out:
//!
//! * one RK4 step, z' = z + c₆⊙(k1 + 2·k2 + 2·k3 + k4) with k_i = f(y_i), y1 = z,
//!   y2 = z + c₂⊙k1, y3 = z + c₂⊙k2, y4 = z + c₁⊙k3 (c₆, c₂, c₁ = Δt·h/6, Δt·h/2, Δt·h per
//!   row), from its end's cotangent z̄': with ḡ = c₆⊙z̄', ȳ4 = f̄(ḡ), ȳ3 = f̄(2ḡ + c₁⊙ȳ4),
//!   ȳ2 = f̄(2ḡ + c₂⊙ȳ3), ȳ1 = f̄(ḡ + c₂⊙ȳ2), and z̄ = z̄' + ȳ1 + ȳ2 + ȳ3 + ȳ4;
//! * one evaluation, k = [h_m·W2m | h_c·W2c] with h = ReLU(y·W1 + bias_b(s)), bias_b(s) =
//!   base_b + s·slope_b: h̄ = [k̄_m·W2mᵀ | k̄_c·W2cᵀ] ⊙ [h > 0], ȳ = h̄·W1ᵀ, and it adds
//!   h_mᵀ·k̄_m, h_cᵀ·k̄_c, yᵀ·h̄, Σ_rows(b) h̄ and s·Σ_rows(b) h̄ to the gradients of W2m, W2c,
//!   W1, base and slope.
//!
//! The gradients equal the graph's up to rounding (the same products summed in another order;
//! `shared_ode_tests.rs` on `flex`; `wgpu_follows_flex_step_by_step` on `wgpu`). Every backend
//! takes it: those that run one pass per subject on the host (`flex`) and those that run the
//! whole shard as one pass (`tch`, `cuda`, `wgpu`), where it saves two forward integrations'
//! launches per step. The kept integration knows the graph backend it replays in
//! (`Autodiff<I>` for its inner backend `I`); in any other it is not used.

use std::any::Any;
use std::sync::Arc;

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::prelude::*;
use burn::tensor::TensorPrimitive;

use super::layers::{PreparedOde, Stage};

/// An integration run once with its stages kept, for the graphs of several parts.
#[derive(Clone)]
pub(crate) struct SharedOde {
    /// The [`Saved`] of the inner backend `I` it ran on.
    saved: Arc<dyn Any + Send + Sync>,
    /// `replay_on::<I>`, as a [`Replay`] of `Autodiff<I>`.
    replay: Arc<dyn Any + Send + Sync>,
}

/// How a graph of backend `B` replays a kept integration.
type Replay<B> = fn(&PreparedOde<B>, Tensor<B, 3>, &SharedOde) -> Option<Tensor<B, 3>>;

/// What the backward reads: the integration's result and stages and the network's weights.
#[derive(Debug)]
struct Saved<B: Backend> {
    z1: Tensor<B, 3>,
    /// Four evaluations per step, in order.
    stages: Vec<Stage<B>>,
    /// The first layer's state rows `[2L, W]`, the second layers `[H+1, L]`.
    w1: Tensor<B, 2>,
    w2_m: Tensor<B, 2>,
    w2_c: Tensor<B, 2>,
    /// Δt per trajectory `[B, 1]`.
    dt: Tensor<B, 2>,
    steps: usize,
}

impl SharedOde {
    /// Integrates `z0` `[B,N,2L]` with `p` on the inner backend `I` of the graphs that will
    /// replay it (`Autodiff<I>`), keeping its stages.
    pub(crate) fn forward<I: Backend>(p: &PreparedOde<I>, z0: Tensor<I, 3>, steps: usize) -> Self {
        let mut stages = Vec::with_capacity(4 * steps.max(1));
        let z1 = p.integrate_keeping(z0, steps, Some(&mut stages));
        let saved = Saved {
            z1,
            stages,
            w1: p.w1.clone(),
            w2_m: p.w2_m.clone(),
            w2_c: p.w2_c.clone(),
            dt: p.dt.clone(),
            steps: steps.max(1),
        };
        let replay: Replay<Autodiff<I>> = replay_on::<I>;
        Self {
            saved: Arc::new(saved),
            replay: Arc::new(replay),
        }
    }
}

/// z(Δt) of the integration `shared` kept, as an operation of `B`'s graph on the inputs `p` and
/// `z0` (which must be the ones it integrated: the same values), with the integration's
/// backward. `None` when `B` is not the graph backend it was kept for.
pub(crate) fn replay<B: Backend>(
    p: &PreparedOde<B>,
    z0: Tensor<B, 3>,
    shared: &SharedOde,
) -> Option<Tensor<B, 3>> {
    let replay = shared.replay.downcast_ref::<Replay<B>>()?;
    replay(p, z0, shared)
}

/// [`replay`] in a graph of `Autodiff<I>`.
fn replay_on<I: Backend>(
    p: &PreparedOde<Autodiff<I>>,
    z0: Tensor<Autodiff<I>, 3>,
    shared: &SharedOde,
) -> Option<Tensor<Autodiff<I>, 3>> {
    let saved = shared.saved.clone().downcast::<Saved<I>>().ok()?;
    assert_eq!(
        z0.dims(),
        saved.z1.dims(),
        "shared_ode::replay: the integration kept was of another batch"
    );
    let prim = |t: Tensor<Autodiff<I>, 3>| t.into_primitive().tensor();
    let prim2 = |t: &Tensor<Autodiff<I>, 2>| t.clone().into_primitive().tensor();
    let z0 = prim(z0);
    let [w1, base, slope, w2_m, w2_c] = [&p.w1, &p.base, &p.slope, &p.w2_m, &p.w2_c].map(prim2);
    let nodes = [
        z0.node, w1.node, base.node, slope.node, w2_m.node, w2_c.node,
    ];
    let out = saved.z1.clone().into_primitive().tensor();
    let y = match OdeBackward::<I>(std::marker::PhantomData)
        .prepare::<NoCheckpointing>(nodes)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(saved, out),
        OpsKind::UnTracked(prep) => prep.finish(out),
    };
    Some(Tensor::from_primitive(TensorPrimitive::Float(y)))
}

struct OdeBackward<I>(std::marker::PhantomData<fn() -> I>);

impl<I> std::fmt::Debug for OdeBackward<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedOdeBackward")
    }
}

impl<I: Backend> Backward<I, 6> for OdeBackward<I> {
    type State = Arc<Saved<I>>;

    fn backward(self, ops: Ops<Self::State, 6>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dz1 = grads.consume::<I>(&ops.node);
        let dz1 = Tensor::<I, 3>::from_primitive(TensorPrimitive::Float(dz1));
        let (dz0, g) = vjp(&ops.state, dz1);
        let [z0, w1, base, slope, w2_m, w2_c] = ops.parents;
        let pairs = [
            (z0, dz0.into_primitive().tensor()),
            (w1, g.w1.into_primitive().tensor()),
            (base, g.base.into_primitive().tensor()),
            (slope, g.slope.into_primitive().tensor()),
            (w2_m, g.w2_m.into_primitive().tensor()),
            (w2_c, g.w2_c.into_primitive().tensor()),
        ];
        for (node, t) in pairs {
            if let Some(node) = node {
                grads.register::<I>(node.id, t);
            }
        }
    }
}

/// The gradients of the integration's weights.
struct OdeGrads<B: Backend> {
    w1: Tensor<B, 2>,
    base: Tensor<B, 2>,
    slope: Tensor<B, 2>,
    w2_m: Tensor<B, 2>,
    w2_c: Tensor<B, 2>,
}

/// The integration's vector-Jacobian product for the cotangent `dz1` `[B,N,2L]` of its result
/// (see the module's documentation): the gradients of z0 and of the weights.
fn vjp<B: Backend>(s: &Saved<B>, dz1: Tensor<B, 3>) -> (Tensor<B, 3>, OdeGrads<B>) {
    let [b, n, d] = dz1.dims();
    let device = dz1.device();
    let r = b * n;
    let h = 1.0 / s.steps as f64;
    let dt =
        s.dt.clone()
            .reshape([b, 1, 1])
            .repeat_dim(1, n)
            .reshape([r, 1]);
    let (c2, c1, c6) = (
        dt.clone().mul_scalar(h / 2.0),
        dt.clone().mul_scalar(h),
        dt.mul_scalar(h / 6.0),
    );
    let [half, l] = s.w2_m.dims();
    let w = 2 * half;
    let w1t = s.w1.clone().transpose();
    let (w2mt, w2ct) = (s.w2_m.clone().transpose(), s.w2_c.clone().transpose());
    let mut g = OdeGrads {
        w1: Tensor::zeros(s.w1.dims(), &device),
        base: Tensor::zeros([b, w], &device),
        slope: Tensor::zeros([b, w], &device),
        w2_m: Tensor::zeros(s.w2_m.dims(), &device),
        w2_c: Tensor::zeros(s.w2_c.dims(), &device),
    };
    // One evaluation at time s from its output's cotangent: its input's.
    let mut eval = |stage: &Stage<B>, dk: Tensor<B, 2>, at: f64| -> Tensor<B, 2> {
        let (dkm, dkc) = (dk.clone().narrow(1, 0, l), dk.narrow(1, l, l));
        let hidden = &stage.hidden;
        let (hm, hc) = (
            hidden.clone().narrow(1, 0, half),
            hidden.clone().narrow(1, half, half),
        );
        g.w2_m = g.w2_m.clone() + hm.transpose().matmul(dkm.clone());
        g.w2_c = g.w2_c.clone() + hc.transpose().matmul(dkc.clone());
        let dh = Tensor::cat(vec![dkm.matmul(w2mt.clone()), dkc.matmul(w2ct.clone())], 1);
        let dpre = dh.mask_fill(hidden.clone().lower_equal_elem(0.0), 0.0);
        g.w1 = g.w1.clone() + stage.y.clone().transpose().matmul(dpre.clone());
        let dbias = dpre.clone().reshape([b, n, w]).sum_dim(1).reshape([b, w]);
        if at != 0.0 {
            g.slope = g.slope.clone() + dbias.clone().mul_scalar(at);
        }
        g.base = g.base.clone() + dbias;
        dpre.matmul(w1t.clone())
    };
    let mut dz = dz1.reshape([r, d]);
    for step in (0..s.steps).rev() {
        let st = &s.stages[4 * step..4 * step + 4];
        let at = |i: usize| i as f64 * h / 2.0;
        let ds = dz.clone() * c6.clone();
        let dy4 = eval(&st[3], ds.clone(), at(2 * step + 2));
        let dy3 = eval(
            &st[2],
            ds.clone().mul_scalar(2.0) + dy4.clone() * c1.clone(),
            at(2 * step + 1),
        );
        let dy2 = eval(
            &st[1],
            ds.clone().mul_scalar(2.0) + dy3.clone() * c2.clone(),
            at(2 * step + 1),
        );
        let dy1 = eval(&st[0], ds + dy2.clone() * c2.clone(), at(2 * step));
        dz = dz + dy1 + dy2 + dy3 + dy4;
    }
    (dz.reshape([b, n, d]), g)
}
