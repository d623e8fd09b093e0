"""Writer of the NBFX fixture format read by tests/support/fixture.c.

File: magic b"NBFX0001", u32 entry count, then per entry: u32 name length, the name (UTF-8,
no NUL), u32 dtype (0 = f64, 1 = i32), u32 ndim, ndim x u64 dims, the data little-endian.
"""
import struct

import numpy as np


class Writer:
    def __init__(self):
        self.entries = []

    def add(self, name, arr):
        """Floating-point arrays are stored as f64, everything else as i32."""
        arr = np.asarray(arr)
        if arr.dtype.kind == "f":
            self.entries.append((name, 0, arr.astype("<f8")))
        else:
            self.entries.append((name, 1, arr.astype("<i4")))

    def write(self, path):
        with open(path, "wb") as f:
            f.write(b"NBFX0001")
            f.write(struct.pack("<I", len(self.entries)))
            for name, dt, arr in self.entries:
                nb = name.encode()
                f.write(struct.pack("<I", len(nb)))
                f.write(nb)
                f.write(struct.pack("<II", dt, arr.ndim))
                for n in arr.shape:
                    f.write(struct.pack("<Q", n))
                f.write(np.ascontiguousarray(arr).tobytes())
