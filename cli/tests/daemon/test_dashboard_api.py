"""The daemon's JSON API under /api/v1/ end to end: the real `keywatch run` against a real
redis-server and a real 3+3 cluster, read with a real HTTP client. The queue figures equal
`keywatch inspect --json`'s (waited for: the gauges read every 100 ms here); dead letters are
paged by a cursor, binary payloads come as base64 and a 16 MiB payload is previewed; replay
and purge work only with [http] admin = true and a token (403 otherwise, 401 without the
token, 415 for a form post); bad input is a JSON error naming what was wrong.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from urllib.parse import quote

import http.client

import redis as redis_py
from conftest import base_config, sanitized_build, toml_str, wait_for

TOKEN = "s3cret-t0ken"
QUEUES = ("jobs", "mail", "reports")


def handler_config(tmp_path, admin: bool = True, token: bool = True) -> str:
    """Three task queues served by an exec handler that records each task it acks (stdin
    line) in tmp_path/delivered, and fails tasks whose id holds "bad" while
    tmp_path/fail exists (so that they become dead letters at once: max_attempts 1)."""
    (tmp_path / "fail").write_text("")
    script = (f'in=$(cat); if printf %s "$in" | grep -q bad && [ -e {tmp_path}/fail ]; '
              f'then exit 1; fi; printf "%s\\n" "$in" >> {tmp_path}/delivered')
    http = ""
    if token:
        http += f"token = {toml_str(TOKEN)}\n"
    if admin:
        http += "admin = true\n"
    return f"""
queues = {json.dumps(list(QUEUES))}
max_attempts = 1

[metrics]
queue_interval = "100ms"

[[handler]]
plugin = "exec"
name = "recorder"
events = "task"

[handler.options]
argv0 = "/bin/sh"
argv1 = "-c"
argv2 = {toml_str(script)}
""", http


def start(daemon, url, tmp_path, admin=True, token=True):
    extra, http = handler_config(tmp_path, admin, token)
    d = daemon(base_config(url, extra) + http)
    d.wait_running()
    return d


def call(d, method, path, body=None, token=TOKEN, content_type="application/json"):
    """(status, parsed JSON body) of one request."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(f"http://{d.http}{path}", data=data, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if data is not None and content_type:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        text = e.read()
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text.decode(errors="replace")


def get(d, path, token=TOKEN):
    return call(d, "GET", path, token=token)


FIGURES = ("due", "due_now", "inflight", "dead")


def inspect_figures(keywatch, url):
    r = keywatch("inspect", "--json", "--redis", url, "--queues", ",".join(QUEUES))
    assert r.returncode == 0, r.stderr
    return {q["queue"]: {f: q[f] for f in FIGURES} for q in json.loads(r.stdout)["queues"]}


def api_figures(d):
    status, body = get(d, "/api/v1/queues")
    assert status == 200, body
    return {q["queue"]: {f: q.get(f) for f in FIGURES} for q in body["queues"]}


def figures_agree(d, keywatch, url):
    """Waits until the API's figures equal inspect's (both read Redis; the API's every
    100 ms) and returns them."""
    def same():
        want = inspect_figures(keywatch, url)
        got = api_figures(d)
        return want if all(got.get(q) == f for q, f in want.items()) else None
    return wait_for(same, 30, "the API's queue figures to equal keywatch inspect's")


def schedule(keywatch, url, queue, task, payload="p", when="0"):
    r = keywatch("schedule", queue, task, payload, "--in", when, "--redis", url, "--quiet")
    assert r.returncode == 0, r.stderr


def dead_count(d, queue):
    return get(d, f"/api/v1/queues/{queue}")[1].get("dead")


