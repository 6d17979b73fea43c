//! The fast CPU kernels (`FastCpu`, what `--backend flex` runs) against plain Burn
//! (`Autodiff<Flex>`, Burn's own operations and default backward passes): forward outputs and
//! gradients on random inputs agree to a relative error of 1e-4, for the MNIST CNN's layer
//! shapes and for odd ones (batch 1, padding, stride 2, dilation, 1×1, no bias), and the whole
//! CNN's logits and parameter gradients agree too; 2-D matrix products and thin batched ones
//! (also of transposed views) agree, and the threaded element-wise operations give Flex's
//! values exactly.

use burn::backend::{Autodiff, Flex};
use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::loss::CrossEntropyLoss;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::module::{conv2d, max_pool2d, max_pool2d_with_indices};
use burn::tensor::{Distribution, TensorData};
use trainer::backend::fast_cpu::{FastCpu, fast_calls};
use trainer::models::cnn::MnistCnn;
use trainer::toolbox::params;

use crate::common;

use common::numerics::{Conv, assert_close, host, random, tensor};

type Fast = Autodiff<FastCpu>;
type Plain = Autodiff<Flex>;

/// The fast path's output and gradients against plain Burn's, the fast kernels having run, and
/// the same for inference (no autodiff).
fn check(name: &str, conv: &Conv) {
    let calls = fast_calls();
    let fast = conv.run::<Fast>(7);
    assert!(
        fast_calls() >= calls + 3,
        "{name}: the fast kernels did not run"
    );
    Conv::assert_same(name, &fast, &conv.run::<Plain>(7));
    let n = |s: [usize; 4]| s.iter().product::<usize>();
    let (x, w) = (random(n(conv.x), 7), random(n(conv.w), 8));
    let b = conv.bias.then(|| random(conv.w[0], 9));
    let y_fast = conv2d(
        tensor::<FastCpu, 4>(&x, conv.x),
        tensor::<FastCpu, 4>(&w, conv.w),
        b.as_ref().map(|b| tensor::<FastCpu, 1>(b, [conv.w[0]])),
        conv.options(),
    );
    let y_plain = conv2d(
        tensor::<Flex, 4>(&x, conv.x),
        tensor::<Flex, 4>(&w, conv.w),
        b.as_ref().map(|b| tensor::<Flex, 1>(b, [conv.w[0]])),
        conv.options(),
    );
    assert_close(&format!("{name}: inference"), &host(y_fast), &host(y_plain));
}

#[test]
fn conv2d_matches_plain_burn_on_the_cnn_layers() {
    for (name, conv) in Conv::cnn_layers() {
        check(name, &conv);
    }
}

#[test]
fn conv2d_matches_plain_burn_on_odd_shapes() {
    for (name, conv) in Conv::odd_shapes() {
        check(name, &conv);
    }
}

struct Pool {
    x: [usize; 4],
    k: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
}

impl Pool {
    fn new(x: [usize; 4]) -> Self {
        Self {
            x,
            k: [2, 2],
            stride: [2, 2],
            padding: [0, 0],
            dilation: [1, 1],
        }
    }

    /// Output, indices and the gradient of `sum(output · r)`.
    fn run<B: AutodiffBackend>(&self) -> (Vec<f32>, Vec<i64>, Vec<f32>) {
        let x = tensor::<B, 4>(&random(self.x.iter().product(), 3), self.x).require_grad();
        let (k, s, p, d) = (self.k, self.stride, self.padding, self.dilation);
        let (_, idx) = max_pool2d_with_indices(x.clone(), k, s, p, d, false);
        let y = max_pool2d(x.clone(), k, s, p, d, false);
        let dims = y.dims();
        let r = tensor::<B, 4>(&random(dims.iter().product(), 4), dims);
        let grads = (y.clone() * r).sum().backward();
        let idx = idx.into_data().convert::<i64>().to_vec::<i64>().unwrap();
        (host(y), idx, host(x.grad(&grads).unwrap()))
    }

    fn check(&self, name: &str) {
        let calls = fast_calls();
        let (y, idx, dx) = self.run::<Fast>();
        assert!(
            fast_calls() >= calls + 3,
            "{name}: the fast kernels did not run"
        );
        let (y_ref, idx_ref, dx_ref) = self.run::<Plain>();
        assert_close(&format!("{name}: output"), &y, &y_ref);
        // Max-pool compares and copies values (the gradient adds a value where windows
        // overlap): output and gradient came out exact on all four cases (printed error 0);
        // the indices are compared exactly (no arithmetic, so the same on every CPU).
        assert_eq!(idx, idx_ref, "{name}: indices");
        assert_close(&format!("{name}: input grad"), &dx, &dx_ref);
        let x = random(self.x.iter().product(), 3);
        let (k, s, p, d) = (self.k, self.stride, self.padding, self.dilation);
        let fast = max_pool2d(tensor::<FastCpu, 4>(&x, self.x), k, s, p, d, false);
        let plain = max_pool2d(tensor::<Flex, 4>(&x, self.x), k, s, p, d, false);
        assert_close(&format!("{name}: inference"), &host(fast), &host(plain));
    }
}

