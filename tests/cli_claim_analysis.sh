#!/usr/bin/env bash
# experiments/claim_10k/analyze.py, the pre-registered analysis, on a hand-made results tree whose answers
# are worked out here by hand: Student's t quantiles against a printed table; a paired gap of known
# per-seed values (mean, sd, 95% interval with t(7) = 2.364624); the two one-sided tests at both margins;
# the leave-one-seed-out picks; EF's recovery given only where the plain gap is resolved; the refusal to
# compute on fewer than the plan's eight seeds; and the bit-for-bit check of seeds 1-3 failing on a
# changed loss. ($1, the nobubble binary, is not used: ctest passes it to every cli test.)
set -u
source "$(dirname "$0")/support/cli_harness.sh"
analyze=$(dirname "$0")/../experiments/claim_10k/analyze.py
command -v python3 > /dev/null || { echo "python3 is missing"; exit 1; }

# ---- t quantiles against a table (Student's t, two-sided 95% and one-sided 95%; experiments/studylib.py's,
# which every study's analysis uses)
python3 - "$(dirname "$0")/../experiments/studylib.py" > "$work/t.out" 2>&1 <<'EOF'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("a", sys.argv[1]); a = importlib.util.module_from_spec(spec)
spec.loader.exec_module(a)
table = [(0.975, 1, 12.706205), (0.975, 2, 4.302653), (0.975, 7, 2.364624), (0.975, 30, 2.042272), (0.95, 7, 1.894579)]
bad = [(p, df, a.t_quantile(p, df), want) for p, df, want in table if abs(a.t_quantile(p, df) - want) > 2e-6]
print("bad:", bad) if bad else print("t ok")
EOF
grep -q "t ok" "$work/t.out" && ok || fail "t quantiles: $(cat "$work/t.out")"

# ---- a hand-made results tree: 8 seeds, every configuration (tests/support/claim_10k_tree.sh says its values)
source "$(dirname "$0")/support/claim_10k_tree.sh"
claim_10k_tree "$work/res"
e=("${claim_10k_e[@]}")
python3 "$analyze" --results "$work/res" > "$work/a.out" 2> "$work/a.err" || fail "analyze.py on 8 seeds: $(cat "$work/a.err")"
# sd of e: sqrt((2*(9+4+1) + 0) * 1e-6 / 7) = sqrt(28e-6 / 7) = 0.002; half-width 2.364624 * 0.002 / sqrt(8) = 0.001672
grep -q "| adamw | 4e-3 | 3.0450 | +0.1000 \[+0.0983, +0.1017\] | 0.0020 | resolved |" "$work/a.out" && ok \
  || fail "AdamW's gap row: $(grep '| adamw | 4e-3' "$work/a.out")"
# Muon: +0.004 [+0.0023, +0.0057], resolved; 90% half-width 1.894579 * 0.000707 = 0.00134: [+0.0027, +0.0053],
# inside (-0.012, 0.012) and (-0.05, 0.05): equivalent at both margins.
grep "| muon | 4e-3 | 3.0450 | +0.0040 \[+0.0023, +0.0057\] | 0.0020 | resolved | \[+0.0027, +0.0053\]" "$work/a.out" \
  | grep -q "equivalent within 0.012 (p = 0.000); equivalent within 0.05" && ok \
  || fail "Muon's gap row and its equivalence: $(grep '| muon | 4e-3' "$work/a.out")"
grep -q "| muon | 1: 4e-3, 2: 4e-3, 3: 4e-3, 4: 4e-3, 5: 4e-3, 6: 4e-3, 7: 4e-3, 8: 4e-3 | 4e-3 | +0.0040" "$work/a.out" && ok \
  || fail "the leave-one-seed-out picks: $(grep 'picks\|| muon | 1:' "$work/a.out")"
# AdamW minus Muon: exactly 0.096 on every seed (sd 0): an interval of zero width
grep -q "| both at 4e-3 | +0.0960 \[+0.0960, +0.0960\] | AdamW larger | 25.0x |" "$work/a.out" && ok \
  || fail "AdamW minus Muon: $(grep 'both at 4e-3' "$work/a.out")"
# EF: gap halved on every seed: recovery 50% exactly
grep -q "| 4e-3 | +0.0020 \[+0.0012, +0.0028\] | resolved | 50% \[50%, 50%\] |" "$work/a.out" && ok \
  || fail "EF's recovery: $(grep -A3 'error feedback' "$work/a.out")"

# ---- a gap that is not resolved gets no recovery and no ratio; the TOST fails at the narrow margin
for s in 1 2 3 4 5 6 7 8; do
  f="$work/res/claim_10k/runs/${s}_muon_8e-3_2bw"
  loss=$(awk -v s=$s -v e="${e[$s]}" 'BEGIN { printf "%.6f", 3.0 + s / 100 + 0.001 + 10 * e }')
  printf '{"final_val_loss": %s}\n' "$loss" > "$f/summary.json"; printf '{"val_loss": %s}\n' "$loss" > "$f/final_eval.json"
