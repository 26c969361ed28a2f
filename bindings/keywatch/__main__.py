"""``python -m keywatch watch --redis URL``: one JSON line per event on stdout, the same
lines as the CLI's ``keywatch watch`` (the line is made by the library's own printer), until
Ctrl-C, SIGTERM or ``--duration``. Built on the bindings only, so a Python-only install
has a working tool. Exit status: 0 after a stop, 1 when the engine failed, 2 for bad input."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from typing import Any, Dict, List, Optional, Union

from . import Engine, Error, Retry, __version__, library_version
from ._convert import to_ms
from ._errors import InvalidArgument


def _duration_seconds(text: str) -> float:
    """--duration as the CLI's: the library's text ("30s", "500ms", "2m"), or a plain
    number of seconds."""
    value: Union[str, float] = text
    try:
        value = float(text)
    except ValueError:
        pass
    try:
        return to_ms(value, "--duration") / 1000.0
    except Error as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m keywatch",
                                     description="keywatch from Python")
    parser.add_argument("--version", action="version",
                        version=f"keywatch {__version__} (library {library_version()})")
    verbs = parser.add_subparsers(dest="verb", required=True)
    watch = verbs.add_parser("watch", help="print one JSON line per event")
    watch.add_argument("--redis", default=os.environ.get("KEYWATCH_REDIS_URL"),
                       help="redis://[user:password@]host:port[/db][?db=N], unix:///path or "
                            "redis+sentinel://host1:26379,host2:26379/MASTERNAME "
                            "(default: $KEYWATCH_REDIS_URL)")
    watch.add_argument("--events", default="expired",
                       help="comma-separated event names or '*' (default expired)")
    watch.add_argument("--prefix", help="only keys starting with this text "
                                        "(tracked keys are then not claimed)")
    watch.add_argument("--glob", help="only keys matching this Redis-style glob "
                                      "(tracked keys are then not claimed)")
    watch.add_argument("--db", type=int, help="only events from this database number")
    what = watch.add_mutually_exclusive_group()
    what.add_argument("--queues", default="", help="comma-separated task queues to serve")
    what.add_argument("--observe", action="store_true",
                      help="only print live events: claim no tracked key and no task")
    watch.add_argument("--namespace", help="prefix of keywatch's keys in Redis (default kw)")
    watch.add_argument("--workers", type=int, default=1, help="handler threads (default 1)")
    watch.add_argument("--duration", type=_duration_seconds,
                       help="stop after this long, as the CLI's: 30s, 500ms, 2m "
                            "(a plain number is seconds)")
    watch.add_argument("-c", "--conf", action="append", default=[], metavar="NAME=VALUE",
                       help="any library option, e.g. lease=10s (repeatable)")
    watch.add_argument("-v", "--verbose", action="count", default=0)
    return parser


class _Printer:
    """Writes whole lines under a lock; a closed stdout stops the engine."""

    def __init__(self, engine: Engine) -> None:
        self._lock = threading.Lock()
        self._engine = engine
        self.broken = False

    def __call__(self, event: Any) -> None:
        line = event.json_line()
        with self._lock:
            if not self.broken:
                try:
                    sys.stdout.write(line)
                    sys.stdout.flush()
                    return
                except (BrokenPipeError, OSError):
                    self.broken = True
                    threading.Thread(target=self._engine.stop, daemon=True).start()
        if event.queue is not None:  # a tracked key or task: hand it back, never lose it
            raise Retry("python -m keywatch watch could not write the event to its stdout")


def _options(args: argparse.Namespace) -> Dict[str, Any]:
    options: Dict[str, Any] = {"workers": args.workers}
    for item in args.conf:
        name, sep, value = item.partition("=")
        if not sep:
            raise InvalidArgument(f"--conf {item!r}: use NAME=VALUE, e.g. lease=10s")
        options[name] = value
    if args.namespace:
        options["namespace"] = args.namespace
    keyed = args.prefix is not None or args.glob is not None or args.db is not None
    if args.observe or keyed:
        options["track.enable"] = False
    return options


def watch(args: argparse.Namespace) -> int:
    if not args.redis:
        print("python -m keywatch watch: give --redis URL (or set KEYWATCH_REDIS_URL)",
              file=sys.stderr)
        return 2
    try:
        engine = Engine(args.redis, **_options(args))
        printer = _Printer(engine)
        engine.add_handler(printer, args.events, prefix=args.prefix, glob=args.glob, db=args.db)
        queues: List[str] = [q for q in args.queues.split(",") if q]
        for queue in queues:
            engine.add_handler(printer, "task", queue=queue)
    except (Error, ValueError, TypeError) as e:
        print(f"python -m keywatch watch: {e}", file=sys.stderr)
        return 2
    timer: Optional[threading.Timer] = None
    try:
        try:
            engine.start()
        except Error as e:
            print(f"python -m keywatch watch: cannot watch {args.redis}: {e}", file=sys.stderr)
            return 1
        print(f"keywatch: watching {args.redis} for {args.events} events", file=sys.stderr,
              flush=True)
        if args.duration is not None:
            timer = threading.Timer(args.duration, engine.stop)
            timer.daemon = True
            timer.start()
        engine.run()
    except KeyboardInterrupt:  # Ctrl-C before run() took over: stop all the same
        pass
    finally:
        if timer is not None:
            timer.cancel()
        engine.close()
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="keywatch: %(message)s")
    return watch(args)


if __name__ == "__main__":
    sys.exit(main())
