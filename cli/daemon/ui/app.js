// The keywatch dashboard: reads the daemon's JSON API (/api/v1/) every 2 s while the tab is
// visible and draws the overview, a queue and the handlers. The token is asked once and
// kept in this variable only (never a cookie, never storage).
"use strict";
let token = null;
let info = { admin: false };
let timer = null;
const history = {}; // series name -> [{t, v}] of counters, for the sparklines' rates
const HISTORY = 60;
const view = document.getElementById("view");

function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined && v !== false) e.setAttribute(k, v);
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k.nodeType ? k : String(k));
  return e;
}
const num = (v) => (v === undefined || v === null ? "-" : String(v));
const td = (v, f) => h("td", { class: "n", "data-f": f }, num(v));

async function api(path, opts) {
  const o = Object.assign({ headers: {} }, opts || {});
  if (token) o.headers.Authorization = "Bearer " + token;
  const r = await fetch("/api/v1/" + path, o);
  if (r.status === 401) { askToken(); throw new Error("the token is needed"); }
  const body = await r.json().catch(() => ({ error: "HTTP " + r.status }));
  if (!r.ok) throw new Error(body.error || "HTTP " + r.status);
  return body;
}

function askToken() {
  stop();
  const form = document.getElementById("login");
  form.hidden = false;
  document.getElementById("token").focus();
}
document.getElementById("login").addEventListener("submit", (e) => {
  e.preventDefault();
  token = document.getElementById("token").value;
  document.getElementById("login").hidden = true;
  start();
});

// Counter -> rate per second between polls, kept for the sparklines.
function record(name, t, v) {
  const s = (history[name] = history[name] || []);
  s.push({ t, v });
  if (s.length > HISTORY) s.shift();
}
function rates(name) {
  const s = history[name] || [], out = [];
  for (let i = 1; i < s.length; i++) {
    const dt = (s[i].t - s[i - 1].t) / 1000;
    out.push(dt > 0 ? Math.max(0, (s[i].v - s[i - 1].v) / dt) : 0);
  }
  return out;
}
function spark(name, w = 120, hgt = 24) {
  const r = rates(name), max = Math.max(1, ...r);
  const pts = r.map((v, i) => `${(i / Math.max(1, r.length - 1)) * w},${hgt - (v / max) * (hgt - 2) - 1}`);
  const svg = `<svg width="${w}" height="${hgt}" viewBox="0 0 ${w} ${hgt}"><polyline fill="none" stroke="#2f6fdf" stroke-width="1.5" points="${pts.join(" ")}"/></svg>`;
  const last = r.length ? r[r.length - 1] : 0;
  const e = h("span", { class: "spark", "data-series": name });
  e.innerHTML = svg;
  e.append(h("small", {}, last.toFixed(1) + "/s"));
  return e;
}

// Bars of a histogram's per-bucket counts (buckets are cumulative).
function histogram(hist, w = 520, hgt = 120) {
  if (!hist || !hist.buckets) return h("p", { class: "hint" }, "no observations yet");
  const b = hist.buckets, counts = b.map((x, i) => x[1] - (i ? b[i - 1][1] : 0));
  const max = Math.max(1, ...counts), bw = w / b.length;
  let bars = "";
  counts.forEach((c, i) => {
    const bh = (c / max) * (hgt - 20);
    const label = b[i][0] === "+Inf" ? "+Inf" : "≤" + b[i][0] + "s";
    bars += `<rect x="${i * bw + 1}" y="${hgt - 14 - bh}" width="${bw - 2}" height="${bh}" fill="#2f6fdf"><title>${label}: ${c}</title></rect>`;
    if (i % 3 === 0) bars += `<text x="${i * bw}" y="${hgt - 2}" font-size="9">${label}</text>`;
  });
  const e = h("div", { class: "hist", "data-count": hist.count });
  e.innerHTML = `<svg width="${w}" height="${hgt}">${bars}</svg>`;
  e.append(h("small", {}, `${hist.count} observations, mean ${hist.count ? (hist.sum / hist.count).toFixed(3) : 0} s`));
  return e;
}