#[test]
fn max_pool_matches_plain_burn() {
    Pool::new([16, 64, 24, 24]).check("pool of the CNN");
    Pool::new([1, 2, 5, 7]).check("batch 1, odd sizes");
    Pool {
        k: [3, 3],
        padding: [1, 1],
        ..Pool::new([2, 3, 9, 8])
    }
    .check("3×3, stride 2, padding 1");
    Pool {
        k: [2, 3],
        stride: [1, 2],
        dilation: [2, 1],
        ..Pool::new([2, 2, 8, 9])
    }
    .check("dilation 2");
}

/// Every parameter's gradient, in visiting order.
struct GradsOf<'a, B: AutodiffBackend>(&'a B::Gradients, Vec<Vec<f32>>);

impl<B: AutodiffBackend> ModuleVisitor<B> for GradsOf<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        self.1.push(host(param.val().grad(self.0).unwrap()));
    }
}

/// Logits and parameter gradients of the CNN (no dropout) with the weights of `init`.
fn cnn_step<B: AutodiffBackend>(init: &[(String, params::HostTensor)]) -> Vec<Vec<f32>> {
    let dev = Default::default();
    let source = init.iter().cloned().collect();
    let model = params::load(MnistCnn::<B>::new(&dev, false), &source, &dev).unwrap();
    let x = tensor::<B, 4>(&random(8 * 784, 11), [8, 1, 28, 28]);
    let y = Tensor::<B, 1, Int>::from_data(
        TensorData::new((0..8).map(|i| (i * 3 % 10) as i64).collect(), [8]),
        &dev,
    );
    let logits = model.forward(x);
    let grads = CrossEntropyLoss::new(None, &dev)
        .forward(logits.clone(), y)
        .backward();
    let mut v = GradsOf::<B>(&grads, vec![host(logits)]);
    model.visit(&mut v);
    v.1
}

#[test]
fn the_cnn_step_matches_plain_burn() {
    let dev = Default::default();
    let model = MnistCnn::<Plain>::new(&dev, false);
    let init: Vec<_> = params::collect(&model)
        .into_iter()
        .map(|(name, mut t)| {
            // Larger than the default initialisation, so that every layer matters.
            t.data.iter_mut().for_each(|v| *v *= 2.0);
            (name, t)
        })
        .collect();
    let fast = cnn_step::<Fast>(&init);
    let plain = cnn_step::<Plain>(&init);
    let names: Vec<String> = std::iter::once("logits".to_string())
        .chain(init.iter().map(|(n, _)| format!("grad of {n}")))
        .collect();
    assert_eq!(fast.len(), names.len());
    for ((f, p), name) in fast.iter().zip(&plain).zip(&names) {
        assert_close(name, f, p);
    }
}

#[test]
fn dropout_masks_are_seeded() {
    let draw = || {
        FastCpu::seed(&Default::default(), 5);
        let t = Tensor::<FastCpu, 1>::random(
            [10_000],
            Distribution::Bernoulli(0.75),
            &Default::default(),
        );
        host(t)
    };
    let (a, b) = (draw(), draw());
    // One process, one seed, ChaCha8 (the same stream on every machine): identical draws.
    assert_eq!(a, b);
    let kept = a.iter().filter(|&&v| v == 1.0).count();
    assert!(a.iter().all(|&v| v == 0.0 || v == 1.0));
    assert!(
        (7_200..7_800).contains(&kept),
        "{kept} of 10000 kept at p = 0.75"
    );
}

