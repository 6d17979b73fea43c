//! `trainer sweep plan|task|run|status`: the command lines of campaigns (the work is in
//! `crate::sweep`); which keys a spec may use comes from the training commands' own flags.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, CommandFactory, Subcommand};

use super::Cli;
use crate::sweep::{self, PlanSettings, Scheduler};

#[derive(Subcommand, Debug)]
pub enum SweepCommand {
    /// Expand SPEC.toml into tasks (one --config file and run directory each, a manifest) and
    /// write the scheduler's script; prints the command that submits it (--submit runs it).
    Plan(PlanArgs),
    /// Run task INDEX of a planned sweep (what an array task calls), resuming its checkpoint.
    Task { dir: PathBuf, index: usize },
    /// Run the pending, stopped and failed tasks on this machine, N at a time.
    Run {
        dir: PathBuf,
        #[arg(long, default_value_t = 1)]
        jobs: usize,
    },
    /// Each task: done, failed (exit code and last error line), stopped, running or pending.
    Status {
        dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
pub struct PlanArgs {
    /// The sweep specification (command, [base], [grid], [[variant]], folds, seeds, [then]).
    #[arg(required_unless_present = "missing")]
    pub spec: Option<PathBuf>,
    /// The sweep directory (manifest, task configs, run directories, logs).
    #[arg(long, required_unless_present = "missing")]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "slurm")]
    pub scheduler: Scheduler,
    /// At most N tasks at once (the array's %N; `sweep run --jobs`).
    #[arg(long, default_value_t = 0)]
    pub throttle: usize,
    /// Submit the script (default: print the command).
    #[arg(long)]
    pub submit: bool,
    /// Re-plan the sweep in DIR: a new script of its failed, stopped and pending tasks only.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["spec", "out"])]
    pub missing: Option<PathBuf>,
}

/// Whether `key` (either spelling) is a flag of `trainer <command>`.
fn known(command: &str, key: &str) -> bool {
    let root = Cli::command();
    let Some(cmd) = root.find_subcommand(command) else {
        return false;
    };
    let dashed = key.replace('_', "-");
    cmd.get_arguments().any(|a| {
        a.get_id().as_str() == key
            || a.get_long() == Some(dashed.as_str())
            || a.get_all_aliases()
                .is_some_and(|al| al.iter().any(|x| *x == key || *x == dashed))
    })
}

pub fn run(c: SweepCommand) -> Result<ExitCode> {
    match c {
        SweepCommand::Plan(a) => {
            let s = PlanSettings {
                spec: a.spec,
                out: a.out,
                scheduler: a.scheduler,
                throttle: a.throttle,
                submit: a.submit,
                missing: a.missing,
            };
            sweep::plan(&s, &known).map(|_| ExitCode::SUCCESS)
        }
        SweepCommand::Task { dir, index } => sweep::task(&dir, index),
        SweepCommand::Run { dir, jobs } => sweep::run(&dir, jobs),
        SweepCommand::Status { dir, json } => sweep::status(&dir, json).map(|_| ExitCode::SUCCESS),
    }
}
