#!/usr/bin/env bash
# Installs everything dlckpt needs to build, test and benchmark, from Debian 12
# packages only. Used by README.md and .ci/run. Needs root (or sudo).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build pkg-config gfortran git procps psmisc util-linux \
  mpich libmpich-dev openmpi-bin libopenmpi-dev python3-mpi4py python3-numpy \
  libisal-dev liblz4-dev \
  libfuse3-dev fuse3 \
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev \
  clang libclang-rt-14-dev \
  fio iproute2 python3 python3-numpy help2man \
  glusterfs-server glusterfs-client \
  slurm-wlm munge >/dev/null
echo "install-deps: done"
