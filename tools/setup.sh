#!/usr/bin/env bash
# Installs the Debian 12 packages ahbmsim builds and tests with, when any is missing
# (--run: only what building and running `ahbm` needs, as ./ahbm asks; --fuzz: also clang).
# Idempotent and silent when everything is there. Nothing is downloaded except through apt.
set -euo pipefail

packages=(
  bazel-bootstrap     # Bazel 4.2.3; third_party/ stands in for the rules it would download
  g++
  libcaf-dev          # C++ Actor Framework 0.17.6 (with its OpenSSL module)
  libssl-dev          # OpenSSL 3: `ahbm worker`'s mutual TLS (cluster/)
  openssl             # the openssl command: certificates for workers (README, tests)
  libprotobuf-dev     # protobuf 3.21 runtime
  zlib1g-dev          # zlib: protobuf's gzip streams (the job store)
  protobuf-compiler   # protoc 3.21
  libabsl-dev         # Abseil 20220623
  libgtest-dev
  libgmock-dev
  libbenchmark-dev    # Google Benchmark 1.7
  libjemalloc-dev     # jemalloc 5.3, the allocator of ahbm and the benchmarks
  gnuplot-nox         # gnuplot 5.4: the report's SVG plots (ahbm milestone)
)

# For the tests only: Slurm 22.05 and munge, with which //cluster:slurm_test runs `ahbm slurm`
# on a one-node cluster of its own (tools/slurm_cluster.sh: its own daemons, key and config).
if [[ ${1:-} != --run ]]; then
  packages+=(slurmctld slurmd slurm-client munge)
fi

# `tools/setup.sh --fuzz`: also what tools/fuzz.sh needs — clang 14 with its sanitizer runtimes
# and libFuzzer (tests/fuzz/README.md). The bounded fuzz tests of `bazel test //...` need none.
if [[ ${1:-} == --fuzz ]]; then
  packages+=(clang-14 libclang-rt-14-dev libfuzzer-14-dev)
fi

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q >/dev/null
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
