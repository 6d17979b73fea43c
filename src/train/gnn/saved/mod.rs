//! The commands that reopen a finished `train-gnn` run (its `args.json`, the best fold's
//! checkpoint, the cohort it was trained on) and forecast with it, whatever the model:
//! `trainer eval-gnn` (`eval_gnn`: test metrics again, or on another cohort), `trainer predict`
//! (`predict`: forecast matrices of named subjects at any Δt or age), `trainer plot-sc`
//! (`plot_sc`: heatmaps, strata, new-edge PR curves, trajectories); `reopen` finds the run and
//! rebuilds its model, `coverage` says which Δt and ages the training data covers.

mod coverage;
pub(crate) mod eval_gnn;
pub(crate) mod plot_sc;
pub(crate) mod predict;
pub(super) mod reopen;
