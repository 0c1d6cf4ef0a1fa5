#!/usr/bin/env python3
"""Reads `deepinfer bench --timeline` JSON: each decode row's step span, busy and idle time and its
largest idle gaps; then, for the row with the launch list, every launch with the GPU idle time
just before it (no kernel running), and the idle time summed per kernel name that follows it —
where a replayed step waits between dependent launches.

Then each kernel's exposed time: under programmatic dependent launch a kernel starts early and
waits in its prologue, so its duration overstates what it costs the step; each stretch of the
step is charged to the kernel that ends it instead (launches in end order: end - max(start,
previous end)), summed per kernel name and grid size — the step's critical-path share per kernel.

Usage: python3 tools/bench/timeline_report.py bench.json [--launches N] [--by-name N] [--exposed N]
"""
import argparse
import json
import re
import sys


def idle_before(launches):
    """Idle microseconds before each launch: its start minus the latest end of those before it."""
    out, covered = [], None
    for k in sorted(launches, key=lambda k: k["start_us"]):
        start, end = k["start_us"], k["start_us"] + k["us"]
        out.append((k, 0.0 if covered is None else max(0.0, start - covered)))
        covered = end if covered is None else max(covered, end)
    return out


def kernel_label(name):
    """A kernel's name with its template arguments, without namespaces and parameter list.

    >>> kernel_label("void deepinfer::kernels::lean_gemv_kernel<(deepinfer::kernels::WeightFmt)2, 4, true, 4>"
    ...              "(deepinfer::kernels::GemmParams)")
    'lean_gemv_kernel<(WeightFmt)2, 4, true, 4>'
    >>> kernel_label("deepinfer::kernels::moe_route_kernel(float const*, int)")
    'moe_route_kernel'
    """
    name = name.replace("void ", "").replace("deepinfer::kernels::", "")
    m = re.match(r"^([^(<]*<.*?>)\(", name)
    return (m.group(1) if m else name.split("(")[0])[:80]


def exposed_time(launches):
    """Per launch, the part of the step it ends: launches in end order, each charged end - max(start,
    previous end); the charges sum to the step's busy time.

    >>> ks = [{"start_us": 0.0, "us": 10.0}, {"start_us": 2.0, "us": 12.0}, {"start_us": 20.0, "us": 5.0}]
    >>> [round(e, 1) for _, e in exposed_time(ks)]
    [10.0, 4.0, 5.0]
    """
    out, covered = [], 0.0
    for k in sorted(launches, key=lambda k: k["start_us"] + k["us"]):
        end = k["start_us"] + k["us"]
        out.append((k, max(0.0, end - max(covered, k["start_us"]))))
        covered = max(covered, end)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--launches", type=int, default=200, help="launches to list (0: none)")
    ap.add_argument("--by-name", type=int, default=20, help="kernel names to list by idle time before them")
    ap.add_argument("--exposed", type=int, default=20, help="kernels (name, CTAs) to list by exposed time")
    a = ap.parse_args()
    d = json.load(open(a.json))
    if "timeline_error" in d:
        print(f"timeline: {d['timeline_error']}")
    listed = None
    for r in d.get("rows", []):
        t = r.get("timeline")
        if t is None:
            if "timeline_error" in r:
                print(f"{r['kind']} b{r['batch']}@{r['context']}: {r['timeline_error']}")
            continue
        idle_pct = 100 * t["idle_us"] / max(t["span_us"], 1e-9)
        print(f"{r['kind']} b{r['batch']}@{r['context']}: {t['kernels']} kernels, span {t['span_us']:.1f} us, "
              f"busy {t['busy_us']:.1f}, idle {t['idle_us']:.1f} ({idle_pct:.1f}%), "
              f"kernel time summed {t['kernel_sum_us']:.1f}")
        for g in t["largest_gaps"][:5]:
            print(f"    gap {g['us']:7.2f} us at {g['at_us']:8.1f}: {g['before'][:50]} -> {g['after'][:50]}")
        if "launches" in t and listed is None:
            listed = (r, t["launches"])
    if listed is None:
        return
    r, launches = listed
    rows = idle_before(launches)
    print(f"\nlaunches of b{r['batch']}@{r['context']} (start, duration, idle before, stream, CTAs):")
    for k, idle in rows[: a.launches]:
        print(f"  {k['start_us']:9.2f} {k['us']:8.2f} {idle:7.2f}  s{k['stream']:<3} {k['ctas']:6d}  {k['name'][:90]}")
    by = {}
    for k, idle in rows:
        name = k["name"].split("<")[0].split("(")[0].replace("void ", "")
        e = by.setdefault(name, [0, 0.0, 0.0])
        e[0] += 1
        e[1] += k["us"]
        e[2] += idle
    print("\nby kernel (launches, time, idle before them):")
    for name, (n, us, idle) in sorted(by.items(), key=lambda x: -x[1][2])[: a.by_name]:
        print(f"  {n:4d}x {us:9.1f} us  idle {idle:8.1f} us  {name}")
    ex = {}
    for k, us in exposed_time(launches):
        key = (kernel_label(k["name"]), k["ctas"])
        e = ex.setdefault(key, [0, 0.0])
        e[0] += 1
        e[1] += us
    total = sum(us for _, us in ex.values())
    print(f"\nexposed time by kernel and CTAs ({total:.1f} us; each stretch charged to the kernel ending it):")
    for (name, ctas), (n, us) in sorted(ex.items(), key=lambda x: -x[1][1])[: a.exposed]:
        print(f"  {n:4d}x {us:9.1f} us {100 * us / max(total, 1e-9):5.1f}%  {ctas:6d} CTAs  {name}")


if __name__ == "__main__":
    sys.exit(main())