#[test]
fn matmul_matches_flex() {
    for (m, k, n) in [
        (800, 128, 128),
        (64, 9216, 128),
        // Few rows and a wide output: one GEMM on gemm's threads (the fc1 input gradient).
        (64, 128, 9216),
        (3, 5, 2),
        (1, 7, 1),
        (513, 33, 17),
    ] {
        let (a, b) = (random(m * k, 21), random(k * n, 22));
        let fast = tensor::<FastCpu, 2>(&a, [m, k]).matmul(tensor::<FastCpu, 2>(&b, [k, n]));
        let plain = tensor::<Flex, 2>(&a, [m, k]).matmul(tensor::<Flex, 2>(&b, [k, n]));
        assert_close(&format!("{m}x{k} · {k}x{n}"), &host(fast), &host(plain));
        // A transposed view as the right operand (a linear layer's input gradient).
        let bt = tensor::<FastCpu, 2>(&b, [n, k]).swap_dims(0, 1);
        let fast = tensor::<FastCpu, 2>(&a, [m, k]).matmul(bt);
        let bt = tensor::<Flex, 2>(&b, [n, k]).swap_dims(0, 1);
        let plain = tensor::<Flex, 2>(&a, [m, k]).matmul(bt);
        assert_close(&format!("{m}x{k} · ({n}x{k})ᵀ"), &host(fast), &host(plain));
    }
}

#[test]
fn threaded_element_wise_ops_give_flex_values_exactly() {
    let n = 100_003;
    let (a, b) = (random(n, 31), random(n, 32));
    let f = || (tensor::<FastCpu, 1>(&a, [n]), tensor::<FastCpu, 1>(&b, [n]));
    let p = || (tensor::<Flex, 1>(&a, [n]), tensor::<Flex, 1>(&b, [n]));
    let (x, y) = f();
    let fast = [
        host(x.clone() + y.clone()),
        host(x.clone() - y.clone()),
        host(x.clone() * y.clone()),
        host(x.clone() / y.clone()),
        host(x.clone().abs().log()),
        host(x.clone().abs().sqrt()),
        host(x.clone().neg().mul_scalar(1.5).add_scalar(0.25)),
        host(burn::tensor::activation::relu(x)),
    ];
    let (x, y) = p();
    let plain = [
        host(x.clone() + y.clone()),
        host(x.clone() - y.clone()),
        host(x.clone() * y.clone()),
        host(x.clone() / y.clone()),
        host(x.clone().abs().log()),
        host(x.clone().abs().sqrt()),
        host(x.clone().neg().mul_scalar(1.5).add_scalar(0.25)),
        host(burn::tensor::activation::relu(x)),
    ];
    // Bit-equality holds on every CPU and thread count: each value is computed on its own by
    // the same scalar function on both sides (`+ − × ÷ √` are correctly rounded, so Flex's
    // SIMD loops give the scalar results; ln calls the same libm function in the same
    // process), and the threaded path cuts the buffer into fixed 16 384-value chunks whatever
    // the thread count. Nothing is summed.
    for (i, (f, p)) in fast.iter().zip(&plain).enumerate() {
        assert!(f == p, "operation {i} differs from Flex");
    }
}

/// exp, ln_1p and sigmoid run eight values at a time with AVX2 + FMA
/// (`fast_cpu/vector_math.rs`), with polynomials of their own instead of libm's: within 1e-6
/// relative of Flex's (a few f32 ulps; measured at most 1.7e-7), on a tensor large enough for
/// the threaded path and one below it (Flex's own). Whatever the chunking, the fast path gives
/// the same bits: each value is computed on its own.
#[test]
fn exp_log1p_and_sigmoid_stay_within_ulps_of_flex() {
    for n in [100_003, 1_001] {
        let a: Vec<f32> = random(n, 33).iter().map(|v| 40.0 * v).collect();
        let fast = tensor::<FastCpu, 1>(&a, [n]);
        let plain = tensor::<Flex, 1>(&a, [n]);
        let pairs = [
            ("exp", host(fast.clone().exp()), host(plain.clone().exp())),
            (
                "ln_1p",
                host(fast.clone().abs().log1p()),
                host(plain.clone().abs().log1p()),
            ),
            (
                "sigmoid",
                host(burn::tensor::activation::sigmoid(fast.clone())),
                host(burn::tensor::activation::sigmoid(plain)),
            ),
        ];
        for (name, f, p) in pairs {
            for ((x, f), p) in a.iter().zip(&f).zip(&p) {
                let rel = if f == p { 0.0 } else { ((f - p) / p).abs() };
                assert!(rel <= 1e-6, "{name}({x}) over {n} values: {f}, Flex {p}");
            }
        }
        // The same values again in one tensor of twice the length: other chunk boundaries.
        let twice: Vec<f32> = a.iter().chain(&a).copied().collect();
        let doubled = host(tensor::<FastCpu, 1>(&twice, [2 * n]).exp());
        let once = host(fast.exp());
        assert!(
            doubled[..n] == once[..] && doubled[n..] == once[..],
            "exp over {n} values"
        );
    }
}

