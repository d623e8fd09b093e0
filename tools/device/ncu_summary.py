#!/usr/bin/env python3
"""Each kernel's share of the GPU's time, from `ncu --metrics gpu__time_duration.sum --print-summary per-kernel`
(tools/device/check.sh's profile part): kernels of the same name are added over their launch shapes, and the
table is sorted by time. ncu runs the kernels one at a time, so the shares are of the kernels' own time, not
of the step's wall-clock time (which also holds launch gaps and host work).

    python3 tools/device/ncu_summary.py ncu.txt [TOP]
"""
import re
import sys

UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
HEADER = re.compile(r"^  (\S.*) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\), .*Invocations (\d+)\s*$")


def kernel_name(name):
    """The kernel's name without "void " and without its trailing argument list, which is cut at the "(" that
    balances the last ")" (a name may hold parentheses of its own: "(anonymous namespace)::k")."""
    name = re.sub(r"^void ", "", name.strip())
    if name.endswith(")"):
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                return name[:i].rstrip() or name
    return name


def kernel_times(lines):
    """{kernel name: total microseconds} over the summary's blocks."""
    times, current = {}, None
    for line in lines:
        m = HEADER.match(line)
        if m:
            current = (kernel_name(m.group(1)), int(m.group(2)))
            continue
        if current and "gpu__time_duration.sum" in line:
            parts = line.split()
            try:
                unit, average = parts[1], float(parts[4].replace(",", ""))
            except (IndexError, ValueError):
                sys.exit(f"ncu_summary.py: expected 'gpu__time_duration.sum UNIT MIN MAX AVERAGE', got: {line.strip()}")
            if unit not in UNITS:
                sys.exit(f"ncu_summary.py: unknown time unit '{unit}' in: {line.strip()}")
            times[current[0]] = times.get(current[0], 0.0) + average * UNITS[unit] * current[1]
            current = None
    return times


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: ncu_summary.py NCU_OUTPUT [TOP]")
    top = int(sys.argv[2]) if len(sys.argv) == 3 else 25
    with open(sys.argv[1], errors="replace") as f:
        times = kernel_times(f.read().split("\n"))
    if not times:
        sys.exit(f"ncu_summary.py: no per-kernel summary in {sys.argv[1]} (run ncu with --print-summary per-kernel)")
    total = sum(times.values())
    print(f"{'ms':>9} {'share':>6}  kernel")
    for name, t in sorted(times.items(), key=lambda x: -x[1])[:top]:
        print(f"{t / 1e3:9.2f} {100 * t / total:5.1f}%  {name}")
    print(f"{total / 1e3:9.2f} 100.0%  all {len(times)} kernels")


if __name__ == "__main__":
    main()
