#!/usr/bin/env bash
# nobubble prepare on a small text: outputs, manifest against the shards, determinism,
# tokenizer reuse, JSON Lines and gzip/zstd inputs (the same shards as the plain text), and the error
# cases (non-zero exit, a message naming the flag, file or line, nothing left behind). Usage: bash tests/cli_prepare.sh path/to/nobubble
set -u
NB=${1:?usage: cli_prepare.sh path/to/nobubble}
FIX=$(cd "$(dirname "$0")" && pwd)/fixtures/tokenizers
T=$(mktemp -d /tmp/nb_cli_prepare.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0; passes=0
ok()   { passes=$((passes + 1)); }
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
check() { if eval "$1"; then ok; else fail "$2"; fi; }

# 40 paragraphs separated by blank lines (some by several, one with trailing spaces)
for i in $(seq 1 40); do
  printf 'Paragraph %d: the quick brown fox jumps over the lazy dog.\n' "$i"
  printf 'And the dog said unto the fox, thou art quick; number %d.\n' "$((i * 7))"
  if [ "$i" = 20 ]; then printf '   \n\n'; fi
  printf '\n'
done > "$T/small.txt"

# an error run: non-zero exit and stderr containing a string
expect_error() { # name pattern args...
  local name=$1 pat=$2; shift 2
  "$NB" prepare --quiet "$@" > "$T/err.out" 2> "$T/err.txt"; local rc=$?
  check "[ $rc -ne 0 ]" "$name: exit status 0"
  check "grep -q -- \"$pat\" '$T/err.txt'" "$name: message lacks '$pat': $(cat "$T/err.txt")"
}

# --- help
"$NB" prepare --help > "$T/help.txt"; check "[ $? -eq 0 ]" "--help exit status"
check "grep -q -- '--val-fraction' '$T/help.txt'" "--help lists the options"

# --- a normal run
"$NB" prepare --input "$T/small.txt" --vocab 300 --out "$T/out" --quiet > "$T/run.txt" 2>&1
check "[ $? -eq 0 ]" "prepare failed: $(cat "$T/run.txt")"
for f in tokenizer.json manifest.json small_train_000000.bin small_val_000000.bin; do
  check "[ -s '$T/out/$f' ]" "missing $f"
done
check "[ \$(ls -A '$T/out' | wc -l) -eq 4 ]" "unexpected files in the output: $(ls -A "$T/out")"
check "[ -z \"\$(ls -A '$T' | grep -E '^\\.out\\.(tmp|old)')\" ]" "temporary folder left behind"

header() { od -An -t d4 -N 12 "$1" | tr -s ' ' | sed 's/^ //'; }
ntok() { header "$1" | cut -d' ' -f3; }
for split in train val; do
  f="$T/out/small_${split}_000000.bin"
  h=$(header "$f")
  check "[ \"\$(echo $h | cut -d' ' -f1-2)\" = '20240520 1' ]" "$split header magic/version: $h"
  n=$(ntok "$f")
  check "[ \$(stat -c %s '$f') -eq \$((1024 + 2 * $n)) ]" "$split size != 1024 + 2 * $n"
  check "grep -q \"\\\"$split\\\": {\\\"tokens\\\": $n,\" '$T/out/manifest.json'" "manifest $split tokens != header ($n)"
  # every document starts with the EOT token (id 299): the first payload token
  first=$(od -An -t u2 -j 1024 -N 2 "$f" | tr -d ' ')
  check "[ '$first' = 299 ]" "$split starts with EOT 299, got $first"
done
# documents: 40 paragraphs; round(0.05 * 40) = 2 for validation; EOT count per split
check "grep -q '\"train_documents\": 38' '$T/out/manifest.json'" "38 train documents"
check "grep -q '\"val_documents\": 2' '$T/out/manifest.json'" "2 val documents"
eots=$(od -An -v -t u2 -j 1024 "$T/out/small_val_000000.bin" | tr -s ' ' '\n' | grep -c '^299$')
check "[ '$eots' = 2 ]" "val shard holds 2 EOT tokens, got $eots"
eots=$(od -An -v -t u2 -j 1024 "$T/out/small_train_000000.bin" | tr -s ' ' '\n' | grep -c '^299$')
check "[ '$eots' = 38 ]" "train shard holds 38 EOT tokens, got $eots"
sha=$(sha256sum "$T/out/tokenizer.json" | cut -d' ' -f1)
check "grep -q \"\\\"sha256\\\": \\\"$sha\\\"\" '$T/out/manifest.json'" "manifest sha256 != sha256sum tokenizer.json"
size=$(stat -c %s "$T/small.txt")
check "grep -q \"\\\"bytes\\\": $size,\" '$T/out/manifest.json'" "manifest source size"
check "grep -q '{\"id\": 299, \"content\": \"<|endoftext|>\"' '$T/out/tokenizer.json'" "tokenizer.json: the end-of-text token is id 299 (vocab 300)"

# --- determinism, seeds, reuse
"$NB" prepare --input "$T/small.txt" --vocab 300 --out "$T/out2" --quiet > /dev/null 2>&1
check "cmp -s '$T/out/small_train_000000.bin' '$T/out2/small_train_000000.bin' && cmp -s '$T/out/tokenizer.json' '$T/out2/tokenizer.json'" "two runs differ"
"$NB" prepare --input "$T/small.txt" --vocab 300 --seed 99 --out "$T/out3" --quiet > /dev/null 2>&1
check "! cmp -s '$T/out/small_val_000000.bin' '$T/out3/small_val_000000.bin'" "--seed does not change the validation documents"
"$NB" prepare --input "$T/small.txt" --tokenizer "$T/out/tokenizer.json" --out "$T/out4" --quiet > /dev/null 2>&1
check "[ $? -eq 0 ] && cmp -s '$T/out/small_train_000000.bin' '$T/out4/small_train_000000.bin'" "--tokenizer reuse gives other tokens"
check "grep -q '\"trained\": false' '$T/out4/manifest.json'" "manifest records the reused tokenizer"
# a Hugging Face tokenizer.json (GPT-2's kind, its <|endoftext|> at id 0): one id 0 per document
"$NB" prepare --input "$T/small.txt" --tokenizer "$FIX/gpt2.json" --out "$T/hf" --quiet > "$T/run.txt" 2>&1
check "[ $? -eq 0 ]" "prepare --tokenizer gpt2.json: $(cat "$T/run.txt")"
zeros=$(od -An -v -t u2 -j 1024 "$T/hf/small_train_000000.bin" | tr -s ' ' '\n' | grep -c '^0$')
check "[ '$zeros' = 38 ] && grep -q '\"eot_id\": 0,' '$T/hf/manifest.json'" "gpt2.json: 38 end-of-text ids 0 in the train shard, got $zeros"
# trained on it and exported: config.json and generation_config.json name its end-of-text id (0), not the last id
"$NB" train --data "$T/hf" --set vocab_size=600 --set n_layers=1 --set d_model=32 --set d_ffn=64 --set context=16 \
  --batch 1 --steps 1 --quiet --export "$T/hf_export" > "$T/run.txt" 2>&1
check "[ $? -eq 0 ]" "train --export on gpt2.json data: $(cat "$T/run.txt")"
for f in config.json generation_config.json; do
  check "grep -q '\"bos_token_id\": 0,' '$T/hf_export/$f' && grep -q '\"eos_token_id\": 0' '$T/hf_export/$f'" \
    "$f of an export trained on gpt2.json data: bos and eos 0: $(grep _token_id "$T/hf_export/$f" | tr -d '\n')"
done
# nobubble's earlier format still loads: "hi" = 256, "his" = 257, end-of-text 258
printf '{"format": "nobubble-bpe", "version": 1, "pretokenizer": "nobubble-gpt2-bytes-v1", "vocab_size": 259, "eot": {"id": 258}, "merges": [[104, 105], [256, 115]]}' > "$T/old.json"
printf 'his hi his\n' > "$T/his.txt"
"$NB" prepare --input "$T/his.txt" --tokenizer "$T/old.json" --val-fraction 0 --out "$T/old" --quiet > "$T/run.txt" 2>&1
check "[ $? -eq 0 ] && [ \"\$(od -An -v -t u2 -j 1024 '$T/old/his_train_000000.bin' | tr -s ' ')\" = ' 258 257 32 256 32 257 10' ]" "the earlier format: $(cat "$T/run.txt")"
"$NB" prepare --input "$T/small.txt" "$T/small.txt" --vocab 300 --val-fraction 0 --shard-tokens 500 --name two --out "$T/out5" --quiet > /dev/null 2>&1
check "[ $? -eq 0 ] && [ -s '$T/out5/two_train_000001.bin' ] && [ ! -e '$T/out5/two_val_000000.bin' ]" "two inputs, --shard-tokens, --val-fraction 0"
check "[ \$(ntok '$T/out5/two_train_000000.bin') -eq 500 ]" "--shard-tokens 500: first shard holds 500 tokens"
check "grep -q '\"train_documents\": 80' '$T/out5/manifest.json'" "two inputs give 80 documents"

# --- errors
expect_error "missing input" "$T/nope.txt" --input "$T/nope.txt" --out "$T/e1"
: > "$T/empty.txt"
expect_error "empty input" "empty.txt is empty" --input "$T/empty.txt" --out "$T/e2"
printf '\n  \n\n' > "$T/blank.txt"
expect_error "blank input" "blank.txt has no text" --input "$T/blank.txt" --out "$T/e3"
expect_error "vocab too small" "--vocab 256" --input "$T/small.txt" --vocab 256 --out "$T/e4"
expect_error "vocab too large" "too large for the data" --input "$T/small.txt" --vocab 60000 --out "$T/e5"
expect_error "output exists" "already exists" --input "$T/small.txt" --vocab 300 --out "$T/out"
expect_error "bad number" "--vocab" --input "$T/small.txt" --vocab abc --out "$T/e6"
expect_error "bad fraction" "--val-fraction" --input "$T/small.txt" --val-fraction 1.5 --out "$T/e7"
expect_error "no --out" "--out" --input "$T/small.txt"
expect_error "unknown option" "--bogus" --bogus
expect_error "bad tokenizer" "--tokenizer" --input "$T/small.txt" --tokenizer "$T/small.txt" --out "$T/e8"
printf '{"model": {"type": "Unigram", "vocab": []}}' > "$T/unigram.json"
expect_error "a Unigram tokenizer" "unigram.json: model.type Unigram is not supported" --input "$T/small.txt" --tokenizer "$T/unigram.json" --out "$T/e9"
printf '{"normalizer": {"type": "NFKC"}, "model": {"type": "BPE", "vocab": {}, "merges": []}}' > "$T/nfkc.json"
expect_error "a normalizer" "nfkc.json: normalizer NFKC is not supported" --input "$T/small.txt" --tokenizer "$T/nfkc.json" --out "$T/e10"
mkdir "$T/precious"; echo keep > "$T/precious/file.txt"
expect_error "force on a foreign folder" "not a prepare output" --input "$T/small.txt" --vocab 300 --out "$T/precious" --force
check "[ -f '$T/precious/file.txt' ]" "--force deleted a folder prepare did not make"
for d in e1 e2 e3 e4 e5 e6 e7 e8 e9 e10; do check "[ ! -e '$T/$d' ]" "$d was created by a failed run"; done
check "[ -z \"\$(ls -A '$T' | grep -E '\\.(tmp|old)-')\" ]" "temporary folders left behind: $(ls -A "$T")"

# --- --force replaces a prepare output
before=$(sha256sum "$T/out/small_train_000000.bin")
"$NB" prepare --input "$T/small.txt" --vocab 280 --out "$T/out" --force --quiet > /dev/null 2>&1
check "[ $? -eq 0 ] && grep -q '{\"id\": 279, \"content\": \"<|endoftext|>\"' '$T/out/tokenizer.json'" "--force did not replace the output"
check "[ \"\$(sha256sum '$T/out/small_train_000000.bin')\" != \"$before\" ]" "--force kept the old shard"
check "[ -z \"\$(ls -A '$T' | grep -E '\\.(tmp|old)-')\" ]" "--force left folders behind: $(ls -A "$T")"

# --- the GCIDE corpus (the tiny committed fixture in its markup stands in for dict-gcide)
G=tests/fixtures/gcide_tiny.dict.dz
"$NB" prepare --corpus gcide --gcide-file "$G" --vocab 260 --out "$T/gcide" --quiet > "$T/gcide.txt" 2>&1
check "[ $? -eq 0 ]" "prepare --corpus gcide failed: $(cat "$T/gcide.txt")"
check "[ -s '$T/gcide/gcide_train_000000.bin' ]" "--corpus gcide: shards are named gcide_*"
check "grep -q '\"package\": \"dict-gcide\"' '$T/gcide/manifest.json'" "manifest names the package: $(cat "$T/gcide/manifest.json")"
check "grep -q '\"documents\": 3}' '$T/gcide/manifest.json'" "manifest: 3 documents (one per entry)"
check "grep -q 'one per GCIDE dictionary entry' '$T/gcide/manifest.json'" "manifest states the document split"
expect_error "a missing GCIDE database" "apt-get install dict-gcide" --corpus gcide --gcide-file "$T/nowhere.dict.dz" --out "$T/g2"
check "grep -q -- '$T/nowhere.dict.dz' '$T/err.txt'" "the missing database is named: $(cat "$T/err.txt")"
check "[ ! -e '$T/g2' ]" "a missing database left an output folder"
"$NB" prepare --quiet --corpus gcid --out "$T/g3" > /dev/null 2> "$T/err.txt"; rc=$?
check "[ $rc -eq 2 ]" "--corpus gcid: exit status $rc, expected 2 (usage)"
check "grep -q -- \"--corpus 'gcid': expected bible, gcide or bible+gcide\" '$T/err.txt'" "--corpus gcid: $(cat "$T/err.txt")"
"$NB" prepare --quiet --corpus gcide --input "$T/small.txt" --out "$T/g4" > /dev/null 2> "$T/err.txt"; rc=$?
check "[ $rc -eq 2 ]" "--corpus with --input: exit status $rc, expected 2"
check "grep -q -- '--corpus gcide and --input: give one of them' '$T/err.txt'" "--corpus with --input: $(cat "$T/err.txt")"
check "grep -q -- '--corpus NAME' '$T/help.txt'" "--help lists --corpus"

# --- JSON Lines, gzip and zstd: the same documents give the same shards whatever the container
python3 - "$T/small.txt" "$T/small.jsonl" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
# the paragraphs as prepare splits them: runs of non-blank lines, each line with its newline
docs, cur = [], []
for line in text.splitlines(keepends=True):
    if line.strip(" \t\r\n\f\v") == "":
        if cur: docs.append("".join(cur)); cur = []
    else:
        cur.append(line)
if cur: docs.append("".join(cur))
with open(sys.argv[2], "w") as f:
    for i, d in enumerate(docs):
        f.write(json.dumps({"id": i, "text": d}) + "\n")
        if i == 3: f.write("\n")                              # a blank line: skipped
        if i == 5: f.write(json.dumps({"text": ""}) + "\n")   # an empty document: skipped
PY
gzip -c "$T/small.jsonl" > "$T/small.jsonl.gz"
cat "$T/small.jsonl.gz" "$T/small.jsonl.gz" > "$T/twice.jsonl.gz"    # two gzip members
if command -v zstd > /dev/null; then zstd -q -c "$T/small.jsonl" > "$T/small.jsonl.zst"; fi
gzip -c "$T/small.txt" > "$T/small.txt.gz"
"$NB" prepare --quiet --input "$T/small.txt" --vocab 300 --out "$T/c_ref" --name small > /dev/null 2>&1 || fail "the reference"
for f in small.jsonl small.jsonl.gz small.jsonl.zst small.txt.gz; do
  [ -e "$T/$f" ] || { fail "$f: zstd is not installed (bash scripts/setup.sh --test)"; continue; }
  "$NB" prepare --quiet --input "$T/$f" --vocab 300 --out "$T/c_$f" --name small > /dev/null 2> "$T/err.txt" ||
    { fail "$f: $(cat "$T/err.txt")"; continue; }
  check "cmp -s '$T/c_ref/small_train_000000.bin' '$T/c_$f/small_train_000000.bin' && cmp -s '$T/c_ref/small_val_000000.bin' '$T/c_$f/small_val_000000.bin'" \
        "$f: its shards differ from the plain text's"
done
check "grep -q '\"format\": \"jsonl\", \"compression\": \"zstd\"' '$T/c_small.jsonl.zst/manifest.json'" "manifest: format and compression"
check "grep -q '\"text_field\": \"text\", \"skipped_lines\": 0' '$T/c_small.jsonl/manifest.json'" "manifest: text field and skipped lines"
"$NB" prepare --quiet --input "$T/twice.jsonl.gz" --vocab 300 --out "$T/c_twice" > /dev/null 2>&1
check "grep -q '\"documents\": 80,' '$T/c_twice/manifest.json'" "two gzip members: both read (80 documents)"
cp "$T/small.jsonl" "$T/small.data"
"$NB" prepare --quiet --input "$T/small.data" --format jsonl --vocab 300 --out "$T/c_data" --name small > /dev/null 2>&1
check "cmp -s '$T/c_ref/small_train_000000.bin' '$T/c_data/small_train_000000.bin'" "--format jsonl on any name"
sed 's/"text"/"body"/' "$T/small.jsonl" > "$T/body.jsonl"
"$NB" prepare --quiet --input "$T/body.jsonl" --text-field body --vocab 300 --out "$T/c_body" --name small > /dev/null 2>&1
check "cmp -s '$T/c_ref/small_train_000000.bin' '$T/c_body/small_train_000000.bin'" "--text-field body"

# --- bad JSON Lines and compressed files: an error naming the file (and line), nothing written
{ head -n 7 "$T/small.jsonl"; echo '{"text": "unterminated'; echo '[1, 2]'; echo '{"id": 1}'; echo '{"text": 5}'
  tail -n +8 "$T/small.jsonl"; } > "$T/bad.jsonl"
expect_error "a line that is not JSON" "bad.jsonl, line 8: not JSON" --input "$T/bad.jsonl" --vocab 300 --out "$T/b1"
check "[ ! -e '$T/b1' ]" "a bad line left an output folder"
expect_error "a line without the field" "line 1: no member \\\"body\\\" (--text-field)" --input "$T/small.jsonl" --text-field body --vocab 300 --out "$T/b2"
"$NB" prepare --quiet --input "$T/bad.jsonl" --skip-bad-lines --vocab 300 --out "$T/b3" --name small > /dev/null 2> "$T/err.txt"
check "grep -q '\"skipped_lines\": 4' '$T/b3/manifest.json'" "--skip-bad-lines: 4 lines skipped and counted: $(cat "$T/err.txt")"
check "cmp -s '$T/c_ref/small_train_000000.bin' '$T/b3/small_train_000000.bin'" "--skip-bad-lines: the good lines' shards"
head -c 200 "$T/small.jsonl.gz" > "$T/cut.jsonl.gz"
expect_error "a truncated gzip file" "cut.jsonl.gz: the gzip stream is truncated" --input "$T/cut.jsonl.gz" --vocab 300 --out "$T/b4"
if [ -e "$T/small.jsonl.zst" ]; then
  head -c 200 "$T/small.jsonl.zst" > "$T/cut.jsonl.zst"
  expect_error "a truncated zstd file" "cut.jsonl.zst: the zstd stream is truncated" --input "$T/cut.jsonl.zst" --vocab 300 --out "$T/b5"
fi
printf '\x1f\x8bnot a gzip stream at all' > "$T/junk.gz"
expect_error "a corrupt gzip file" "junk.gz: not a valid gzip stream" --input "$T/junk.gz" --vocab 300 --out "$T/b6"
check "[ ! -e '$T/b4' ] && [ ! -e '$T/b6' ]" "a bad compressed file left an output folder"
"$NB" prepare --quiet --input "$T/small.jsonl" --format xml --out "$T/b7" > /dev/null 2> "$T/err.txt"; rc=$?
check "[ $rc -eq 2 ] && grep -q -- '--format xml: expected text, jsonl or auto' '$T/err.txt'" "--format xml: exit $rc: $(cat "$T/err.txt")"
check "grep -q -- '--text-field NAME' '$T/help.txt'" "--help lists --text-field"

# --- a special token written in the text: its id by default (as Hugging Face's tokenizers), text on request
{ cat "$T/small.txt"; printf 'The end of one story.<|endoftext|>The start of the next.\n'; } > "$T/eot.txt"
eots() {  # DIR: how many end-of-text ids its shards hold, and its documents
  python3 - "$1" <<'PY'
import glob, json, struct, sys
d = sys.argv[1]; m = json.load(open(d + "/manifest.json"))
eot, n = m["tokenizer"]["eot_id"], 0
for f in glob.glob(d + "/*.bin"):
    b = open(f, "rb").read(); h = struct.unpack("<256i", b[:1024])
    toks = struct.unpack("<%d%s" % (h[2], "H" if h[1] == 1 else "I"), b[1024:])
    n += sum(1 for t in toks if t == eot)
print(n, m["split"]["train_documents"] + m["split"]["val_documents"], m["tokenizer"]["special_tokens_in_text"])
PY
}
"$NB" prepare --quiet --input "$T/eot.txt" --vocab 300 --out "$T/e_id" > /dev/null 2>&1
"$NB" prepare --quiet --input "$T/eot.txt" --vocab 300 --out "$T/e_text" --special-tokens text > /dev/null 2>&1
read -r n_id docs_id mode_id <<< "$(eots "$T/e_id")"
read -r n_text docs_text mode_text <<< "$(eots "$T/e_text")"
check "[ '$n_id' = $((docs_id + 1)) ] && [ '$mode_id' = id ]" "default: one end-of-text id per document and one in the text ($n_id for $docs_id documents, $mode_id)"
check "[ '$n_text' = '$docs_text' ] && [ '$mode_text' = text ]" "--special-tokens text: one per document only ($n_text for $docs_text, $mode_text)"
"$NB" prepare --quiet --input "$T/eot.txt" --special-tokens none --out "$T/e_bad" > /dev/null 2> "$T/err.txt"; rc=$?
check "[ $rc -eq 2 ] && grep -q -- '--special-tokens none: expected id or text' '$T/err.txt'" "--special-tokens none: exit $rc"

# --- shards whose ids exceed the model's vocabulary: the error names the vocabulary they need
"$NB" train --data "$T/out" --set vocab_size=100 --model tiny --steps 1 --quiet > /dev/null 2> "$T/err.txt"
check "grep -q 'this shard needs a vocabulary of at least' '$T/err.txt' && grep -q 'vocab_size=N' '$T/err.txt'" \
      "a vocabulary too small for the shards: $(cat "$T/err.txt")"

echo "cli_prepare: $passes passed, $fails failed"
[ "$fails" -eq 0 ] && [ "$passes" -gt 0 ]