/// `[b, r, c]` from `data`, or (`transposed`) the transposed view of `[b, c, r]`.
fn operand<B: Backend>(data: &[f32], [b, r, c]: [usize; 3], transposed: bool) -> Tensor<B, 3> {
    if transposed {
        tensor::<B, 3>(data, [b, c, r]).swap_dims(1, 2)
    } else {
        tensor::<B, 3>(data, [b, r, c])
    }
}

/// Batched products with a thin side (inner or output width ≤ 4: CLG-ODE's topology loss) run
/// the fast path's own loops (`thin.rs`): they agree with Flex's GEMMs and with an f64 product
/// within 1e-4 (other summation orders, no fused multiply-add), for contiguous operands and for
/// transposed views, and an item gives the same bits alone as in its batch (the loops' blocks
/// of rows differ there, the order of each sum does not).
#[test]
fn thin_batched_matmuls_match_flex() {
    for (b, m, k, n) in [
        (8, 400, 2, 400),
        (8, 400, 400, 2),
        (3, 37, 1, 9),
        (2, 5, 4, 300),
        (1, 300, 301, 1),
        (5, 17, 33, 3),
        (6, 64, 67, 4),
    ] {
        let (a, c) = (random(b * m * k, 41), random(b * k * n, 42));
        for (lt, rt) in [(false, false), (true, false), (false, true)] {
            let what = format!(
                "[{b},{m},{k}]{} · [{b},{k},{n}]{}",
                ["", "ᵀ"][lt as usize],
                ["", "ᵀ"][rt as usize]
            );
            let calls = fast_calls();
            let fast = host(
                operand::<FastCpu>(&a, [b, m, k], lt).matmul(operand::<FastCpu>(&c, [b, k, n], rt)),
            );
            assert!(fast_calls() > calls, "{what}: the fast kernels did not run");
            let plain =
                host(operand::<Flex>(&a, [b, m, k], lt).matmul(operand::<Flex>(&c, [b, k, n], rt)));
            assert_close(&what, &fast, &plain);
            // The f64 product of the same values (element (i, j) of an operand is at i·cols + j,
            // or at j·rows + i for the transposed view).
            let at =
                |x: &[f32], item: usize, rows: usize, cols: usize, t: bool, i: usize, j: usize| {
                    let off = item * rows * cols;
                    f64::from(x[off + if t { j * rows + i } else { i * cols + j }])
                };
            let exact: Vec<f32> = (0..b * m * n)
                .map(|o| {
                    let (item, i, j) = (o / (m * n), o / n % m, o % n);
                    (0..k)
                        .map(|kk| at(&a, item, m, k, lt, i, kk) * at(&c, item, k, n, rt, kk, j))
                        .sum::<f64>() as f32
                })
                .collect();
            assert_close(&format!("{what} against f64"), &fast, &exact);
            let first = host(
                operand::<FastCpu>(&a[..m * k], [1, m, k], lt).matmul(operand::<FastCpu>(
                    &c[..k * n],
                    [1, k, n],
                    rt,
                )),
            );
            assert!(first == fast[..m * n], "{what}: item 0 alone differs");
        }
    }
}

/// 2-D products with a thin side (CLG-ODE's one-hot and two-column products) take the same
/// loops as a batch of one, and agree with Flex within 1e-4.
#[test]
fn thin_2d_matmuls_match_flex() {
    for (m, k, n) in [(800, 2, 128), (400, 1, 128), (300, 301, 3), (33, 17, 4)] {
        let (a, c) = (random(m * k, 43), random(k * n, 44));
        let calls = fast_calls();
        let fast = host(tensor::<FastCpu, 2>(&a, [m, k]).matmul(tensor::<FastCpu, 2>(&c, [k, n])));
        assert!(
            fast_calls() > calls,
            "{m}x{k} · {k}x{n}: the fast kernels did not run"
        );
        let plain = host(tensor::<Flex, 2>(&a, [m, k]).matmul(tensor::<Flex, 2>(&c, [k, n])));
        assert_close(&format!("{m}x{k} · {k}x{n}"), &fast, &plain);
        let at = tensor::<FastCpu, 2>(&a, [k, m]).swap_dims(0, 1);
        let fast = host(at.matmul(tensor::<FastCpu, 2>(&c, [k, n])));
        let at = tensor::<Flex, 2>(&a, [k, m]).swap_dims(0, 1);
        let plain = host(at.matmul(tensor::<Flex, 2>(&c, [k, n])));
        assert_close(&format!("({k}x{m})ᵀ · {k}x{n}"), &fast, &plain);
    }
}
