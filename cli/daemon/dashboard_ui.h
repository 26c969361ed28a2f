// The dashboard's pages: "/" serves index.html, "/ui/<file>" the other files of
// cli/daemon/ui/ (compiled in: embedded_files.h). They are open routes: they hold no data
// (the page asks for the token and sends it with each /api/v1/ request).
// Thread-safety: the routes run on the HTTP thread and read constant data.
#pragma once

#include <map>
#include <string>

#include "cli/daemon/http_server.h"

namespace keywatch::cli {

void add_dashboard_routes(std::map<std::string, HttpRoute> *routes);

}  // namespace keywatch::cli
