// The one assertion of the fuzz targets: a property that failed prints what was expected
// and the input's size, then aborts, so libFuzzer saves the input as a crash. Header-only;
// used by one fuzz target per process. No shared state: thread-safe.
#pragma once

#include <cstdio>
#include <cstdlib>

#define KW_FUZZ_CHECK(cond, what)                                                                \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            std::fprintf(stderr, "%s:%d: property failed: %s (%s)\n", __FILE__, __LINE__, #cond, \
                         what);                                                                  \
            std::abort();                                                                        \
        }                                                                                        \
    } while (0)
