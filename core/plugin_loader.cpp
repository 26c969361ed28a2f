#include "core/plugin_loader.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "keywatch_types.h"

#ifndef KW_PLUGIN_DIR
#define KW_PLUGIN_DIR "/usr/local/lib/keywatch/plugins"
#endif

namespace keywatch {
namespace {

const char *kDefine = "KW_HANDLER_DEFINE(descriptor) from keywatch_plugin.h";

bool is_file(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// "" when `path` is an ELF shared object; else what it is instead.
std::string not_shared_object(const std::string &path) {
    FILE *f = fopen(path.c_str(), "rb");
    if (!f) return std::string("cannot be read: ") + strerror(errno);
    unsigned char h[EI_NIDENT + 2] = {0};
    size_t n = fread(h, 1, sizeof h, f);
    fclose(f);
    if (n < sizeof h || memcmp(h, ELFMAG, SELFMAG) != 0) return "is not an ELF file";
    // e_type follows e_ident, in the file's byte order.
    unsigned type = h[EI_DATA] == ELFDATA2MSB ? (h[EI_NIDENT] << 8) | h[EI_NIDENT + 1]
                                              : h[EI_NIDENT] | (h[EI_NIDENT + 1] << 8);
    if (type == ET_DYN) return "";
    if (type == ET_REL) return "is a relocatable object (a .o file), not a shared object";
    if (type == ET_EXEC) return "is an executable, not a shared object";
    return "is an ELF file of type " + std::to_string(type) + ", not a shared object";
}

int resolve(const std::string &spec, std::string *path, std::string *err) {
    if (spec.empty()) {
        *err = "no plugin given: pass a path (with a '/') or a plugin name";
        return KW_ERR_INVALID_ARG;
    }
    if (spec.find('/') != std::string::npos) {
        *path = spec;
        return KW_OK;
    }
    std::string tried;
    for (const auto &dir : plugin_search_path()) {
        std::string p = dir + "/" + spec + ".so";
        if (is_file(p)) {
            *path = p;
            return KW_OK;
        }
        tried += (tried.empty() ? "" : ", ") + p;
    }
    *err = "plugin \"" + spec + "\" not found (tried " + tried +
           "): install it there, add its directory to KEYWATCH_PLUGIN_PATH, or pass its path";
    return KW_ERR_NOT_FOUND;
}

int check_descriptor(const std::string &path, const kw_plugin_descriptor_t *d, std::string *err) {
    const std::string file = "plugin \"" + path + "\"";
    if (!d) {
        *err = file +
               ": its entry function returned NULL: it must return the address of a "
               "static kw_plugin_descriptor_t (use " +
               kDefine + ")";
        return KW_ERR_INVALID_ARG;
    }
    if (d->abi_version != KW_PLUGIN_ABI_VERSION) {
        *err = file + " was built for handler ABI " + std::to_string(d->abi_version) +
               ", this keywatch (" KW_VERSION_STRING ") requires ABI " +
               std::to_string(KW_PLUGIN_ABI_VERSION) +
               ": rebuild the plugin against keywatch_plugin.h of keywatch " KW_VERSION_STRING;
        return KW_ERR_INVALID_ARG;
    }
    const size_t need = offsetof(kw_plugin_descriptor_t, close) + sizeof d->close;
    if (d->size < need) {
        *err = file + ": its descriptor is " + std::to_string(d->size) + " bytes, ABI " +
               std::to_string(KW_PLUGIN_ABI_VERSION) + " needs at least " + std::to_string(need) +
               ": set .size = sizeof(kw_plugin_descriptor_t) and rebuild against "
               "keywatch_plugin.h of keywatch " KW_VERSION_STRING;
        return KW_ERR_INVALID_ARG;
    }
    if (!d->name || !*d->name) {
        *err = file + ": its descriptor has no name: set .name (e.g. \"my_handler\")";
        return KW_ERR_INVALID_ARG;
    }
    if (!d->handle) {
        *err = file + " (\"" + d->name +
               "\"): its descriptor's handle callback is NULL; the host needs handle to deliver "
               "events: set .handle";
        return KW_ERR_INVALID_ARG;
    }
    return KW_OK;
}

}  // namespace

PluginLibrary::~PluginLibrary() {
    if (handle_) dlclose(handle_);
}

std::vector<std::string> plugin_search_path() {
    std::vector<std::string> dirs;
    if (const char *env = getenv("KEYWATCH_PLUGIN_PATH")) {
        std::string s = env;
        size_t start = 0;
        while (start <= s.size()) {
            size_t end = s.find(':', start);
            if (end == std::string::npos) end = s.size();
            if (end > start) dirs.push_back(s.substr(start, end - start));
            start = end + 1;
        }
    }
    dirs.push_back(KW_PLUGIN_DIR);
    return dirs;
}

int open_plugin(const std::string &spec, std::shared_ptr<PluginLibrary> *out, std::string *err) {
    std::string path;
    if (int rc = resolve(spec, &path, err); rc != KW_OK) return rc;
    const std::string file = "plugin \"" + path + "\"";
    if (!is_file(path)) {
        *err = file + " cannot be opened: no such file" +
               (spec.find('/') == std::string::npos ? "" : " (check the path)");
        return KW_ERR_NOT_FOUND;
    }
    if (std::string what = not_shared_object(path); !what.empty()) {
        *err = file + " " + what +
               ": the host needs an ELF shared object; build the plugin with -shared -fPIC";
        return KW_ERR_INVALID_ARG;
    }
    auto lib = std::shared_ptr<PluginLibrary>(new PluginLibrary());
    lib->path_ = path;
    dlerror();
    lib->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib->handle_) {
        const char *e = dlerror();
        *err = file + " cannot be loaded: " + (e ? e : "dlopen failed") +
               " (a missing library or symbol: check it with ldd -r)";
        return KW_ERR_INVALID_ARG;
    }
    dlerror();
    void *sym = dlsym(lib->handle_, KW_PLUGIN_ENTRY_SYMBOL);
    if (!sym) {
        *err = file +
               " does not export " KW_PLUGIN_ENTRY_SYMBOL
               ", the entry function the host calls: declare it with " +
               std::string(kDefine) + " and rebuild";
        return KW_ERR_INVALID_ARG;
    }
    kw_plugin_entry_fn entry;
    static_assert(sizeof entry == sizeof sym, "function and data pointers differ in size");
    memcpy(&entry, &sym, sizeof entry);
    const kw_plugin_descriptor_t *d = entry();
    if (int rc = check_descriptor(path, d, err); rc != KW_OK) return rc;
    lib->descriptor_ = d;
    *out = std::move(lib);
    return KW_OK;
}

}  // namespace keywatch