async function overview() {
  const [nodes, queues] = await Promise.all([api("nodes"), api("queues")]);
  const t = queues.now_ms, st = queues.stats;
  record("events", t, st["events.received"] || 0);
  record("claimed", t, st["items.claimed"] || 0);
  record("items", t, st["items.acked"] || 0);
  for (const q of queues.queues) record("q:" + q.queue, t, (q.stats || {})["queue.claimed"] || 0);
  const ready = h("p", { id: "ready", class: nodes.ready ? "ok" : "bad" }, nodes.ready ? "ready" : "not ready");
  const reasons = h("ul", { id: "not-ready" }, (nodes.not_ready || []).map((r) => h("li", {}, r)));
  const nodeRows = nodes.nodes.map((n) => h("tr", { "data-node": n.node }, h("td", {}, n.node),
    h("td", { class: n.state === "ready" ? "ok" : "bad" }, n.state),
    h("td", {}, n.sweeping === undefined ? "-" : n.sweeping ? "yes" : "no"),
    td((n.stats || {})["node.received"], "received")));
  const qRows = queues.queues.map((q) => h("tr", { "data-queue": q.queue },
    h("td", {}, h("a", { href: "#/queue/" + encodeURIComponent(q.queue) }, q.queue)),
    td(q.due, "due"), td(q.due_now, "due_now"), td(q.inflight, "inflight"), td(q.dead, "dead"),
    td(q.oldest_overdue_ms === -1 ? "-" : q.oldest_overdue_ms, "oldest_overdue_ms"),
    h("td", {}, spark("q:" + q.queue, 90, 20))));
  return [
    h("h2", {}, "Readiness"), ready, reasons,
    h("div", { class: "cards" },
      h("div", { class: "card" }, "events received", spark("events")),
      h("div", { class: "card" }, "items claimed", spark("claimed")),
      h("div", { class: "card" }, "items acked", spark("items"))),
    h("h2", {}, "Nodes"),
    h("table", { id: "nodes" }, h("tr", {}, h("th", {}, "node"), h("th", {}, "state"), h("th", {}, "sweeping"), h("th", { class: "n" }, "events")), nodeRows),
    h("h2", {}, "Queues"),
    h("table", { id: "queues" }, h("tr", {}, h("th", {}, "queue"), ...["due", "due now", "in flight", "dead", "oldest overdue (ms)"].map((x) => h("th", { class: "n" }, x)), h("th", {}, "claimed/s")), qRows),
    h("p", { class: "hint", id: "read-ms" }, "queue figures read from Redis at " + new Date(queues.read_ms).toLocaleTimeString()),
  ];
}

async function act(queue, action, entry, count) {
  const what = entry ? `dead letter ${entry}` : `all ${count} dead letters`;
  if (!confirm(`${action === "replay" ? "Replay" : "Purge"} ${what} of queue '${queue}'?`)) return;
  try {
    const r = await api(`queues/${encodeURIComponent(queue)}/dead/${action}`, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(entry ? { entry } : { all: true }),
    });
    setStatus(`${action}: ${r.replayed ?? r.purged} done`);
  } catch (e) { setStatus(e.message, true); }
  refresh();
}

function payload(d) {
  if (d.payload_preview !== undefined) return h("pre", {}, d.payload_preview + (d.payload_truncated ? "…" : ""));
  if (d.payload_preview_b64 !== undefined) return h("pre", {}, "base64: " + d.payload_preview_b64 + (d.payload_truncated ? "…" : ""));
  return "-";
}

