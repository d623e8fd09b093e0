#!/usr/bin/env python3
"""Hugging Face's tokenizers package as the reference for special tokens written in the text.

tokenizers' encode finds an added special token's content in the text (leftmost, longest first) and
gives its id, whatever the pre-tokenizer would make of those characters; nobubble's encoder does the
same unless told to read them as plain text. This script loads the committed
tests/fixtures/tokenizers/gpt2.json and llama3.json (hf_tokenizers.py made them) and writes, beside
them, gpt2_special.ids and llama3_special.ids: for each test string one line "HEX<TAB>ID ID ...", HEX
the string's UTF-8 bytes, the ids of encode(text, add_special_tokens=False); and *_special_text.ids, the
same with encode_special_tokens set (special tokens read as plain text). tests/test_tokenizer_hf.c
checks nobubble's ids against them.

Usage: python3 -m venv /tmp/venv && /tmp/venv/bin/pip install tokenizers
       /tmp/venv/bin/python tools/reference/hf_special_tokens.py   (written with tokenizers 0.23.3)
"""
import os

from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
DIR = os.path.join(HERE, "..", "..", "tests", "fixtures", "tokenizers")

TESTS = [
    "<|endoftext|>",
    "Hello<|endoftext|>world",
    "In the beginning <|endoftext|> God created",
    "<|endoftext|><|endoftext|>",
    "<|endoftext|",
    "<|endoftext|>>",
    "<<|endoftext|>",
    "the end.\n<|endoftext|>\nThe start",
    "x<|begin_of_text|>y<|end_of_text|>z",
    "<|end_of_text|><|begin_of_text|>",
    "<|begin_of_text|",
    "no special token here at all",
    "  <|end_of_text|>  ",
    "Café <|endoftext|> naïve <|end_of_text|>",
]

for name in ("gpt2", "llama3"):
    tok = Tokenizer.from_file(os.path.join(DIR, name + ".json"))
    # as tokenizers encodes by default, then with encode_special_tokens (special tokens as plain text:
    # nb_tokenizer_special_as_text, prepare --special-tokens text)
    for suffix, as_text in (("_special.ids", False), ("_special_text.ids", True)):
        tok.encode_special_tokens = as_text
        with open(os.path.join(DIR, name + suffix), "w") as f:
            for text in TESTS:
                ids = tok.encode(text, add_special_tokens=False).ids
                f.write(text.encode("utf-8").hex() + "\t" + " ".join(map(str, ids)) + "\n")
    print(name, "written")
