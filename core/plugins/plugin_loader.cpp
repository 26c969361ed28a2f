#include "core/plugins/plugin_loader.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "keywatch_types.h"

// Set by core/CMakeLists.txt: the plugin directory configured at build time, the same
// directory relative to the library's own (as installed), the library directory relative
// to the programs' (as installed), and the build tree with the plugins built in it.
#ifndef KW_PLUGIN_DIR
#define KW_PLUGIN_DIR "/usr/local/lib/keywatch/plugins"
#endif
#ifndef KW_PLUGIN_SUBDIR
#define KW_PLUGIN_SUBDIR "keywatch/plugins"
#endif
#ifndef KW_BINDIR_TO_LIBDIR
#define KW_BINDIR_TO_LIBDIR "../lib"
#endif

namespace keywatch {
namespace {

// Under AddressSanitizer a plugin stays mapped after its last close: LeakSanitizer's exit
// check reads the thread-local storage of every module ever loaded and crashes on that of
// an unloaded one (GCC 12's libsanitizer; seen in half the runs of a test that loads and
// closes the webhook plugin). A kept mapping also lets leak reports name the plugin's code.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kKeepMapped = RTLD_NODELETE;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr int kKeepMapped = RTLD_NODELETE;
#else
constexpr int kKeepMapped = 0;
#endif
#else
constexpr int kKeepMapped = 0;
#endif

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

// The canonical absolute form of `path`, or "" when it does not exist.
std::string real_path(const std::string &path) {
    char buf[PATH_MAX];
    return realpath(path.c_str(), buf) ? std::string(buf) : std::string();
}

// The file this code was loaded from: libkeywatch.so, or the program it is linked into
// (the keywatch binary links the engine statically). "" when unknown.
std::string own_file(bool *is_program) {
    Dl_info info;
    struct link_map *map = nullptr;
    static const int anchor = 0;  // any object of this file's
    if (!dladdr1(&anchor, &info, reinterpret_cast<void **>(&map), RTLD_DL_LINKMAP) || !map)
        return "";
    // The main program's link map has no name.
    *is_program = map->l_name[0] == '\0';
    return real_path(*is_program ? "/proc/self/exe" : map->l_name);
}

// The directories beside this library where its plugins are: the installed layout
// (<libdir>/keywatch/plugins beside <libdir>/libkeywatch.so, or reached from
// <bindir>/keywatch), and in its build tree the plugins built there.
std::vector<std::string> own_plugin_dirs() {
    std::vector<std::string> dirs;
    bool is_program = false;
    const std::string file = own_file(&is_program);
    if (file.empty()) return dirs;
    const std::string dir = file.substr(0, file.rfind('/'));
    dirs.push_back(dir + (is_program ? "/" KW_BINDIR_TO_LIBDIR "/" : "/") + KW_PLUGIN_SUBDIR);
#if defined(KW_BUILD_DIR) && defined(KW_BUILD_PLUGIN_DIR)
    const std::string build = real_path(KW_BUILD_DIR);
    if (!build.empty() && file.compare(0, build.size() + 1, build + "/") == 0)
        dirs.push_back(KW_BUILD_PLUGIN_DIR);
#endif
    return dirs;
}

int resolve(const std::string &spec, std::string *path, std::string *err) {
    if (spec.empty()) {
        *err = "no plugin given: pass a path (with a '/' or ending in .so) or a plugin name";
        return KW_ERR_INVALID_ARG;
    }
    if (plugin_spec_is_path(spec)) {
        // dlopen looks a name without '/' up on the library path: "rec.so" is ./rec.so.
        *path = spec.find('/') == std::string::npos ? "./" + spec : spec;
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
    std::vector<std::string> more = own_plugin_dirs();
    more.push_back(KW_PLUGIN_DIR);
    // Each directory once: the configured one is often the one beside the library.
    for (const auto &dir : more) {
        const std::string real = real_path(dir);
        bool seen = false;
        for (const auto &d : dirs)
            seen = seen || d == dir || (!real.empty() && real_path(d) == real);
        if (!seen) dirs.push_back(dir);
    }
    return dirs;
}

bool plugin_spec_is_path(const std::string &spec) {
    return spec.find('/') != std::string::npos ||
           (spec.size() >= 3 && spec.compare(spec.size() - 3, 3, ".so") == 0);
}

int open_plugin(const std::string &spec, std::shared_ptr<PluginLibrary> *out, std::string *err) {
    std::string path;
    if (int rc = resolve(spec, &path, err); rc != KW_OK) return rc;
    const std::string file = "plugin \"" + path + "\"";
    if (!is_file(path)) {
        *err = file + " cannot be opened: no such file" +
               (plugin_spec_is_path(spec) ? " (check the path)" : "");
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
    lib->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | kKeepMapped);
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
