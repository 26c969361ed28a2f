"""keywatch.Stats: an engine's statistics (the table in include/keywatch.h), read from one
snapshot (kw_engine_stats) without parsing text.

Example::

    stats = engine.stats()
    stats["items.acked"] + 1                 # a counter or gauge: int
    stats["queue.acked.keys"]                # one sample of a labelled family
    stats.family("queue.acked")              # {"keys": 12, "emails": 3}: by label value
    stats["expiry.lateness.keys"]            # a histogram's entry: its count (int)
    lateness = stats.histograms["expiry.lateness.keys"]  # the Histogram itself
    lateness.count, lateness.sum             # observations, their sum in seconds
    lateness.buckets                         # ((0.001, 0), ..., (inf, count)): cumulative
    for s in stats.samples:                  # every sample with its type, unit and help
        print(s.name, s.type, s.unit, s.label, s.label_value, s.value)

Every entry of the dict is an ``int`` (as ``Engine.stat(name)`` gives it), so arithmetic on
``stats[name]`` type-checks; histograms are typed apart, in ``stats.histograms``.

A labelled family (a row such as ``queue.acked.<queue>``) has one sample per label value,
named with the value in place of ``<queue>``; its samples appear once their label is known
(queues and handlers at ``start()``, nodes when first connected). Figures of different
samples may be a few events apart (the engine is not stopped to read them).

Thread-safety: a Stats is a plain snapshot; read it from any thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple, Union

_TYPES = ("counter", "gauge", "histogram")


@dataclass(frozen=True)
class Histogram:
    """A histogram's observations: ``count``, ``sum`` (in its unit, seconds) and
    ``buckets``, cumulative as Prometheus' ``le`` buckets: ``(upper bound, observations
    <= it)``, the last bound ``math.inf`` with the total."""

    count: int
    sum: float
    buckets: Tuple[Tuple[float, int], ...]


Value = Union[int, Histogram]


class Sample(NamedTuple):
    """One sample: ``name`` (e.g. ``"queue.acked.keys"``), ``row`` (its table row,
    ``"queue.acked.<queue>"``), ``type`` ("counter", "gauge" or "histogram"), ``unit``,
    ``help``, ``label`` and ``label_value`` ("" and "" when unlabelled), ``value``."""

    name: str
    row: str
    type: str
    unit: str
    help: str
    label: str
    label_value: str
    value: Value


def _sample(raw: Tuple[Any, ...]) -> Sample:
    row, kind, unit, help_text, label, label_value, value, total, buckets = raw
    name = row.replace(f"<{label}>", label_value) if label else row
    if buckets is not None:
        value = Histogram(value, total, tuple((float(b), int(c)) for b, c in buckets))
    return Sample(name, row, _TYPES[kind], unit, help_text, label, label_value, value)


def _count(value: Value) -> int:
    return value.count if isinstance(value, Histogram) else value


class Stats(Dict[str, int]):
    """Every sample by name as an ``int`` (a dict: ``stats["items.acked"]``; a histogram's
    entry is its count), plus ``histograms`` (each histogram by name), ``samples`` (each
    with its type, unit, help and label) and ``family()`` (a labelled family by label)."""

    def __init__(self, raw: Sequence[Tuple[Any, ...]]) -> None:
        #: Every sample, in the table's order.
        self.samples: List[Sample] = [_sample(r) for r in raw]
        #: Each histogram sample by name (``"expiry.lateness.keys"``).
        self.histograms: Dict[str, Histogram] = {
            s.name: s.value for s in self.samples if isinstance(s.value, Histogram)}
        super().__init__((s.name, _count(s.value)) for s in self.samples)

    def family(self, name: str) -> Dict[str, int]:
        """The samples of a labelled family by label value: ``family("queue.acked")`` (or
        ``"queue.acked.<queue>"``) is ``{"keys": 12, ...}`` (a histogram family: counts);
        ``{}`` while no label value is known (e.g. ``events.received.<event>`` before the
        first event)."""
        return {s.label_value: _count(s.value) for s in self.samples
                if s.label and (s.row == name or s.row == f"{name}.<{s.label}>")}
