//! `trainer sweep plan|task|run|status`: the command lines of campaigns (the work is in
//! `crate::sweep`); which keys a spec may use comes from the training commands' own flags.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::training_command::TrainingCommand;
use clap::{Args, CommandFactory, Subcommand};

use super::Cli;
use crate::cluster::scheduler::SchedulerKind;
use crate::cluster::scheduler::resources::ResourceArgs;
use crate::sweep::{self, PlanSettings};

#[derive(Subcommand, Debug)]
pub(crate) enum SweepCommand {
    /// Expand SPEC.toml into tasks (one --config file and run directory each, a manifest) and
    /// write the scheduler's script; prints the command that submits it (--submit runs it).
    Plan(Box<PlanArgs>),
    /// Run task INDEX of a planned sweep (what an array task calls), resuming its checkpoint.
    Task {
        dir: PathBuf,
        index: usize,
        /// First the GPU preflight (`trainer doctor --require-gpu`): on failure the task ends
        /// with the doctor's exit code and reason, before the trainer starts.
        #[arg(long)]
        preflight: bool,
    },
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
        /// Print one progress line (counts, ETA) every SECS seconds until nothing runs or waits.
        #[arg(long, value_name = "SECS", conflicts_with = "json",
              value_parser = crate::settings::interval_secs)]
        watch: Option<f64>,
    },
}

#[derive(Args, Debug)]
pub(crate) struct PlanArgs {
    /// The sweep specification (command, `[base]`, `[grid]`, `[[variant]]`, folds, seeds,
    /// `[then]`).
    #[arg(required_unless_present = "missing")]
    pub spec: Option<PathBuf>,
    /// `KEY=VALUE` over the spec: a value goes into `[base]`, a list (`lr=[1e-3,1e-4]`) becomes
    /// KEY's grid axis; either replaces the spec's own KEY.
    #[arg(value_name = "KEY=VALUE", conflicts_with = "missing")]
    pub overrides: Vec<String>,
    /// The sweep directory (manifest, task configs, run directories, logs).
    #[arg(long, required_unless_present = "missing")]
    pub out: Option<PathBuf>,
    /// Default: slurm for a new sweep; with --missing, the sweep's own.
    #[arg(long, value_enum)]
    pub scheduler: Option<SchedulerKind>,
    /// Refuse a spec that expands to more tasks than this (counted before anything is written).
    #[arg(long, default_value_t = sweep::MAX_TASKS)]
    pub max_tasks: usize,
    /// At most N tasks at once (the array's %N; `sweep run --jobs`).
    #[arg(long, default_value_t = 0)]
    pub throttle: usize,
    /// Submit the script (default: print the command).
    #[arg(long)]
    pub submit: bool,
    /// Re-plan the sweep in DIR: a new script of its failed, stopped and pending tasks only.
    /// With --scheduler or resource flags (--gpus 0, --partition, …) the sweep moves: its
    /// manifest is rewritten and each change said; finished tasks are kept as they are.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["spec", "out"])]
    pub missing: Option<PathBuf>,
    // The queue resources, one flag per key of `[resources]` (from the keys' table in
    // `cluster/scheduler/resources/key.rs`).
    #[command(flatten)]
    pub resources: ResourceArgs,
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

/// Parses `trainer <command> --config FILE` as the command itself would (every value through
/// its flag's checks), at plan time.
fn check(command: &str, config: &std::path::Path) -> Result<()> {
    // What `sweep task` adds (`--out`, `--resume auto`, train-gnn's `--results-dir`), so that
    // the flags are parsed exactly as the task will run them.
    let mut argv: Vec<std::ffi::OsString> = vec![
        "trainer".into(),
        command.into(),
        "--config".into(),
        config.into(),
        "--out".into(),
        "sweep-plan-check".into(),
        "--resume".into(),
        "auto".into(),
    ];
    if TrainingCommand::from_name(command).is_some_and(TrainingCommand::is_gnn) {
        argv.extend(["--results-dir".into(), "sweep-plan-check".into()]);
    }
    super::config::parse_from(argv)
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!("{e}"))
}

pub(crate) fn run(c: SweepCommand) -> Result<ExitCode> {
    match c {
        SweepCommand::Plan(a) => {
            let s = PlanSettings {
                spec: a.spec,
                out: a.out,
                scheduler: a.scheduler,
                throttle: a.throttle,
                submit: a.submit,
                missing: a.missing,
                resources: a.resources.pairs(),
                max_tasks: a.max_tasks,
                overrides: a
                    .overrides
                    .iter()
                    .map(|o| sweep::spec::parse_override(o))
                    .collect::<Result<_>>()?,
            };
            let preset = |command: &str, name: &str| super::presets::table(command, name).ok();
            let flags = sweep::CommandFlags {
                known: &known,
                check: &check,
                preset: &preset,
            };
            sweep::plan(&s, &flags).map(|_| ExitCode::SUCCESS)
        }
        SweepCommand::Task {
            dir,
            index,
            preflight,
        } => sweep::task(&dir, index, preflight),
        SweepCommand::Run { dir, jobs } => sweep::run(&dir, jobs),
        SweepCommand::Status { dir, json, watch } => match watch {
            Some(every) => sweep::watch(&dir, every),
            None => sweep::status(&dir, json),
        }
        .map(|_| ExitCode::SUCCESS),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// `sweep plan` has one flag per key of `[resources]`, under the resources' heading, from
    /// the keys' table (`cluster/scheduler/resources/key.rs`).
    #[test]
    fn sweep_plan_has_a_flag_for_every_resources_key() {
        use crate::cluster::scheduler::resources::ResourceKey;
        let root = super::Cli::command();
        let plan = root
            .find_subcommand("sweep")
            .and_then(|s| s.find_subcommand("plan"))
            .unwrap();
        let heading = Some("Queue resources (over the spec's [resources])");
        for k in ResourceKey::ALL {
            let a = plan
                .get_arguments()
                .find(|a| a.get_id().as_str() == k.name())
                .unwrap_or_else(|| panic!("{k}: no flag of sweep plan"));
            assert_eq!(a.get_help_heading(), heading, "{k}");
            assert!(
                super::known("sweep", k.name()) || a.get_long().is_some(),
                "{k}"
            );
        }
        let under = plan
            .get_arguments()
            .filter(|a| a.get_help_heading() == heading)
            .count();
        assert_eq!(under, ResourceKey::ALL.len());
    }
}
