// Plugin loader: finds a handler plugin (a path, or a name on the search path), checks
// that it is an ELF shared object, dlopens it (RTLD_NOW | RTLD_LOCAL), calls its entry
// function and checks the descriptor against this host's ABI. Every refusal names the
// file, what it has, what the host needs and what to do (PostgreSQL's style).
// The search path: $KEYWATCH_PLUGIN_PATH (colon-separated directories); the plugin
// directory beside the loaded library as installed (<libdir>/keywatch/plugins next to
// <libdir>/libkeywatch.so, or reached from <bindir>/keywatch, which links the engine
// statically, wherever `cmake --install --prefix` put it); the plugins built
// beside it when the library runs from its build tree; then the directory configured at
// build time (KW_PLUGIN_DIR). Thread-safe (no shared state).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "keywatch_plugin.h"

namespace keywatch {

// An open plugin library: dlclose on destruction. Shared by the instances made from it.
class PluginLibrary {
  public:
    ~PluginLibrary();
    const std::string &path() const { return path_; }
    const kw_plugin_descriptor_t *descriptor() const { return descriptor_; }

  private:
    friend int open_plugin(const std::string &, std::shared_ptr<PluginLibrary> *, std::string *);
    void *handle_ = nullptr;
    std::string path_;
    const kw_plugin_descriptor_t *descriptor_ = nullptr;
};

// The directories searched for a plugin given by name, in order.
std::vector<std::string> plugin_search_path();

// True when `spec` names a file rather than a plugin on the search path: it contains a
// '/' or ends in ".so" ("rec.so" is the file rec.so, never "rec.so.so").
bool plugin_spec_is_path(const std::string &spec);

// Opens `path_or_name` (a file when plugin_spec_is_path, else "<name>.so" on the search
// path) and checks it. KW_OK with *out set, or a status with the refusal in *err.
int open_plugin(const std::string &path_or_name, std::shared_ptr<PluginLibrary> *out,
                std::string *err);

}  // namespace keywatch
