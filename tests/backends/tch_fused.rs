//! `tch`'s GPU-minded parts, checked on the CPU: the fused Adam (LibTorch's `_fused_adam_`
//! through our C++ shim) against the tensor Adam over several steps, the bench step's counts
//! (no upload, no read, the operations of the model and one update per parameter), and the
//! intra-op thread rule for CUDA placements.
#![cfg(feature = "tch")]

use trainer::backend::DeviceSpec;
use trainer::backend::fast_tch::FastTch;
use trainer::backend::tch_threads::IntraOpThreads;
use trainer::toolbox::optim::{Adam, ParamUpdate};

use crate::common;

use common::numerics::{host, random, rel_err, tensor};
use common::step_counts::bench_mnist_counts;

/// Five steps of both on three parameters (sizes about the CNN's: a bias, a kernel, a layer),
/// with gradients of several magnitudes: every parameter and both moments agree to 1e-6
/// relative (max |a − b| / max |b|). Not bit for bit: the fused kernel updates the first moment
/// as a lerp, `m + (1 − β₁)(g − m)`, and divides the moment by √v + ε once, where the tensor
/// version computes `β₁m + (1 − β₁)g` and scales m first (f32 rounding differs by an ulp or
/// two per step).
#[test]
fn fused_adam_agrees_with_the_tensor_adam_within_1e_6() {
    let fused = trainer::launch::fused_adam::<FastTch>().expect("tch has a fused Adam");
    let mut a = Adam::<FastTch>::with_fused(Some(fused));
    let mut b = Adam::<FastTch>::default();
    let sizes = [32, 18_432, 1_179_648];
    let mut pa: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| tensor::<FastTch, 1>(&random(n, i as u64), [n]))
        .collect();
    let mut pb = pa.clone();
    for step in 0..5u64 {
        for (i, &n) in sizes.iter().enumerate() {
            let scale = [1e-3f32, 1.0, 30.0][i];
            let g: Vec<f32> = random(n, 100 + 10 * step + i as u64)
                .iter()
                .map(|v| v * scale)
                .collect();
            let g = tensor::<FastTch, 1>(&g, [n]);
            pa[i] = a.updated(i, pa[i].clone(), g.clone(), 1e-3);
            pb[i] = b.updated(i, pb[i].clone(), g, 1e-3);
            let (x, y) = (host(pa[i].clone()), host(pb[i].clone()));
            let e = rel_err(&x, &y);
            assert!(e <= 1e-6, "step {step} parameter {i}: relative error {e}");
            let moved = rel_err(&x, &host(tensor::<FastTch, 1>(&random(n, i as u64), [n])));
            assert!(moved > 0.0, "step {step} parameter {i} did not move");
        }
    }
}

/// The bench's training step on `tch` (CPU): data on the device, so no upload and no read; the
/// operations of the CNN's forward and backward, with cross-entropy and dropout in LibTorch's
/// own kernels (one operation each way: 34 where Burn's loss and dropout made 63), plus one
/// fused update per parameter tensor (8): 42, held at most 45 (the tensor Adam alone made 104;
/// `flex`, with Burn's loss and dropout, makes 71).
#[test]
fn the_tch_bench_step_makes_no_upload_no_read_and_at_most_45_ops() {
    let t = tempfile::tempdir().unwrap();
    let ((ops, uploads, reads), (_, i_uploads, i_reads)) = bench_mnist_counts(t.path(), "tch");
    assert_eq!((uploads, reads), (0.0, 0.0), "training step");
    assert!(ops > 8.0 && ops <= 45.0, "training step: {ops} ops");
    assert_eq!((i_uploads, i_reads), (0.0, 1.0), "inference step");
}

/// A CUDA placement runs LibTorch with one intra-op thread (no OpenMP team spinning beside the
/// GPU), and the count in force before comes back when it ends, for a CPU placement after it.
/// The rule needs no GPU: it only sets LibTorch's thread count.
#[test]
fn a_cuda_placement_runs_one_intra_op_thread_and_restores_the_count() {
    tch::set_num_threads(2);
    {
        let _g = IntraOpThreads::for_device(DeviceSpec::Cuda(0));
        assert_eq!(tch::get_num_threads(), 1);
    }
    assert_eq!(tch::get_num_threads(), 2);
    let _g = IntraOpThreads::for_device(DeviceSpec::Cpu);
    assert_eq!(tch::get_num_threads(), 2);
}

