// The JSON the C API hands out for the client's admin operations (kw_client_inspect_json,
// kw_client_dead_list_json), made from core's result structs: the only place where the
// client's results become JSON. Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/client/client.h"

namespace keywatch {

// The object kw_client_inspect_json documents.
std::string inspection_json(const Inspection &in);
// The array kw_client_dead_list_json documents.
std::string dead_letters_json(const std::vector<DeadLetter> &letters);

}  // namespace keywatch
