#!/usr/bin/env python3
"""Hugging Face's tokenizers package as the reference for nobubble's reader of tokenizer.json.

Builds two small byte-level BPE tokenizers with the exact pre-tokenizer settings of GPT-2 (ByteLevel,
add_prefix_space false, GPT-2's regex) and Llama 3 (Split with Llama 3's regex, behavior Isolated, then
ByteLevel with use_regex false; ignore_merges true, as Llama 3's file has), trains each on the
committed text tests/fixtures/tokenizers/train.txt (non-ASCII in several scripts, digits,
contractions, whitespace runs, CRLF), and writes into tests/fixtures/tokenizers/:

  gpt2.json, llama3.json    the tokenizer.json files, as tokenizers saves them
  gpt2.ids, llama3.ids      for each test string: one line "HEX<TAB>ID ID ...", HEX the string's
                            UTF-8 bytes, the ids tokenizers' encode gives (add_special_tokens=False)

tests/test_tokenizer.c checks that nobubble's encoder gives exactly these ids and that its decoder
gives back the text. The special tokens sit at the start (GPT-2's <|endoftext|> at id 0, Llama 3's
two at 0 and 1), so the ids are not in nobubble's own order.

Usage: python3 -m venv /tmp/venv && /tmp/venv/bin/pip install tokenizers
       /tmp/venv/bin/python tools/reference/hf_tokenizers.py   (written with tokenizers 0.23.3)
"""
import os

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "fixtures", "tokenizers")

GPT2_REGEX = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")

TESTS = [
    "Hello world",
    "In the beginning God created the heaven and the earth.",
    "It's 2024; they're here, we've seen it, I'm sure you'll agree they'd say so.",
    "DON'T SHOUT, IT'S LOUD; We'LL see",
    "Numbers: 1 12 123 1234 12345 3.14159 1e10 42nd",
    "Café naïve Zürich Straße crème brûlée",
    "Εν αρχή ην ο λόγος. В начале было Слово.",
    "日本語のテキスト 東京都 2024年 你好，世界！ 안녕하세요",
    "Emoji 😀 🎉 👍🏽 — “quotes” … ™",
    "   leading spaces, trailing spaces   ",
    "tabs\t\tand\tnewlines\n\n\nand CRLF\r\nend",
    "a  b   c    d     e",
    "x1y2z3 abc123def 'quoted' \"double\" (paren)",
    "!!! ??? ... --- @@@ \\\\ ||| ;;; :::",
    "def f(x): return x**2 + 3*x - 1  # comment\n    if (a != b) { }",
    "words never seen: zyzzyva quixotic xylophone 987654321",
    "",
    " ",
    "\n",
    "'s 're 've 'll 'd 'm 't",
    "Unicode spaces: no\u00a0break\u3000ideographic\u2003em \u00a0\u00a0 twice\u2028line",
    "digits \u0661\u0662\u0663 \u00b2 \u2163 and x\u00a0's",
]


def build(kind):
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if kind == "gpt2":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        special = ["<|endoftext|>"]
    else:
        tok = Tokenizer(models.BPE(ignore_merges=True))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
        special = ["<|begin_of_text|>", "<|end_of_text|>"]
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, min_frequency=2, special_tokens=special, initial_alphabet=alphabet,
                                  show_progress=False)
    tok.train([os.path.join(OUT, "train.txt")], trainer)
    if kind == "llama3":  # as Llama 3's file: the begin-of-text token before every encoding
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                           special_tokens=[("<|begin_of_text|>", bos)])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def main():
    for kind in ("gpt2", "llama3"):
        tok = build(kind)
        tok.save(os.path.join(OUT, kind + ".json"))
        with open(os.path.join(OUT, kind + ".ids"), "w") as f:
            for s in TESTS:
                ids = tok.encode(s, add_special_tokens=False).ids
                assert tok.decode(ids) == s, (kind, s)
                f.write("%s\t%s\n" % (s.encode("utf-8").hex(), " ".join(map(str, ids))))
        print("%s: %d tokens, %d test strings" % (kind, tok.get_vocab_size(), len(TESTS)))


if __name__ == "__main__":
    main()
