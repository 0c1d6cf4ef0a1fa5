#!/usr/bin/env python3
"""Turns the output of tools/device/run_cuda_suite.sh into a bench/results validation record.
Usage: suite_to_json.py SUITE.txt --commit SHA --what TEXT [--date YYYY-MM-DD] [--gpu NAME]
                        [--command TEXT] > record.json
A run that started (gtest's "Running N tests") but never finished (a time limit cut it) makes the
result "INCOMPLETE", never "all passed"."""
import argparse
import datetime
import json
import re


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("suite")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--what", required=True)
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--gpu", default="NVIDIA H200")
    ap.add_argument("--command", default="bash tools/device/run_cuda_suite.sh")
    a = ap.parse_args()
    text = open(a.suite, errors="replace").read()
    passed = [{"test": t, "ms": int(ms)} for t, ms in re.findall(r"\[       OK \] (\S+) \((\d+) ms\)", text)]
    failed = sorted(set(re.findall(r"\[  FAILED  \] (\S+\.\S+)", text)))
    started = re.findall(r"\[==========\] Running (\d+) tests? from", text)
    runs = re.findall(r"\[==========\] (\d+) tests? from \d+ test suites? ran", text)
    ok_runs = re.findall(r"\[  PASSED  \] (\d+) tests?", text)
    record = {
        "what": a.what,
        "gpu": a.gpu,
        "commit": a.commit,
        "date": a.date,
        "command": a.command,
        "result": ("FAILED" if failed or len(ok_runs) != len(runs) or not runs
                   else "INCOMPLETE" if len(started) > len(runs) else "all passed")
        + f" (runs: {', '.join(f'{p}/{r}' for p, r in zip(ok_runs + ['0'] * len(runs), runs))}"
        + (f"; {len(started) - len(runs)} run(s) started and not finished" if len(started) > len(runs) else "") + ")",
        "golden": re.findall(r"CUDA .* vs transformers golden: .*", text),
        "passed": passed,
        "failed": failed,
    }
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