async function queuePage(name) {
  const q = encodeURIComponent(name);
  const [fig, dead] = await Promise.all([api("queues/" + q), api("queues/" + q + "/dead?limit=50")]);
  const admin = info.admin;
  const rows = dead.dead_letters.map((d) => h("tr", { "data-entry": d.cursor },
    h("td", {}, h("code", {}, d.entry)), h("td", {}, d.id ?? ("base64: " + d.id_b64)), td(d.attempts, "attempts"),
    h("td", {}, d.error ?? d.error_b64 ?? ""), h("td", {}, payload(d)),
    admin ? h("td", {}, h("button", { class: "replay", onclick: () => act(name, "replay", d.cursor) }, "replay"),
      h("button", { class: "purge", onclick: () => act(name, "purge", d.cursor) }, "purge")) : null));
  const s = fig.stats || {};
  return [
    h("h2", {}, "Queue ", h("code", { id: "queue-name" }, name)),
    h("div", { class: "cards", id: "figures" }, [["due", fig.due], ["due now", fig.due_now], ["in flight", fig.inflight], ["dead", fig.dead],
      ["claimed", s["queue.claimed"]], ["acked", s["queue.acked"]], ["retried", s["queue.retried"]], ["rejected", s["queue.rejected"]]]
      .map(([k, v]) => h("div", { class: "card", "data-f": k }, k, h("b", {}, num(v))))),
    h("h2", {}, "Lateness (handler start minus deadline)"), histogram(fig.lateness),
    h("h2", {}, "Dead letters"),
    admin && fig.dead > 0 ? h("p", {},
      h("button", { id: "replay-all", onclick: () => act(name, "replay", null, fig.dead) }, `Replay all (${fig.dead})`), " ",
      h("button", { id: "purge-all", onclick: () => act(name, "purge", null, fig.dead) }, `Purge all (${fig.dead})`)) : null,
    h("table", { id: "dead" }, h("tr", {}, ["entry", "id", "attempts", "last error", "payload"].map((x) => h("th", {}, x)), admin ? h("th", {}, "") : null), rows),
    dead.next_cursor ? h("p", { class: "hint" }, "more: GET /api/v1/queues/" + q + "/dead?cursor=" + dead.next_cursor) : null,
  ];
}

async function handlersPage() {
  const r = await api("handlers");
  const cols = ["calls", "batches", "errors", "acked", "retried", "rejected", "pending", "waiting"];
  return [
    h("h2", {}, "Handlers"),
    h("table", { id: "handlers" }, h("tr", {}, h("th", {}, "handler"), cols.map((c) => h("th", { class: "n" }, c))),
      r.handlers.map((x) => h("tr", { "data-handler": x.name }, h("td", {}, x.name), cols.map((c) => td(x.stats["handler." + c], c))))),
    r.handlers.map((x) => [h("h2", {}, "Duration of ", h("code", {}, x.name)), histogram(x.stats["handler.duration"])]),
    h("h2", {}, "Plugin counters"),
    h("table", { id: "plugins" }, h("tr", {}, h("th", {}, "instance"), h("th", {}, "counter"), h("th", { class: "n" }, "value")),
      r.plugins.map((p) => h("tr", {}, h("td", {}, p.instance), h("td", {}, p.counter), td(p.value, "value")))),
  ];
}

function setStatus(text, bad) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = bad ? "bad" : "";
}

async function refresh() {
  const route = location.hash.replace(/^#\/?/, "");
  try {
    let parts;
    if (route.startsWith("queue/")) parts = await queuePage(decodeURIComponent(route.slice(6)));
    else if (route === "handlers") parts = await handlersPage();
    else parts = await overview();
    view.replaceChildren(...parts.flat().filter((x) => x));
    setStatus("updated " + new Date().toLocaleTimeString() + (info.admin ? " · admin" : " · read-only"));
  } catch (e) {
    setStatus(e.message, true);
  }
}

function stop() { clearTimeout(timer); timer = null; }
async function tick() { stop(); await refresh(); if (!document.hidden) timer = setTimeout(tick, 2000); }
async function start() {
  try { info = await api(""); } catch (e) { setStatus(e.message, true); return; }
  tick();
}
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "hidden") stop(); else if (token !== null || info.version) tick();
});
window.addEventListener("hashchange", tick);
start();