/// The loss and the logits' gradient through `launch::cross_entropy` on backend `B`.
fn cross_entropy_and_gradient<B: burn::tensor::backend::AutodiffBackend>(
    x: &[f32],
    y: &[i64],
    [n, c]: [usize; 2],
) -> (Vec<f32>, Vec<f32>) {
    use burn::tensor::{Int, Tensor, TensorData};
    let device = Default::default();
    let logits = tensor::<B, 2>(x, [n, c]).require_grad();
    let target = Tensor::<B, 1, Int>::from_data(TensorData::new(y.to_vec(), [n]), &device);
    let loss = trainer::launch::cross_entropy(logits.clone(), target);
    let grads = loss.backward();
    let g = logits.grad(&grads).expect("the logits' gradient");
    (host(loss.inner()), host(g))
}

/// Cross-entropy on `tch` in LibTorch's own kernels (`_log_softmax` + `nll_loss_forward`, one
/// operation; `nll_loss_backward` + `_log_softmax_backward_data`, one operation) against Burn's
/// `CrossEntropyLoss` on burn-tch (`LibTorch`: log-softmax as max, subtract, exp, sum, log,
/// subtract, then gather, mean, negate): the loss and the logits' gradient within 1e-5
/// relative (the log-sum-exp summed in another order), at two scales of logits (1 and 30: one
/// class dominates). Counted: one operation forward, one backward.
#[test]
fn cross_entropy_in_libtorch_kernels_agrees_with_burns_within_1e_5() {
    use burn::backend::{Autodiff, LibTorch};
    use trainer::backend::fast_tch::xent;
    assert!(xent::applies::<Autodiff<FastTch>>() && xent::applies::<FastTch>());
    assert!(
        !xent::applies::<Autodiff<LibTorch>>(),
        "tch-plain keeps Burn's loss"
    );
    let (n, c) = (64, 10);
    for (case, scale) in [1.0f32, 30.0].into_iter().enumerate() {
        let x: Vec<f32> = random(n * c, 7 + case as u64)
            .iter()
            .map(|v| v * scale)
            .collect();
        let y: Vec<i64> = (0..n).map(|i| ((i * 7 + case) % c) as i64).collect();
        let ((fused_loss, fused_grad), counts) = trainer::host_reads::Counts::isolated(|| {
            cross_entropy_and_gradient::<Autodiff<FastTch>>(&x, &y, [n, c])
        });
        let (loss, grad) = cross_entropy_and_gradient::<Autodiff<LibTorch>>(&x, &y, [n, c]);
        let e = rel_err(&fused_loss, &loss);
        assert!(e <= 1e-5, "scale {scale}: loss {fused_loss:?} vs {loss:?}");
        let e = rel_err(&fused_grad, &grad);
        assert!(e <= 1e-5, "scale {scale}: gradient relative error {e}");
        assert!(grad.iter().any(|g| g.abs() > 1e-4), "a gradient to compare");
        // The loss forward, the backward's seed (ones) and the loss backward (Burn's
        // decomposition makes about twenty).
        assert!(counts.ops <= 4, "{counts:?}");
    }
    // Evaluation (no autodiff): the forward alone, the same loss.
    let x = random(n * c, 3);
    let y: Vec<i64> = (0..n).map(|i| (i % c) as i64).collect();
    let eval = |x: &[f32]| {
        use burn::tensor::{Int, Tensor, TensorData};
        let target = Tensor::<FastTch, 1, Int>::from_data(
            TensorData::new(y.clone(), [n]),
            &Default::default(),
        );
        host(trainer::launch::cross_entropy(
            tensor::<FastTch, 2>(x, [n, c]),
            target,
        ))
    };
    let (trained, _) = cross_entropy_and_gradient::<Autodiff<FastTch>>(&x, &y, [n, c]);
    assert_eq!(
        eval(&x),
        trained,
        "the same kernels with and without autodiff"
    );
}