def test_api_reads_match_inspect_and_admin_replays_and_purges(redis, daemon, keywatch, tmp_path):
    d = start(daemon, redis.url, tmp_path)
    for i in range(3):
        schedule(keywatch, redis.url, "jobs", f"bad-{i}", f"payload {i}")
    schedule(keywatch, redis.url, "jobs", "ok-0")
    schedule(keywatch, redis.url, "mail", "later", when="1h")
    schedule(keywatch, redis.url, "reports", "bin-bad", "\udcff\udcfe binary")
    wait_for(lambda: dead_count(d, "jobs") == 3 and dead_count(d, "reports") == 1, 30,
             "4 dead letters")
    figures = figures_agree(d, keywatch, redis.url)
    assert figures["mail"]["due"] == 1 and figures["jobs"]["dead"] == 3

    status, index = get(d, "/api/v1/")
    assert status == 200 and index["admin"] is True
    assert "POST /api/v1/queues/<queue>/dead/replay" in index["endpoints"]
    status, nodes = get(d, "/api/v1/nodes")
    assert status == 200 and [n["node"] for n in nodes["nodes"]] == [f"127.0.0.1:{redis.port}"]
    # KW_CONN_READY (2): the name and the number
    assert nodes["nodes"][0]["state"] == "ready" and nodes["nodes"][0]["stats"]["node.state"] == 2
    status, jobs = get(d, "/api/v1/queues/jobs")
    assert status == 200
    wait_for(lambda: get(d, "/api/v1/queues/jobs")[1]["lateness"]["count"] == 4, 20,
             "4 lateness observations of jobs")
    assert jobs["lateness"]["buckets"][-1][0] == "+Inf"
    status, handlers = get(d, "/api/v1/handlers")
    assert status == 200 and handlers["handlers"][0]["name"] == "recorder"
    wait_for(lambda: get(d, "/api/v1/handlers")[1]["handlers"][0]["stats"]["handler.duration"]
             ["count"] == 5, 20, "5 handler calls timed")
    status, config = get(d, "/api/v1/config")
    assert status == 200 and config["http"] == {"listen": "127.0.0.1:0", "token": True,
                                                  "admin": True}
    assert TOKEN not in json.dumps(config)

    # Dead letters: paged by a cursor, oldest first; binary payloads in base64.
    status, page1 = get(d, "/api/v1/queues/jobs/dead?limit=2")
    assert status == 200, page1
    cursor = quote(page1["next_cursor"])
    status, page2 = get(d, f"/api/v1/queues/jobs/dead?limit=2&cursor={cursor}")
    assert len(page1["dead_letters"]) == 2 and page2["next_cursor"] is None
    letters = page1["dead_letters"] + page2["dead_letters"]
    assert sorted(x["id"] for x in letters) == ["bad-0", "bad-1", "bad-2"]
    def entry_order(letter):  # "<ms>-<seq>" by number: "1-10" after "1-9"
        return tuple(int(part) for part in letter["entry"].split("-"))
    assert [x["entry"] for x in letters] == [x["entry"] for x in sorted(letters, key=entry_order)]
    assert all(x["cursor"] == x["entry"] for x in letters)  # standalone: no slot tag
    first = letters[0]
    assert first["payload_preview"] == "payload " + first["id"][-1]
    assert first["attempts"] == 1 and first["payload_truncated"] is False
    status, binary = get(d, "/api/v1/queues/reports/dead")
    assert binary["dead_letters"][0]["payload_preview_b64"] == "//4gYmluYXJ5"
    assert binary["dead_letters"][0]["payload_bytes"] == 9

    # Bad input: JSON errors naming what was wrong.
    status, err = get(d, "/api/v1/queues/nope")
    assert status == 404 and "unknown queue 'nope'" in err["error"]
    assert get(d, "/api/v1/queues/nope/dead")[0] == 404
    for bad in ("0", "x", "501", "-1"):
        status, err = get(d, f"/api/v1/queues/jobs/dead?limit={bad}")
        assert status == 400 and err["error"].startswith("limit:"), err
    status, err = get(d, "/api/v1/queues/jobs/dead?cursor=abc")
    assert status == 400 and err["error"].startswith("cursor:"), err
    assert get(d, "/api/v1/nothing")[0] == 404
    assert get(d, "/api/v1/queues", token=None)[0] == 401
    assert get(d, "/api/v1/queues/jobs/dead/replay")[0] == 405
    path = "/api/v1/queues/jobs/dead/replay"
    assert call(d, "POST", path, {"entry": "x"}, token=None)[0] == 401
    assert call(d, "POST", path, b"all=true", content_type="application/x-www-form-urlencoded")[0] == 415
    status, err = call(d, "POST", path, {})
    assert status == 400 and err["error"].startswith("entry:")
    status, err = call(d, "POST", path, {"all": 1})
    assert status == 400 and err["error"].startswith("all:"), err
    status, err = call(d, "POST", path, {"entry": "x"})
    assert status == 400 and err["error"].startswith("entry: 'x'"), err
    # No Content-Type at all (urllib would add a form's): refused as a form post is.
    assert raw_status(d, "POST", path, TOKEN, body=b'{"all": true}') == 415
    for method in ("PUT", "DELETE"):
        status, err = call(d, method, path, {"all": True})
        assert status == 405 and "method not allowed" in err["error"], err
    status, index = get(d, "/api/v1")
    assert status == 200 and "endpoints" in index

    # Replay one: delivered (the handler records it) and the count drops.
    (tmp_path / "fail").unlink()
    entry = first["entry"]
    status, done = call(d, "POST", path, {"entry": entry})
    assert (status, done) == (200, {"queue": "jobs", "action": "replay", "replayed": 1})
    wait_for(lambda: (tmp_path / "delivered").exists()
             and first["id"] in (tmp_path / "delivered").read_text(), 30, "the replayed delivered")
    wait_for(lambda: dead_count(d, "jobs") == 2, 20, "2 dead letters left in jobs")
    assert call(d, "POST", path, {"entry": entry})[0] == 404
    # Purge all of reports; replay all of jobs.
    status, done = call(d, "POST", "/api/v1/queues/reports/dead/purge", {"all": True})
    assert (status, done["purged"]) == (200, 1)
    status, done = call(d, "POST", path, {"all": True})
    assert (status, done["replayed"]) == (200, 2)
    figures = figures_agree(d, keywatch, redis.url)
    assert figures["jobs"]["dead"] == 0 and figures["reports"]["dead"] == 0


