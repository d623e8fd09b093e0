#!/usr/bin/env bash
# Packs a CUDA build for a GPU machine that has the NVIDIA driver and cuBLAS but none of nobubble's other
# libraries (a bare CUDA image): the programs of BUILD (configured with -DNB_CUDA=ON) and the shared
# libraries they need beyond glibc, libstdc++ and cuBLAS, into OUT (default .gpu, which .git/info/exclude
# should ignore). tools/gpu/check.sh runs the GPU checks from there.
#
#   cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DNB_CUDA=ON -DNB_NATIVE=OFF -DCMAKE_C_FLAGS=-march=x86-64-v3
#   cmake --build build-cuda -j2 --target nobubble_launcher test_cuda test_cuda_kernels
#   bash tools/gpu/pack.sh build-cuda .gpu
# -march=x86-64-v3 (AVX2, FMA) rather than -march=native: the GPU machine's processor is not this one.
set -euo pipefail
build=${1:?usage: pack.sh BUILD [OUT]}
out=${2:-.gpu}
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib"
cp "$build/nobubble" "$build/nobubble-core" "$build/test_cuda" "$build/test_cuda_kernels" "$out/bin/"
# Every library the programs load, but the C library's own, the C++ runtime and the CUDA libraries
# (the GPU machine has its own, matched to its driver).
ldd "$build/nobubble-core" "$build/test_cuda" "$build/test_cuda_kernels" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)\.so|/libcublas' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
tar -C "$out" -cJf "$out/lib.tar.xz" lib && rm -rf "$out/lib"
du -sh "$out"