/// Dropout on `tch` in LibTorch's kernels (`native_dropout`, `native_dropout_backward`: one
/// operation each) does what Burn's `Dropout` does: about 1 − p of the values kept, each
/// multiplied by exactly 1/(1 − p), the others 0, and the gradient through the same mask and
/// scale; the same seed draws the same mask (a resumed run); and it makes at least three
/// operations fewer than Burn's Bernoulli mask and two products, forward and backward.
#[test]
fn dropout_in_libtorch_kernels_keeps_scales_and_backpropagates_as_burns() {
    use burn::backend::Autodiff;
    use burn::nn::DropoutConfig;
    use burn::prelude::Backend;
    use trainer::host_reads::Counts;
    use trainer::launch::BackendKernels;
    use trainer::models::cnn::{BurnKernels, LayerKernels};
    type B = Autodiff<FastTch>;
    let (n, p) = (100_000, 0.25);
    let xs: Vec<f32> = random(n, 5).iter().map(|v| v + 2.0).collect();
    let ws = random(n, 6);
    let layer = DropoutConfig::new(p).init();
    let run = |drop: &dyn Fn(burn::tensor::Tensor<B, 1>) -> burn::tensor::Tensor<B, 1>| {
        B::seed(&Default::default(), 11);
        Counts::isolated(|| {
            let x = tensor::<B, 1>(&xs, [n]).require_grad();
            let y = drop(x.clone());
            let grads = (y.clone() * tensor::<B, 1>(&ws, [n])).sum().backward();
            (host(y.inner()), host(x.grad(&grads).expect("a gradient")))
        })
    };
    let ((y, g), fused) = run(&|x| BackendKernels.dropout(x, &layer));
    let scale = (1.0 / (1.0 - p)) as f32;
    let kept = y.iter().filter(|v| **v != 0.0).count() as f64 / n as f64;
    assert!((kept - (1.0 - p)).abs() < 0.01, "kept {kept}");
    for i in 0..n {
        if y[i] == 0.0 {
            assert_eq!(g[i], 0.0, "a dropped value's gradient");
        } else {
            assert_eq!(y[i], xs[i] * scale, "a kept value");
            assert_eq!(g[i], ws[i] * scale, "a kept value's gradient");
        }
    }
    let ((again, _), _) = run(&|x| BackendKernels.dropout(x, &layer));
    assert_eq!(again, y, "the same seed, the same mask");
    let (_, burns) = run(&|x| BurnKernels.dropout(x, &layer));
    assert!(
        fused.ops + 3 <= burns.ops,
        "{fused:?} against Burn's {burns:?}"
    );
}

/// `--cuda-graph`'s Adam (issue 72 item 5): while a `DeviceAdam` is set, the fused update reads
/// its step count and rate from two device scalars (a replayed step cannot carry them in its
/// launch) and applies the kernel's own bias corrections: over five steps it agrees with the
/// tensor Adam within 1e-6 relative (the same formula; f32 rounding differs by an ulp or two
/// per step), and the rate really comes from the device (0 there leaves the parameters as they
/// were though the loop passes 1e-3). Dropped, the launch's scalars apply again. Checked on
/// the CPU: LibTorch has the same `_fused_adam_` (tensor-rate overload) there.
#[test]
fn the_replayable_adam_reads_step_and_rate_from_the_device_within_1e_6() {
    use burn::backend::libtorch::LibTorchDevice;
    use trainer::backend::fast_tch::graph::DeviceAdam;

    let fused = trainer::launch::fused_adam::<FastTch>().expect("tch has a fused Adam");
    let mut a = Adam::<FastTch>::with_fused(Some(fused));
    let mut b = Adam::<FastTch>::default();
    let sizes = [32, 18_432];
    let mut pa: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| tensor::<FastTch, 1>(&random(n, i as u64), [n]))
        .collect();
    let mut pb = pa.clone();
    let grad = |step: u64, i: usize, n: usize| {
        let g: Vec<f32> = random(n, 200 + 10 * step + i as u64)
            .iter()
            .map(|v| v * [1e-3f32, 30.0][i])
            .collect();
        tensor::<FastTch, 1>(&g, [n])
    };
    let scalars = DeviceAdam::new(&LibTorchDevice::Cpu, 1e-8);
    for step in 0..5u64 {
        assert_eq!(a.next_time(), Some(step + 1));
        scalars.set(step + 1, 1e-3);
        for (i, &n) in sizes.iter().enumerate() {
            let g = grad(step, i, n);
            pa[i] = a.updated(i, pa[i].clone(), g.clone(), 1e-3);
            pb[i] = b.updated(i, pb[i].clone(), g, 1e-3);
            let e = rel_err(&host(pa[i].clone()), &host(pb[i].clone()));
            assert!(e <= 1e-6, "step {step} parameter {i}: relative error {e}");
        }
    }
    scalars.set(6, 0.0);
    let before = host(pa[1].clone());
    pa[1] = a.updated(1, pa[1].clone(), grad(5, 1, sizes[1]), 1e-3);
    assert_eq!(
        host(pa[1].clone()),
        before,
        "the rate was not read from the device"
    );
    drop(scalars);
    let before = host(pa[1].clone());
    pa[1] = a.updated(1, pa[1].clone(), grad(6, 1, sizes[1]), 1e-3);
    assert_ne!(
        host(pa[1].clone()),
        before,
        "the launch's rate did not apply again"
    );
    // Parameters at different steps have no common next step; a replayed update counted moves
    // every parameter's step count without an update.
    assert_eq!(a.next_time(), None);
    assert_eq!(b.next_time(), Some(6));
    b.count_replayed_step();
    assert_eq!(b.next_time(), Some(7));
}

