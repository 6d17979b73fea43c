//! `trainer bench mnist`: training and inference throughput of the MNIST CNN on every compiled
//! backend and usable device (and PyTorch), in one run, warm-up excluded.
//!
//! Built to be trusted on a shared machine: the contenders run in interleaved rounds whose
//! order rotates, so that the machine's load hits them alike; each figure is the median over
//! rounds with its spread; each contender's busy cores (process CPU time over wall time) are
//! measured rather than assumed; the ratio to PyTorch and the fraction of the hardware floor
//! (see [`Floor`]) are printed; the load average before and after is printed too.

use std::time::Instant;

use anyhow::{Result, bail};
use burn::module::AutodiffModule;
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;

use super::BenchSettings as BenchArgs;
use super::pytorch::Feed;
use super::report::{
    BenchRow, Floor, Measure, PhaseFigures, Rate, Spread, load_average, print_table,
};
use crate::backend::fast_cpu;
use crate::backend::profile as op_profile;
use crate::backend::{self, BackendJob, BackendKind, Placement};
use crate::data::mnist::{self, MnistSplit, PIXELS, Split};
use crate::files::write_json;
use crate::host_reads::{Counts, PerStep};
use crate::models::cnn::MnistCnn;
use crate::toolbox::optim::{Adam, Grads};

struct BenchJob<'a> {
    batch: usize,
    data: &'a MnistSplit,
    args: &'a BenchArgs,
    /// The step recorded as a CUDA graph and replayed (`--cuda-graph`'s row).
    graph: bool,
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
        let mut model = MnistCnn::<B>::new(&device, true);
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
        let (mut clock, mut counts) = (Clock::start(), Counts::now());
        for step in 0..warmup + steps {
            if step == warmup {
                (clock, counts) = (Clock::start(), Counts::now());
                op_profile::reset();
            }
            op_profile::phase("data");
            model = match graph.as_mut() {
                Some(g) => g.step(model, &mut adam, &data, step, step_once)?,
                None => step_once(model, &mut adam, data.batch(step)),
            };
        }
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
        let (mut clock, mut counts) = (Clock::start(), Counts::now());
        for step in 0..warmup + steps {
            if step == warmup {
                (clock, counts) = (Clock::start(), Counts::now());
                op_profile::reset();
            }
            op_profile::phase("inference");
            let (x, _) = data.batch(step);
            // One read per batch: the predicted classes, as an evaluation needs them.
            let k = &crate::launch::BackendKernels;
            let _ = crate::host_reads::data(eval.forward_with(x, k).argmax(1));
        }
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

/// Deterministic synthetic digits when no data directory is given.
fn synthetic(n: usize) -> MnistSplit {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let images = (0..n * PIXELS)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 56) as u8
        })
        .collect();
    MnistSplit {
        images,
        labels: (0..n).map(|i| (i % 10) as u8).collect(),
    }
}

/// Threads the CPU backends use: `RAYON_NUM_THREADS` if set, else every available core.
fn cpu_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// One contender of the benchmark and its figures over the rounds.
struct Contender {
    backend: String,
    device: String,
    /// `None` for PyTorch.
    placement: Option<Placement>,
    /// How PyTorch's training batches are fed (the reference rows keep the data on the device,
    /// as ours do; the others are reported beside them).
    feed: Feed,
    /// Ours with the step recorded as a CUDA graph (`--cuda-graph`).
    graph: bool,
    rounds: Vec<Measure>,
    error: Option<String>,
}

impl Contender {
    fn new(backend: &str, device: &str, placement: Option<Placement>) -> Self {
        Self {
            backend: backend.into(),
            device: device.into(),
            placement,
            feed: Feed::Device,
            graph: false,
            rounds: Vec::new(),
            error: None,
        }
    }
}

/// Our contenders: `--backends`, else every compiled backend on every usable device.
fn contenders(wanted: &[BackendKind]) -> Vec<Contender> {
    super::selected_placements(wanted)
        .into_iter()
        .map(|p| match p {
            Ok(p) => Contender::new(p.backend.name(), &p.device.to_string(), Some(p)),
            Err(kind) => {
                let mut c = Contender::new(kind.name(), "-", None);
                c.error = Some("not compiled into this binary, or no usable device".into());
                c
            }
        })
        .collect()
}

