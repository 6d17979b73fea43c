//! trainer: a one-binary deep-learning trainer for shared GPU clusters.
//!
//! Data flows one way: [`cli`] (flags, config files, presets) → plain settings → [`launch`]
//! (backend, scheduler, communicator, run directory) → [`train`] jobs (data, [`models`]) →
//! [`engine`] (the loop, with the [`toolbox`]) → [`outputs`] (run directory files).
//! `docs/architecture.md` has the module map and recipes.

#![warn(unreachable_pub)]

use std::process::ExitCode;

use anyhow::Result;

/// Every line this crate writes to stderr leaves in one `write(2)`. A job's log file is shared:
/// slurmstepd writes `*** JOB … CANCELLED ***` into it, the batch script echoes, other ranks
/// print; std's `eprintln!` writes a line piece by piece, so another writer's text could land
/// in the middle of ours (CI once read "[train-mnist] requeued slurmstepd-vm: error: *** JOB 200
/// … *** Slurm job 200"). Declared before the modules, this shadows std's macro in all of them;
/// unlike std's, it never panics when stderr is closed.
macro_rules! eprintln {
    () => {
        $crate::stderr_line(::std::string::String::new())
    };
    ($($arg:tt)*) => {
        $crate::stderr_line(::std::format!($($arg)*))
    };
}

/// Writes `text` and a newline to stderr in one call (see [`eprintln!`] above); errors (a
/// closed stderr) are ignored, as a log line has nowhere else to go.
#[doc(hidden)]
pub fn stderr_line(mut text: String) {
    use std::io::Write;
    text.push('\n');
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

pub mod backend;
pub(crate) mod bench;
pub mod cli;
pub mod cluster;
pub(crate) mod commands;
pub mod data;
pub(crate) mod dist;
pub mod engine;
pub mod error;
pub(crate) mod eval;
pub mod exit;
pub(crate) mod files;
pub mod host_reads;
pub mod launch;
pub mod metrics;
pub mod models;
pub mod outputs;
pub mod report;
pub(crate) mod settings;
pub mod sweep;
pub mod toolbox;
pub(crate) mod train;
pub(crate) mod training_command;

use cli::{Cli, Command, DataCommand};

/// Runs one command line.
pub fn run(cli: Cli) -> Result<ExitCode> {
    if let Some(toml) = print_config(&cli) {
        print!("{toml}");
        return Ok(ExitCode::SUCCESS);
    }
    let long_running = cli.command.training().is_some()
        || matches!(cli.command, Command::Bench(_))
        || matches!(
            &cli.command,
            Command::Sweep {
                command: cli::sweep::SweepCommand::Run { .. }
                    | cli::sweep::SweepCommand::Task { .. }
            }
        );
    if !long_running {
        // A report read through `| head` ends quietly when the reader closes the pipe, as `cat`
        // does (killed by SIGPIPE), instead of panicking in `println!` (Rust ignores SIGPIPE).
        // SAFETY: restoring a signal's default action before any thread is started.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    if cli.command.training().is_some() {
        // First thing, before MPI, data and checkpoint loading: a scheduler's signal (Slurm's
        // `--signal=B:USR1@…`, a requeue, a preemption) can come while the job starts, and a
        // signal with its default action would kill the process (exit 128+n) without a word.
        // Caught here, it is answered at the first step boundary (checkpoint, exit 75/requeue).
        toolbox::stop::install()?;
    }
    match cli.command {
        Command::TrainMnist(args) => train::mnist::run(args.resolve()?),
        Command::TrainGnn(args) => train::gnn::run(args.resolve()?),
        Command::Eval(args) => eval::run(args).map(|_| ExitCode::SUCCESS),
        Command::Cohort(s) => train::gnn::cohort::run(s).map(|_| ExitCode::SUCCESS),
        Command::EvalGnn(s) => train::gnn::saved::eval_gnn::run(s).map(|_| ExitCode::SUCCESS),
        Command::Predict(s) => train::gnn::saved::predict::run(s).map(|_| ExitCode::SUCCESS),
        Command::PlotSc(s) => train::gnn::saved::plot_sc::run(s).map(|_| ExitCode::SUCCESS),
        Command::Bench(args) => bench::mnist::run(args).map(|_| ExitCode::SUCCESS),
        Command::Plot(a) => {
            report::plot::plot(
                &a.runs,
                &a.labels,
                &a.metric,
                a.title.as_deref(),
                crate::outputs::figure::Layout::column(a.column),
                &a.out,
            )?;
            eprintln!("wrote {}", a.out.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Compare(a) => report::compare::compare(&a.settings()).map(|_| ExitCode::SUCCESS),
        Command::Env { json } => commands::cmd_env(json).map(|_| ExitCode::SUCCESS),
        Command::Doctor { require_gpu, json } => commands::cmd_doctor(require_gpu, json),
        Command::SynthConnectome(a) => {
            commands::synth(&a.options(), &a.out).map(|_| ExitCode::SUCCESS)
        }
        Command::MigPick => commands::cmd_mig_pick(),
        Command::Data {
            command: DataCommand::Fetch(a),
        } => data::fetch::fetch(a.dataset, &a.out, a.mirror.as_deref()).map(|_| ExitCode::SUCCESS),
        Command::Sweep { command } => cli::sweep::run(command),
        Command::Completions(a) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(a.shell, &mut cmd, "trainer", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The resolved configuration, when a training command was asked to print it.
fn print_config(cli: &Cli) -> Option<&str> {
    let run = match &cli.command {
        Command::TrainMnist(a) => &a.run,
        Command::TrainGnn(a) => &a.run,
        _ => return None,
    };
    run.print_config
        .then_some(run.resolved_config.as_deref().unwrap_or_default())
}
