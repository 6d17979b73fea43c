# Test binaries that scripts/test.sh and scripts/test-jobs.sh share out, and how both run the
# slow ones side by side (sourced by both).
#
# jobs/ and containers/: scripts/test-jobs.sh runs them once it has set up gflow and Apptainer,
# and requires both; scripts/test.sh leaves them to it instead of running them twice. Each runs
# in a process of its own, at once: three of them take 50-100 s each, mostly waiting on a
# scheduler (Slurm, gflowd) or building an image.
JOBS_TESTS=(jobs_slurm jobs_gflow sweep_gflow jobs_lsf containers_defs containers_apptainer)
# Tests that spend most of their time waiting on the real Slurm's clock (a time-limit signal at
# slurmctld's 30-second checks, a requeued job's 30-second credential lifetime): 1.5-2.5 idle
# minutes each. scripts/test.sh runs each beside the other tests, not after them.
SLURM_WAITING_TESTS=(slurm_requeue sweep_stages)

# `--test NAME` for every NAME given.
test_flags() {
  local name
  for name in "$@"; do printf -- '--test\n%s\n' "$name"; done
}

# `cargo test "${CARGO_TEST_ARGS[@]}" --test NAME` for every NAME given, each in a process of
# its own, all at once, each into target/NAME.log; BESIDE_PIDS holds the processes.
start_beside() {
  BESIDE_NAMES=("$@")
  BESIDE_PIDS=()
  local name
  for name in "$@"; do
    cargo test "${CARGO_TEST_ARGS[@]}" --test "$name" >"target/$name.log" 2>&1 &
    BESIDE_PIDS+=($!)
  done
}

# Waits for start_beside's processes and prints their logs in order; fails if any failed.
wait_beside() {
  local i rc failed=0
  for i in "${!BESIDE_NAMES[@]}"; do
    rc=0
    wait "${BESIDE_PIDS[$i]}" || rc=$?
    echo "--- tests/${BESIDE_NAMES[$i]}.rs (run beside the others):"
    cat "target/${BESIDE_NAMES[$i]}.log"
    if [ "$rc" != 0 ]; then
      echo "tests/${BESIDE_NAMES[$i]}.rs failed (exit $rc)"
      failed=$rc
    fi
  done
  return "$failed"
}
