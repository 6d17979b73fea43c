#!/usr/bin/env bash
# Stop the one-node Slurm started by scripts/slurm-up.sh.
#
#   scripts/slurm-down.sh            # stop slurmd, slurmctld, munged (by their pid files)
#   scripts/slurm-down.sh --purge    # ... and remove $TRAINER_SLURM_DIR
#
# Daemons are stopped only through the pid files in $TRAINER_SLURM_DIR (default
# /tmp/trainer-slurm), never by process name, so other Slurm or munge instances are untouched.
set -euo pipefail

DIR="${TRAINER_SLURM_DIR:-/tmp/trainer-slurm}"
log() { echo "slurm-down: $*" >&2; }

# `stop NAME PIDFILE`: SIGTERM the pid in PIDFILE, wait up to 10 s, then SIGKILL.
stop() {
  local name="$1" file="$2" pid
  if [[ ! -s "$file" ]]; then
    log "$name: no pid file"
    return 0
  fi
  pid="$(cat "$file")"
  if ! [[ "$pid" =~ ^[0-9]+$ ]] || ! kill -0 "$pid" 2>/dev/null; then
    log "$name: not running"
    rm -f "$file"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name: still alive after 10 s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
  log "$name (pid $pid) stopped"
}

stop slurmd "$DIR/slurmd.pid"
stop slurmctld "$DIR/slurmctld.pid"
stop munged "$DIR/munged.pid"
rm -f "$DIR/munge/munged.pid"

if [[ "${1:-}" == "--purge" ]]; then
  rm -rf "$DIR"
  log "removed $DIR"
fi
