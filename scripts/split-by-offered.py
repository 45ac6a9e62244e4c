#!/usr/bin/env python3
"""Medians of a lab run's results split by the generator's offered load.

On a shared host the generator itself is sometimes slowed (it offers far
less in some runs than in others, for every DUT alike); a median over all
runs then mixes the two by chance. Usage:
    scripts/split-by-offered.py lab-results/RUN/results.json [--at MPPS] [--baseline DUT]
"""
import argparse
import json
import statistics

p = argparse.ArgumentParser()
p.add_argument("results")
p.add_argument("--at", type=float, default=6.0, help="offered Mpps that splits the runs")
p.add_argument("--baseline", default="linerate")
a = p.parse_args()
runs = json.load(open(a.results))["runs"]
for name, keep in [(f">= {a.at} Mpps offered", lambda o: o >= a.at),
                   (f"< {a.at} Mpps offered", lambda o: o < a.at)]:
    by = {}
    for r in runs:
        if keep(r["offered_pps"] / 1e6):
            by.setdefault(f'{r["dut"]} {r["profile"]}', []).append(r["value_pps"] / 1e6)
    print(name)
    base = [v for k, vs in by.items() if k.split()[0] == a.baseline for v in vs]
    for k, vs in by.items():
        m = statistics.median(vs)
        ratio = f"{m / statistics.median(base):.2f}x" if base else "-"
        print(f"  {k:40} runs {len(vs):2}  median {m:.3f} Mpps  {ratio}")
