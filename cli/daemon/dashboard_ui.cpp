#include "cli/daemon/dashboard_ui.h"

#include "cli/daemon/embedded_files.h"

namespace keywatch::cli {
namespace {

std::string content_type(const std::string &name) {
    auto ends = [&](const std::string &ext) {
        return name.size() > ext.size() &&
               name.compare(name.size() - ext.size(), ext.size(), ext) == 0;
    };
    if (ends(".html")) return "text/html; charset=utf-8";
    if (ends(".js")) return "text/javascript; charset=utf-8";
    if (ends(".css")) return "text/css; charset=utf-8";
    if (ends(".svg")) return "image/svg+xml";
    return "application/octet-stream";
}

HttpResponse file(const std::string &name) {
    HttpResponse r;
    for (size_t i = 0; i < kEmbeddedFileCount; i++)
        if (name == kEmbeddedFiles[i].name) {
            r.content_type = content_type(name);
            r.body.assign(reinterpret_cast<const char *>(kEmbeddedFiles[i].data),
                          kEmbeddedFiles[i].size);
            return r;
        }
    r.status = 404;
    r.body = "not found: /ui/" + name + "\n";
    return r;
}

}  // namespace

void add_dashboard_routes(std::map<std::string, HttpRoute> *routes) {
    (*routes)["/"] = {[](const HttpRequest &) { return file("index.html"); }, true};
    (*routes)["/ui/"] = {[](const HttpRequest &req) {
                             const std::string name = req.path.substr(4);
                             return file(name.empty() ? "index.html" : name);
                         },
                         true, true};
}

}  // namespace keywatch::cli