pub(crate) fn run(args: BenchArgs) -> Result<()> {
    super::limits::check(&args)?;
    if args.target == super::BenchTarget::Gnn {
        return super::gnn::run(&args);
    }
    if args.plan_flags_given() {
        bail!("--plan-subjects, --plan-folds and --plan-epochs apply to bench gnn only");
    }
    let batch_size = args.mnist_batch()?;
    if args.rounds == 0 || args.steps == 0 {
        bail!("--rounds and --steps must be at least 1");
    }
    let data = match &args.data_dir {
        Some(d) => mnist::load_split(d, Split::Train)?,
        None => synthetic(4096),
    };
    let load_before = load_average();
    let threads = cpu_threads();
    // One core's sgemm, measured before the rounds and again before each: the floor is the
    // best (a peak; noise only lowers a measurement).
    let mut sgemm = vec![fast_cpu::sgemm_gflops_one_core()];
    let mut all = contenders(&args.backends);
    // `tch` on a GPU also with its step recorded as a CUDA graph (`train-mnist --cuda-graph`).
    if let Some(p) = all.iter().filter_map(|c| c.placement).find(|p| {
        p.backend == BackendKind::Tch && p.device.is_cuda() && crate::launch::capture::available()
    }) {
        let mut graph = Contender::new("tch cuda-graph", &p.device.to_string(), Some(p));
        graph.graph = true;
        all.push(graph);
    }
    if args.pytorch.is_some() {
        all.push(Contender::new("pytorch", "cpu", None));
        // PyTorch on the GPU too when one of ours runs there: each row is compared with PyTorch
        // on its own kind of device.
        if let Some(gpu) = all
            .iter()
            .filter_map(|c| c.placement)
            .find(|p| p.device.is_cuda() && !p.backend.name().starts_with("wgpu"))
        {
            let device = gpu.device.to_string();
            all.push(Contender::new("pytorch", &device, None));
            // And fed from the host per step, as a loader without pinned memory does: the
            // other question (reported, never the reference).
            let mut fed = Contender::new("pytorch host-fed", &device, None);
            fed.feed = Feed::Host;
            all.push(fed);
            // And its whole step captured once as a CUDA graph and replayed: the ceiling
            // `--cuda-graph` aims at (reported, never the reference).
            let mut graph = Contender::new("pytorch cuda-graph", &device, None);
            graph.feed = Feed::Graph;
            all.push(graph);
        }
    }
    let n = all.len();
    for round in 0..args.rounds {
        sgemm.push(fast_cpu::sgemm_gflops_one_core());
        // Each round starts one contender later, so that none always follows the same one.
        for i in (0..n).map(|i| (i + round) % n) {
            let c = &mut all[i];
            if c.error.is_some() {
                continue;
            }
            eprintln!(
                "[bench] round {}/{}: {} on {} ...",
                round + 1,
                args.rounds,
                c.backend,
                c.device
            );
            let job = BenchJob {
                batch: batch_size,
                data: &data,
                args: &args,
                graph: c.graph,
            };
            let result = match (c.placement, &args.pytorch) {
                (Some(p), _) => backend::dispatch_checked(p, job),
                (None, Some(python)) => super::pytorch::run(
                    python, &args, batch_size, threads, &c.device, c.feed,
                )
                .map(|(m, label)| {
                    c.backend = label;
                    m
                }),
                (None, None) => continue,
            };
            match result {
                Ok(m) => c.rounds.push(m),
                Err(e) => c.error = Some(format!("{e:#}")),
            }
        }
    }
    let load_after = load_average();
    let floor = Floor::new(threads, &sgemm, fast_cpu::gemm_kernels());
    // PyTorch's medians on the CPU and on the GPU: the reference of the rows on that kind.
    let reference_on = |gpu: bool| {
        all.iter()
            .find(|c| {
                c.placement.is_none()
                    && c.feed == Feed::Device
                    && (c.device != "cpu") == gpu
                    && c.error.is_none()
                    && !c.rounds.is_empty()
            })
            .map(|c| {
                (
                    Spread::of(c.rounds.iter().map(|m| m.train.img_per_s)).median,
                    Spread::of(c.rounds.iter().map(|m| m.infer.img_per_s)).median,
                )
            })
    };
    let references = [reference_on(false), reference_on(true)];
    let rows: Vec<BenchRow> = all
        .into_iter()
        .map(|c| {
            let reference = references[usize::from(c.device != "cpu")];
            let train: Vec<Rate> = c.rounds.iter().map(|m| m.train).collect();
            let infer: Vec<Rate> = c.rounds.iter().map(|m| m.infer).collect();
            let train = PhaseFigures::new(&train, reference.map(|r| r.0), floor.train_img_per_s);
            let infer = PhaseFigures::new(&infer, reference.map(|r| r.1), floor.infer_img_per_s);
            BenchRow {
                backend: c.backend,
                device: c.device,
                batch_size,
                steps: args.steps,
                rounds: c.rounds.len(),
                train_img_per_s: train.img_per_s.median,
                infer_img_per_s: infer.img_per_s.median,
                train,
                infer,
                conv_implicit_gemm: c.rounds.last().and_then(|m| m.conv_implicit_gemm),
                error: c.error,
            }
        })
        .collect();
    print_table(&rows, &floor);
    let fmt_load = |l: Option<[f64; 3]>| {
        l.map_or_else(
            || "unknown".into(),
            |l| format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2]),
        )
    };
    println!(
        "batch {}, {} steps after {} warm-up, {} rounds, {threads} threads; load average \
         before {}, after {}",
        batch_size,
        args.steps,
        args.warmup,
        args.rounds,
        fmt_load(load_before),
        fmt_load(load_after)
    );
    let json = serde_json::json!({
        "target": "mnist", "rounds": args.rounds, "threads": threads,
        "load_average_before": load_before, "load_average_after": load_after,
        "floor": floor, "rows": rows,
    });
    println!("{}", serde_json::to_string(&json)?);
    if let Some(path) = &args.json {
        write_json(path, &json)?;
    }
    Ok(())
}
