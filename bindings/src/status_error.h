// Errors of the C API as a C++ exception, and its translation into the Python exception
// classes of keywatch._errors (one class per status of the status table). Also the
// process guard: handles made before os.fork() refuse to be used in the child.
// Thread-safety: throw from any thread; the translation runs with the GIL held.
#pragma once

#include <sys/types.h>

#include <stdexcept>
#include <string>

#include <pybind11/pybind11.h>

namespace keywatch::python {

// A failed C call: the status code and the library's message for it.
class StatusError : public std::runtime_error {
  public:
    StatusError(int status, const std::string &message)
        : std::runtime_error(message), status_(status) {}
    int status() const { return status_; }

  private:
    int status_;
};

// Throws StatusError(status, message or the status's text when message is empty) unless
// status is KW_OK.
void check(int status, const std::string &message);

// Raises keywatch._errors.<class_name>(message) (a Python exception, not a status).
[[noreturn]] void raise_python_error(const char *class_name, const std::string &message);

// Remembers the process a handle was made in; check() in a forked child raises
// keywatch.ForkError naming what to do.
class ProcessGuard {
  public:
    ProcessGuard();
    void check(const char *what) const;
    bool in_child() const;

  private:
    pid_t pid_;
};

// Registers the translator of StatusError (module initialisation).
void register_status_error(pybind11::module_ &m);

}  // namespace keywatch::python
