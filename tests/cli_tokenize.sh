#!/usr/bin/env bash
# nobubble tokenize: the ids Hugging Face's tokenizers give (tests/fixtures/tokenizers/*_special*.ids, from
# tools/reference/hf_special_tokens.py), special tokens as ids and as text; text from standard input decoded
# back byte for byte; a prepared folder's tokenizer through --data; refusals with their exit codes.
set -u
bin=${1:?usage: cli_tokenize.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
fix=tests/fixtures/tokenizers

# every line of a fixture: HEX<TAB>ids, encoded by tokenize --text
for name in gpt2 llama3; do
  for mode in id text; do
    file=$fix/${name}_special.ids; [ $mode = text ] && file=$fix/${name}_special_text.ids
    bad=0 lines=0
    while IFS=$'\t' read -r hex ids; do
      text=$(python3 -c 'import sys; sys.stdout.buffer.write(bytes.fromhex(sys.argv[1]))' "$hex")
      got=$("$bin" tokenize --tokenizer "$fix/$name.json" --special-tokens $mode --text "$text")
      lines=$((lines + 1))
      [ "$got" = "$ids" ] || { bad=$((bad + 1)); echo "  $name/$mode: '$text': $got, want $ids" >&2; }
    done < "$file"
    [ $lines -eq 14 ] && [ $bad -eq 0 ] && ok || fail "$name, special tokens as $mode: $bad of $lines strings differ from tokenizers'"
  done
done

# standard input, several lines and UTF-8, there and back
printf 'In the beginning God created the heaven and the earth.\n\nCafé — naïve 日本語 <|endoftext|> end\n' > "$work/in.txt"
"$bin" tokenize --tokenizer "$fix/gpt2.json" < "$work/in.txt" > "$work/ids.txt" && ok || fail "encode from standard input"
"$bin" tokenize --tokenizer "$fix/gpt2.json" --decode < "$work/ids.txt" > "$work/back.txt" && ok || fail "decode"
cmp -s "$work/in.txt" "$work/back.txt" && ok || fail "decode(encode(text)) is not the text: $(head -c 200 "$work/back.txt")"
[ "$(wc -l < "$work/ids.txt")" -eq 1 ] && ok || fail "the ids are not on one line"

# a prepared folder's tokenizer
small_corpus "$bin" "$work/data" 10 && ok || fail "prepare"
"$bin" tokenize --data "$work/data" --text "In the beginning" > "$work/d.txt" && [ -s "$work/d.txt" ] && ok || fail "--data DIR"
[ "$("$bin" tokenize --data "$work/data" --decode < "$work/d.txt")" = "In the beginning" ] && ok || fail "--data DIR: back"

expect_error "an id beyond the vocabulary" "id 2, '300': expected a whole number from 0 to 299" \
  bash -c "echo '1 300' | '$bin' tokenize --data '$work/data' --decode"
expect_error "a word among the ids" "id 1, 'abc'" bash -c "echo 'abc' | '$bin' tokenize --data '$work/data' --decode"
"$bin" tokenize --text x > /dev/null 2> "$work/err"; rc=$?
[ $rc -eq 2 ] && grep -q "give --data DIR or --tokenizer FILE" "$work/err" && ok || fail "no tokenizer: exit $rc: $(cat "$work/err")"
"$bin" tokenize --data "$work/data" --special-tokens maybe > /dev/null 2> "$work/err"; rc=$?
[ $rc -eq 2 ] && ok || fail "--special-tokens maybe: exit $rc"
"$bin" tokenize --data "$work/nowhere" --text x > /dev/null 2> "$work/err"; rc=$?
[ $rc -eq 1 ] && grep -q "nowhere/tokenizer.json" "$work/err" && ok || fail "a missing folder: exit $rc: $(cat "$work/err")"
finish
