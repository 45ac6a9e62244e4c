#!/usr/bin/env python3
"""A lab run's DUTs compared three ways, for overload runs on a shared host.

On this project's 2-core VM the generator's offered load and the DUT's
forwarding rate move together from run to run (correlation about 0.9: the
host slows both cores at once), and that drift is wider than the
differences the firewall goals ask about. So beside the ratio of medians
(what report.md gives) this prints:

- paired: each round's rate over the baseline's in the same round (the
  DUTs take turns within a round, in an order that changes from round to
  round), median over the rounds with a bootstrap 95% interval of that
  median (4000 resamples of the rounds, seeded), and range;
- adjusted: each DUT's mean rate moved to the median offered load of all
  runs along the slope the runs share (an analysis of covariance: one slope
  fitted within each DUT's runs and pooled), and its ratio to the
  baseline's. This holds only where the DUT does not change what the
  generator offers (refusals at the DUT's ring are counted apart and cost
  the generator little: docs/firewall.md); the script prints
  each DUT's median offered load so that can be checked.

None of these replaces more runs. Usage:
    scripts/offered-covariate.py lab-results/RUN/results.json [--baseline DUT]
"""
import argparse
import json
import random
import statistics as st

p = argparse.ArgumentParser()
p.add_argument("results")
p.add_argument("--baseline", default="linerate")
a = p.parse_args()
runs = json.load(open(a.results))["runs"]
by = {}
for r in runs:
    key = f'{r["dut"]} {r["profile"]}'
    by.setdefault(key, {})[r["repeat"]] = (r["offered_pps"] / 1e6, r["value_pps"] / 1e6)
base_key = next((k for k in by if k.split()[0] == a.baseline), None)
if base_key is None:
    raise SystemExit(f"no runs of the baseline {a.baseline!r}")

offered = [o for v in by.values() for o, _ in v.values()]
rates = [y for v in by.values() for _, y in v.values()]
o0 = st.median(offered)
sxy = sxx = 0.0
for v in by.values():
    mo = st.mean(o for o, _ in v.values())
    my = st.mean(y for _, y in v.values())
    sxy += sum((o - mo) * (y - my) for o, y in v.values())
    sxx += sum((o - mo) ** 2 for o, _ in v.values())
slope = sxy / sxx if sxx else 0.0
print(f"{len(runs)} runs; offered and forwarded correlate {st.correlation(offered, rates):.2f}; "
      f"pooled slope {slope:.3f}; adjusted to {o0:.3f} Mpps offered")


def adjusted(v):
    return st.mean(y for _, y in v.values()) + slope * (o0 - st.mean(o for o, _ in v.values()))


base = by[base_key]
offers = {k: st.median(o for o, _ in v.values()) for k, v in by.items()}
spread = max(offers.values()) / min(offers.values()) - 1
if spread > 0.05:
    print(f"the DUTs' median offered loads differ by {spread:.0%}: a DUT changes what the "
          "generator offers here, so no adjusted figures")
for k, v in by.items():
    med = st.median(y for _, y in v.values())
    off = st.median(o for o, _ in v.values())
    line = f"  {k:36} runs {len(v):2}  offered {off:.3f}  median {med:.3f} Mpps"
    if k != base_key:
        pairs = sorted(v[i][1] / base[i][1] for i in v if i in base)
        rng = random.Random(1)
        boot = sorted(st.median(rng.choices(pairs, k=len(pairs))) for _ in range(4000))
        line += (f"  {med / st.median(y for _, y in base.values()):.3f}x medians"
                 f"  paired {st.median(pairs):.3f}x (95% {boot[100]:.3f}-{boot[3899]:.3f};"
                 f" rounds {pairs[0]:.2f}-{pairs[-1]:.2f})")
        if spread <= 0.05:
            line += f"  adjusted {adjusted(v):.3f} Mpps {adjusted(v) / adjusted(base):.3f}x"
    elif spread <= 0.05:
        line += f"  adjusted {adjusted(v):.3f} Mpps (baseline)"
    print(line)
