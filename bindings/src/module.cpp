// keywatch._keywatch: the extension module under the keywatch package. It binds the C API
// (through capi_seam.h only); the Pythonic layer (types, durations, exceptions, the
// engine's decorators) is the pure-Python package around it. Thread-safety: see each class.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/src/capi_seam.h"
#include "bindings/src/client_binding.h"
#include "bindings/src/conf.h"
#include "bindings/src/engine_binding.h"
#include "bindings/src/event_binding.h"
#include "bindings/src/status_error.h"
#include "bindings/src/held_events.h"

namespace py = pybind11;
using namespace keywatch::python;

PYBIND11_MODULE(_keywatch, m) {
    m.doc() = "keywatch's C library, bound for the keywatch package";
    m.attr("__version__") = KW_VERSION_STRING;  // the header the module was built against
    m.def("library_version", &capi::version_string, "version of the libkeywatch loaded");
    m.def("strerror", &capi::strerror, py::arg("status"));
    m.def("err_name", &capi::err_name, py::arg("status"));
    m.def("option_defaults", &option_defaults, "every option of the library with its default");
    m.def("duration_ms", &duration_ms, py::arg("text"),
          "a duration in the library's text (\"250ms\") as milliseconds");
    register_status_error(m);
    bind_event(m);
    bind_client(m);
    bind_engine(m);
    bind_hold(m);
}
