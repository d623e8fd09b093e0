#!/usr/bin/env bash
# Old against new on the same machine, alternating runs: the training throughput (tokens/s from
# summary.json) of two nobubble binaries on the runs a refactoring must not slow down, each the
# median of REPEATS runs made back to back in pairs (old, new), since this machine is shared and noisy.
#
# usage: bench/old_new.sh OLD_BINARY NEW_BINARY [REPEATS (3)]   (after `nobubble prepare --out data/bible`)
#   e.g. git worktree add /tmp/old REV && (cd /tmp/old && scripts/build.sh) &&
#        bench/old_new.sh /tmp/old/build/nobubble build/nobubble 3
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2 reps=${3:-3}
[ -f data/bible/manifest.json ] || "$new" prepare --out data/bible >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
base=(--data data/bible --quiet --eval-batches 1)
runs=(
  "--model small --batch 16 --seq 256 --steps 16"
  "--model medium --batch 8 --seq 256 --steps 4"
  "--model small --batch 8 --seq 256 --steps 16 --stages 2 --delay 2bw --microbatches 4"
  "--model small --batch 8 --seq 256 --steps 8 --pipeline 2bw --stages 2 --microbatches 4"
  "mpi --model small --batch 8 --seq 256 --steps 8 --pipeline 2bw --stages 2 --microbatches 4 --transport mpi"
)
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
tokens_per_s() { grep -o '"tokens_per_s": [0-9.]*' "$1/summary.json" | awk '{print $2}'; }
one() {  # one BINARY OUT ARGS...
  local bin=$1 out=$2; shift 2
  rm -rf "$out"
  if [ "$1" = mpi ]; then
    shift
    mpirun --oversubscribe -np 2 --bind-to none "$bin" train "${base[@]}" "$@" --out "$out" >/dev/null
  else
    "$bin" train "${base[@]}" "$@" --out "$out" >/dev/null
  fi
  tokens_per_s "$out"
}
lscpu | grep -E '^Model name' | sed 's/^Model name: */CPU: /'
echo "flags: $(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "| run | old: median (runs) | new: median (runs) | new / old |"
echo "|---|---|---|---|"
for r in "${runs[@]}"; do
  o=() n=()
  for ((i = 0; i < reps; i++)); do
    o+=("$(one "$old" "$tmp/old" $r)")
    n+=("$(one "$new" "$tmp/new" $r)")
  done
  mo=$(printf '%s\n' "${o[@]}" | median) mn=$(printf '%s\n' "${n[@]}" | median)
  printf '| `%s` | %.0f (%s) | %.0f (%s) | %.2f |\n' "$r" "$mo" "$(printf '%.0f, ' "${o[@]}" | sed 's/, $//')" \
    "$mn" "$(printf '%.0f, ' "${n[@]}" | sed 's/, $//')" "$(echo "$mn / $mo" | bc -l)"
done
