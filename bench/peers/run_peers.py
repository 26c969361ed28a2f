#!/usr/bin/python3
"""bench/peers/run_peers.py: keywatch beside its peers, in one run on one private
redis-server: N delayed items due at the same instant, --rounds rounds.

    bench/peers/run_peers.py [--n 100000] [--rounds 3] [--build build] [--out FILE]

Per round, on the same server (FLUSHALL between phases):
  keywatch  kw_bench_queue --only burst --batch 1000 --port P --lateness-out FILE: N
            kw_client_track calls (4 client threads, pipelines of 1000: the size of BullMQ's
            addBulk chunks below) for keys sharing one deadline, a
            default engine with a recording handler; then, in the same process,
  native    the same N keys as plain SET PXAT (one pipelined connection) and a raw
            hiredis subscriber on __keyevent@0__:expired (lateness of each notification);
  bullmq    bullmq_burst.js: N delayed jobs (Queue.addBulk, chunks of 1000) with one due
            time, a Worker (concurrency --concurrency, default 100) with a no-op processor.
            Even rounds run it after kw_bench_queue, odd rounds before.
Figures per variant and round: add rate (N / time the adding took), per-item lateness
(handler start, notification or processor start minus the deadline), p50/p99/max over all
N (a missing item is infinitely late), "all started by" (the largest lateness, when all
arrived), drain rate (N / (last start - first start)), and for keywatch "all acked by" and
BullMQ "all completed by".
Then bench/python_bench.py (keywatch's Python package beside redis-py and the C engine)
runs on the same server with the same --rounds; its output is kept and its medians printed.

Output: --out (default BUILD/peers/results.json): every sample set and each round's summary,
the medians, the machine (JSON as Python writes it: NaN for n/a, Infinity for a missed item);
and a plain-text table (medians, ratios keywatch/native and keywatch/BullMQ).
bench/peers/plot_peers.py draws the lateness distributions from it.
Every phase is bounded (--phase-timeout); one that runs out is reported, not waited for.
Exit status: 0 when the bench ran (whatever the figures), 1 when it could not.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VARIANTS = ("keywatch", "native", "bullmq")


def die(msg: str) -> None:
    print(f"run_peers: {msg}", file=sys.stderr)
    sys.exit(1)


# ---- what the run needs -------------------------------------------------------------------

def check_tools(args: argparse.Namespace) -> None:
    """Clear messages for what is missing, before anything starts."""
    for tool, hint in (("redis-server", "apt-get install redis-server"),
                       ("redis-benchmark", "apt-get install redis-tools"),
                       ("node", "apt-get install nodejs (v18 or later)"),
                       ("npm", "apt-get install npm")):
        if not shutil.which(tool):
            die(f"{tool} is not installed ({hint})")
    if not os.access(args.kw_bench_queue, os.X_OK):
        die(f"{args.kw_bench_queue} is missing: build keywatch with its benchmarks first: "
            f"cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2")
    if not args.skip_python and not os.access(args.python, os.X_OK):
        die(f"{args.python} is missing: make the Python venv with the keywatch package first "
            f"(scripts/test.sh python does it), or pass --skip-python")


def npm_ci() -> None:
    """node_modules from the lockfile, once (npm ci when it is missing or older)."""
    mods, lock = HERE / "node_modules", HERE / "package-lock.json"
    stamp = mods / ".package-lock.json"
    if stamp.exists() and stamp.stat().st_mtime >= lock.stat().st_mtime:
        return
    print("run_peers: npm ci in bench/peers", flush=True)
    r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=HERE)
    if r.returncode != 0:
        die("npm ci failed in bench/peers (is npm's registry reachable?)")


# ---- the private redis-server ---------------------------------------------------------------

class Server:
    """redis-server on a free loopback port in a private directory; stop() ends it by pid."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.dir = Path(tempfile.mkdtemp(prefix="kw-peers-"))
        self.log = self.dir / "redis.log"
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir), "--logfile", str(self.log),
             "--notify-keyspace-events", "Ex"], stdout=subprocess.DEVNULL)
        for _ in range(500):
            if self.proc.poll() is not None:
                die(f"redis-server exited at start: {self.log.read_text(errors='replace')[-2000:]}")
            try:
                if self.command("PING") == "PONG":
                    return
            except OSError:
                time.sleep(0.02)
        self.stop()
        die("redis-server did not answer PING in 10 s")

    def command(self, *args: str) -> str:
        """One command over RESP; the reply's first line without its type byte."""
        req = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=60) as s:
            s.sendall(req.encode())
            data = b""
            while not data.endswith(b"\r\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        if data[:1] == b"$":  # a bulk string: its length line, then the text
            size = int(data[1:data.index(b"\r\n")])
            return data.split(b"\r\n", 1)[1][:size].decode(errors="replace") if size >= 0 else ""
        return data[1:].split(b"\r\n", 1)[0].decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- figures ----------------------------------------------------------------------------------

def percentile(sorted_late: List[float], n: int, q: float) -> float:
    """Nearest rank over n items of which sorted_late arrived; missing ones are infinite."""
    rank = max(1, math.ceil(q * n))
    return sorted_late[rank - 1] if rank <= len(sorted_late) else math.inf


def summarize(sample: Dict[str, Any]) -> Dict[str, Any]:
    n, late = sample["n"], sorted(sample["late_ms"])
    span_s = (late[-1] - late[0]) / 1000 if len(late) > 1 else 0
    all_in = len(late) >= n
    return {
        "n": n, "delivered": len(late),
        "add_rate": n / sample["add_s"] if sample.get("add_s") else math.nan,
        "p50_ms": percentile(late, n, 0.50), "p99_ms": percentile(late, n, 0.99),
        "max_ms": late[-1] if all_in and late else math.inf,
        "all_started_by_ms": late[-1] if all_in and late else math.inf,
        "first_ms": late[0] if late else math.nan,
        "drain_rate": len(late) / span_s if span_s > 0 else math.nan,
        "done_by_ms": sample.get("acked_by_ms") if sample.get("acked_by_ms") is not None
        else math.nan,
        "timed_out": sample.get("timed_out", []),
    }


def median(xs: List[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return statistics.median(xs) if xs else math.nan


# ---- phases ------------------------------------------------------------------------------------

def run_phase(name: str, cmd: List[str], timeout: float, log: List[str]) -> bool:
    """Runs one phase, its output echoed and kept; False when it failed or ran out of time."""
    print(f"  $ {' '.join(cmd)}", flush=True)
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, cwd=ROOT)
        out, ok = r.stdout, r.returncode == 0
        if not ok:
            out += f"\n{name}: exit status {r.returncode}"
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) \
            else (e.stdout or "")
        out += f"\n{name}: TIMED OUT after {timeout:.0f} s (phase abandoned)"
        ok = False
    print(out.rstrip(), flush=True)
    print(f"  ({name}: {time.monotonic() - t0:.0f} s)", flush=True)
    log.append(out)
    return ok


def read_samples(path: Path) -> List[Dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def one_round(r: int, args: argparse.Namespace, server: Server, tmp: Path) -> Dict[str, Any]:
    samples_file = tmp / f"round{r}.jsonl"
    log: List[str] = []
    kw = [str(args.kw_bench_queue), "--only", "burst", "--batch", "1000", "--rounds", "1",
          "--keys", str(args.n),
          "--port", str(server.port), "--lateness-out", str(samples_file),
          "--wait-ms", str(args.wait_ms)]
    bull = ["node", str(HERE / "bullmq_burst.js"), "--port", str(server.port), "--n", str(args.n),
            "--out", str(samples_file), "--concurrency", str(args.concurrency),
            "--wait-ms", str(args.wait_ms), "--add-timeout-ms", str(args.phase_timeout * 1000)]
    phases = [("kw_bench_queue", kw), ("bullmq", bull)]
    if r % 2:
        phases.reverse()
    for name, cmd in phases:
        server.command("FLUSHALL", "SYNC")
        run_phase(name, cmd, args.phase_timeout * 2 + args.wait_ms / 1000, log)
    server.command("FLUSHALL", "SYNC")
    out: Dict[str, Any] = {"round": r + 1, "order": [p[0] for p in phases], "log": log}
    for s in read_samples(samples_file):
        out[s["variant"]] = {"summary": summarize(s), "sample": s}
    for v in VARIANTS:
        if v not in out:
            print(f"  round {r + 1}: no {v} samples (see the output above)", flush=True)
    return out


def run_python(args: argparse.Namespace, server: Server) -> Dict[str, Any]:
    cmd = [str(args.python), str(ROOT / "bench" / "python_bench.py"), "--rounds",
           str(args.rounds), "--port", str(server.port), "--server-log", str(server.log)]
    log: List[str] = []
    ok = run_phase("python_bench.py", cmd, args.phase_timeout * 3, log)
    text = log[0] if log else ""
    # The medians: "  NAME   median   RATE UNIT   (runs: ...)  = R.RRx BASELINE".
    medians = [line.strip() for line in text.splitlines()
               if " median " in line or line.startswith("== ") or "target:" in line]
    return {"command": cmd, "ok": ok, "output": text, "medians": medians}


# ---- report ------------------------------------------------------------------------------------

def machine() -> Dict[str, Any]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    redis = subprocess.run(["redis-server", "--version"], stdout=subprocess.PIPE, text=True).stdout
    m = re.search(r"v=(\S+)", redis)
    node = subprocess.run(["node", "--version"], stdout=subprocess.PIPE, text=True).stdout.strip()
    return {"cpu": model, "cores": os.cpu_count(), "redis": m.group(1) if m else redis.strip(),
            "node": node, "kernel": platform.release(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "loadavg_start": os.getloadavg()}


def medians_of(rounds: List[Dict[str, Any]]) -> Dict[str, Dict[str, float]]:
    keys = ("add_rate", "p50_ms", "p99_ms", "max_ms", "all_started_by_ms", "drain_rate",
            "done_by_ms")
    return {v: {k: median([r[v]["summary"][k] for r in rounds if v in r]) for k in keys}
            for v in VARIANTS}


def fmt(x: float, unit: str) -> str:
    if math.isnan(x):
        return "n/a"
    if math.isinf(x):
        return "missed"
    return f"{x:,.0f}/s" if unit == "rate" else f"{x:,.0f} ms" if abs(x) >= 10 else f"{x:.1f} ms"


def round_ratio(rounds: List[Dict[str, Any]], key: str, base: str) -> str:
    """Median over the rounds of keywatch's figure / the baseline's of the same round."""
    ratios = []
    for r in rounds:
        if "keywatch" not in r or base not in r:
            continue
        a, b = r["keywatch"]["summary"][key], r[base]["summary"][key]
        if b and not any(math.isnan(x) or math.isinf(x) for x in (a, b)):
            ratios.append(a / b)
    return f"{statistics.median(ratios):.2f}x" if ratios else "n/a"


def table(res: Dict[str, Any]) -> str:
    m, n = res["medians"], res["n"]
    rows = [("add (items/s)", "add_rate", "rate"),
            ("lateness p50", "p50_ms", "ms"),
            ("lateness p99", "p99_ms", "ms"),
            ("all started by deadline +", "all_started_by_ms", "ms"),
            ("drain (first to last start)", "drain_rate", "rate"),
            ("all acked/completed by +", "done_by_ms", "ms")]
    lines = [f"== bench/peers: {n:,} items due at one instant, medians of {res['rounds']} rounds "
             f"(one redis-server {res['machine']['redis']}; {res['machine']['cpu']}, "
             f"{res['machine']['cores']} cores)",
             f"  {'figure':<30} {'keywatch':>12} {'native':>12} {'BullMQ':>12} "
             f"{'kw/native':>10} {'kw/BullMQ':>10}"]
    for label, key, unit in rows:
        k, nat, b = (m[v][key] for v in VARIANTS)
        rounds = res["rounds_data"]
        lines.append(f"  {label:<30} {fmt(k, unit):>12} {fmt(nat, unit):>12} {fmt(b, unit):>12} "
                     f"{round_ratio(rounds, key, 'native'):>10} "
                     f"{round_ratio(rounds, key, 'bullmq'):>10}")
    lines.append("  (ratios: median of the per-round ratios, each to its same-round baseline. Rates: "
                 "higher is better, a ratio > 1 favours keywatch;\n   lateness: lower is better, "
                 "a ratio < 1 favours keywatch. native add = pipelined SET PXAT; native has no ack)")
    for r in res["rounds_data"]:
        per = "; ".join(
            f"{v} add {fmt(r[v]['summary']['add_rate'], 'rate')}, all by "
            f"+{fmt(r[v]['summary']['all_started_by_ms'], 'ms')}, drain "
            f"{fmt(r[v]['summary']['drain_rate'], 'rate')}" for v in VARIANTS if v in r)
        lines.append(f"  round {r['round']} ({' then '.join(r['order'])}): {per}")
    py = res.get("python")
    if py:
        lines.append("== bench/python_bench.py on the same server (medians)")
        lines += [f"  {line}" for line in py["medians"]]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100000, help="items due at one instant")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--build", type=Path, default=ROOT / "build", help="the CMake build dir")
    ap.add_argument("--out", type=Path, help="results JSON (default BUILD/peers/results.json)")
    ap.add_argument("--concurrency", type=int, default=100, help="BullMQ Worker concurrency")
    ap.add_argument("--wait-ms", type=int, default=300000,
                    help="arrivals awaited this long after the deadline (each variant)")
    ap.add_argument("--phase-timeout", type=int, default=300,
                    help="seconds one phase may take before it is abandoned")
    ap.add_argument("--python", type=Path, help="interpreter with the keywatch package "
                    "(default BUILD/python-venv/bin/python)")
    ap.add_argument("--skip-python", action="store_true", help="leave python_bench.py out")
    args = ap.parse_args()
    if args.n < 100 or args.rounds < 1:
        ap.error("--n >= 100 and --rounds >= 1")
    args.kw_bench_queue = args.build / "bench" / "kw_bench_queue"
    args.python = args.python or args.build / "python-venv" / "bin" / "python"
    args.out = args.out or args.build / "peers" / "results.json"
    check_tools(args)
    npm_ci()
    res: Dict[str, Any] = {"n": args.n, "rounds": args.rounds, "command": sys.argv,
                           "machine": machine(), "concurrency": args.concurrency}
    server = Server()
    print(f"run_peers: redis-server {res['machine']['redis']} on 127.0.0.1:{server.port} "
          f"(pid {server.proc.pid}), {args.rounds} rounds of {args.n:,}", flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix="kw-peers-samples-") as tmp:
            res["rounds_data"] = []
            for r in range(args.rounds):
                print(f"\n== round {r + 1}/{args.rounds}", flush=True)
                res["rounds_data"].append(one_round(r, args, server, Path(tmp)))
        if not args.skip_python:
            print("\n== bench/python_bench.py", flush=True)
            res["python"] = run_python(args, server)
    finally:
        server.stop()
    res["machine"]["loadavg_end"] = os.getloadavg()
    res["medians"] = medians_of(res["rounds_data"])
    res["table"] = table(res)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res))
    print("\n" + res["table"])
    print(f"\nresults: {args.out} (plot: /usr/bin/python3 bench/peers/plot_peers.py {args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
