#!/usr/bin/env python3
"""FD.io CSIT's MLRsearch (PyPI MLRsearch 1.2.1) with `linerate trial` as
its measurer: against linerate's simulated DUT (`--seed`: `linerate trial
--sim SEED ...`, the same replayable DUT linerate's own MLRsearch faces in
crates/linerate/tests/csit_oracle.rs), or through a lab that is up
(`--lab NAME`: `linerate trial --lab NAME`, as scripts/compare-csit-lab.sh
does). Prints, as JSON, each goal's relevant lower and upper bound (loads,
pps) and the number of trials.

Run with the interpreter of the venv scripts/setup.sh makes
(.venv-csit/bin/python).
"""
import argparse
import json
import subprocess
import sys

from MLRsearch import (AbstractMeasurer, Config, MeasurementResult,
                       MultipleLossRatioSearch, SearchGoal)


class SimTrial(AbstractMeasurer):
    def __init__(self, linerate, sim_args, trace):
        self.linerate = linerate
        self.sim_args = sim_args
        self.trace = trace
        self.trials = 0

    def measure(self, intended_duration, intended_load):
        self.trials += 1
        out = subprocess.run(
            [self.linerate, "trial", *self.sim_args,
             "-R", repr(float(intended_load)), "-t", repr(float(intended_duration)),
             "--json"],
            check=True, capture_output=True, text=True).stdout
        t = json.loads(out)
        if self.trace:
            print(f"trial {self.trials:>2} {intended_load / 1e3:>12.3f} Kpps "
                  f"{intended_duration:5.2f} s loss {t['loss_ratio'] * 100:.4f}%",
                  file=sys.stderr)
        return MeasurementResult(
            intended_duration=intended_duration,
            intended_load=intended_load,
            offered_count=t["offered"],
            forwarding_count=t["received"],
        )


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--linerate", required=True)
    p.add_argument("--seed", type=int)
    p.add_argument("--lab")
    p.add_argument("--capacity", type=float, default=1e6)
    p.add_argument("--noise", type=float, default=0.002)
    p.add_argument("--spurious", type=float, default=0.0)
    p.add_argument("--min-load", type=float, required=True)
    p.add_argument("--max-load", type=float, required=True)
    p.add_argument("--pdr-loss-ratio", type=float, default=0.005)
    p.add_argument("--exceed-ratio", type=float, default=0.0)
    p.add_argument("--width", type=float, default=0.005)
    p.add_argument("--initial-seconds", type=float, default=1.0)
    p.add_argument("--final-seconds", type=float, default=4.0)
    p.add_argument("--duration-sum", type=float, default=4.0)
    p.add_argument("--trace", action="store_true",
                   help="print each trial (load, duration, loss) to stderr")
    a = p.parse_args()
    goals = [
        SearchGoal(
            loss_ratio=loss,
            exceed_ratio=a.exceed_ratio,
            relative_width=a.width,
            initial_trial_duration=a.initial_seconds,
            final_trial_duration=a.final_seconds,
            duration_sum=a.duration_sum,
            preceding_targets=2,
            expansion_coefficient=2,
            fail_fast=False,
        )
        for loss in (0.0, a.pdr_loss_ratio)
    ]
    config = Config()
    config.goals = goals
    config.min_load = a.min_load
    config.max_load = a.max_load
    config.search_duration_max = 1e9
    config.warmup_duration = None
    if a.lab is not None:
        where = ["--lab", a.lab]
    elif a.seed is not None:
        where = ["--sim", str(a.seed), "--sim-capacity", repr(a.capacity),
                 "--sim-noise", repr(a.noise), "--sim-spurious", repr(a.spurious)]
    else:
        p.error("give --seed (a simulated DUT) or --lab NAME")
    measurer = SimTrial(a.linerate, where, a.trace)
    results = MultipleLossRatioSearch(config).search(measurer, debug=lambda _: None)
    out = {"trials": measurer.trials}
    for name, goal in zip(("ndr", "pdr"), goals):
        r = results[goal]
        lower = r.relevant_lower_bound
        upper = r.relevant_upper_bound
        out[name] = {
            "lower_pps": None if lower is None else lower.float_load,
            "upper_pps": None if upper is None else upper.float_load,
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
