#!/usr/bin/env python3
"""Prints tollgate's time per call next to its peers', from criterion's saved results.

Usage: python3 benches/ratios.py [--markdown] [TARGET_DIR ...]
       (TARGET_DIR defaults to $CARGO_TARGET_DIR or ./target)

Benchmarks are named <group>/<peer>/<scenario> (see benches/harness.rs). A peer is
ours when it is `tollgate` or `tollgate.<topic>` (several tollgate limiters in one
group, as in `algorithms/tollgate.leaky_bucket/mostly_allow`). Every other peer is a
baseline: a plain name (`governor`) for every one of ours in its group and scenario,
a name with a topic (`async_lock.semaphore`) only for `tollgate.<same topic>`.

For every group and scenario, prints each peer's time per iteration (criterion's
headline estimate) with its 95% interval, and on each of our rows tollgate's time
divided by each baseline's: a ratio at or below 1.0 means tollgate is at least as
fast. `--markdown` prints one table row per pair instead.

Given several target directories (copies of `target/` from separate runs), takes
each benchmark's fastest run: on a shared machine, other processes only ever add
time, so the best of a few runs is the steadiest estimate.
"""

import json
import os
import sys
from collections import defaultdict
from pathlib import Path


def is_ours(peer: str) -> bool:
    return peer == "tollgate" or peer.startswith("tollgate.")


def topic(peer: str) -> str:
    return peer.partition(".")[2]


def baselines(ours: str, peers: dict) -> list:
    """The peers `ours` is compared with: topic-less ones, and those of its topic."""
    return sorted(
        peer
        for peer in peers
        if not is_ours(peer) and (not topic(peer) or topic(peer) == topic(ours))
    )


def load(root: Path) -> dict:
    # (group, scenario) -> peer -> (estimate ns, low ns, high ns)
    results = defaultdict(dict)
    for bench in root.glob("**/new/benchmark.json"):
        meta = json.loads(bench.read_text())
        estimates = json.loads((bench.parent / "estimates.json").read_text())
        # The figure criterion prints: the slope of time over iterations when it has
        # one (linear sampling), else the mean.
        estimate = estimates.get("slope") or estimates["mean"]
        interval = estimate["confidence_interval"]
        key = (meta["group_id"], meta.get("value_str") or "")
        results[key][meta["function_id"]] = (
            estimate["point_estimate"],
            interval["lower_bound"],
            interval["upper_bound"],
        )
    return results


def print_text(results: dict) -> None:
    print(f"{'benchmark':<40} {'peer':<32} {'ns/call':>9} {'95% CI':>17}  tollgate/peer")
    for (group, scenario), peers in sorted(results.items()):
        name = f"{group}/{scenario}"
        order = sorted(peers, key=lambda p: (not is_ours(p), p))
        for peer in order:
            mean, low, high = peers[peer]
            ratios = ""
            if is_ours(peer):
                ratios = ", ".join(
                    f"{mean / peers[other][0]:.2f} vs {other}" for other in baselines(peer, peers)
                )
            print(f"{name:<40} {peer:<32} {mean:9.2f} {f'[{low:.2f}, {high:.2f}]':>17}  {ratios}")


def print_markdown(results: dict) -> None:
    print("| benchmark | tollgate ns/call | peer | peer ns/call | tollgate/peer |")
    print("|---|---:|---|---:|---:|")
    for (group, scenario), peers in sorted(results.items()):
        for peer in sorted(p for p in peers if is_ours(p)):
            ours = peers[peer][0]
            label = f"{group}/{peer}/{scenario}"
            for other in baselines(peer, peers):
                theirs = peers[other][0]
                print(f"| {label} | {ours:.2f} | {other} | {theirs:.2f} | {ours / theirs:.2f} |")


def best_of(runs: list) -> dict:
    """Each benchmark's fastest run."""
    best = defaultdict(dict)
    for run in runs:
        for key, peers in run.items():
            for peer, figures in peers.items():
                if peer not in best[key] or figures[0] < best[key][peer][0]:
                    best[key][peer] = figures
    return best


def main() -> None:
    args = sys.argv[1:]
    markdown = "--markdown" in args
    targets = [Path(a) for a in args if a != "--markdown"]
    if not targets:
        targets = [Path(os.environ.get("CARGO_TARGET_DIR", "target"))]
    runs = []
    for target in targets:
        root = target / "criterion"
        run = load(root)
        if not run:
            sys.exit(f"no criterion results under {root}; run `cargo bench --bench main` first")
        runs.append(run)
    results = best_of(runs)
    if markdown:
        print_markdown(results)
    else:
        print_text(results)


if __name__ == "__main__":
    main()
