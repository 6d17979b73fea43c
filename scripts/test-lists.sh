# The test binaries (one per area: tests/<area>/main.rs, each file of the area a module) that
# scripts/test.sh and scripts/test-jobs.sh share out, and how both run the slow files side by
# side (sourced by both). A file is named AREA:FILE (cargo test --test AREA -- FILE::).
#
# jobs/ and containers/: scripts/test-jobs.sh runs them once it has set up gflow and Apptainer,
# and requires both; scripts/test.sh leaves them to it instead of running them twice. Each runs
# in a process of its own, at once: three of them take 50-100 s each, mostly waiting on a
# scheduler (Slurm, gflowd) or building an image.
JOBS_TESTS=(jobs:jobs_slurm jobs:jobs_gflow jobs:sweep_gflow jobs:jobs_lsf jobs:containers_defs
  jobs:containers_apptainer)
# Tests that spend most of their time waiting on the real Slurm's clock (a time-limit signal at
# slurmctld's 30-second checks, a requeued job's 30-second credential lifetime): 1.5-2.5 idle
# minutes each. scripts/test.sh runs each beside the other tests, not after them.
SLURM_WAITING_TESTS=(cluster:slurm_requeue sweep:sweep_stages)

# Every test binary but the jobs/ and containers/ one (scripts/test-jobs.sh runs that): the
# areas' and the harness-less ones of Cargo.toml (tests/*.rs).
# fuzz_parsers and fuzz_cluster are binaries of their own: their counting global allocator
# measures the whole process, so no other test may allocate beside them.
OTHER_TEST_BINARIES=(engine cluster gnn sweep backends host_memory fuzz_parsers fuzz_cluster fuzz_outputs)

# `--test NAME` for every NAME given.
test_flags() {
  local name
  for name in "$@"; do printf -- '--test\n%s\n' "$name"; done
}

# `--skip FILE::` for every AREA:FILE given (the files start_beside runs on their own).
skip_flags() {
  local entry
  for entry in "$@"; do printf -- '--skip\n%s::\n' "${entry#*:}"; done
}

# `cargo test "${CARGO_TEST_ARGS[@]}" --test AREA -- FILE::` for every AREA:FILE given, each in
# a process of its own, all at once, each into target/FILE.log; BESIDE_PIDS holds the processes.
start_beside() {
  BESIDE_NAMES=("$@")
  BESIDE_PIDS=()
  local entry
  for entry in "$@"; do
    cargo test "${CARGO_TEST_ARGS[@]}" --test "${entry%%:*}" -- "${entry#*:}::" \
      >"target/${entry#*:}.log" 2>&1 &
    BESIDE_PIDS+=($!)
  done
}

# Waits for start_beside's processes and prints their logs in order; fails if any failed.
wait_beside() {
  local i rc name failed=0
  for i in "${!BESIDE_NAMES[@]}"; do
    name=${BESIDE_NAMES[$i]#*:}
    rc=0
    wait "${BESIDE_PIDS[$i]}" || rc=$?
    echo "--- tests/${BESIDE_NAMES[$i]%%:*}/$name.rs (run beside the others):"
    cat "target/$name.log"
    if [ "$rc" != 0 ]; then
      echo "tests/${BESIDE_NAMES[$i]%%:*}/$name.rs failed (exit $rc)"
      failed=$rc
    fi
  done
  return "$failed"
}