/// The pieces a recorded step relies on, on the CPU: an in-place copy fills a fixed buffer
/// (shared by its clones), a snapshot is new memory with the same values, and a capture
/// needs a CUDA device.
#[test]
fn fixed_buffers_keep_their_address_and_a_capture_needs_cuda() {
    use burn::backend::libtorch::LibTorchDevice;
    use burn::prelude::*;
    use trainer::backend::fast_tch::graph;

    let dev = LibTorchDevice::Cpu;
    let fixed = Tensor::<FastTch, 1, Int>::zeros([4], &dev);
    let src = Tensor::<FastTch, 1, Int>::from_data([3i64, 1, 4, 1], &dev);
    graph::copy_into(&fixed, src);
    assert_eq!(
        fixed.clone().into_data().to_vec::<i64>().unwrap(),
        [3, 1, 4, 1]
    );
    let f = tensor::<FastTch, 1>(&[1.5, -2.0], [2]);
    let s = graph::snapshot(f.clone());
    assert_ne!(graph::address(s.clone()), graph::address(f.clone()));
    assert_eq!(host(s), host(f));
    let err = graph::Capture::new(&dev)
        .err()
        .expect("a CPU capture is refused");
    assert!(format!("{err:#}").contains("CUDA"), "{err:#}");
}

/// `--cuda-graph` with `--backend tch` on the CPU: refused (exit 2) naming the CUDA device it
/// needs, with no run directory.
#[test]
fn cuda_graph_on_a_cpu_device_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    common::write_tiny_mnist(&data, 32);
    let o = common::run_in(
        t.path(),
        &[
            "train-mnist",
            "--data-dir",
            data.to_str().unwrap(),
            "--backend",
            "tch",
            "--device",
            "cpu",
            "--cuda-graph",
            "--out",
            "run",
        ],
    );
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--cuda-graph") && err.contains("CUDA device"),
        "{err}"
    );
    assert!(!t.path().join("run").exists());
}

/// What a recorded step's replay relies on, checked on the CPU with the real training step of
/// `tch` (the CNN, LibTorch's loss and dropout, the fused Adam with device scalars): after a
/// step every parameter is still in the memory it was in before (the update is in place), so
/// a replay updates the model the loop holds. Three steps, the first one making the moments.
#[test]
fn the_tch_step_updates_every_parameter_in_place() {
    use burn::backend::Autodiff;
    use burn::backend::libtorch::LibTorchDevice;
    use burn::optim::GradientsParams;
    use burn::prelude::*;
    use trainer::backend::fast_tch::graph::{self, DeviceAdam};
    use trainer::engine::graph::{StepCapture, addresses};
    use trainer::models::cnn::MnistCnn;
    use trainer::toolbox::optim::Grads;

    type B = Autodiff<FastTch>;
    /// Only the addresses: the rest of a capture needs a GPU.
    struct Addresses;
    impl StepCapture<FastTch> for Addresses {
        fn side_stream(&mut self, _: bool) -> anyhow::Result<()> {
            unreachable!()
        }
        fn begin(&mut self) -> anyhow::Result<()> {
            unreachable!()
        }
        fn end(&mut self) -> anyhow::Result<()> {
            unreachable!()
        }
        fn replay(&mut self) -> anyhow::Result<()> {
            unreachable!()
        }
        fn adam(&mut self, _: u64, _: f64) {
            unreachable!()
        }
        fn address(&self, t: Tensor<FastTch, 1>) -> usize {
            graph::address(t)
        }
        fn snapshot(&self, _: Tensor<FastTch, 1>) -> Tensor<FastTch, 1> {
            unreachable!()
        }
    }
    let dev = LibTorchDevice::Cpu;
    let mut model = MnistCnn::<B>::new(&dev, true);
    trainer::toolbox::params::materialize(&model);
    let fused = trainer::launch::fused_adam::<FastTch>().expect("tch has a fused Adam");
    let mut adam = Adam::<FastTch>::with_fused(Some(fused));
    let scalars = DeviceAdam::new(&dev, 1e-8);
    let x = tensor::<B, 4>(&random(16 * 784, 3), [16, 1, 28, 28]);
    let y =
        Tensor::<B, 1, Int>::from_data([0i64, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5], &dev);
    for step in 0..3 {
        let before = addresses(&Addresses, &model);
        scalars.set(adam.next_time().unwrap(), 1e-3);
        let loss = trainer::launch::cross_entropy(
            model.forward_with(x.clone(), &trainer::launch::BackendKernels),
            y.clone(),
        );
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = adam.step(1e-3, model, Grads::Params(grads));
        assert_eq!(
            addresses(&Addresses, &model),
            before,
            "step {step}: a parameter moved"
        );
    }
}
