#!/usr/bin/env python3
"""Verifies the per-tensor checksums of the safetensors files nobubble writes, with Python's xxhash
package (XXH3, 64-bit, seed 0: `pip install xxhash` or Debian's python3-xxhash) for "xxh3:" values and
tools/reference/nbh64.py for the "nbh64:" values of files written before XXH3, and the header's checksum
("nobubble.header_checksum": XXH3 of the header's canonical form, docs/checkpoints.md) where a file has
one. Independent of the C code.

    python3 tools/reference/checksums.py FILE.safetensors...   # checks every tensor that has a checksum
    python3 tools/reference/checksums.py --vectors              # the XXH3 vectors of tests/test_safetensors.c
    python3 tools/reference/checksums.py --fixtures DIR         # writes the tiny fixtures of
                                                                # tests/fixtures/checksums/ (one per algorithm,
                                                                # and one with the header's checksum)

Exit status 1 when a checksum does not match."""
import json
import os
import struct
import sys

import xxhash

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbh64 import nbh64  # noqa: E402

KEY = "nobubble.checksum:"
HEADER_KEY = "nobubble.header_checksum"
ALGOS = {"xxh3:": lambda b: xxhash.xxh3_64_intdigest(b), "nbh64:": nbh64}


def header_digest(meta, entries):
    """XXH3 of the header's canonical form: each metadata pair but the header's checksum, by key (byte
    order), as b"M" key NUL value NUL; then each tensor, by name, as b"T" name NUL dtype NUL, each
    dimension in decimal followed by ",", NUL, begin NUL end NUL."""
    out = b""
    for key in sorted((k for k in meta if k != HEADER_KEY), key=str.encode):
        out += b"M" + key.encode() + b"\0" + meta[key].encode() + b"\0"
    for name in sorted(entries, key=str.encode):
        e = entries[name]
        begin, end = e["data_offsets"]
        dims = "".join(f"{d}," for d in e["shape"])
        out += b"T" + f"{name}\0{e['dtype']}\0{dims}\0{begin}\0{end}\0".encode()
    return xxhash.xxh3_64_intdigest(out)


def check_file(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    bad = 0
    if HEADER_KEY in meta:
        got, want = "xxh3:%016x" % header_digest(meta, header), meta[HEADER_KEY]
        bad += got != want
        print(f"{path}: the header: {'ok' if got == want else f'MISMATCH: {got}, the header says {want}'}")
    for name, entry in header.items():
        want = meta.get(KEY + name)
        if want is None:
            print(f"{path}: {name}: no checksum")
            continue
        algo = next((a for a in ALGOS if want.startswith(a)), None)
        if algo is None:
            print(f"{path}: {name}: unknown checksum algorithm in '{want}'")
            bad += 1
            continue
        b, e = entry["data_offsets"]
        got = algo + "%016x" % ALGOS[algo](raw[8 + n + b:8 + n + e])
        bad += got != want
        print(f"{path}: {name}: {'ok' if got == want else f'MISMATCH: {got}, the header says {want}'}")
    return bad


def write_fixture(path, algo, tensors, extra=None, header_sum=False):
    """A safetensors file as nobubble lays it out: the checksums in __metadata__ (extra pairs first; the
    header's checksum last where asked), F32 little-endian."""
    meta = {"format": "pt", **(extra or {})}
    entries, data = {}, b""
    for name, values in tensors:
        raw = struct.pack(f"<{len(values)}f", *values)
        meta[KEY + name] = algo + "%016x" % ALGOS[algo](raw)
        entries[name] = {"dtype": "F32", "shape": [len(values)], "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if header_sum:
        meta[HEADER_KEY] = "xxh3:%016x" % header_digest(meta, entries)
    text = json.dumps({"__metadata__": meta, **entries}, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


TENSORS = [("w", [0.5, -1.25, 3.0, 1e-3, -7.5]), ("b", [2.0, -0.0, 0.125])]
# metadata as a checkpoint carries it (a non-ASCII value, written escaped by json.dumps)
EXTRA = {"run.lr": "0.004", "next_step": "120", "note": "caf\u00e9 \"q\""}


def vectors():
    ramp = bytes(range(256))
    for k in (0, 1, 3, 4, 8, 16, 17, 128, 129, 240, 241, 256):
        print(f"the first {k} of the bytes 0, 1, 2, ...: {xxhash.xxh3_64_intdigest(ramp[:k]):016x}")
    print(f"[1.0f, -2.0f]: {xxhash.xxh3_64_intdigest(struct.pack('<2f', 1.0, -2.0)):016x}")
    for name, values in TENSORS:
        print(f"fixture tensor {name}: {xxhash.xxh3_64_intdigest(struct.pack(f'<{len(values)}f', *values)):016x}")
    a = {"format": "pt", KEY + "a": "xxh3:%016x" % xxhash.xxh3_64_intdigest(struct.pack("<2f", 1.0, -2.0))}
    print(f"the header of [1.0f, -2.0f] named a: {header_digest(a, {'a': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}}):016x}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--vectors"]:
        vectors()
    elif sys.argv[1:2] == ["--fixtures"] and len(sys.argv) == 3:
        write_fixture(os.path.join(sys.argv[2], "tiny_xxh3.safetensors"), "xxh3:", TENSORS)
        write_fixture(os.path.join(sys.argv[2], "tiny_nbh64.safetensors"), "nbh64:", TENSORS)
        write_fixture(os.path.join(sys.argv[2], "tiny_header.safetensors"), "xxh3:", TENSORS, EXTRA, True)
    else:
        sys.exit(1 if sum(check_file(p) for p in sys.argv[1:]) else 0)
