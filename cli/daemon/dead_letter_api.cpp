// DashboardApi's dead-letter endpoints: the list of a queue (a page at a time, payloads
// previewed) and the actions replay and purge (POST, [http] admin only). The calls are the
// C API's that `keywatch dead list|replay|purge` make.
#include <algorithm>
#include <memory>

#include "cli/daemon/dashboard_api.h"
#include "cli/dead_replay.h"
#include "cli/daemon/stats_view.h"

namespace keywatch::cli {
namespace {

using Json = nlohmann::json;

constexpr int64_t kDefaultPage = 50;
constexpr int64_t kMaxPage = 500;
constexpr size_t kPreviewBytes = 1023;  // a multiple of 3: base64 cut without padding

// A whole number from 1 to kMaxPage, or false.
bool page_limit(const std::string &text, int64_t *out) {
    if (text.empty() || text.size() > 4 || text.find_first_not_of("0123456789") != text.npos)
        return false;
    *out = std::stoll(text);
    return *out >= 1 && *out <= kMaxPage;
}

// A payload of any size as at most kPreviewBytes: "payload_preview" (UTF-8, cut at a
// character's start) or "payload_preview_b64", with "payload_bytes" and "payload_truncated".
void preview_payload(Json *letter) {
    if (letter->contains("payload")) {
        std::string text = (*letter)["payload"].get<std::string>();
        letter->erase("payload");
        (*letter)["payload_bytes"] = text.size();
        (*letter)["payload_truncated"] = text.size() > kPreviewBytes;
        if (text.size() > kPreviewBytes) {
            size_t cut = kPreviewBytes;
            while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) cut--;
            text.resize(cut);
        }
        (*letter)["payload_preview"] = std::move(text);
    } else if (letter->contains("payload_b64")) {
        std::string b64 = (*letter)["payload_b64"].get<std::string>();
        letter->erase("payload_b64");
        const size_t pad = b64.size() >= 2 ? std::count(b64.end() - 2, b64.end(), '=') : 0;
        const size_t bytes = b64.size() / 4 * 3 - pad;
        (*letter)["payload_bytes"] = bytes;
        (*letter)["payload_truncated"] = bytes > kPreviewBytes;
        if (bytes > kPreviewBytes) b64.resize(kPreviewBytes / 3 * 4);
        (*letter)["payload_preview_b64"] = std::move(b64);
    }
}

// The last error of client, for a reply.
std::string failure(kw_client_t *client, int rc) {
    return std::string(kw_err_name(rc)) + ": " + kw_client_last_error(client);
}

}  // namespace

HttpResponse DashboardApi::dead_list(const std::string &queue, const HttpRequest &req) {
    StatsView stats;
    stats.read(ctx_.engine);
    if (queue_json(queue, stats).is_null())
        return json_error(404, "unknown queue '" + queue +
                                   "': GET /api/v1/queues lists the queues this daemon knows");
    int64_t limit = kDefaultPage;
    if (auto it = req.query.find("limit"); it != req.query.end() && !page_limit(it->second, &limit))
        return json_error(400, "limit: '" + it->second + "' is not a page size: give 1 to " +
                                   std::to_string(kMaxPage));
    const auto cursor = req.query.find("cursor");
    const std::string after = cursor == req.query.end() ? "" : cursor->second;
    std::string err;
    kw_client_t *c = client(&err);
    if (!c) return json_error(503, err);
    char *text = nullptr;
    // One more than the page: whether there is a next one.
    const int rc = kw_client_dead_page_json(c, queue.c_str(), after.c_str(),
                                            static_cast<size_t>(limit + 1), &text);
    if (rc == KW_ERR_INVALID_ARG)
        return json_error(400, "cursor: '" + after +
                                   "' is not a page's cursor: give the next_cursor of the "
                                   "previous page");
    if (rc != KW_OK) return json_error(503, failure(c, rc));
    std::unique_ptr<char, void (*)(void *)> owned(text, &kw_free);
    Json list = Json::parse(text);
    Json page = Json::array();
    for (auto &letter : list) {
        if (static_cast<int64_t>(page.size()) == limit) break;
        preview_payload(&letter);
        page.push_back(std::move(letter));
    }
    // The cursor of the last entry (the C API's: its id, on a cluster with its slot tag).
    Json next;
    if (static_cast<int64_t>(list.size()) > limit) next = page.back()["cursor"];
    return json_response({{"queue", queue}, {"dead_letters", page}, {"next_cursor", next}});
}

