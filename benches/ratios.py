#!/usr/bin/env python3
"""Prints tollgate's time per call next to its peers', from criterion's saved results.

Usage: python3 benches/ratios.py [TARGET_DIR]   (default: $CARGO_TARGET_DIR or ./target)

Benchmarks are named <group>/<peer>/<scenario> (see benches/harness.rs). For every
group and scenario with a `tollgate` peer, prints each peer's time per iteration (criterion's headline estimate)
and tollgate's time divided by that peer's: a ratio at or below 1.0 means tollgate is
at least as fast.
"""

import json
import os
import sys
from collections import defaultdict
from pathlib import Path


def main() -> None:
    target = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CARGO_TARGET_DIR", "target"))
    root = target / "criterion"
    # (group, scenario) -> peer -> (mean ns, low ns, high ns)
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
    if not results:
        sys.exit(f"no criterion results under {root}; run `cargo bench --bench main` first")

    print(f"{'benchmark':<36} {'peer':<10} {'ns/call':>9} {'95% CI':>17} {'tollgate/peer':>14}")
    for (group, scenario), peers in sorted(results.items()):
        ours = peers.get("tollgate")
        for peer, (mean, low, high) in sorted(peers.items(), key=lambda p: p[0] != "tollgate"):
            ratio = "" if ours is None or peer == "tollgate" else f"{ours[0] / mean:.2f}"
            name = f"{group}/{scenario}"
            print(f"{name:<36} {peer:<10} {mean:9.2f} {f'[{low:.2f}, {high:.2f}]':>17} {ratio:>14}")


if __name__ == "__main__":
    main()
