"""bench/python_bench.py: issue 14's "Performance" figures for the Python package, each
beside a baseline measured in the same run on the same private redis-server, repeated for
--rounds rounds (alternating which variant goes first), with medians and the issue's
targets. Not a test: it prints figures and exits 0 unless the benchmark itself broke.

    build/python-venv/bin/python bench/python_bench.py [--rounds 3] [--only live,e2e,track]

Run it with the interpreter the keywatch package is installed in (scripts/test.sh's venv).

live   A flood of N (--events) `SET` commands (redis-benchmark -P 64 -c 4 over 100000 keys),
       each making Redis publish one __keyevent@0__:set notification (redis-benchmark may
       send up to 4 x 64 more: a run counts until N arrived), under Redis' default
       pubsub output-buffer limit (32mb hard, 8mb for 60 s). keywatch: keywatch.Engine with
       one no-op Python handler for "set" (default workers); figure: handler calls
       (events.delivered) / (time of the last call - flood start, polled every 10 ms), and
       events.dropped. Baseline: Debian's redis-py, PSUBSCRIBE __keyevent@*__:set and a
       pubsub.listen() loop counting messages on its own thread; same rate formula,
       dropped = N - received. "disconnected": Redis logged closing that client for its
       output-buffer limit (or the listener saw its connection close). Each alone with
       the flood. Target: keywatch >= 2x redis-py, 0 dropped, never disconnected.
e2e    K (--keys) tracked keys with a 1 ms TTL, written (untimed) and all due before an
       engine starts; rate = K / (time from start() until items.acked == K, polled every
       5 ms). Variants: keywatch.Engine with a no-op Python handler, keywatch.aio.Engine
       with a no-op coroutine handler, and the baseline: the C engine through the C API
       with a no-op C handler (python_bench_native.c's kw_pybench_noop, loaded with ctypes
       with the very libkeywatch of the package). Default options (workers, sweep.batch).
       Target: each Python variant >= 50% of the C engine.
track  T (--tracks) Client.track calls from Python in pipelines of B (--batch; `with
       client.pipeline() as p: p.track(...)`) against the C client's pipelined
       kw_client_track loop (kw_pybench_track), one client each, 16-byte keys and values,
       1 h TTL, FLUSHALL before each variant. Target: Python >= 70% of C.

--port P --server-log FILE: run on the redis-server already on 127.0.0.1:P (its log file
FILE) instead of starting one; it is FLUSHALLed and its notify-keyspace-events set to
"Eg$x" (bench/peers/run_peers.py runs this bench on the server of its peers this way).

The machine may be shared: figures of one round can be far apart; compare the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import redis as redispy

import keywatch
from keywatch import aio

ROOT = Path(__file__).resolve().parents[1]


# ---- a private redis-server -------------------------------------------------------------

class Server:
    """redis-server on a free loopback port, its log in a private directory; or, with a
    port, the one already there (its log at `log`), emptied and not stopped here."""

    NOTIFY = "Eg$x"

    def __init__(self, workdir: Path, port: int = 0, log: Optional[Path] = None) -> None:
        self.proc: Optional[subprocess.Popen] = None
        if port:
            self.port, self.log = port, Path(log or "")
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = int(s.getsockname()[1])
            self.log = workdir / "redis.log"
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(workdir), "--logfile", str(self.log),
                 "--notify-keyspace-events", self.NOTIFY])
        self.url = f"redis://127.0.0.1:{self.port}"
        self.r = redispy.Redis(port=self.port)
        for _ in range(200):
            try:
                if self.r.ping():
                    break
            except redispy.ConnectionError:
                time.sleep(0.02)
        else:
            raise RuntimeError(f"redis-server on port {self.port} does not answer")
        if port:
            self.r.flushall()
            self.r.config_set("notify-keyspace-events", self.NOTIFY)

    def buffer_limit_closes(self, name: str) -> int:
        """How often Redis logged closing a client named `name` for its output buffer."""
        text = self.log.read_text(errors="replace")
        return sum(1 for line in text.splitlines()
                   if "output buffer limits" in line and f"name={name}" in line)

    def stop(self) -> None:
        if self.proc:
            self.proc.terminate()
            self.proc.wait(10)


# ---- the C side (python_bench_native.c) ---------------------------------------------------

class Native:
    """libkeywatch of the installed package, and the bench's C helpers, through ctypes."""

    def __init__(self, workdir: Path) -> None:
        pkg = Path(keywatch.__file__).parent
        lib = next(pkg.glob("libkeywatch.so*"))
        self.kw = ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
        so = workdir / "python_bench_native.so"
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-I", str(ROOT / "include"), "-o",
                        str(so), str(ROOT / "bench" / "python_bench_native.c")], check=True)
        self.native = ctypes.CDLL(str(so))
        kw, vp, cp = self.kw, ctypes.c_void_p, ctypes.c_char_p
        for name, res, args in [
            ("kw_conf_new", vp, []), ("kw_conf_free", None, [vp]),
            ("kw_conf_set", ctypes.c_int, [vp, cp, cp, cp, ctypes.c_size_t]),
            ("kw_engine_new", ctypes.c_int, [vp, ctypes.POINTER(vp), cp, ctypes.c_size_t]),
            ("kw_engine_add_handler", ctypes.c_int, [vp, vp, vp, vp, vp]),
            ("kw_engine_start", ctypes.c_int, [vp]),
            ("kw_engine_stop", ctypes.c_int, [vp, ctypes.c_int64]),
            ("kw_engine_free", None, [vp]),
            ("kw_engine_last_error", cp, [vp]),
            ("kw_engine_stat", ctypes.c_int, [vp, cp, ctypes.POINTER(ctypes.c_int64)]),
            ("kw_client_new", ctypes.c_int, [vp, ctypes.POINTER(vp), cp, ctypes.c_size_t]),
            ("kw_client_free", None, [vp]),
            ("kw_client_last_error", cp, [vp]),
        ]:
            fn = getattr(kw, name)
            fn.restype, fn.argtypes = res, args
        self.native.kw_pybench_track.restype = ctypes.c_int
        self.native.kw_pybench_track.argtypes = [vp, cp, ctypes.c_longlong, ctypes.c_int,
                                                 ctypes.c_longlong]
        self.noop = ctypes.cast(self.native.kw_pybench_noop, vp)

    def conf(self, url: str) -> Any:
        conf = self.kw.kw_conf_new()
        err = ctypes.create_string_buffer(256)
        if self.kw.kw_conf_set(conf, b"redis.url", url.encode(), err, 256) != 0:
            raise RuntimeError(err.value.decode())
        return conf

    def e2e(self, url: str, keys: int) -> float:
        """Seconds from kw_engine_start until items.acked == keys (no-op C handler)."""
        conf = self.conf(url)
        engine = ctypes.c_void_p()
        err = ctypes.create_string_buffer(256)
        rc = self.kw.kw_engine_new(conf, ctypes.byref(engine), err, 256)
        self.kw.kw_conf_free(conf)
        if rc != 0:
            raise RuntimeError(err.value.decode())
        try:
            if self.kw.kw_engine_add_handler(engine, None, self.noop, None, None) != 0:
                raise RuntimeError("kw_engine_add_handler failed")
            acked = ctypes.c_int64()
            start = time.perf_counter()
            if self.kw.kw_engine_start(engine) != 0:
                raise RuntimeError(self.kw.kw_engine_last_error(engine).decode())
            while True:
                self.kw.kw_engine_stat(engine, b"items.acked", ctypes.byref(acked))
                if acked.value >= keys:
                    return time.perf_counter() - start
                time.sleep(0.005)
        finally:
            self.kw.kw_engine_stop(engine, -1)
            self.kw.kw_engine_free(engine)

    def track(self, url: str, n: int, batch: int) -> float:
        """Seconds for n pipelined kw_client_track calls (one client)."""
        conf = self.conf(url)
        client = ctypes.c_void_p()
        err = ctypes.create_string_buffer(256)
        rc = self.kw.kw_client_new(conf, ctypes.byref(client), err, 256)
        self.kw.kw_conf_free(conf)
        if rc != 0:
            raise RuntimeError(err.value.decode())
        try:
            start = time.perf_counter()
            rc = self.native.kw_pybench_track(client, b"c:", n, batch, 3600000)
            elapsed = time.perf_counter() - start
            if rc != 0:
                raise RuntimeError(self.kw.kw_client_last_error(client).decode())
            return elapsed
        finally:
            self.kw.kw_client_free(client)


