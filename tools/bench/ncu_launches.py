#!/usr/bin/env python3
"""Per-launch table of an `ncu --csv` log taken with the metrics gpu__time_duration.sum,
dram__bytes_read.sum and launch__grid_size (tools/bench/profile_on_device.sh launches): one line per
launch in launch order (the last --last launches: one measured forward), with its DRAM read
bandwidth, so latency-bound launches (short, far below the copy bandwidth) stand out.
With --by-name: those launches' totals per kernel (time, calls, bytes), largest first — two
binaries' profiles side by side. With --first-grid-at-least N: only the 0-based index of the first
launch whose grid has >= N CTAs (exit 1 if none): which launch of a kernel is a prefill-sized one
(profile_on_device.sh source with GRID_MIN).
Usage: ncu_launches.py LOG.csv [--last N] [--by-name | --first-grid-at-least N]"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ncu_summary import kernel_name, read_ncu_rows  # noqa: E402

SCALE = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6, "ns": 1e-3, "us": 1.0, "ms": 1e3,
         "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9, "": 1.0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--last", type=int, default=0)
    ap.add_argument("--by-name", action="store_true")
    ap.add_argument("--first-grid-at-least", type=int, default=0)
    a = ap.parse_args()
    launches = collections.OrderedDict()
    for r in read_ncu_rows(a.log):
        rec = launches.setdefault(r["ID"], {"name": kernel_name(r["Kernel Name"])})
        v = float(r["Metric Value"].replace(",", "")) * SCALE.get(r.get("Metric Unit", ""), 1.0)
        rec[r["Metric Name"]] = v
    rows = list(launches.values())[-a.last:] if a.last else list(launches.values())
    if a.first_grid_at_least:
        for i, rec in enumerate(rows):
            if rec.get("launch__grid_size", 0) >= a.first_grid_at_least:
                print(i)
                return
        sys.exit(f"no launch with a grid of >= {a.first_grid_at_least} CTAs in {a.log}")
    if a.by_name:
        by = collections.defaultdict(lambda: [0.0, 0, 0.0])
        for rec in rows:
            e = by[rec["name"]]
            e[0] += rec.get("gpu__time_duration.sum", 0.0)
            e[1] += 1
            e[2] += rec.get("dram__bytes_read.sum", 0.0)
        for name, (us, n, b) in sorted(by.items(), key=lambda kv: -kv[1][0]):
            print(f"{us:10.2f} us {n:5d} calls {b / 1e6:9.2f} MB  {name[:100]}")
        print(f"total {sum(e[0] for e in by.values()):.1f} us over {len(rows)} launches")
        return
    tot_us = tot_b = 0.0
    for rec in rows:
        us = rec.get("gpu__time_duration.sum", 0.0)
        b = rec.get("dram__bytes_read.sum", 0.0)
        tot_us += us
        tot_b += b
        gbs = b / (us * 1e3) if us > 0 else 0.0
        print(f"{us:9.2f} us {b / 1e6:9.2f} MB {gbs:7.0f} GB/s grid {int(rec.get('launch__grid_size', 0)):6d}  {rec['name'][:110]}")
    print(f"total {tot_us:.1f} us, {tot_b / 1e9:.3f} GB read, {tot_b / (tot_us * 1e3) if tot_us else 0:.0f} GB/s over {len(rows)} launches")


if __name__ == "__main__":
    main()
