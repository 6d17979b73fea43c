# Test binaries that scripts/test.sh and scripts/test-jobs.sh share out (sourced by both).
#
# jobs/ and containers/: scripts/test-jobs.sh runs them once it has set up gflow and Apptainer,
# and requires both; scripts/test.sh leaves them to it instead of running them twice.
JOBS_TESTS=(jobs_slurm jobs_gflow sweep_gflow jobs_lsf containers_defs containers_apptainer)
# Tests that spend most of their time waiting on the real Slurm's clock (a time-limit signal at
# slurmctld's 30-second checks, a requeued job's 30-second credential lifetime): 1.5-2.5 idle
# minutes each. scripts/test.sh runs them beside the other tests, not after them.
SLURM_WAITING_TESTS=(slurm_requeue sweep_stages)

# `--test NAME` for every NAME given.
test_flags() {
  local name
  for name in "$@"; do printf -- '--test\n%s\n' "$name"; done
}
