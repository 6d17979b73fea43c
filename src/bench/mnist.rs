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
use burn::nn::loss::CrossEntropyLoss;
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;

use super::BenchSettings as BenchArgs;
use super::report::{
    BenchRow, Floor, Measure, PhaseFigures, Rate, Spread, load_average, print_table,
};
use crate::backend::fast_cpu;
use crate::backend::profile as op_profile;
use crate::backend::{self, BackendJob, BackendKind, Placement};
use crate::data::mnist::{self, MnistSplit, PIXELS, Split};
use crate::files::write_json;
use crate::models::cnn::MnistCnn;
use crate::toolbox::optim::{Adam, Grads};

struct BenchJob<'a> {
    batch: usize,
    data: &'a MnistSplit,
    args: &'a BenchArgs,
}

fn batch<B: Backend>(
    data: &MnistSplit,
    step: usize,
    bs: usize,
    device: &B::Device,
) -> (Tensor<B, 4>, Tensor<B, 1, Int>) {
    let n = data.len();
    let idx: Vec<usize> = (0..bs).map(|i| (step * bs + i) % n).collect();
    let (x, y) = data.batch(&idx);
    (
        Tensor::from_data(TensorData::new(x, [bs, 1, 28, 28]), device),
        Tensor::from_data(TensorData::new(y, [bs]), device),
    )
}

/// Wall and process CPU time since a start.
struct Clock(Instant, f64);

impl Clock {
    fn start() -> Self {
        Self(Instant::now(), op_profile::cpu_seconds())
    }

    fn rate(&self, images: usize) -> Rate {
        let wall = self.0.elapsed().as_secs_f64();
        Rate {
            img_per_s: images as f64 / wall,
            threads: (op_profile::cpu_seconds() - self.1) / wall,
        }
    }
}

impl BackendJob for BenchJob<'_> {
    type Output = Measure;
    fn run<B: AutodiffBackend>(self, device: B::Device, p: Placement) -> Result<Measure> {
        let (bs, steps, warmup) = (self.batch, self.args.steps, self.args.warmup);
        op_profile::enable(op_profile::requested());
        B::seed(&device, 1);
        let mut model = MnistCnn::<B>::new(&device, true);
        crate::toolbox::params::materialize(&model);
        let mut adam = Adam::<B::InnerBackend>::default();
        let loss_fn = CrossEntropyLoss::new(None, &device);
        let mut clock = Clock::start();
        for step in 0..warmup + steps {
            if step == warmup {
                clock = Clock::start();
                op_profile::reset();
            }
            op_profile::phase("data");
            let (x, y) = batch::<B>(self.data, step, bs, &device);
            op_profile::phase("forward");
            let loss = loss_fn.forward(model.forward(x), y);
            op_profile::phase("backward");
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            op_profile::phase("optimizer");
            model = adam.step(1e-3, model, Grads::Params(grads));
        }
        // Reading a value waits for queued device work.
        let _ = crate::toolbox::params::collect(&model);
        let train = clock.rate(bs * steps);
        let label = format!("{} training step, batch {bs}", p.backend.name());
        super::profile::print(&label, &op_profile::take(), steps);

        let eval = model.valid();
        let mut clock = Clock::start();
        for step in 0..warmup + steps {
            if step == warmup {
                clock = Clock::start();
                op_profile::reset();
            }
            op_profile::phase("inference");
            let (x, _) = batch::<B::InnerBackend>(self.data, step, bs, &device);
            let _ = eval.forward(x).argmax(1).into_data();
        }
        let infer = clock.rate(bs * steps);
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
        Ok(Measure { train, infer })
    }
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
    rounds: Vec<Measure>,
    error: Option<String>,
}

impl Contender {
    fn new(backend: &str, device: &str, placement: Option<Placement>) -> Self {
        Self {
            backend: backend.into(),
            device: device.into(),
            placement,
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

pub fn run(args: BenchArgs) -> Result<()> {
    super::limits::check(&args)?;
    if args.target == super::BenchTarget::Gnn {
        return super::gnn::run(&args);
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
    if args.pytorch.is_some() {
        all.push(Contender::new("pytorch", "cpu", None));
        // PyTorch on the GPU too when one of ours runs there: each row is compared with PyTorch
        // on its own kind of device.
        if let Some(gpu) = all
            .iter()
            .filter_map(|c| c.placement)
            .find(|p| p.device.is_cuda() && !p.backend.name().starts_with("wgpu"))
        {
            all.push(Contender::new("pytorch", &gpu.device.to_string(), None));
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
            };
            let result = match (c.placement, &args.pytorch) {
                (Some(p), _) => backend::dispatch_checked(p, job),
                (None, Some(python)) => super::pytorch::run(
                    python, &args, batch_size, threads, &c.device,
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
