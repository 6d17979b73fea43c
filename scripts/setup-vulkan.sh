#!/usr/bin/env bash
# Installs Mesa's software Vulkan driver (lavapipe: Debian 12 `mesa-vulkan-drivers`, Vulkan 1.3
# on llvmpipe) when no Vulkan ICD for it is present: the `wgpu` backend's CI stage runs Burn's
# CubeCL kernels on it, on the CPU, without a GPU (idempotent; needs root or sudo to install).
set -euo pipefail
if ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
echo "setup-vulkan: installing mesa-vulkan-drivers (lavapipe)" >&2
$SUDO apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
  mesa-vulkan-drivers >&2
ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1 ||
  { echo "setup-vulkan: lavapipe's ICD is still missing after the install" >&2; exit 1; }
