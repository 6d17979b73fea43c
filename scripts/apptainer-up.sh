#!/usr/bin/env bash
# A real Apptainer 1.4.5 on this Debian 12 machine, for tests and for trying the container
# definitions (containers/*.def). Debian 12 has no Apptainer package; Debian sid has 1.4.5, so:
#   1. debootstrap a minimal Debian sid root filesystem with apptainer, debootstrap and
#      squashfs-tools in it (about 1.5 minutes, once; everything from Debian's mirror);
#   2. write a wrapper `$DIR/bin/apptainer` that enters that root filesystem with `unshare`
#      (new mount and pid namespaces) + `pivot_root`, with the host's /work, /tmp, /home, /root,
#      /usr/share/datasets, the current directory and $TRAINER_APPTAINER_BINDS (colon-separated)
#      bind-mounted at the same paths, and runs apptainer there:
#        * `build` runs inside a user namespace with a full 0-65535 uid/gid map (as root on the
#          host the sandbox lacks CAP_SYS_RESOURCE, which a root build asks for);
#        * `exec`, `run`, `shell` and `test` get `--no-privs` for the same reason.
#
#   eval "$(scripts/apptainer-up.sh)"        # prints export TRAINER_APPTAINER=... (idempotent)
#   $TRAINER_APPTAINER build x.sif containers/trainer-cpu.def
#   $TRAINER_APPTAINER exec --nv x.sif trainer doctor
#
# Starts no daemon. Needs root (debootstrap, namespaces). Remove with: rm -rf "$DIR".
set -euo pipefail

DIR="${TRAINER_APPTAINER_DIR:-/var/tmp/trainer-apptainer}"
MIRROR="${TRAINER_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
ROOTFS="$DIR/rootfs"

log() { echo "apptainer-up: $*" >&2; }
die() {
  echo "apptainer-up: error: $*" >&2
  exit 1
}
[[ "$(id -u)" == 0 ]] || die "run as root (debootstrap and namespaces need it)"

# --- 1. the sid root filesystem ----------------------------------------------------------------
if [[ ! -x "$ROOTFS/usr/bin/apptainer" ]]; then
  if ! command -v debootstrap >/dev/null; then
    log "installing debootstrap"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends debootstrap >&2
  fi
  log "debootstrap Debian sid with apptainer into $ROOTFS (about 1.5 minutes)"
  rm -rf "$ROOTFS.partial"
  mkdir -p "$DIR"
  debootstrap --variant=minbase --include=apptainer,debootstrap,squashfs-tools,ca-certificates \
    sid "$ROOTFS.partial" "$MIRROR" >"$DIR/debootstrap.log" 2>&1 ||
    die "debootstrap failed; see $DIR/debootstrap.log"
  mv "$ROOTFS.partial" "$ROOTFS"
fi
# apptainer build reads /etc/hosts; debootstrap leaves none.
[[ -s "$ROOTFS/etc/hosts" ]] || printf '127.0.0.1 localhost\n::1 localhost ip6-localhost\n' >"$ROOTFS/etc/hosts"
cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf" 2>/dev/null || true

# --- 2. the wrapper ------------------------------------------------------------------------------
mkdir -p "$DIR/bin"
cat >"$DIR/bin/apptainer.new" <<WRAP
#!/usr/bin/env bash
# Written by scripts/apptainer-up.sh: runs Apptainer from the Debian sid root filesystem
# $ROOTFS (unshare + pivot_root), host paths bind-mounted at the same places.
ROOTFS="$ROOTFS"
WRAP
cat >>"$DIR/bin/apptainer.new" <<'WRAP'
sub="${1:-}"
args=("$@")
userns=()
case "$sub" in
build) userns=(unshare --user --mount --propagation private --map-users=0:0:65536 --map-groups=0:0:65536) ;;
exec | run | shell | test)
  if [[ "$(id -u)" == 0 ]] && [[ " $* " != *" --no-privs "* ]]; then
    args=("$sub" --no-privs "${@:2}")
  fi
  ;;
esac
binds="/work:/tmp:/home:/root:/usr/share/datasets:$PWD${TRAINER_APPTAINER_BINDS:+:$TRAINER_APPTAINER_BINDS}"
exec unshare --mount --pid --fork --kill-child --propagation private \
  bash -c '
set -e
R="$1"; binds="$2"; cwd="$3"; shift 3
mount --bind "$R" "$R"
mount -t proc proc "$R/proc"
mount --rbind /dev "$R/dev"
mount --rbind /sys "$R/sys"
IFS=: read -r -a list <<<"$binds"
for d in "${list[@]}"; do
  [[ -n "$d" && "$d" != / && -d "$d" ]] || continue
  case "$d" in "$R" | "$R"/*) continue ;; esac
  mkdir -p "$R$d"
  mountpoint -q "$R$d" || mount --rbind "$d" "$R$d"
done
mkdir -p "$R/.oldroot"
cd "$R"
pivot_root . .oldroot
umount -l /.oldroot
cd "$cwd" 2>/dev/null || cd /
exec "$@"
' bash "$ROOTFS" "$binds" "$PWD" "${userns[@]}" apptainer "${args[@]}"
WRAP
chmod 755 "$DIR/bin/apptainer.new"
mv "$DIR/bin/apptainer.new" "$DIR/bin/apptainer"

version="$("$DIR/bin/apptainer" --version)" || die "the wrapper does not run apptainer"
log "$version ($DIR/bin/apptainer)"
echo "export TRAINER_APPTAINER=$DIR/bin/apptainer"
