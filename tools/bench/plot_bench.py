#!/usr/bin/env python3
"""Plots a `deepinfer bench` JSON: decode tokens/s vs batch per context (with the baseline rows),
and roofline shares. Usage: plot_bench.py bench.json out.svg (needs matplotlib)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    data = json.load(open(sys.argv[1]))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    rows = [r for r in data["rows"] if r["kind"] == "decode" and r.get("tokens_per_s") is not None]
    for ctx in sorted({r["context"] for r in rows}):
        rs = sorted((r for r in rows if r["context"] == ctx), key=lambda r: r["batch"])
        ax1.plot([r["batch"] for r in rs], [r["tokens_per_s"] for r in rs], "o-", label=f"deepinfer ctx {ctx}")
        ax2.plot([r["batch"] for r in rs], [r["hbm_roofline_pct"] for r in rs], "o-", label=f"HBM roofline % ctx {ctx}")
        ax2.plot([r["batch"] for r in rs], [r["tensor_peak_pct"] for r in rs], "x--", label=f"FP8 peak % ctx {ctx}")
    base = [r for r in data.get("baseline", {}).get("rows", []) if r.get("kind", "decode") == "decode"]
    for ctx in sorted({r["context"] for r in base if r.get("tokens_per_s") is not None}):
        rs = sorted((r for r in base if r["context"] == ctx and r.get("tokens_per_s") is not None), key=lambda r: r["batch"])
        ax1.plot([r["batch"] for r in rs], [r["tokens_per_s"] for r in rs], "s:", label=f"transformers ctx {ctx}")
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    ax1.set_yscale("log")
    ax1.set_ylabel("decode tokens/s")
    ax2.set_ylabel("% of ceiling")
    m = data.get("model", {})
    fig.suptitle(f"{data['gpu'].get('name')} — V4-Flash widths, {m.get('layers')} layers, commit {data.get('commit', '')[:10]}")
    fig.tight_layout()
    fig.savefig(sys.argv[2])


if __name__ == "__main__":
    main()