HttpResponse DashboardApi::dead_action(const std::string &queue, const std::string &action,
                                       const HttpRequest &req) {
    if (req.method != "POST")
        return json_error(405, "method not allowed: " + req.path + " takes POST");
    if (!ctx_.admin)
        return json_error(403,
                          "actions are off: set [http] admin = true (with a token) to "
                          "replay or purge from the API");
    // No form posts: a browser sends those cross-site without asking (CSRF).
    if (req.content_type.rfind("application/json", 0) != 0)
        return json_error(
            415,
            "send the request as Content-Type: application/json: {\"entry\": CURSOR} or "
            "{\"all\": true}");
    const Json body = Json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
    if (!body.is_object())
        return json_error(400,
                          "the body is not a JSON object: give {\"entry\": \"<cursor>\"} "
                          "or {\"all\": true}");
    if (body.contains("all") && !body["all"].is_boolean())
        return json_error(400, "all: " + body["all"].dump() + " is not true or false");
    if (body.contains("entry") && !body["entry"].is_string())
        return json_error(400, "entry: " + body["entry"].dump() +
                                   " is not a string: give a dead letter's \"cursor\" from its "
                                   "list");
    const bool all = body.value("all", false);
    const bool one = body.contains("entry");
    if (all == one)
        return json_error(400,
                          "entry: give one dead letter ({\"entry\": \"<cursor>\"}, its "
                          "\"cursor\" in the list) or all of them ({\"all\": true})");
    StatsView stats;
    stats.read(ctx_.engine);
    const Json known = queue_json(queue, stats);
    if (known.is_null())
        return json_error(404, "unknown queue '" + queue +
                                   "': GET /api/v1/queues lists the queues this daemon knows");
    std::string err;
    kw_client_t *c = client(&err);
    if (!c) return json_error(503, err);
    const std::string entry = one ? body["entry"].get<std::string>() : "";
    int64_t count = 0;
    int rc = KW_OK;
    if (action == "purge") {
        rc = kw_client_dead_purge(c, queue.c_str(), one ? entry.c_str() : nullptr, &count);
    } else {
        // At most the dead letters the gauges counted: a letter its handler rejects again
        // at once is dead again at once, and must not be replayed for ever.
        const int64_t want = known.value("dead", int64_t{kReplayBatch});
        rc = replay_dead_letters(c, queue.c_str(), one ? entry.c_str() : nullptr, want, &count);
        if (rc == KW_ERR_NOT_FOUND && !one) rc = KW_OK;  // none there (any more)
    }
    if (rc == KW_ERR_NOT_FOUND || (one && rc == KW_OK && count == 0))
        return json_error(404, "queue '" + queue + "' has no dead letter " + entry +
                                   ": GET its dead letters for their cursors");
    if (rc == KW_ERR_INVALID_ARG)
        return json_error(400, "entry: '" + entry +
                                   "' is not a dead letter's cursor: <ms>-<seq>, on a cluster "
                                   "followed by @<slot tag> (its \"cursor\" in the list)");
    if (rc != KW_OK) {
        Json e = {{"error", failure(c, rc)}, {action == "purge" ? "purged" : "replayed", count}};
        return json_response(e, 503);
    }
    return json_response(
        {{"queue", queue}, {"action", action}, {action == "purge" ? "purged" : "replayed", count}});
}

}  // namespace keywatch::cli
