#include "cli/conn_state.h"

#include "keywatch.h"

namespace keywatch::cli {

const char *conn_state_name(int64_t state) {
    switch (state) {
        case KW_CONN_DISCONNECTED:
            return "disconnected";
        case KW_CONN_CONNECTING:
            return "connecting";
        case KW_CONN_READY:
            return "ready";
        case KW_CONN_BROKEN:
            return "broken";
    }
    return "unknown";
}

}  // namespace keywatch::cli