def test_actions_are_refused_when_admin_is_off(redis, daemon, keywatch, tmp_path):
    d = start(daemon, redis.url, tmp_path, admin=False, token=False)
    schedule(keywatch, redis.url, "jobs", "bad-1")
    wait_for(lambda: dead_count(d, "jobs") == 1, 30, "a dead letter")
    assert get(d, "/api/v1/", token=None)[1]["admin"] is False
    for action in ("replay", "purge"):
        status, err = call(d, "POST", f"/api/v1/queues/jobs/dead/{action}", {"all": True},
                           token=None)
        assert status == 403 and "[http] admin = true" in err["error"], err
    assert dead_count(d, "jobs") == 1


def test_admin_without_a_token_is_refused_at_load(redis, keywatch, tmp_path):
    extra, _ = handler_config(tmp_path)
    r = keywatch("run", "--check", config=base_config(redis.url, extra) + "admin = true\n")
    assert r.returncode == 2, r.stderr
    assert "[http] admin: the dashboard's actions (replay, purge) need a token" in r.stderr


def test_a_16_mib_payload_is_previewed_not_sent(redis, daemon, keywatch, tmp_path):
    d = start(daemon, redis.url, tmp_path)
    schedule(keywatch, redis.url, "jobs", "bad-small")
    wait_for(lambda: dead_count(d, "jobs") == 1, 30, "a dead letter")
    # A second entry in the same dead-letter stream, with a 16 MiB payload. A sanitizer
    # build takes about the HTTP server's request timeout (10 s) to page one through the
    # daemon's JSON: there it is 2 MiB, still 2048 times the preview.
    huge_bytes = (2 << 20) if sanitized_build() else (16 << 20)
    stream = next(k for k in redis.client.scan_iter(match="*jobs*dead", count=1000))
    fields = dict(redis.client.xrange(stream)[0][1])
    fields[b"id"] = b"bad-huge"
    fields[b"payload"] = b"x" * huge_bytes
    redis.client.xadd(stream, fields)
    status, body = get(d, "/api/v1/queues/jobs/dead")
    assert status == 200
    huge = body["dead_letters"][1]
    assert huge["id"] == "bad-huge" and huge["payload_bytes"] == huge_bytes
    assert huge["payload_truncated"] is True and len(huge["payload_preview"]) <= 1024
    assert len(json.dumps(body)) < 10000


def test_cluster_figures_match_inspect_and_dead_letters_page_over_slots(cluster, daemon, keywatch,
                                                                         tmp_path):
    d = start(daemon, cluster.seed, tmp_path)
    for i in range(6):
        schedule(keywatch, cluster.seed, "jobs", f"bad-{i}")
    schedule(keywatch, cluster.seed, "mail", "later", when="1h")
    wait_for(lambda: dead_count(d, "jobs") == 6, 60, "6 dead letters over the cluster")
    figures_agree(d, keywatch, cluster.seed)
    status, nodes = get(d, "/api/v1/nodes")
    assert status == 200 and len(nodes["nodes"]) == 3
    seen, cursor = [], ""
    while True:
        status, page = get(d, f"/api/v1/queues/jobs/dead?limit=4{cursor}")
        assert status == 200, page
        seen += [x["id"] for x in page["dead_letters"]]
        if page["next_cursor"] is None:
            break
        cursor = f"&cursor={quote(page['next_cursor'])}"
    assert sorted(seen) == [f"bad-{i}" for i in range(6)]
    # The same entry id in two slots' streams: a letter's cursor names one stream, and an
    # action on that cursor touches that stream only.
    masters = [redis_py.Redis(host=n["host"], port=int(n["port"])) for n in cluster.nodes
               if n["role"] == "master"]
    TWIN = "99999999999999-1"
    streams = [(m, k) for m in masters for k in m.scan_iter(match="*jobs*dead", count=1000)]
    assert len(streams) >= 2, streams
    for m, key in streams[:2]:
        fields = dict(m.xrange(key, count=1)[0][1])
        fields[b"id"] = b"twin"
        m.xadd(key, fields, id=TWIN)  # after every entry there (an id must grow)
    twins = [x for x in get(d, "/api/v1/queues/jobs/dead?limit=500")[1]["dead_letters"]
             if x["entry"] == TWIN]
    assert len(twins) == 2, twins
    assert [x["cursor"] for x in twins] == [f"{TWIN}@{x['slot_tag']}" for x in twins]
    purge = "/api/v1/queues/jobs/dead/purge"
    status, done = call(d, "POST", purge, {"entry": twins[0]["cursor"]})
    assert (status, done.get("purged")) == (200, 1), done
    left = [x["cursor"] for x in get(d, "/api/v1/queues/jobs/dead?limit=500")[1]["dead_letters"]
            if x["entry"] == TWIN]
    assert left == [twins[1]["cursor"]]
    for m in masters:
        m.close()
    status, done = call(d, "POST", purge, {"all": True})
    assert (status, done["purged"]) == (200, 7)


