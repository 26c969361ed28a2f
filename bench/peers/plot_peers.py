#!/usr/bin/python3
"""bench/peers/plot_peers.py: the lateness distributions of a bench/peers run (keywatch vs
Redis's own expiry notifications vs BullMQ) as CDFs, one line per variant and round, log-x,
with the machine and the medians named under the plot.

    /usr/bin/python3 bench/peers/plot_peers.py build/peers/results.json [-o docs/bench/peers-lateness.png]

Reads the results file run_peers.py wrote. Needs Debian's matplotlib (python3-matplotlib).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("plot_peers: matplotlib is missing (apt-get install python3-matplotlib)", file=sys.stderr)
    sys.exit(1)

STYLE = {"keywatch": ("keywatch (handler start)", "tab:blue"),
         "native": ("Redis expiry + keyspace notification", "tab:gray"),
         "bullmq": ("BullMQ Worker (processor start)", "tab:red")}
FLOOR_MS = 0.1  # log-x: earlier arrivals (and negative lateness) are drawn here


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("-o", "--output", type=Path, default=Path("docs/bench/peers-lateness.png"))
    args = ap.parse_args()
    res = json.loads(args.results.read_text())
    fig, ax = plt.subplots(figsize=(9, 5.6))
    for name, (label, color) in STYLE.items():
        for i, r in enumerate(res["rounds_data"]):
            if name not in r:
                continue
            s = r[name]["sample"]
            late = sorted(max(x, FLOOR_MS) for x in s["late_ms"])
            n = s["n"]
            ys = [(k + 1) / n for k in range(len(late))]
            ax.step(late, ys, where="post", color=color, alpha=0.85, linewidth=1.4,
                    label=label if i == 0 else None)
    ax.set_xscale("log")
    ax.set_xlabel("lateness: start (or notification) minus the shared deadline, ms (log)")
    ax.set_ylabel(f"fraction of the {res['n']:,} items started")
    ax.set_ylim(0, 1.01)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left")
    m, mach = res["medians"], res["machine"]

    def ms(x: float) -> str:
        return "missed" if math.isinf(x) else "n/a" if math.isnan(x) else f"{x:,.0f} ms"

    ax.set_title(f"{res['n']:,} items due at one instant: lateness CDF, {res['rounds']} rounds "
                 f"(one line per round)", fontsize=11)
    caption = (
        f"All started by (median): keywatch +{ms(m['keywatch']['all_started_by_ms'])}, native "
        f"+{ms(m['native']['all_started_by_ms'])}, BullMQ +{ms(m['bullmq']['all_started_by_ms'])} "
        f"(Worker concurrency {res.get('concurrency', '?')}).\n"
        f"{mach['cpu']}, {mach['cores']} cores, shared with other builds (load average "
        f"{mach['loadavg_start'][0]:.1f} at start, {mach.get('loadavg_end', [math.nan])[0]:.1f} "
        f"at the end); redis-server {mach['redis']}, node {mach['node']}; {mach['date']}.\n"
        f"One redis-server for all variants, FLUSHALL between phases; made by "
        f"bench/peers/run_peers.py and plot_peers.py.")
    fig.text(0.01, 0.01, caption, fontsize=8, va="bottom")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.output, dpi=110)
    print(f"plot_peers: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