done
python3 "$analyze" --results "$work/res" > "$work/b.out" 2>&1
grep "| muon | 8e-3 |" "$work/b.out" | grep -q "within noise .*not shown equivalent within 0.012" && ok \
  || fail "a gap of mean 0 and sd 0.02 is within noise and not shown equivalent at 0.012: $(grep '| muon | 8e-3' "$work/b.out")"
grep -q "| 8e-3 | .* | not computed: the plain gap is not resolved |" "$work/b.out" && ok \
  || fail "no recovery over an unresolved gap: $(grep '| 8e-3 |' "$work/b.out")"

# ---- fewer than eight seeds: refused unless --partial
rm -r "$work/res/claim_10k/runs/8_adamw_8e-3_2bw"
python3 "$analyze" --results "$work/res" > /dev/null 2> "$work/c.err" && fail "7 seeds of one configuration accepted" \
  || { grep -q "only seeds \[1, 2, 3, 4, 5, 6, 7\]" "$work/c.err" && ok || fail "the refusal names the seeds: $(cat "$work/c.err")"; }
python3 "$analyze" --results "$work/res" --partial > "$work/d.out" 2>&1 && grep -q "seeds 1-7, n = 7" "$work/d.out" && ok \
  || fail "--partial computes on the 7 common seeds: $(head -20 "$work/d.out")"

# ---- the bit-for-bit check: a twin in results/scaling with one training loss changed stops the analysis
mkdir -p "$work/res/scaling/runs/10000_muon_4e-3_sync_1"
for step in 100 200; do printf '{"step": %d, "train_loss": 5.5, "val_loss": 5.6}\n' $step; done \
  > "$work/res/scaling/runs/10000_muon_4e-3_sync_1/metrics.jsonl"
sed 's/5.5,/5.5,/' "$work/res/scaling/runs/10000_muon_4e-3_sync_1/metrics.jsonl" > "$work/res/claim_10k/runs/1_muon_4e-3_sync/metrics.jsonl"
python3 "$analyze" --results "$work/res" --partial > "$work/e.out" 2>&1 && grep -q "| 1_muon_4e-3_sync | 2 | 2 | 2 | 2 | equal |" "$work/e.out" \
  && ok || fail "an equal twin: $(grep '1_muon' "$work/e.out")"
sed -i '2s/5.5,/5.50001,/' "$work/res/claim_10k/runs/1_muon_4e-3_sync/metrics.jsonl"
python3 "$analyze" --results "$work/res" --partial > "$work/f.out" 2>&1 && fail "a changed twin accepted" \
  || { grep -q "DIFFERENT" "$work/f.out" && grep -q "stops the analysis" "$work/f.out" && ok || fail "a changed twin: $(cat "$work/f.out")"; }
# ... unless the point ran on another kind of CPU than its twin (machines.log, the sweep's log): then its
# difference is reported and the analysis goes on; on the twin's kind it still stops it.
printf '100 start Intel(R) Xeon(R) Processor | avx512f | binary 0\n' > "$work/res/claim_10k/machines.log"
printf '150 start 1_muon_4e-3_sync\n160 done 1_muon_4e-3_sync 10.0s\n' > "$work/res/claim_10k/sweep.log"
python3 "$analyze" --results "$work/res" --partial > "$work/g.out" 2>&1 \
  && grep -q "| 1_muon_4e-3_sync | 2 | 1 | 2 | 2 | another CPU (Intel(R) Xeon(R) Processor): final training loss +1.00e-05 from its twin's |" "$work/g.out" \
  && ok || fail "a changed twin on another CPU: $(grep '1_muon' "$work/g.out")"
printf '155 start AMD EPYC 9B45 | avx512f | binary 0\n' >> "$work/res/claim_10k/machines.log"
python3 "$analyze" --results "$work/res" --partial > "$work/h.out" 2>&1 \
  && grep -q "another CPU (AMD EPYC 9B45, Intel(R) Xeon(R) Processor)" "$work/h.out" && ok \
  || fail "a point resumed on a second CPU is named with both: $(grep '1_muon' "$work/h.out")"
printf '100 start AMD EPYC 9B45 | avx512f | binary 0\n' > "$work/res/claim_10k/machines.log"
python3 "$analyze" --results "$work/res" --partial > "$work/i.out" 2>&1 && fail "a changed twin on the twin's CPU accepted" \
  || { grep -q "DIFFERENT" "$work/i.out" && ok || fail "a changed twin on the twin's CPU: $(cat "$work/i.out")"; }
finish
