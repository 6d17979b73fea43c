//! `trainer bench mnist`: training and inference throughput of the MNIST CNN on every compiled
//! backend and usable device (and PyTorch), in one run, warm-up excluded.
//!
//! Built to be trusted on a shared machine: the contenders run in interleaved rounds whose
//! order rotates, so that the machine's load hits them alike; each figure is the median over
//! rounds with its spread; each contender's busy cores (process CPU time over wall time) are
//! measured rather than assumed; the ratio to PyTorch and the fraction of the hardware floor
//! (see [`Floor`]) are printed; the load average before and after is printed too.

use anyhow::{Result, bail};

use super::BenchSettings as BenchArgs;
use super::mnist_job::BenchJob;
use super::pytorch::Feed;
use super::report::{
    BenchRow, Floor, Measure, PhaseFigures, Rate, Spread, load_average, print_table,
};
use crate::backend::fast_cpu;
use crate::backend::{self, BackendKind, Placement};
use crate::data::mnist::{self, MnistSplit, PIXELS, Split};
use crate::files::write_json;

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
