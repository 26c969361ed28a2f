// The engine's statistics snapshot (kw_engine_stats) as Python values: one tuple per
// sample, in the table's order, that keywatch.stats turns into Sample and Histogram
// objects. Reads a snapshot the caller owns only; called with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include "keywatch.h"

namespace keywatch::python {

// [(row, type, unit, help, label, label_value, value, sum, buckets), ...]: row is the table's
// name ("expiry.lateness.<queue>"), type 0 counter / 1 gauge / 2 histogram, value the count
// of a histogram, sum its sum in seconds (else the value), buckets
// [(upper bound in seconds, cumulative count), ...] ending with (inf, count), or None.
// Raises StatusError (keywatch.Error) when no snapshot can be taken.
pybind11::list stats_samples(kw_engine_t *engine);

}  // namespace keywatch::python
