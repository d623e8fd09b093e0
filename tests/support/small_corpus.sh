# Sourced by tests/support/cli_harness.sh and the loops of tools/reliability/ (which set $work).
# small_corpus BIN DIR [PARAGRAPHS (40)]: DIR prepared from a small real text (Genesis 1:1-2, numbered
# paragraphs; $work/text.txt), byte-level BPE vocabulary 300, a tenth for validation. Status: prepare's.
small_corpus() {
  local bin=$1 dir=$2 n=${3:-40} i
  for i in $(seq 1 "$n"); do
    printf 'In the beginning God created the heaven and the earth. Paragraph %d.\n\nAnd the earth was without form, and void; and darkness was upon the face of the deep. %d\n\n' "$i" "$((i * 7))"
  done > "$work/text.txt"
  "$bin" prepare --input "$work/text.txt" --vocab 300 --val-fraction 0.1 --out "$dir" > /dev/null 2>&1
}
