// duetime dashboard: plain JavaScript over the REST API, refreshed every few seconds.
// Everything from the server is inserted with textContent, never as HTML.
"use strict";

const REFRESH_MS = 5000;
const TOKEN_KEY = "duetime.token";
const NAMESPACE_KEY = "duetime.namespace";

const state = {
  auth: false,
  namespace: null,
  token: localStorage.getItem(TOKEN_KEY) || "",
  timer: null,
};

const $ = (selector) => document.querySelector(selector);

function el(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null) continue;
    if (name === "text") node.textContent = value;
    else if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.code;
    this.field = body && body.field;
  }
}

// The prefix the API is mounted under (its root_path; "" at the root), set by the server.
const ROOT = document.documentElement.dataset.root || "";

async function api(path, options = {}) {
  const headers = { Accept: "application/json" };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  const response = await fetch(ROOT + path, { ...options, headers });
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

function nsPath(suffix) {
  return `/v1/namespaces/${encodeURIComponent(state.namespace)}${suffix}`;
}

// -- formatting ----------------------------------------------------------------------------
function shortInstant(iso) {
  if (!iso) return "–";
  return iso.replace("T", " ").replace(/\.\d+Z$/, "Z").replace(/Z$/, "");
}

function compactInstant(iso) {
  // Today's instants as a time of day; other days in full.
  const full = shortInstant(iso);
  const today = new Date().toISOString().slice(0, 10);
  return full.startsWith(today) ? full.slice(11) : full;
}

function humanSpan(ms) {
  const abs = Math.abs(ms);
  const units = [
    ["d", 86400000],
    ["h", 3600000],
    ["min", 60000],
    ["s", 1000],
  ];
  for (const [unit, size] of units) {
    if (abs >= size) {
      const value = abs / size;
      return `${value >= 10 ? Math.round(value) : value.toFixed(1).replace(/\.0$/, "")} ${unit}`;
    }
  }
  return `${Math.round(abs)} ms`;
}

function relative(iso) {
  const ms = Date.parse(iso) - Date.now();
  return ms >= 0 ? `in ${humanSpan(ms)}` : `${humanSpan(ms)} late`;
}

function bucketLabel(le) {
  if (le === null) return "> 1 h";
  if (le < 1) return `${+(le * 1000).toFixed(1)} ms`;
  if (le < 60) return `${le} s`;
  if (le < 3600) return `${le / 60} min`;
  return `${le / 3600} h`;
}

// -- notices and auth ----------------------------------------------------------------------
function notice(message, kind = "error") {
  const box = $("#notice");
  if (!message) {
    box.hidden = true;
    return;
  }
  box.className = `notice ${kind}`;
  box.textContent = message;
  box.hidden = false;
}

function handleError(error) {
  if (error instanceof ApiError && error.status === 401) {
    $("#token-form").hidden = false;
    notice(state.token ? "That token is not valid (revoked?). Enter another one." :
      "This server requires a bearer token: paste one from `duetime tokens create`.", "warn");
  } else {
    notice(error.message);
  }
}

// -- loading -------------------------------------------------------------------------------
async function loadNamespaces() {
  const select = $("#namespace");
  const { items } = await api("/v1/namespaces");
  select.replaceChildren(...items.map((name) => el("option", { value: name, text: name })));
  const wanted = new URLSearchParams(location.search).get("namespace") ||
    localStorage.getItem(NAMESPACE_KEY);
  state.namespace = items.includes(wanted) ? wanted : items[0] || null;
  if (state.namespace) select.value = state.namespace;
  if (!items.length) notice("No namespaces yet: schedule a timer to create one.", "info");
}

function renderCounts(counts) {
  for (const card of document.querySelectorAll("#counts .count")) {
    const value = counts[card.dataset.status] ?? 0;
    card.querySelector("b").textContent = value.toLocaleString();
    card.classList.toggle("zero", value === 0);
  }
}

function renderNextDue(timers) {
  const body = $("#next-due tbody");
  body.replaceChildren(
    ...timers.map((t) =>
      el("tr", {}, [
        el("td", { class: "mono", text: t.key, title: t.key }),
        el("td", { text: t.type }),
        el("td", { text: t.subject ?? "–" }),
        el("td", { class: "mono", text: compactInstant(t.run_at), title: shortInstant(t.run_at) }),
        el("td", { text: relative(t.run_at) }),
      ]),
    ),
  );
  if (!timers.length) body.append(el("tr", {}, [el("td", { colspan: 5, class: "muted", text: "Nothing pending." })]));
  const line = $("#timeline");
  line.replaceChildren();
  if (!timers.length) return;
  const now = Date.now();
  const last = Math.max(...timers.map((t) => Date.parse(t.run_at)));
  const span = Math.max(last - now, 60000);
  line.append(el("span", { class: "tick start", text: "now" }), el("span", { class: "tick end", text: `+${humanSpan(span)}` }));
  for (const t of timers) {
    const offset = Date.parse(t.run_at) - now;
    const left = Math.min(100, Math.max(0, (offset / span) * 100));
    line.append(el("span", {
      class: offset < 0 ? "dot late" : "dot",
      style: `left: ${left}%`,
      title: `${t.key} · ${t.type} · ${shortInstant(t.run_at)} (${relative(t.run_at)})`,
    }));
  }
}

function renderLateness(lateness) {
  const box = $("#lateness");
  let previous = 0;
  const bars = lateness.buckets.map((bucket) => {
    const count = bucket.count - previous;
    previous = bucket.count;
    return { label: bucketLabel(bucket.le), count };
  });
  const top = Math.max(1, ...bars.map((b) => b.count));
  box.replaceChildren(
    ...bars.map((b) =>
      el("div", { class: "bar", title: `${b.label}: ${b.count}` }, [
        el("span", { class: "fill", style: `height: ${(b.count / top) * 100}%` }),
        el("span", { class: "label", text: b.label }),
      ]),
    ),
  );
  $("#lateness-summary").textContent = lateness.count
    ? `${lateness.count.toLocaleString()} attempts started, mean ${humanSpan((lateness.sum / lateness.count) * 1000)} late`
    : "No attempts started by this server's workers yet.";
}

function renderDead(page) {
  const body = $("#dead tbody");
  body.replaceChildren(
    ...page.items.map((t) =>
      el("tr", { "data-key": t.key }, [
        el("td", { class: "mono", text: t.key, title: t.key }),
        el("td", { text: t.type }),
        el("td", { text: `${t.attempts}/${t.max_attempts}` }),
        el("td", { class: "error", text: t.last_error ?? "–", title: t.last_error ?? "" }),
        el("td", {}, [el("button", { class: "replay", "data-key": t.key, text: "Replay", onclick: () => replay(t.key) })]),
      ]),
    ),
  );
  if (!page.items.length) body.append(el("tr", {}, [el("td", { colspan: 5, class: "muted", text: "No dead letters." })]));
}

function renderNodes(nodes) {
  const body = $("#nodes tbody");
  body.replaceChildren(
    ...nodes.map((n) =>
      el("tr", {}, [
        el("td", {}, [el("span", { class: n.alive ? "alive" : "stale", title: n.alive ? "alive" : "no recent heartbeat" })]),
        el("td", { class: "mono", text: n.id }),
        el("td", { text: n.role }),
        el("td", { text: n.host }),
        el("td", { text: String(n.pid) }),
        el("td", { text: `${humanSpan(Date.now() - Date.parse(n.heartbeat_at))} ago` }),
        el("td", { text: String(n.in_flight) }),
      ]),
    ),
  );
  if (!nodes.length) body.append(el("tr", {}, [el("td", { colspan: 7, class: "muted", text: "No nodes registered." })]));
}

async function refresh() {
  if (!state.namespace) return;
  try {
    const [stats, dead, nodes] = await Promise.all([
      api(nsPath("/stats")),
      api(nsPath("/dead?limit=50")),
      api("/v1/nodes"),
    ]);
    renderCounts(stats.counts);
    renderNextDue(stats.next_due);
    renderLateness(stats.lateness);
    renderDead(dead);
    renderNodes(nodes.items);
    $("#status-line").textContent = `updated ${new Date().toLocaleTimeString()}`;
    if (!$("#notice").classList.contains("ok")) notice(null);
  } catch (error) {
    handleError(error);
  }
}

// -- actions -------------------------------------------------------------------------------
async function replay(key) {
  try {
    const answer = await api(nsPath(`/dead/${encodeURIComponent(key)}/replay`), { method: "POST" });
    notice(`Replayed ${answer.timer.key}: ${answer.timer.status}, due ${shortInstant(answer.timer.run_at)}.`, "ok");
    setTimeout(() => $("#notice").classList.contains("ok") && notice(null), 4000);
    await refresh();
  } catch (error) {
    handleError(error);
  }
}

function timerRow(t) {
  return el("tr", {}, [
    el("td", {}, [el("a", { href: "#", class: "mono", text: t.key, onclick: (e) => { e.preventDefault(); showDetail(t.key); } })]),
    el("td", { text: t.type }),
    el("td", { text: t.subject ?? "–" }),
    el("td", {}, [el("span", { class: `pill ${t.status}`, text: t.status })]),
    el("td", { class: "mono", text: shortInstant(t.due_at) }),
    el("td", { text: `${t.attempts}/${t.max_attempts}` }),
  ]);
}

async function search(term) {
  const table = $("#results");
  const empty = $("#results-empty");
  $("#detail").hidden = true;
  let items = [];
  try {
    const found = await api(nsPath(`/timers/${encodeURIComponent(term)}`));
    items = [found.timer];
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 404) return handleError(error);
  }
  try {
    const bySubject = await api(nsPath(`/timers?subject=${encodeURIComponent(term)}&limit=100`));
    items = items.concat(bySubject.items.filter((t) => !items.some((i) => i.id === t.id)));
  } catch (error) {
    return handleError(error);
  }
  table.querySelector("tbody").replaceChildren(...items.map(timerRow));
  table.hidden = !items.length;
  empty.hidden = items.length > 0;
  empty.textContent = `No timer has the key or subject “${term}”.`;
}

