#include "bindings/src/stats_binding.h"

#include <memory>

#include "bindings/src/capi_seam.h"
#include "bindings/src/status_error.h"

namespace py = pybind11;

namespace keywatch::python {
namespace {

py::object buckets(const kw_stats_t *s, size_t i) {
    const double *bounds = nullptr;
    const uint64_t *counts = nullptr;
    const size_t n = capi::stats_buckets(s, i, &bounds, &counts);
    if (n == 0) return py::none();
    py::list out;
    for (size_t b = 0; b < n; b++) out.append(py::make_tuple(bounds[b], counts[b]));
    return std::move(out);
}

}  // namespace

py::list stats_samples(kw_engine_t *engine) {
    kw_stats_t *raw = nullptr;
    check(capi::engine_stats(engine, &raw), "kw_engine_stats: no statistics snapshot");
    std::unique_ptr<kw_stats_t, void (*)(kw_stats_t *)> stats(raw, capi::stats_free);
    const kw_stats_t *s = stats.get();
    py::list out;
    for (size_t i = 0, n = capi::stats_count(s); i < n; i++)
        out.append(py::make_tuple(capi::stats_name(s, i), static_cast<int>(capi::stats_type(s, i)),
                                  capi::stats_unit(s, i), capi::stats_help(s, i),
                                  capi::stats_label_name(s, i), capi::stats_label_value(s, i),
                                  capi::stats_value(s, i), capi::stats_sum(s, i), buckets(s, i)));
    return out;
}

}  // namespace keywatch::python
