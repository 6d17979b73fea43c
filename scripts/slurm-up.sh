#!/usr/bin/env bash
# Start a one-node Slurm cluster on this machine, for tests and for trying job templates.
#
#   eval "$(scripts/slurm-up.sh)"     # installs, configures, starts; exports SLURM_CONF
#   sinfo; sbatch ...; scontrol show hostnames 'gpu1,gpu[3-5,7]'
#   scripts/slurm-down.sh             # stops the daemons again
#
# Idempotent: a second run reuses the running daemons. Needs root (daemons, apt-get, mknod).
#
# What it sets up (Debian 12 `slurm-wlm` + `munge`, Slurm 22.05, no systemd):
#   * everything under $TRAINER_SLURM_DIR (default /tmp/trainer-slurm): slurm.conf, gres.conf,
#     munge key and socket, state, spool, logs, pid files;
#   * partitions q_ai4 (default), q_ai8, q_gpu_c and q_cn on the single node;
#   * four fake GPUs: character devices made with mknod (major 195 like /dev/nvidiaN) in
#     $TRAINER_SLURM_DIR/dev, so `--gres=gpu:N` sets CUDA_VISIBLE_DEVICES like a real node,
#     plus 64 shards per GPU (`--gres=shard:16`);
#   * MpiDefault=pmix, and SlurmdParameters=config_overrides so the node claims more CPUs
#     (TRAINER_SLURM_CPUS, default 8) than the machine has and several 1-CPU jobs run at once;
#   * cred_expire=30 (AuthInfo): a requeued job waits the credential lifetime plus a second
#     before it may start again, 121 s at Slurm's default; the requeue tests requeue jobs
#     several times, and a step's credential is used within seconds on one node.
#
# Standard output carries only `export VAR=...` lines; progress goes to standard error.
set -euo pipefail

DIR="${TRAINER_SLURM_DIR:-/tmp/trainer-slurm}"
CPUS="${TRAINER_SLURM_CPUS:-8}"
CTLD_PORT="${TRAINER_SLURM_CTLD_PORT:-6817}"
SLURMD_PORT="${TRAINER_SLURM_SLURMD_PORT:-6818}"
NODE="$(hostname -s)"

log() { echo "slurm-up: $*" >&2; }
die() {
  echo "slurm-up: error: $*" >&2
  exit 1
}

# `pid_alive FILE`: the pid in FILE names a running process.
pid_alive() {
  [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null
}

[[ "$(id -u)" == 0 ]] || die "run as root (daemons, apt-get and mknod need it)"

# --- 1. packages --------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null ||
  ! command -v munged >/dev/null || ! command -v scontrol >/dev/null ||
  ! compgen -G '/usr/lib/*/pmix2/lib/libpmix.so' >/dev/null; then
  # MpiDefault=pmix: Slurm's mpi_pmix plugin dlopens pmix2/lib/libpmix.so, which only
  # libpmix-dev ships (libpmix2 alone has libpmix.so.2, and neither is a hard dependency).
  log "installing slurm-wlm, munge and libpmix-dev with apt-get (about a minute)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends slurm-wlm munge libpmix-dev >&2
fi
command -v slurmctld >/dev/null || die "slurmctld still missing after apt-get install slurm-wlm"

# --- 2. directories, munge key, fake GPUs ---------------------------------------------------
mkdir -p "$DIR"/{state,spool,log,dev,munge}
chmod 755 "$DIR"
chown munge:munge "$DIR/munge" 2>/dev/null || true
chmod 755 "$DIR/munge" # munged wants the socket directory world-executable
if [[ ! -s "$DIR/munge/munge.key" ]]; then
  dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
fi
chown munge:munge "$DIR/munge/munge.key" 2>/dev/null || true
chmod 400 "$DIR/munge/munge.key"

for i in 0 1 2 3; do
  dev="$DIR/dev/nvidia$i"
  if [[ ! -c "$dev" ]]; then
    rm -f "$dev"
    mknod -m 666 "$dev" c 195 "$i"
  fi
done

# --- 3. configuration -----------------------------------------------------------------------
# Real memory as slurmd sees it; CPUs are overridden (config_overrides) to run more jobs.
MEM="$(slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' | head -n1)"
MEM="${MEM:-4000}"
SOCKET="$DIR/munge/munge.socket.2"

cat >"$DIR/slurm.conf.new" <<EOF
# Written by scripts/slurm-up.sh; rewritten on every run.
ClusterName=trainer
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCKET,cred_expire=30
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
MpiDefault=pmix
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=10
GresTypes=gpu,shard
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM Gres=gpu:4,shard:256 State=UNKNOWN
PartitionName=q_ai4 Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
PartitionName=q_ai8 Nodes=$NODE MaxTime=INFINITE State=UP
PartitionName=q_gpu_c Nodes=$NODE MaxTime=INFINITE State=UP
PartitionName=q_cn Nodes=$NODE MaxTime=INFINITE State=UP
EOF
mv "$DIR/slurm.conf.new" "$DIR/slurm.conf"

{
  echo "# Written by scripts/slurm-up.sh: fake GPUs are char devices (major 195) outside /dev."
  echo "AutoDetect=off"
  for i in 0 1 2 3; do echo "Name=gpu File=$DIR/dev/nvidia$i"; done
  for i in 0 1 2 3; do echo "Name=shard Count=64 File=$DIR/dev/nvidia$i"; done
} >"$DIR/gres.conf"

export SLURM_CONF="$DIR/slurm.conf"

# --- 4. daemons -----------------------------------------------------------------------------
if pid_alive "$DIR/munged.pid"; then
  log "munged already running (pid $(cat "$DIR/munged.pid"))"
else
  log "starting munged"
  runuser -u munge -- munged \
    --socket="$SOCKET" \
    --key-file="$DIR/munge/munge.key" \
    --pid-file="$DIR/munge/munged.pid" \
    --log-file="$DIR/munge/munged.log" \
    --seed-file="$DIR/munge/munged.seed" ||
    die "munged failed to start; see $DIR/munge/munged.log"
  for _ in $(seq 50); do [[ -s "$DIR/munge/munged.pid" ]] && break; sleep 0.1; done
  cp "$DIR/munge/munged.pid" "$DIR/munged.pid"
fi

if pid_alive "$DIR/slurmctld.pid"; then
  log "slurmctld already running (pid $(cat "$DIR/slurmctld.pid"))"
else
  log "starting slurmctld"
  slurmctld -i || die "slurmctld failed to start; see $DIR/log/slurmctld.log"
fi

if pid_alive "$DIR/slurmd.pid"; then
  log "slurmd already running (pid $(cat "$DIR/slurmd.pid"))"
else
  log "starting slurmd"
  slurmd -N "$NODE" || die "slurmd failed to start; see $DIR/log/slurmd.log"
fi

# --- 5. wait for an idle node ----------------------------------------------------------------
state=""
for _ in $(seq 120); do
  state="$(sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null | head -n1 || true)"
  case "$state" in
  idle | mixed | allocated) break ;;
  down* | drain*) scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true ;;
  esac
  sleep 0.5
done
case "$state" in
idle | mixed | allocated) log "node $NODE is $state" ;;
*) die "node $NODE not idle after 60 s (state '${state:-unknown}'); see $DIR/log/" ;;
esac

echo "export SLURM_CONF=$DIR/slurm.conf"
echo "export TRAINER_SLURM_DIR=$DIR"
