#!/usr/bin/env python3
"""nbh64, the per-tensor checksum of the safetensors files nobubble writes, written from its
definition in docs/checkpoints.md (plain Python, no dependencies; independent of the C code).

    python3 tools/reference/nbh64.py FILE.safetensors...   # checks every tensor that has a checksum
    python3 tools/reference/nbh64.py --vectors              # the test vectors of tests/test_safetensors.c

Exit status 1 when a checksum does not match."""
import json
import struct
import sys

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
KEY = "nobubble.checksum:"
ALGO = "nbh64:"


def mix64(x):
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def nbh64(data):
    lanes = [(i + 1) * GOLDEN & M64 for i in range(4)]
    padded = bytes(data) + b"\0" * (-len(data) % 8)
    for j in range(len(padded) // 8):
        word = int.from_bytes(padded[8 * j:8 * j + 8], "little")
        lane = ((lanes[j % 4] ^ word) * GOLDEN) & M64
        lanes[j % 4] = lane ^ (lane >> 29)
    h = len(data)
    for lane in lanes:
        h = mix64(h ^ lane)
    return h


def check_file(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    bad = 0
    for name, entry in header.items():
        want = meta.get(KEY + name)
        if want is None:
            print(f"{path}: {name}: no checksum")
            continue
        b, e = entry["data_offsets"]
        got = ALGO + "%016x" % nbh64(raw[8 + n + b:8 + n + e])
        bad += got != want
        print(f"{path}: {name}: {'ok' if got == want else f'MISMATCH: {got}, the header says {want}'}")
    return bad


def vectors():
    ramp = bytes(range(100))
    for k in (0, 1, 7, 8, 31, 32, 33, 100):
        print(f"the first {k} of the bytes 0, 1, 2, ...: {nbh64(ramp[:k]):016x}")
    print(f"[1.0f, -2.0f]: {nbh64(struct.pack('<2f', 1.0, -2.0)):016x}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--vectors"]:
        vectors()
    else:
        sys.exit(1 if sum(check_file(p) for p in sys.argv[1:]) else 0)
