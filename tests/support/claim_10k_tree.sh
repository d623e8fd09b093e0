# A hand-made results tree of experiments/claim_10k (sourced by tests/cli_claim_analysis.sh and
# tests/cli_claims.sh), whose answers the tests work out by hand: 8 seeds, every configuration; synchronous
# losses 3.0 + seed/100 at 4e-3 and 0.001 more at 8e-3 (so 4e-3 wins every leave-one-out pick); AdamW's 2BW
# gap 0.10 + e_s, Muon's 0.004 + e_s, with e_s = (-0.003, -0.002, -0.001, 0, 0, 0.001, 0.002, 0.003)
# (mean 0, sd 0.002); Muon's EF gap half of its 2BW gap.
claim_10k_e=(0 -0.003 -0.002 -0.001 0 0 0.001 0.002 0.003)

claim_10k_point() {  # root seed opt rate delay loss: the point's summary (8-batch) and whole-split losses
  local d="$1/claim_10k/runs/$2_$3_$4_$5"
  mkdir -p "$d"
  printf '{"final_val_loss": %s}\n' "$6" > "$d/summary.json"
  printf '{"point": "%s", "val_loss": %s}\n' "$(basename "$d")" "$6" > "$d/final_eval.json"
}

claim_10k_tree() {  # root: all 80 points
  local s rate base e
  for s in 1 2 3 4 5 6 7 8; do
    e=${claim_10k_e[$s]}
    for rate in 4e-3 8e-3; do
      base=$(awk -v s=$s -v r=$rate 'BEGIN { printf "%.6f", 3.0 + s / 100 + (r == "8e-3" ? 0.001 : 0) }')
      claim_10k_point "$1" $s adamw $rate sync "$base"
      claim_10k_point "$1" $s adamw $rate 2bw "$(awk -v b="$base" -v e="$e" 'BEGIN { printf "%.6f", b + 0.10 + e }')"
      claim_10k_point "$1" $s muon $rate sync "$base"
      claim_10k_point "$1" $s muon $rate 2bw "$(awk -v b="$base" -v e="$e" 'BEGIN { printf "%.6f", b + 0.004 + e }')"
      claim_10k_point "$1" $s muon $rate 2bw+ef "$(awk -v b="$base" -v e="$e" 'BEGIN { printf "%.6f", b + (0.004 + e) / 2 }')"
    done
  done
}