async function showDetail(key) {
  try {
    const { timer, attempts } = await api(nsPath(`/timers/${encodeURIComponent(key)}`));
    const rows = [
      ["key", timer.key], ["type", timer.type], ["status", timer.status], ["subject", timer.subject],
      ["due", shortInstant(timer.due_at)], ["local", timer.local && `${timer.local} ${timer.timezone}`],
      ["fired", shortInstant(timer.fired_at)], ["completed", shortInstant(timer.completed_at)],
      ["last error", timer.last_error], ["payload", JSON.stringify(timer.payload)],
    ].filter(([, value]) => value !== null && value !== undefined && value !== "–");
    const box = $("#detail");
    box.replaceChildren(
      el("dl", {}, rows.flatMap(([name, value]) => [el("dt", { text: name }), el("dd", { class: "mono", text: String(value) })])),
      el("h3", { text: `Attempts (${attempts.length})` }),
      el("ol", { class: "attempts" }, attempts.map((a) =>
        el("li", { text: `#${a.number} on ${a.node_id} at ${shortInstant(a.started_at)}: ${a.outcome ?? "running"}${a.error ? ` — ${a.error}` : ""}` }))),
    );
    box.hidden = false;
  } catch (error) {
    handleError(error);
  }
}

// -- start ---------------------------------------------------------------------------------
async function start() {
  try {
    const info = await api("/v1/info");
    state.auth = info.auth;
    $("#token-form").hidden = !info.auth;
    $("#token").value = state.token;
    await loadNamespaces();
    await refresh();
  } catch (error) {
    handleError(error);
  }
  clearInterval(state.timer);
  state.timer = setInterval(refresh, REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  $("#namespace").addEventListener("change", (event) => {
    state.namespace = event.target.value;
    localStorage.setItem(NAMESPACE_KEY, state.namespace);
    $("#results").hidden = true;
    $("#detail").hidden = true;
    refresh();
  });
  $("#token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.token = $("#token").value.trim();
    localStorage.setItem(TOKEN_KEY, state.token);
    notice(null);
    start();
  });
  $("#forget-token").addEventListener("click", () => {
    state.token = "";
    localStorage.removeItem(TOKEN_KEY);
    $("#token").value = "";
    start();
  });
  $("#search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const term = $("#search").value.trim();
    if (term) search(term);
  });
  start();
});
