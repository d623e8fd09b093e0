#!/usr/bin/env bash
# Installs the Debian packages nobubble needs to build, test and run. Idempotent: installs
# only what is missing, so running it again is quick.
set -euo pipefail

packages=(
  build-essential   # gcc, make
  cmake             # the build (3.25)
  libdnnl-dev       # oneDNN: the default CPU GEMM backend
  libopenblas-openmp-dev  # OpenBLAS (OpenMP build): the second CPU GEMM backend (NB_GEMM=openblas)
  libxxhash-dev     # XXH3: the checksums of the safetensors files nobubble writes
  pkg-config        # nobubble.pc, for programs that use the installed library (tests/cli_install.sh)
  bible-kjv         # the default corpus (the King James Bible)
  libpcre2-dev      # PCRE2: the regex pre-tokenizers of Hugging Face tokenizer.json files
  libopenmpi-dev openmpi-bin  # MPI: pipeline stages as processes (--transport mpi)
  zlib1g-dev        # zlib: gzip inputs of prepare, and dict-gcide's dictzip file (--corpus gcide)
  libzstd-dev       # zstd: zstd inputs of prepare
  libyaml-dev       # libyaml: train --config FILE.yaml
  libgsl-dev        # GSL: the report's t and chi-square quantiles and least squares (the binary only)
)
# With --test: what only the tests need as well.
if [ "${1:-}" = "--test" ]; then
  packages+=(
    chromium        # renders the HTML report in a test (headless)
    zstd            # compresses prepare's test inputs (tests/cli_prepare.sh)
  )
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup.sh: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "setup.sh: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