# ---- live: keywatch.Engine vs a redis-py pubsub listener ---------------------------------

def flood(server: Server, events: int) -> "subprocess.Popen[bytes]":
    return subprocess.Popen(
        ["redis-benchmark", "-h", "127.0.0.1", "-p", str(server.port), "-n", str(events),
         "-P", "64", "-c", "4", "-r", "100000", "-t", "set", "-q"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_counted(count: Callable[[], int], events: int, flooder: "subprocess.Popen[bytes]",
                 start: float, poll: float) -> Tuple[int, float, float]:
    """Polls count() until it reaches events, or 2 s pass without progress after the flood
    ended (60 s at most). Returns (count, time of its last change - start, flood's rate)."""
    last, last_change, flood_end = 0, start, None
    deadline = start + 60
    while time.perf_counter() < deadline:
        n = count()
        now = time.perf_counter()
        if n != last:
            last, last_change = n, now
        if flood_end is None and flooder.poll() is not None:
            flood_end = now
        if n >= events:
            break
        if flood_end is not None and now - last_change > 2.0:
            break
        time.sleep(poll)
    flooder.wait()
    flood_end = flood_end or time.perf_counter()
    return last, last_change - start, events / (flood_end - start)


def live_keywatch(server: Server, events: int, options: Dict[str, Any]) -> Dict[str, Any]:
    engine = keywatch.Engine(server.url, **options)
    engine.add_handler(lambda event: None, "set")
    engine.start()
    try:
        start = time.perf_counter()
        flooder = flood(server, events)
        n, elapsed, flood_rate = wait_counted(lambda: engine.stat("events.delivered"), events,
                                              flooder, start, 0.01)
        stats = engine.stats()
        engine_reconnects = engine.stat("conn.reconnects")
    finally:
        engine.stop()
        engine.close()
    return dict(rate=n / elapsed if elapsed > 0 else 0.0, received=n, flood=flood_rate,
                dropped=stats["events.dropped"],
                disconnected=engine_reconnects > 0)


def live_redispy(server: Server, events: int, run: int) -> Dict[str, Any]:
    name = f"pybench-redispy-{run}"
    conn = redispy.Redis(port=server.port, client_name=name)
    pubsub = conn.pubsub()
    pubsub.psubscribe("__keyevent@*__:set")
    pubsub.get_message(timeout=5)  # the psubscribe confirmation
    received = [0]
    broken: List[str] = []

    def listen() -> None:
        try:
            for message in pubsub.listen():  # type: ignore[no-untyped-call]
                if message["type"] == "pmessage":
                    received[0] += 1
                    if received[0] >= events:
                        return
        except Exception as e:  # the server closed the connection
            broken.append(f"{type(e).__name__}: {e}")

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    start = time.perf_counter()
    flooder = flood(server, events)
    n, elapsed, flood_rate = wait_counted(lambda: received[0], events, flooder, start, 0.01)
    closes = server.buffer_limit_closes(name)
    try:
        pubsub.close()
    except Exception:
        pass
    listener.join(5)
    return dict(rate=n / elapsed if elapsed > 0 else 0.0, received=n, flood=flood_rate,
                dropped=events - n,
                disconnected=closes > 0 or bool(broken))


# ---- e2e: tracked keys through a no-op handler -------------------------------------------

def write_due_keys(server: Server, keys: int) -> None:
    server.r.flushall()
    with keywatch.Client(server.url) as client:
        for first in range(0, keys, 1000):
            with client.pipeline() as p:
                for i in range(first, min(first + 1000, keys)):
                    p.track(f"e:{i:014d}", b"0123456789abcdef", ttl=0.001)
    time.sleep(0.05)  # every deadline has passed


def e2e_sync(server: Server, keys: int, options: Dict[str, Any]) -> float:
    engine = keywatch.Engine(server.url, **options)
    engine.add_handler(lambda event: None, "expired", queue="keys")
    start = time.perf_counter()
    engine.start()
    try:
        while engine.stat("items.acked") < keys:
            time.sleep(0.005)
        return time.perf_counter() - start
    finally:
        engine.close()


def e2e_async(server: Server, keys: int, options: Dict[str, Any]) -> float:
    async def main() -> float:
        engine = aio.Engine(server.url, **options)

        async def noop(event: Any) -> None:
            pass

        engine.add_handler(noop, "expired", queue="keys")
        start = time.perf_counter()
        await engine.start()
        try:
            while engine.stat("items.acked") < keys:
                await asyncio.sleep(0.005)
            return time.perf_counter() - start
        finally:
            await engine.stop()

    return asyncio.run(main())


# ---- track: Client.track pipelined vs kw_client_track pipelined --------------------------

def track_python(server: Server, n: int, batch: int) -> float:
    value = b"0123456789abcdef"
    keys = [f"p:{i:014d}".encode() for i in range(n)]
    with keywatch.Client(server.url) as client:
        start = time.perf_counter()
        for first in range(0, n, batch):
            with client.pipeline() as p:
                for key in keys[first:first + batch]:
                    p.track(key, value, 3600)
        return time.perf_counter() - start


# ---- driver ------------------------------------------------------------------------------

def median(xs: List[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def report(title: str, rows: Dict[str, List[float]], baseline: str, unit: str,
           target: Optional[Tuple[str, float]] = None) -> None:
    print(f"\n== {title}")
    base = median(rows[baseline])
    for name, values in rows.items():
        m = median(values)
        runs = ", ".join(f"{v:,.0f}" for v in values)
        ratio = "" if name == baseline else f"  = {m / base:.2f}x {baseline}"
        print(f"  {name:<28} median {m:>12,.0f} {unit}   (runs: {runs}){ratio}")
    if target:
        name, at_least = target
        got = median(rows[name]) / base
        print(f"  target: {name} >= {at_least:g}x {baseline}: "
              f"{'met' if got >= at_least else 'NOT met'} ({got:.2f}x)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="live,e2e,track")
    ap.add_argument("--events", type=int, default=1_000_000, help="live: flood size")
    ap.add_argument("--keys", type=int, default=20_000, help="e2e: tracked keys")
    ap.add_argument("--tracks", type=int, default=50_000, help="track: calls per variant")
    ap.add_argument("--batch", type=int, default=100, help="track: calls per pipeline")
    ap.add_argument("--workers", type=int, default=0,
                    help="the Python engines' workers option (default: the library's)")
    ap.add_argument("--port", type=int, default=0,
                    help="use the redis-server on 127.0.0.1:PORT instead of starting one")
    ap.add_argument("--server-log", type=Path, help="with --port: that server's log file")
    args = ap.parse_args()
    if bool(args.port) != bool(args.server_log):
        ap.error("--port and --server-log go together")
    args.options = {"workers": args.workers} if args.workers else {}
    only = set(args.only.split(","))
    if not only <= {"live", "e2e", "track"}:
        ap.error("--only takes live, e2e and track")
    for tool in ("redis-server", "redis-benchmark", "cc"):
        if not shutil.which(tool):
            print(f"python_bench: {tool} is needed", file=sys.stderr)
            return 1
    print(f"keywatch {keywatch.__version__} (library {keywatch.library_version()}), "
          f"redis-py {redispy.__version__}, {os.cpu_count()} cores, {args.rounds} rounds, "
          f"Python engines' options {args.options or 'default'}")
    with tempfile.TemporaryDirectory(prefix="kw-pybench-") as tmp:
        workdir = Path(tmp)
        native = Native(workdir)
        server = Server(workdir, args.port, args.server_log)
        try:
            if "live" in only:
                run_live(server, args)
            if "e2e" in only:
                run_e2e(server, native, args)
            if "track" in only:
                run_track(server, native, args)
        finally:
            server.stop()
    return 0


def run_live(server: Server, args: argparse.Namespace) -> None:
    rates: Dict[str, List[float]] = {"redis-py pubsub": [], "keywatch.Engine (Python)": []}
    notes = []
    for r in range(args.rounds):
        order = ["redis-py pubsub", "keywatch.Engine (Python)"]
        for name in order if r % 2 == 0 else reversed(order):
            server.r.flushall()
            res = (live_redispy(server, args.events, r) if name.startswith("redis-py")
                   else live_keywatch(server, args.events, args.options))
            rates[name].append(res["rate"])
            notes.append(f"  round {r + 1} {name}: {res['received']:,} of {args.events:,} "
                         f"received, dropped {res['dropped']:,}, disconnected "
                         f"{'yes' if res['disconnected'] else 'no'}, flood {res['flood']:,.0f}/s")
            print(notes[-1], flush=True)
    report(f"live: {args.events:,} set events, handler calls/s (received/s for redis-py)",
           rates, "redis-py pubsub", "/s", ("keywatch.Engine (Python)", 2.0))
    print("\n".join(notes))


def run_e2e(server: Server, native: Native, args: argparse.Namespace) -> None:
    variants: Dict[str, Callable[[], float]] = {
        "C engine (no-op C handler)": lambda: native.e2e(server.url, args.keys),
        "keywatch.Engine (Python)": lambda: e2e_sync(server, args.keys, args.options),
        "keywatch.aio.Engine": lambda: e2e_async(server, args.keys, args.options),
    }
    rates: Dict[str, List[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(args.rounds):
        for name in names[r % 3:] + names[:r % 3]:
            write_due_keys(server, args.keys)
            rates[name].append(args.keys / variants[name]())
            print(f"  round {r + 1} {name}: {rates[name][-1]:,.0f} items/s", flush=True)
    report(f"e2e: {args.keys:,} due tracked keys, items/s", rates,
           "C engine (no-op C handler)", "items/s", ("keywatch.Engine (Python)", 0.5))
    aio_ratio = median(rates["keywatch.aio.Engine"]) / median(rates["C engine (no-op C handler)"])
    print(f"  target: keywatch.aio.Engine >= 0.5x C engine: "
          f"{'met' if aio_ratio >= 0.5 else 'NOT met'} ({aio_ratio:.2f}x)")


def run_track(server: Server, native: Native, args: argparse.Namespace) -> None:
    rates: Dict[str, List[float]] = {"C kw_client_track": [], "Python Client.track": []}
    for r in range(args.rounds):
        order = ["C kw_client_track", "Python Client.track"]
        for name in order if r % 2 == 0 else reversed(order):
            server.r.flushall()
            secs = (native.track(server.url, args.tracks, args.batch) if name.startswith("C")
                    else track_python(server, args.tracks, args.batch))
            rates[name].append(args.tracks / secs)
            print(f"  round {r + 1} {name}: {rates[name][-1]:,.0f} calls/s", flush=True)
    report(f"track: {args.tracks:,} calls in pipelines of {args.batch}, calls/s", rates,
           "C kw_client_track", "calls/s", ("Python Client.track", 0.7))


if __name__ == "__main__":
    sys.exit(main())
