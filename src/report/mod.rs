//! Reports on finished runs, of any origin: `trainer compare` ([`compare`]: runs and sweeps side
//! by side against the identity forecast, grouped tables, degeneracy warnings), its paired view
//! `--against` ([`against`]: by test subject, bootstrap intervals, Wilcoxon and Holm), and
//! `trainer plot` ([`plot`]: the curves of runs and of a sweep's tasks). Every input is read by
//! one reader ([`runs`]): runs of ours, a sweep's tasks (through `crate::sweep`'s manifest) or
//! the reference trainer's run directories ([`reference_run`]).

pub mod against;
pub(crate) mod compare;
pub(crate) mod plot;
mod reference_run;
mod runs;
