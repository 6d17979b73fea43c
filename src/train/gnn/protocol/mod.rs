//! The test protocol every `train-gnn --model` shares, whatever the model: a fold's data
//! (`fold_data`: the cohort normalised with the fold's training subjects, the fold's stage and
//! model-file name, Δt between visits), the evaluation (`evaluate`: any forecast against the
//! identity's, exact topology), the test set of the best fold's best weights and the result
//! files (`test_set`), its per-subject breakdown and strata (`breakdown`), the validation
//! columns of a metrics row (`columns`), and what a saved run gives a model to forecast from
//! (`saved_run`). It imports no model: each model's own evaluation lives in its own room
//! (CLG-ODE's in `clg_ode/`).

pub(crate) mod breakdown;
pub(crate) mod columns;
pub(crate) mod evaluate;
pub(crate) mod fold_data;
pub(crate) mod saved_run;
pub(crate) mod test_set;
