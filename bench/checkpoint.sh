#!/usr/bin/env bash
# Checkpoint write and load speed (issue 7) for the `medium` model's full state (weights in the
# Hugging Face format + AdamW state), next to the disk's own speed for the same bytes (dd with
# fsync) measured in the same run; and the same state saved by a 2-stage pipeline (a part per stage,
# both stages writing at once) and loaded back; R rounds, medians. Usage: bench/checkpoint.sh [ROUNDS] [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
dir=${2:-$(mktemp -d)}
bash scripts/build.sh >/dev/null
[ -f data/bible/manifest.json ] || ./build/nobubble prepare --out data/bible --quiet
save=(); load=(); disk=(); psave=(); pload=()
pipe=(--stages 2 --pipeline 2bw --microbatches 2)
for r in $(seq 1 "$rounds"); do
  rm -rf "$dir/ck"
  s=$(./build/nobubble train --data data/bible --model medium --steps 1 --batch 1 --save-dir "$dir/ck" --log-every 100 |
      sed -n 's/^checkpoint saved .*(\([0-9]*\) MB\/s)$/\1/p')
  l=$(./build/nobubble train --data data/bible --model medium --steps 2 --batch 1 --resume "$dir/ck/step_000001" \
      --log-every 100 | sed -n 's/^checkpoint loaded .*(\([0-9]*\) MB\/s)$/\1/p')
  bytes=$(cat "$dir/ck/step_000001/"* | wc -c)
  d=$(dd if=/dev/zero of="$dir/dd.bin" bs=1M count=$((bytes / 1048576)) conv=fsync 2>&1 | sed -n 's/.*, \([0-9.]*\) \([MG]\)B\/s$/\1 \2/p' |
      awk '{print ($2 == "G") ? $1 * 1000 : $1}')
  rm -f "$dir/dd.bin"
  rm -rf "$dir/pk"
  ps=$(./build/nobubble train --data data/bible --model medium --steps 1 --batch 1 "${pipe[@]}" --save-dir "$dir/pk" --log-every 100 |
      sed -n 's/^checkpoint saved .*(\([0-9]*\) MB\/s)$/\1/p')
  pl=$(./build/nobubble train --data data/bible --model medium --steps 2 --batch 1 "${pipe[@]}" --resume "$dir/pk/step_000001" \
      --log-every 100 | sed -n 's/^checkpoint loaded .*(\([0-9]*\) MB\/s)$/\1/p')
  save+=("$s"); load+=("$l"); disk+=("$d"); psave+=("$ps"); pload+=("$pl")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
echo "medium, AdamW: $(du -sm "$dir/ck/step_000001" | cut -f1) MB per checkpoint; medians of $rounds rounds:"
echo "  save $(median "${save[@]}") MB/s (fsync'ed), load $(median "${load[@]}") MB/s, disk (dd, fsync) $(median "${disk[@]}") MB/s"
echo "  2-stage pipeline, a part per stage ($(du -sm "$dir/pk/step_000001" | cut -f1) MB): save $(median "${psave[@]}") MB/s, load $(median "${pload[@]}") MB/s"
