#!/usr/bin/env python3
"""One A/B call's runs as a bench/results record entry: reads the ab_<i>.json files that
tools/bench/ab_on_device.sh wrote (in the order of its CONFIGS) and prints
{gpu, commit, command, configs, cells, summary}, cells keyed d<batch> / p<batch>@<context> with
tokens/s — the entries of the ab_*_s<session>.json records ({what, date, runs: [...]}).
Usage: ab_record.py FOLDER 'CONFIG|CONFIG|...' [--commit SHA] [--command CMD] [--summary TEXT]"""
import argparse
import json
import os


def cells_of(folder, n):
    cells, gpu = [], None
    for i in range(n):
        path = os.path.join(folder, f"ab_{i}.json")
        if not os.path.exists(path):  # a configuration that failed or ran out of time
            cells.append(None)
            continue
        d = json.load(open(path))
        gpu = d["gpu"]["name"] if isinstance(d["gpu"], dict) else d["gpu"]
        cell = {}
        for r in d["rows"]:
            key = f"d{r['batch']}" if r["kind"] == "decode" else f"p{r['batch']}@{r['context']}"
            cell[key] = round(r["tokens_per_s"], 1)
        cells.append(cell)
    return gpu, cells


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("configs", help="the CONFIGS string the call ran ('|'-separated)")
    ap.add_argument("--commit", default="")
    ap.add_argument("--command", default="")
    ap.add_argument("--summary", default="")
    a = ap.parse_args()
    configs = a.configs.split("|")
    gpu, cells = cells_of(a.folder, len(configs))
    print(json.dumps({"gpu": gpu, "commit": a.commit, "command": a.command, "configs": configs,
                      "cells": cells, "summary": a.summary}, indent=1))


if __name__ == "__main__":
    main()
