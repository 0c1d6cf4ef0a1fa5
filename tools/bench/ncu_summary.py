#!/usr/bin/env python3
"""Sums an `ncu --csv --metrics gpu__time_duration.sum` log by kernel name (device-side time per
kernel, no launch or synchronisation overhead): the ground truth behind `deepinfer bench`'s per-op
breakdown. Usage: ncu_summary.py LOG.csv [--skip-name SUBSTR ...] [--top N]"""
import argparse
import collections
import csv
import io
import sys


def read_ncu_rows(path):
    """The rows of the CSV table in an `ncu --csv` log (ncu prints its own messages before it)."""
    text = open(path, errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        sys.exit("no ncu CSV table in " + path)
    return csv.DictReader(io.StringIO(text[start:]))


def kernel_name(full):
    """A kernel's name without its parameter list: the last top-level "(...)" is cut, so template
    arguments such as "(int)-1" stay ("void k<2, (int)-1>(GemmParams)" -> "void k<2, (int)-1>")."""
    full = full.strip()
    if not full.endswith(")"):
        return full
    depth = 0
    for i in range(len(full) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(full[i], 0)
        if depth == 0:
            return full[:i].strip()
    return full


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--skip-name", action="append", default=[])
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    rows = read_ncu_rows(a.log)
    total = collections.defaultdict(float)
    calls = collections.Counter()
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = kernel_name(r["Kernel Name"])
        if any(s in name for s in a.skip_name):
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "nsecond")
        v *= {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}.get(unit, 1e-3)
        total[name] += v
        calls[name] += 1
    grand = sum(total.values())
    print(f"total {grand:.1f} us over {sum(calls.values())} kernels")
    for name, us in sorted(total.items(), key=lambda x: -x[1])[: a.top]:
        print(f"{us:10.1f} us {calls[name]:5d} x {us / calls[name]:8.2f} us  {name[:110]}")


if __name__ == "__main__":
    main()
