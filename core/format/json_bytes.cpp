#include "core/format/json_bytes.h"

#include "core/format/text.h"

namespace keywatch {

void put_bytes(nlohmann::ordered_json &j, const std::string &name, std::string_view bytes) {
    if (is_valid_utf8(bytes))
        j[name] = std::string(bytes);
    else
        j[name + "_b64"] = base64_encode(bytes);
}

}  // namespace keywatch
