#!/usr/bin/env python3
"""Summarises an ncu source-level SASS export (`ncu --import REP --page source --csv --print-source
sass > FILE.csv`, from a profile with `--section SourceCounters`): instructions per warp, the opcode
mix, the warp-stall reasons, the hottest instructions by stall samples and the largest straight-line
regions (consecutive instructions executed the same number of times: a loop body, a prologue, an
unrolled step — their share of all instructions shows where a kernel's issue slots go). What the
CUDA tuning records quote for a kernel ("~159 instructions per window, 'wait' stalls 33%", "28% of
the instructions quantise the staged row") comes from this.
Usage: ncu_sass_hotspots.py FILE.csv [--warps N] [--top K] [--regions R]"""
import argparse
import collections
import csv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--warps", type=int, default=0, help="warps launched (grid x block / 32), for per-warp counts")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--regions", type=int, default=20, help="largest straight-line regions to list")
    a = ap.parse_args()
    rows = list(csv.reader(open(a.csv, errors="replace")))
    start = next((i for i, r in enumerate(rows) if r and r[0] == "Address"), None)
    if start is None:
        raise SystemExit("no SASS table (Address column) in " + a.csv)
    hdr, data = rows[start], rows[start + 1:]
    col = {h: i for i, h in enumerate(hdr)}
    execd, samples, src = col["Instructions Executed"], col["Warp Stall Sampling (All Samples)"], col["Source"]
    stall_cols = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]

    def num(r, i):
        v = r[i].replace(",", "") if i < len(r) else ""
        return int(v) if v.isdigit() else 0

    total = sum(num(r, execd) for r in data)
    total_samples = sum(num(r, samples) for r in data) or 1
    print(f"instructions executed: {total}" + (f" ({total / a.warps:.0f} per warp)" if a.warps else ""))
    ops = collections.Counter()
    for r in data:
        words = r[src].split()
        if words:
            op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
            ops[op.split(".")[0]] += num(r, execd)
    print("opcode mix: " + ", ".join(f"{o} {100 * c / max(total, 1):.1f}%" for o, c in ops.most_common(12)))
    stalls = collections.Counter({h: sum(num(r, col[h]) for r in data) for h in stall_cols})
    s = sum(stalls.values()) or 1
    print("stall reasons: " + ", ".join(f"{h[6:]} {100 * c / s:.1f}%" for h, c in stalls.most_common(8)))
    print(f"hottest instructions (share of {total_samples} stall samples):")
    for i, r in sorted(enumerate(data), key=lambda x: -num(x[1], samples))[: a.top]:
        print(f"  {i:5d} {100 * num(r, samples) / total_samples:5.1f}%  x{num(r, execd):<9d} {r[src].strip()[:80]}")
    # Regions: runs of consecutive instructions with one execution count, in address order.
    regions = []  # [count, first index, length, stall samples]
    for i, r in enumerate(data):
        n = num(r, execd)
        if regions and regions[-1][0] == n:
            regions[-1][2] += 1
            regions[-1][3] += num(r, samples)
        else:
            regions.append([n, i, 1, num(r, samples)])
    print("largest straight-line regions (instructions executed, in address order):")
    for n, i, length, smp in sorted(sorted(regions, key=lambda g: -g[0] * g[2])[: a.regions], key=lambda g: g[1]):
        print(f"  {i:5d} x{n:<8d} {length:4d} instructions  {100 * n * length / max(total, 1):5.1f}%  "
              f"stalls {100 * smp / total_samples:5.1f}%  first: {data[i][src].strip()[:50]}")


if __name__ == "__main__":
    main()
