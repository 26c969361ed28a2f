#include "bindings/src/status_error.h"

#include <unistd.h>

#include "bindings/src/capi_seam.h"

namespace py = pybind11;

namespace keywatch::python {

void check(int status, const std::string &message) {
    if (status == KW_OK) return;
    throw StatusError(status, message.empty() ? capi::strerror(status) : message);
}

void raise_python_error(const char *class_name, const std::string &message) {
    py::object cls = py::module_::import("keywatch._errors").attr(class_name);
    PyErr_SetObject(cls.ptr(), cls(message).ptr());
    throw py::error_already_set();
}

ProcessGuard::ProcessGuard() : pid_(getpid()) {}

bool ProcessGuard::in_child() const {
    return getpid() != pid_;
}

void ProcessGuard::check(const char *what) const {
    if (!in_child()) return;
    raise_python_error("ForkError",
                       std::string(what) + " was created in process " + std::to_string(pid_) +
                           " and cannot be used after os.fork() "
                           "(this is process " +
                           std::to_string(getpid()) + "): create a new one in the child");
}

void register_status_error(py::module_ &) {
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const StatusError &e) {
            py::object make = py::module_::import("keywatch._errors").attr("from_status");
            py::object exc = make(e.status(), e.what());
            PyErr_SetObject(reinterpret_cast<PyObject *>(Py_TYPE(exc.ptr())), exc.ptr());
        }
    });
}

}  // namespace keywatch::python
