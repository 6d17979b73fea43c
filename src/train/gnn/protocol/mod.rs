//! The test protocol every `train-gnn --model` shares: a fold's data (`fold_data`: the cohort
//! normalised with the fold's training subjects, the fold's stage and model-file name), the
//! evaluation (`evaluate`: validation and forecasts of CLG-ODE, any forecast against the
//! identity's), the test set scored with the best fold's best weights (`test_set`), its
//! per-subject breakdown and strata (`breakdown`), and the validation and settings columns of
//! a metrics row (`columns`).

pub mod breakdown;
pub mod columns;
pub mod evaluate;
pub mod fold_data;
pub mod test_set;
