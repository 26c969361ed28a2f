// The dashboard's files (cli/daemon/ui/: HTML, CSS, JavaScript), compiled into the binary by
// cmake/embed_files.cmake (a generated source defines the table): nothing is read from disk
// or fetched at run time. Constant data: thread-safe.
#pragma once

#include <cstddef>

namespace keywatch::cli {

struct EmbeddedFile {
    const char *name;  // relative to cli/daemon/ui/: "index.html", "app.js"
    const unsigned char *data;
    size_t size;
};

extern const EmbeddedFile kEmbeddedFiles[];
extern const size_t kEmbeddedFileCount;

}  // namespace keywatch::cli