def raw_status(d, method, path, token=None, body=None, host_header=None):
    """The status of a request sent as written: no client normalises the path or adds a
    Content-Type."""
    host, port = d.http.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if host_header:
        headers["Host"] = host_header
    try:
        conn.request(method, path, body=body, headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


def test_every_api_path_needs_the_token_and_the_page_is_open(redis, daemon, tmp_path):
    d = start(daemon, redis.url, tmp_path, admin=False)
    paths = ["/api/v1", "/api/v1/", "/api/v1/nodes", "/api/v1/queues", "/api/v1/queues/jobs",
             "/api/v1/queues/jobs/dead", "/api/v1/handlers", "/api/v1/config", "/api/v1/nothing"]
    for path in paths:
        status, err = get(d, path, token=None)
        assert status == 401 and "unauthorized" in err["error"], (path, err)
        assert get(d, path, token="wrong")[0] == 401, path
    for action in ("replay", "purge"):
        path = f"/api/v1/queues/jobs/dead/{action}"
        assert call(d, "POST", path, {"all": True}, token=None)[0] == 401
        # With the token but admin off: forbidden, and said why.
        status, err = call(d, "POST", path, {"all": True})
        assert status == 403 and "[http] admin = true" in err["error"], err
    # The page and its files are open; unknown files and a way out of /ui/ are not found.
    assert raw_status(d, "GET", "/") == 200
    assert raw_status(d, "GET", "/ui/app.js") == 200
    for path in ("/ui/nothing.js", "/ui/../index.html", "/ui/..%2Fui%2Fapp.js"):
        assert raw_status(d, "GET", path) == 404, path


def test_config_shows_handler_option_names_not_their_values(redis, daemon, tmp_path):
    extra = f"""
[[handler]]
plugin = "webhook"
name = "hook"

[handler.options]
url = "http://127.0.0.1:9/hook?api_key=url-s3cret"
headers = "Authorization: Bearer header-s3cret"
"""
    d = daemon(base_config(redis.url, extra) + f"token = {toml_str(TOKEN)}\n")
    d.wait_running()
    status, config = get(d, "/api/v1/config")
    assert status == 200, config
    text = json.dumps(config)
    assert "s3cret" not in text, text
    line = next(x for x in config["summary"] if x.startswith('handler "hook"'))
    assert "headers" in line and "url" in line, line


def test_without_a_token_a_foreign_host_is_refused(redis, daemon, tmp_path):
    """DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 sends
    Host: evil.example; the daemon without a token answers only to its own names."""
    d = start(daemon, redis.url, tmp_path, admin=False, token=False)
    port = d.http.rsplit(":", 1)[1]
    for path in ("/api/v1/queues", "/", "/metrics"):
        assert raw_status(d, "GET", path, host_header=f"evil.example:{port}") == 403, path
        for own in (d.http, f"localhost:{port}", f"LOCALHOST:{port}", "127.0.0.1"):
            assert raw_status(d, "GET", path, host_header=own) == 200, (path, own)


def test_polling_dead_letters_does_not_scan_redis_each_time(redis, daemon, keywatch, tmp_path):
    """A dashboard polls a queue's dead letters every 2 s: the streams found are reused,
    not looked for again with a SCAN of every master per request. (The gauges read once an
    hour here, so that the SCANs counted are the list's.)"""
    extra, http = handler_config(tmp_path)
    d = daemon(base_config(redis.url, extra.replace('"100ms"', '"1h"')) + http)
    d.wait_running()
    schedule(keywatch, redis.url, "jobs", "bad-1")
    wait_for(lambda: len(get(d, "/api/v1/queues/jobs/dead")[1].get("dead_letters", [])) == 1,
             30, "a dead letter listed")

    def scans():
        return redis.client.info("commandstats").get("cmdstat_scan", {}).get("calls", 0)
    before = scans()
    for _ in range(5):
        status, page = get(d, "/api/v1/queues/jobs/dead")
        assert status == 200 and len(page["dead_letters"]) == 1
    assert scans() - before <= 1, scans() - before  # one: the 5 s reuse ran out
