"""The daemon's /metrics, /healthz and /readyz end to end: the real `keywatch run` against
real redis-servers and a real cluster. /metrics is read by the Prometheus text parser of
python3-prometheus-client; values are checked after known traffic (tracked keys, tasks, a
rejected task, an untracked expiry); the token guards every path but /healthz; /readyz
flips to 503 when a cluster master is killed and back to 200 once its replica took over.
"""

from __future__ import annotations

import json
import os
import signal

from prometheus_client.parser import text_string_to_metric_families

from conftest import Cluster, RedisServer, base_config, toml_str, wait_for


def scrape(d, token=None):
    """{(sample name, frozenset(labels)): value} and {family: type} of one /metrics."""
    status, body, headers = d.get("/metrics", token)
    assert status == 200, body
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    samples, types = {}, {}
    for fam in text_string_to_metric_families(body):
        assert fam.type != "untyped", f"a sample outside its family: {fam.samples}"
        assert fam.name not in types, f"family {fam.name} appears twice"
        types[fam.name] = fam.type
        for s in fam.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples, types


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())))


def expire_untracked(client, key):
    """SET key with a short TTL, then touch it until Redis deletes it (publishing expired)."""
    client.set(key, "v", px=20)
    wait_for(lambda: client.exists(key) == 0, 10, f"{key} to expire")


TRAFFIC_CONFIG = """
queues = ["jobs"]
max_attempts = 1

[metrics]
queue_interval = "100ms"

[[handler]]
plugin = "stream"
name = "keys-to-stream"
events = ["expired"]
queue = "keys"

[handler.options]
stream = "expired-out"

[[handler]]
plugin = "exec"
name = "jobs-exec"
events = "task"
queue = "jobs"

[handler.options]
argv0 = "/bin/sh"
argv1 = "-c"
argv2 = "if grep -q t-bad; then exit 1; fi; exit 0"
"""


def test_metrics_parse_and_move_by_known_traffic(redis, daemon, keywatch):
    d = daemon(base_config(redis.url, TRAFFIC_CONFIG))
    d.wait_running()
    before, _ = scrape(d)
    node = f"127.0.0.1:{redis.port}"
    assert value(before, "keywatch_node_up", node=node) == 1
    assert value(before, "keywatch_handler_calls_total", handler="jobs-exec") == 0
    version = [k for k in before if k[0] == "keywatch_build_info"]
    assert len(version) == 1 and before[version[0]] == 1

    def run(*args):
        r = keywatch(*args, "--redis", redis.url, "--quiet")
        assert r.returncode == 0, r.stderr

    for i in range(3):
        run("track", f"tracked:{i}", "v", "--ttl", "100ms")
    for task in ("t-ok1", "t-ok2", "t-bad"):
        run("schedule", "jobs", task, "payload", "--in", "0")
    for task in ("t-later1", "t-later2"):
        run("schedule", "jobs", task, "payload", "--in", "1h")
    expire_untracked(redis.client, "plain:1")

    expected = {
        ("keywatch_handler_events_total", (("handler", "keys-to-stream"), ("result", "acked"))): 3,
        ("keywatch_handler_events_total", (("handler", "jobs-exec"), ("result", "acked"))): 2,
        ("keywatch_handler_events_total", (("handler", "jobs-exec"), ("result", "rejected"))): 1,
        ("keywatch_queue_items_claimed_total", (("queue", "keys"),)): 3,
        ("keywatch_queue_items_acked_total", (("queue", "keys"),)): 3,
        ("keywatch_queue_items_dead_total", (("queue", "jobs"),)): 1,
        ("keywatch_queue_due", (("queue", "jobs"),)): 2,
        ("keywatch_queue_in_flight", (("queue", "jobs"),)): 0,
        ("keywatch_queue_dead_letters", (("queue", "jobs"),)): 1,
        ("keywatch_expiry_lateness_seconds_count", (("queue", "keys"),)): 3,
        ("keywatch_expiry_lateness_seconds_count", (("queue", "jobs"),)): 3,
        ("keywatch_handler_duration_seconds_count", (("handler", "jobs-exec"),)): 3,
    }

    received = "keywatch_notifications_received_total"

    def settled():
        # Every figure a counter moves is waited for: the loop thread counts a reply after
        # the effect can be seen in Redis.
        samples, types = scrape(d)
        got = {k: value(samples, k[0], **dict(k[1])) for k in expected}
        heard = (value(samples, received, event="expired")
                 >= value(before, received, event="expired") + 1
                 and value(samples, "keywatch_node_notifications_received_total", node=node) >= 1)
        return (samples, types) if got == expected and heard else None

    try:
        samples, types = wait_for(settled, 30, "the figures of the traffic")
    except BaseException:
        print(d.get("/metrics")[1])
        raise
    lateness_inf = value(samples, "keywatch_expiry_lateness_seconds_bucket", queue="keys", le="+Inf")
    assert lateness_inf == 3
    assert value(samples, "keywatch_queue_gauges_read_errors_total") == 0
    assert types["keywatch_handler_events"] == "counter"  # the parser drops "_total"
    assert types["keywatch_expiry_lateness_seconds"] == "histogram"
    assert types["keywatch_handler_duration_seconds"] == "histogram"
    assert types["keywatch_queue_due"] == "gauge"
    assert types["keywatch_node_up"] == "gauge"
    assert all(name.startswith("keywatch_") for name in types)
    # The stream handler really wrote the three expiries it acked.
    assert redis.client.xlen("expired-out") == 3


def test_token_guards_every_path_but_healthz(redis, daemon):
    d = daemon(f"[redis]\nurl = {toml_str(redis.url)}\n\n"
               f"[http]\nlisten = \"127.0.0.1:0\"\ntoken = \"s3cret\"\n\n"
               f"[[handler]]\nplugin = \"print\"\nevents = [\"expired\"]\n")
    d.wait_running()
    status, _, headers = d.get("/metrics")
    assert status == 401
    assert headers["WWW-Authenticate"] == 'Bearer realm="keywatch"'
    assert d.get("/metrics", "wrong")[0] == 401
    assert d.get("/readyz")[0] == 401
    assert d.get("/healthz")[:2] == (200, "ok\n")
    samples, _ = scrape(d, "s3cret")
    assert value(samples, "keywatch_node_up", node=f"127.0.0.1:{redis.port}") == 1
    wait_for(lambda: d.get("/readyz", "s3cret")[0] == 200, 20, "/readyz 200 with the token")
    assert d.get("/nothing", "s3cret")[0] == 404


def test_readyz_flips_to_503_when_a_master_dies_and_back_after_failover(daemon):
    cluster = Cluster()  # its own: this test kills one of its masters
    try:
        config = base_config(cluster.seed, """
[cluster]
refresh = "500ms"

[reconnect]
min = "50ms"
max = "500ms"

[[handler]]
plugin = "print"
events = ["expired"]
""")
        d = daemon(config)
        d.wait_running()
        masters = [n for n in cluster.nodes if n["role"] == "master"]
        names = {f"{n['host']}:{n['port']}" for n in masters}

        def ready_with_masters():
            status, body, _ = d.get("/readyz")
            return status == 200 and {n["node"] for n in json.loads(body)["nodes"]} == names

        wait_for(ready_with_masters, 30, "/readyz 200 listing the three masters")
        victim = masters[0]
        victim_name = f"{victim['host']}:{victim['port']}"
        os.kill(int(victim["pid"]), signal.SIGKILL)

        def not_ready():
            status, body, _ = d.get("/readyz")
            return (status, body) if status == 503 else None

        status, body = wait_for(not_ready, 30, "/readyz 503 after a master was killed")
        assert victim_name in body, body
        verdict = json.loads(body)
        assert verdict["ready"] is False
        assert any(victim_name in reason for reason in verdict["not_ready"]), body

        def ready_again():
            status, body, _ = d.get("/readyz")
            if status != 200:
                return None
            listed = {n["node"] for n in json.loads(body)["nodes"]}
            # Never ready while the victim's slots have no master: after the cluster marks
            # it failed the topology drops it, and until its replica is promoted the two
            # masters left are all ready but a third of the slots is uncovered.
            assert victim_name not in listed and len(listed) == 3, body
            return listed

        wait_for(ready_again, 60, "/readyz 200 again once the replica took over")
        samples, _ = scrape(d)
        assert value(samples, "keywatch_node_up", node=victim_name) is None
        assert value(samples, "keywatch_nodes") == 3
        assert value(samples, "keywatch_topology_refreshes_total") >= 2
    finally:
        cluster.stop()


def test_run_over_ipv6(daemon, keywatch):
    # A server on ::1 named redis://[::1]:PORT, and the HTTP server on [::1]:0: a tracked
    # key is delivered, and the event and the node label name the node as the URL does.
    server = RedisServer("::1")
    try:
        node = f"[::1]:{server.port}"
        assert server.url == f"redis://{node}"
        d = daemon(f"[redis]\nurl = {toml_str(server.url)}\n\n[http]\nlisten = \"[::1]:0\"\n\n"
                   "[[handler]]\nplugin = \"print\"\nevents = [\"expired\"]\n")
        d.wait_running()
        assert d.http.startswith("[::1]:"), d.http
        r = keywatch("track", "--redis", server.url, "v6:1", "v", "--ttl", "200ms", "--quiet")
        assert r.returncode == 0, r.stderr
        line = wait_for(lambda: [json.loads(l) for l in d.stdout().splitlines()
                                 if l.startswith("{") and '"v6:1"' in l], 20, "v6:1 delivered")
        assert line[0]["node"] == node, line
        samples, _ = scrape(d)
        assert value(samples, "keywatch_node_up", node=node) == 1
    finally:
        server.stop()
