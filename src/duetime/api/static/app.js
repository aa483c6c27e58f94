// duetime operations console: plain JavaScript over the REST API, no build step, no library.
// Everything from the server is inserted with textContent, never as HTML. Every URL is relative
// to this script (import.meta.url), so the console works under any prefix or behind a proxy.
// The page refreshes the view in sight when the server's live feed says something changed.

const BASE = new URL("../", import.meta.url);
const TOKEN_KEY = "duetime.token";
const NAMESPACE_KEY = "duetime.namespace";
const PAGE = 50;
const LIVE_GAP_MS = 2000; // at most one refresh per this long for changes heard on the feed
const ACTIONS = {
  cancel: { verb: "cancel", done: "cancelled", takes: "scheduled or retrying" },
  replay: { verb: "replay", done: "replayed", takes: "dead" },
  run_now: { verb: "run now", done: "made due now", takes: "pending (not yet due)" },
  delete: { verb: "delete", done: "deleted", takes: "finished (done, dead, cancelled or expired)" },
};

const state = {
  namespace: null,
  token: localStorage.getItem(TOKEN_KEY) || "",
  view: "overview",
  timerKey: null,
  hash: null,
  filter: {},
  cursors: { timers: null, schedules: null, events: null, audit: null },
  eventsFilter: {},
  live: null,
  refreshing: false,
  reading: Promise.resolve(), // the view's read in flight: reads of a view go one at a time
  again: false,
  liveTimer: null,
  liveAt: 0,
  paused: false, // live refresh paused by the operator
  hidden: false, // the tab is hidden: refresh waits until it is seen again
  missed: false, // a change was heard while paused or hidden
  chart: { range: "1h", type: "", node: "" },
  selected: new Set(),
  anchor: null, // the row a shift-click ticks from
  allMatching: null, // the filter (as JSON) whose every timer is selected, beyond the rows shown
  changedFrom: null, // each acted-on row's status before the last action, to mark what changed
  me: null, // GET /v1/me: who the caller is, what it may change
};

const $ = (selector) => document.querySelector(selector);

function el(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

// -- talking to the API --------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.field = body && body.field;
  }
}

// A payload sealed at rest with a key this server's ring lacks reads as {"$sealed": "<key id>"}
// (docs/security.md): the key id, or null for any other payload.
function sealedKey(payload) {
  if (payload === null || typeof payload !== "object" || Array.isArray(payload)) return null;
  const names = Object.keys(payload);
  return names.length === 1 && names[0] === "$sealed" && typeof payload.$sealed === "string"
    && !payload.$sealed.startsWith("dts1:") ? payload.$sealed : null;
}

function url(path, params = {}) {
  const target = new URL(path, BASE);
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") target.searchParams.set(name, value);
  }
  return target;
}

function headers(json = false) {
  // Tells the audit log an operator acted here, not a script with the same token.
  const h = { Accept: "application/json", "X-Duetime-Client": "console" };
  if (json) h["Content-Type"] = "application/json";
  if (state.token) h.Authorization = `Bearer ${state.token}`;
  return h;
}

async function api(path, { method = "GET", params, body } = {}) {
  const response = await fetch(url(path, params), {
    method,
    headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let answer = null;
  try {
    answer = await response.json();
  } catch (_) {
    answer = null;
  }
  if (!response.ok) throw new ApiError(response.status, answer);
  return answer;
}

function ns(suffix) {
  return `v1/namespaces/${encodeURIComponent(state.namespace)}${suffix}`;
}

function keyPath(key) {
  return key.split("/").map(encodeURIComponent).join("/");
}

// -- formatting ----------------------------------------------------------------------------
function instant(iso) {
  if (!iso) return "–";
  return iso.replace("T", " ").replace(/(\.\d{3})\d*Z$/, "$1Z").replace(/\.000Z$|Z$/, "");
}

function span(ms) {
  const abs = Math.abs(ms);
  for (const [unit, size] of [["d", 86400000], ["h", 3600000], ["min", 60000], ["s", 1000]]) {
    if (abs >= size) {
      const value = abs / size;
      return `${value >= 10 ? Math.round(value) : value.toFixed(1).replace(/\.0$/, "")} ${unit}`;
    }
  }
  return `${abs >= 10 ? Math.round(abs) : abs.toFixed(1).replace(/\.0$/, "")} ms`;
}

function relative(iso) {
  const ms = Date.parse(iso) - Date.now();
  return ms >= 0 ? `in ${span(ms)}` : `${span(ms)} ago`;
}

// A cell too narrow for its text: the whole of it in the title, and a click shows it wrapped.
function wholeCell(text, title = text, cls = "") {
  return el("td", {
    class: `${cls} expandable`.trim(), text, title,
    onclick: (event) => event.currentTarget.classList.toggle("whole"),
  });
}

function dueCell(iso) {
  return timeCell(iso);
}

function pill(status) {
  return el("span", { class: `pill ${status}`, text: status });
}

function timerLink(key) {
  return el("a", { href: `#timer/${encodeURIComponent(key)}`, class: "mono", text: key, title: key });
}

function pageSize(body, rows, more, size = PAGE) {
  // A refresh re-reads as many rows as are shown (up to the API's 1,000), so the pages an
  // operator loaded with "Load more" stay in place when the view is read again.
  return more ? size : Math.max(size, Math.min(body.querySelectorAll(rows).length, 1000));
}

function emptyRow(body, columns, text) {
  body.append(el("tr", {}, [el("td", { colspan: columns, class: "muted", text })]));
}

// -- notices, auth, confirmation -----------------------------------------------------------
function notice(message, kind = "error") {
  const box = $("#notice");
  if (!message) {
    box.hidden = true;
    return;
  }
  box.className = `notice ${kind}`;
  box.textContent = message;
  box.style.visibility = "";
  box.hidden = false;
  if (kind === "ok") setTimeout(() => box.textContent === message && fadeNotice(), 6000);
}

function fadeNotice() {
  // A notice that goes by itself (its time is up, or a refresh in the background answered)
  // leaves its place empty until the reader moves on: had it closed up, everything below would
  // jump under the pointer, and a click meant for "Edit…" could land on "Cancel timer".
  $("#notice").style.visibility = "hidden";
}

function handleError(error) {
  if (error instanceof ApiError && error.status === 401) {
    $("#token-form").hidden = false;
    notice(state.token ? "That token is not valid (revoked?). Enter another one." :
      "This server requires a bearer token: paste one from `duetime tokens create`.", "warn");
  } else if (error instanceof ApiError && error.field && !error.message.startsWith(`${error.field}:`)) {
    notice(`${error.field}: ${error.message}`);
  } else {
    notice(error.message);
  }
}

function confirmed(title, text, yes) {
  const dialog = $("#confirm");
  $("#confirm-title").textContent = title;
  $("#confirm-text").textContent = text;
  $("#confirm-yes").textContent = yes;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}

// -- overview ------------------------------------------------------------------------------
async function showOverview() {
  // Each part is drawn as soon as its own answer comes: the dead letters and the next due
  // never wait for the counts or the charts, which take longest on a large namespace.
  const namespace = state.namespace;
  const mine = (draw) => (answer) => { if (state.view === "overview" && state.namespace === namespace) draw(answer); };
  const limits = api(ns("/limits?limit=1000"));
  if (!$("#counts").dataset.namespace || $("#counts").dataset.namespace !== namespace) countsPending();
  await Promise.all([
    api(ns("/timers"), { params: { status: "dead", limit: 10 } }).then(mine(drawDeadLetters)),
    Promise.all([api(ns("/dead/types"), { params: { limit: 10 } }), limits]).then(mine(([t, l]) => drawDeadTypes(t, l))),
    api(ns("/stats"), { params: { counts: false } }).then(mine(drawNextDue)),
    api(ns("/counts")).then(mine(drawStats)),
    api(ns("/charts"), { params: state.chart }).then(mine(drawCharts)),
  ]);
  $("#counts").dataset.namespace = namespace;
}

function countsPending() {
  // Another namespace's counts must not stand in for this one's while they are counted.
  for (const card of document.querySelectorAll("#counts .count")) {
    card.querySelector("b").textContent = "…";
    card.setAttribute("aria-busy", "true");
  }
}

function drawDeadTypes(deadTypes, limits) {
  const typesBody = $("#dead-types tbody");
  typesBody.replaceChildren(...deadTypes.items.map((g) => el("tr", { "data-type": g.type }, [
    el("td", {}, [el("a", { href: filterHash({ status: "dead", type: g.type }), text: g.type })]),
    el("td", { text: g.count.toLocaleString() }),
    timeCell(g.newest_at),
    wholeCell(g.newest_error ?? "", g.newest_error ?? "", "error"),
    el("td", {}, [el("div", { class: "row-actions" }, [
      typePause(g.type, limits.items),
      el("button", {
        type: "button", class: "secondary small", "data-replay": g.type, text: `Replay ${g.count.toLocaleString()}…`,
        "aria-label": `Replay ${g.count.toLocaleString()} dead ${g.type} timers…`,
        onclick: () => bulk("replay", { status: "dead", type: g.type }),
      }),
      el("button", {
        type: "button", class: "danger small", "data-delete": g.type, text: `Delete ${g.count.toLocaleString()}…`,
        "aria-label": `Delete ${g.count.toLocaleString()} dead ${g.type} timers…`,
        onclick: () => bulk("delete", { status: "dead", type: g.type }),
      }),
    ])]),
  ])));
  $("#dead-types").hidden = !deadTypes.items.length;
}

function drawStats(stats) {
  const deadCount = stats.counts.dead ?? 0;
  $("#dead-title").firstChild.textContent = `Dead letters: ${deadCount.toLocaleString()} `;
  $("#dead-replay-all").hidden = deadCount === 0;
  $("#dead-delete-all").hidden = deadCount === 0;
  $("#dead-all").hidden = deadCount === 0;
  drawCounts(stats);
}

function drawDeadLetters(dead) {
  const deadBody = $("#dead tbody");
  deadBody.replaceChildren(...dead.items.map((t) => el("tr", { "data-key": t.key }, [
    el("td", {}, [timerLink(t.key)]),
    el("td", { text: t.type }),
    dueCell(t.completed_at),
    el("td", { text: `${t.attempts}/${t.max_attempts}` }),
    wholeCell(t.last_error ?? "", t.last_error ?? "", "error"),
  ])));
  if (!dead.items.length) emptyRow(deadBody, 5, "No dead letters.");
}

function drawCounts(stats) {
  for (const card of document.querySelectorAll("#counts .count")) {
    const value = stats.counts[card.dataset.status] ?? 0;
    card.querySelector("b").textContent = value.toLocaleString();
    card.classList.toggle("zero", value === 0);
    card.removeAttribute("aria-busy");
  }
}

function drawNextDue(stats) {
  const body = $("#next-due tbody");
  body.replaceChildren(...stats.next_due.map((t) => el("tr", {}, [
    el("td", {}, [timerLink(t.key)]),
    el("td", { text: t.type }),
    el("td", { text: t.subject ?? "–" }),
    timeCell(t.run_at),
    el("td", { text: relative(t.run_at) }),
  ])));
  if (!stats.next_due.length) emptyRow(body, 5, "Nothing pending.");
  const waiting = stats.unsubscribed ?? [];
  $("#unsubscribed tbody").replaceChildren(...waiting.map((u) => el("tr", { "data-type": u.type }, [
    el("td", {}, [el("a", { href: filterHash({ type: u.type }), class: "mono", text: u.type, title: u.type })]),
    el("td", { text: u.count.toLocaleString() }),
  ])));
  $("#unsubscribed-panel").hidden = !waiting.length;
}

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, children = []) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
}

function chart(box, minutes, series, { unit, label, since }) {
  // A bar or line chart in inline SVG: one slot per minute, series stacked (bars) or drawn.
  const width = 600, height = 150, left = 44, bottom = 18, top = 8;
  const plotW = width - left - 4, plotH = height - bottom - top;
  const slot = plotW / Math.max(minutes.length, 1);
  const stacks = minutes.map((_, i) => series.filter((s) => s.kind === "bar")
    .reduce((sum, s) => sum + (s.values[i] || 0), 0));
  const lines = series.filter((s) => s.kind === "line").flatMap((s) => s.values.filter((v) => v !== null));
  const top_ = Math.max(1, ...stacks, ...lines);
  const y = (v) => top + plotH - (v / top_) * plotH;
  const nodes = [
    svg("line", { x1: left, x2: width - 4, y1: y(0), y2: y(0), class: "axis" }),
    svg("text", { x: left - 6, y: y(top_) + 4, class: "tick", "text-anchor": "end" }, [unit(top_)]),
    svg("text", { x: left - 6, y: y(0), class: "tick", "text-anchor": "end" }, [unit(0)]),
    svg("text", { x: left, y: height - 4, class: "tick" }, [since || `${minutes.length} min ago`]),
    svg("text", { x: width - 4, y: height - 4, class: "tick", "text-anchor": "end" }, ["now"]),
  ];
  minutes.forEach((minute, i) => {
    let base = 0;
    for (const s of series.filter((s) => s.kind === "bar")) {
      const v = s.values[i] || 0;
      if (!v) continue;
      nodes.push(svg("rect", {
        x: left + i * slot + 0.5, width: Math.max(slot - 1, 1), y: y(base + v), height: y(base) - y(base + v),
        class: `bar ${s.name}`,
      }, [svg("title", {}, [`${instant(minute.start).slice(11, 16)} UTC: ${v} ${s.name}`])]));
      base += v;
    }
  });
  for (const s of series.filter((s) => s.kind === "line")) {
    const points = s.values.map((v, i) => v === null ? null : `${left + i * slot + slot / 2},${y(v)}`);
    const runs = [];
    let run = [];
    for (const p of points) {
      if (p === null) { if (run.length) runs.push(run); run = []; } else run.push(p);
    }
    if (run.length) runs.push(run);
    for (const r of runs) {
      nodes.push(r.length > 1
        ? svg("polyline", { points: r.join(" "), class: `line ${s.name}` })
        : svg("circle", { cx: r[0].split(",")[0], cy: r[0].split(",")[1], r: 2.5, class: `dot ${s.name}` }));
    }
  }
  box.replaceChildren(svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label }, nodes));
}

// -- timers --------------------------------------------------------------------------------
function readFilter() {
  const form = new FormData($("#filter"));
  const filter = {};
  for (const [name, value] of form.entries()) if (String(value).trim()) filter[name] = String(value).trim();
  return filter;
}

function writeFilter(filter) {
  for (const input of $("#filter").elements) if (input.name) input.value = filter[input.name] || "";
}

function timerRow(t) {
  return el("tr", { "data-key": t.key, "data-status": t.status }, [
    el("td", { class: "pick" }, [el("input", {
      type: "checkbox", "data-pick": t.key, "aria-label": `Select ${t.key}`,
      checked: state.selected.has(t.key), onclick: (event) => pickClicked(t.key, event),
    })]),
    el("td", {}, [timerLink(t.key)]),
    el("td", { text: t.type }),
    el("td", { text: t.subject ?? "–" }),
    el("td", {}, [pill(t.status)]),
    dueCell(t.due_at),
    el("td", { text: `${t.attempts}/${t.max_attempts}` }),
    wholeCell(t.last_error ?? "", t.last_error ?? "", "error"),
  ]);
}

async function showTimers({ more = false } = {}) {
  const body = $("#timers tbody");
  const shown = pageSize(body, "tr[data-key]", more);
  const page = await api(ns("/timers"), {
    params: { ...state.filter, limit: shown, cursor: more ? state.cursors.timers : undefined },
  });
  if (more) body.append(...page.items.map(timerRow));
  else body.replaceChildren(...page.items.map(timerRow));
  state.cursors.timers = page.next_cursor;
  const count = body.querySelectorAll("tr[data-key]").length;
  if (!count) emptyRow(body, 8, "No timer matches this filter.");
  showSelection();
  $("#timers-more").hidden = !page.next_cursor;
  $("#timers-shown").textContent = `${count.toLocaleString()} shown${page.next_cursor ? ", more below" : ""}`;
}

async function bulk(action, filter = { ...state.filter }) {
  const what = ACTIONS[action];
  delete filter.sort; // an order, not a filter
  try {
    const dry = await api(ns("/timers/bulk"), { method: "POST", body: { action, filter, dry_run: true } });
    if (!dry.count) {
      notice(`No ${what.takes} timer matches this filter: nothing to ${what.verb}.`, "info");
      return;
    }
    const described = Object.entries(filter).map(([k, v]) => `${k} ${v}`).join(", ") || "no filter: the whole namespace";
    const ok = await confirmed(
      `${what.verb[0].toUpperCase()}${what.verb.slice(1)} ${dry.count.toLocaleString()} timers?`,
      `${dry.count.toLocaleString()} ${what.takes} timers match (${described}) — ${what.verb} them?`,
      `${what.verb[0].toUpperCase()}${what.verb.slice(1)} ${dry.count.toLocaleString()}`,
    );
    if (!ok) return;
    const done = await api(ns("/timers/bulk"), { method: "POST", body: { action, filter } });
    notice(`${done.count.toLocaleString()} timers ${what.done}.`, "ok");
    await refresh();
  } catch (error) {
    handleError(error);
  }
}

// -- one timer -----------------------------------------------------------------------------
async function showTimer() {
  const key = state.timerKey;
  const { timer, attempts } = await api(ns(`/timers/${keyPath(key)}`));
  // Another timer (or view) was chosen while this one loaded: its buttons must not come back.
  if (state.view !== "timer" || state.timerKey !== key) return;
  $("#timer-title").replaceChildren(el("span", { class: "mono", text: timer.key }), " ", pill(timer.status));
  const fields = [
    ["type", timer.type], ["subject", timer.subject], ["due", instant(timer.due_at)],
    ["runs at", timer.status === "scheduled" || timer.status === "retrying" ? `${instant(timer.run_at)} (${relative(timer.run_at)})` : null],
    ["local", timer.local && `${timer.local} ${timer.timezone}`],
    ["window", timer.window && `${timer.window} s, ${timer.spread}` + (timer.attempts === 0 ? `; chosen instant ${instant(timer.run_at)}` : "")],
    ["attempts", attemptCount(timer, attempts)], ["fired", timer.fired_at && instant(timer.fired_at)],
    ["completed", timer.completed_at && instant(timer.completed_at)], ["last error", timer.last_error],
    ["correlation id", timer.correlation_id], ["destination", timer.destination],
    ["registered", instant(timer.registered_at)], ["producer", timer.producer],
    ["lease", timer.lease_owner && `${timer.lease_owner} until ${instant(timer.lease_expires_at)}`],
  ].filter(([, value]) => value !== null && value !== undefined && value !== "");
  $("#timer-fields").replaceChildren(...fields.flatMap(([name, value]) =>
    [el("dt", { text: name }), el("dd", { class: name === "last error" ? "error" : "", text: String(value) })]));
  titleInstants($("#timer-fields"), timer);
  $("#timer-payload").textContent = sealedKey(timer.payload) !== null
    ? `sealed (with key ${sealedKey(timer.payload)}, which this server's key ring does not hold)`
    : JSON.stringify(timer.payload, null, 2);
  // Nobody would deliver it: say so, or it waits in silence.
  const waits = timer.subscribers === 0 && (timer.status === "scheduled" || timer.status === "retrying");
  $("#timer-unsubscribed").replaceChildren(...(waits ? [
    "no subscriber for ", el("code", { text: timer.type }),
    ": no live node has a handler or a route for it, so it waits until one runs (e.g. duetime serve --app module:app)."] : []));
  $("#timer-unsubscribed").hidden = !waits;
  $("#attempts-title").textContent = `Attempts (${attempts.length})`;
  const body = $("#attempts tbody");
  // A refresh keeps the tracebacks the reader opened or closed; at first the newest is open.
  const seen = body.dataset.key === key;
  const opened = new Set([...body.querySelectorAll("details[open]")].map((d) => d.dataset.number));
  const whole = new Set([...body.querySelectorAll("pre[data-whole]")].map((p) => p.dataset.whole));
  const newestTraceback = Math.max(-1, ...attempts.filter((a) => a.traceback).map((a) => a.number));
  body.dataset.key = key;
  body.replaceChildren(...attempts.flatMap((a) => {
    // Took: from the true start, which a running or lost attempt has none of (never the claim's
    // instant, up to the claim's look-ahead before the due time).
    const took = a.finished_at && a.started_at
      ? span(Date.parse(a.finished_at) - Date.parse(a.started_at)) : "–";
    const unknown = a.finished_at ? "start not reported" : "not reported yet";
    const row = el("tr", { class: "attempt" }, [
      el("td", { text: String(a.number) }),
      el("td", { class: "mono", text: a.node_id, title: a.node_id }),
      timeCell(a.claimed_at, { ms: true }),
      a.started_at ? timeCell(a.started_at, { ms: true }) : el("td", { class: "mono", text: "–", title: unknown }),
      timeCell(a.finished_at, { ms: true }),
      el("td", { text: took }),
      el("td", {}, [a.outcome ? pill(a.outcome) : pill("running")]),
      el("td", { class: "error", text: a.error ?? "", title: a.error ?? "" }),
    ]);
    if (!a.traceback) return [row];
    return [row, el("tr", { class: "traceback" }, [el("td", { colspan: 8 }, [
      el("details", { "data-number": a.number, open: seen ? opened.has(String(a.number)) : a.number === newestTraceback }, [
        el("summary", { text: `Traceback of attempt ${a.number}` }),
        ...tracebackBlock(a, seen && whole.has(String(a.number))),
      ]),
    ])])];
  }));
  if (!attempts.length) emptyRow(body, 7, "Not attempted yet.");
  const pending = timer.status === "scheduled" || timer.status === "retrying";
  $("#timer-actions").replaceChildren(...[
    pending && el("button", { type: "button", id: "act-run-now", text: timer.status === "retrying" ? "Retry now" : "Run now", onclick: () => act(timer, "run_now") }),
    timer.status === "dead" && el("button", { type: "button", id: "act-replay", text: "Replay", onclick: () => act(timer, "replay") }),
    pending && !timer.destination && el("button", { type: "button", id: "act-edit", class: "secondary", text: "Edit…", onclick: () => openEdit(timer) }),
    pending && el("button", { type: "button", id: "act-cancel", class: "danger", text: "Cancel timer", onclick: () => act(timer, "cancel") }),
    FINISHED.includes(timer.status) && el("button", { type: "button", id: "act-delete", class: "danger", text: "Delete timer", onclick: () => act(timer, "delete") }),
  ].filter(Boolean));
  editSees(timer, pending);
}

function attemptCount(timer, attempts) {
  // A replay numbers its fresh attempts on and adds as many to max_attempts as were made, so
  // the stored "1 of 21" is counted from the replay: after the latest attempt that ended the
  // timer dead, unless it still is (as the CLI's show counts them).
  const before = Math.max(0, ...attempts
    .filter((a) => a.outcome === "dead" && (a.number < timer.attempts || timer.status !== "dead"))
    .map((a) => a.number));
  const count = `${timer.attempts - before} of ${timer.max_attempts - before}`;
  return before ? `${count} since the replay (${before} before it)` : count;
}

async function act(timer, action) {
  const what = ACTIONS[action];
  const ok = await confirmed(`${what.verb[0].toUpperCase()}${what.verb.slice(1)} ${timer.key}?`,
    `${timer.type} · ${timer.status} · due ${instant(timer.due_at)}. ${CONSEQUENCE[action] ?? ""}`,
    `${what.verb[0].toUpperCase()}${what.verb.slice(1)}`);
  if (!ok) return;
  const path = ns(`/timers/${keyPath(timer.key)}`);
  try {
    // DELETE only cancels (sent twice, it still only cancels); erasing a finished timer and its
    // history is a request of its own.
    if (action === "cancel") await api(path, { method: "DELETE" });
    else if (action === "delete") await api(`${path}/purge`, { method: "POST" });
    else if (action === "replay") await api(ns(`/dead/${keyPath(timer.key)}/replay`), { method: "POST" });
    else await api(`${path}/run-now`, { method: "POST" });
    notice(`${timer.key} ${what.done}.`, "ok");
    if (action === "delete") {
      // It is gone: on to the list it was in, with the notice, which speaks of that view too.
      const next = filterHash({ status: timer.status });
      state.hash = next.slice(1);
      location.hash = next;
    } else await refresh();
  } catch (error) {
    handleError(error);
  }
}

const FINISHED = ["done", "dead", "cancelled", "expired"];
const CONSEQUENCE = {
  cancel: "A cancelled timer never fires.",
  delete: "A deleted timer is gone with its attempts and history; its key may be scheduled again.",
};

// -- tracebacks: the handler's frames first, every frame one click away ----------------------
function tracebackBlock(a, whole) {
  // The API folds duetime's and the thread pool's frames in traceback_trimmed; the full one is
  // a click away, and stays shown across refreshes once asked for.
  const short = a.traceback_trimmed ?? a.traceback;
  const pre = el("pre", { class: "code", text: whole ? a.traceback : short });
  if (whole) pre.dataset.whole = String(a.number);
  if (short === a.traceback) return [pre];
  const toggle = el("button", {
    type: "button", class: "link small", "data-full-traceback": a.number,
    text: whole ? "Fold duetime's frames" : "Show the full traceback",
    onclick: () => {
      const full = pre.dataset.whole === undefined;
      pre.textContent = full ? a.traceback : short;
      if (full) pre.dataset.whole = String(a.number);
      else delete pre.dataset.whole;
      toggle.textContent = full ? "Fold duetime's frames" : "Show the full traceback";
    },
  });
  return [toggle, pre];
}

// -- audit log -----------------------------------------------------------------------------
const FILTER_ORDER = ["subject", "status", "type", "due_from", "due_until"];
const TARGET_ORDER = ["key", "keys", "filter", "schedule", "pattern", "limit", "token", "name"];

function ordered(object, order) {
  // In a fixed order, as the CLI tells them (PostgreSQL's jsonb keeps no order of its own).
  const rank = (name) => (order.includes(name) ? order.indexOf(name) : order.length);
  return Object.entries(object).sort(([a], [b]) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
}

function describeTarget(target) {
  // As `duetime audit` says it: "keys a, b", "status=dead type=order.*", "pattern email.*".
  const pairs = (object, order = []) => ordered(object, order).map(([k, v]) => `${k}=${v}`).join(" ");
  return ordered(target, TARGET_ORDER).map(([name, value]) => {
    if (name === "filter") return pairs(value, FILTER_ORDER) || "every timer";
    if (Array.isArray(value)) return `${name} ${value.join(", ")}`;
    if (value && typeof value === "object") return `${name} ${pairs(value)}`;
    return `${name} ${value}`;
  }).join("; ");
}

function auditRow(e) {
  const target = describeTarget(e.target);
  return el("tr", { "data-id": e.id, "data-action": e.action }, [
    timeCell(e.at),
    el("td", { text: e.actor }),
    el("td", { text: e.via }),
    el("td", { class: "mono", text: e.action }),
    el("td", { class: "count-cell", text: e.count.toLocaleString() }),
    el("td", { class: "mono target", text: target, title: target }),
  ]);
}

async function showAudit({ more = false } = {}) {
  const body = $("#audit tbody");
  const shown = pageSize(body, "tr[data-id]", more);
  const page = await api(ns("/audit"), { params: { limit: shown, cursor: more ? state.cursors.audit : undefined } });
  if (more) body.append(...page.items.map(auditRow));
  else body.replaceChildren(...page.items.map(auditRow));
  if (!body.querySelectorAll("tr[data-id]").length) emptyRow(body, 6, "No operator action recorded in this namespace.");
  state.cursors.audit = page.next_cursor;
  $("#audit-more").hidden = !page.next_cursor;
}

// -- schedules -----------------------------------------------------------------------------
function rule(s) {
  // One of three kinds: a cron expression, an RFC 5545 rule (with its calendar), an interval.
  if (s.cron) return `cron ${s.cron}`;
  if (s.rrule) return [`rrule ${s.rrule}`, calendarText(s)].filter(Boolean).join(" · ");
  return `every ${span(s.every * 1000)}`;
}

function calendarText(s) {
  // What decides a calendar rule's days besides the RRULE, when it says anything.
  return [
    s.holidays && `holidays ${s.holidays}`,
    s.holiday_dates?.length && `${s.holiday_dates.length} holiday date${s.holiday_dates.length === 1 ? "" : "s"}`,
    s.roll && `roll ${s.roll}`,
    s.feb29 && s.feb29 !== "feb28" && `29 Feb → ${s.feb29}`,
  ].filter(Boolean).join(", ");
}

function scheduleRow(s) {
  const toggle = s.active
    ? el("button", { type: "button", class: "secondary small", "data-pause": s.name, text: "Pause", onclick: () => pause(s.name, false) })
    : el("button", { type: "button", class: "small", "data-resume": s.name, text: "Resume", onclick: () => pause(s.name, true) });
  return el("tr", { "data-name": s.name }, [
    el("td", {}, [el("button", { type: "button", class: "link mono", text: s.name, onclick: () => showSchedule(s.name) })]),
    el("td", { text: s.type }),
    el("td", { class: "mono", text: rule(s) }),
    el("td", { text: s.timezone }),
    el("td", { class: "occurrences-cell mono", "data-next": s.name, text: s.active ? instant(s.next_at) : "paused" }),
    timeCell(s.last_at),
    el("td", {}, [pill(s.active ? "active" : "paused"), missedBadge(s)].filter(Boolean)),
    el("td", {}, [el("div", { class: "row-actions" }, [toggle, s.active && el("button", {
      type: "button", class: "secondary small", "data-run-next": s.name, text: "Run next now…",
      onclick: () => runNext(s).catch(handleError),
    }), ...scheduleRowLinks(s)].filter(Boolean))]),
  ]);
}

function missedBadge(s) {
  // Occurrences not done by their deadline (must_succeed_within), with the latest one's reason.
  const d = s.deadline;
  if (!d?.misses) return null;
  const title = `latest: ${instant(d.last_miss_at)} UTC (${d.last_miss_reason}); last success: ${instant(d.last_success_at)}`;
  return el("span", { class: "pill dead", "data-missed": s.name, title, text: `${d.misses} missed` });
}

async function showSchedules({ more = false } = {}) {
  const body = $("#schedules tbody");
  const limit = pageSize(body, "tr[data-name]", more, 100);
  const page = await api(ns("/schedules"), { params: { limit, cursor: more ? state.cursors.schedules : undefined } });
  if (more) body.append(...page.items.map(scheduleRow));
  else body.replaceChildren(...page.items.map(scheduleRow));
  if (!body.children.length) emptyRow(body, 8, "No schedules in this namespace.");
  // The next three occurrences of the first rows, in each schedule's own zone.
  const active = page.items.filter((s) => s.active).slice(0, 25);
  const details = await Promise.all(active.map((s) =>
    api(ns(`/schedules/${encodeURIComponent(s.name)}`), { params: { count: 3 } }).catch(() => null)));
  details.forEach((detail, i) => {
    const cell = body.querySelector(`td[data-next="${CSS.escape(active[i].name)}"]`);
    if (!detail || !cell) return;
    cell.replaceChildren(...detail.next.map((o) => el("div", { text: o.local.replace("T", " "), title: `${instant(o.utc)} UTC` })));
    cell.title = detail.description;
  });
  state.cursors.schedules = page.next_cursor;
  $("#schedules-more").hidden = !page.next_cursor;
  const open = $("#schedule-detail").dataset.name;
  if (open && !$("#schedule-detail").hidden) await showSchedule(open);
}

async function showSchedule(name) {
  const box = $("#schedule-detail");
  const detail = await api(ns(`/schedules/${encodeURIComponent(name)}`), { params: { count: 5 } });
  box.dataset.name = name;
  box.replaceChildren(
    el("h3", { text: `${name}: ${detail.description}` }),
    detail.next.length
      ? el("ol", { class: "occurrences" }, detail.next.map((o) => el("li", { class: "mono", text: `${instant(o.utc)} UTC · ${o.local}` })))
      : el("p", { class: "muted", text: "Paused: no coming occurrences." }),
  );
  box.hidden = false;
}

async function pause(name, resume) {
  try {
    await api(ns(`/schedules/${encodeURIComponent(name)}/${resume ? "resume" : "pause"}`), { method: "POST" });
    notice(`Schedule ${name} ${resume ? "resumed" : "paused"}.`, "ok");
    await refresh();
  } catch (error) {
    handleError(error);
  }
}

// -- event log -----------------------------------------------------------------------------
function eventRow(e) {
  const outcomes = e.deliveries.map((d) => d.outcome ?? "running");
  return el("tr", { "data-key": e.key }, [
    timeCell(e.fired_at),
    el("td", {}, [timerLink(e.key)]),
    el("td", { text: e.type }),
    el("td", {}, [pill(e.status)]),
    el("td", { text: outcomes.length ? outcomes.join(", ") : "–" }),
  ]);
}

async function showEvents({ more = false } = {}) {
  const body = $("#events tbody");
  const page = await api(ns("/events"), {
    params: { ...state.eventsFilter, limit: pageSize(body, "tr[data-key]", more), cursor: more ? state.cursors.events : undefined },
  });
  if (more) body.append(...page.items.map(eventRow));
  else body.replaceChildren(...page.items.map(eventRow));
  if (!body.children.length) emptyRow(body, 5, "Nothing fired yet.");
  state.cursors.events = page.next_cursor;
  $("#events-more").hidden = !page.next_cursor;
}

// -- flow control --------------------------------------------------------------------------
function globMatches(pattern, type) {
  const parts = pattern.split("*").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  return new RegExp(`^${parts.join("[\\s\\S]*")}$`).test(type);
}

function typePause(type, rules) {
  // An event type's own Pause… / Resume; a glob's pause is shown as such (resumed there).
  const own = rules.find((r) => r.pattern === type && r.paused);
  if (own) {
    return el("button", { type: "button", class: "small", "data-resume-type": type, text: "Resume",
      "aria-label": `Resume ${type}`, onclick: () => pauseTypes(type, true).catch(handleError) });
  }
  const glob = rules.find((r) => r.paused && globMatches(r.pattern, type));
  if (glob) return el("a", { href: "#limits", class: "pill paused", text: `paused by ${glob.pattern}` });
  return el("button", { type: "button", class: "secondary small", "data-pause-type": type, text: "Pause…",
    "aria-label": `Pause ${type}`, onclick: () => pauseTypes(type, false).catch(handleError) });
}

const LIMIT_FIELDS = ["pattern", "concurrency", "rate", "burst", "partition_by"];

function hasLimit(l) {
  return l.concurrency !== null || l.rate !== null;
}

function limitRow(l) {
  const dash = (value) => value === null || value === undefined ? "–" : String(value);
  const label = (verb) => `${verb} ${l.pattern}`;
  // A destination's own rate is set on the destination, not here: shown, never edited.
  const subject = l.destination ? `destination ${l.destination}` : l.pattern;
  return el("tr", { "data-pattern": l.pattern }, [
    el("td", { class: "mono", text: subject, title: subject }),
    el("td", { text: dash(l.concurrency) }),
    el("td", { class: "mono", text: dash(l.rate) }),
    el("td", { text: dash(l.burst) }),
    el("td", { class: "mono", text: dash(l.partition_by), title: l.partition_by ?? "" }),
    el("td", {}, [pill(l.paused ? "paused" : "limited")]),
    el("td", { class: "count-cell", text: l.running.toLocaleString() }),
    el("td", { class: l.held ? "count-cell held" : "count-cell", text: l.held.toLocaleString() }),
    el("td", {
      class: l.held ? "held" : "", text: l.oldest_held_seconds === null ? "–" : span(l.oldest_held_seconds * 1000),
      title: l.oldest_held_at ? `due ${instant(l.oldest_held_at)} UTC` : "",
    }),
    el("td", {}, [el("div", { class: "row-actions" }, l.destination ? [] : [
      l.paused
        ? el("button", { type: "button", class: "small", "data-resume": l.pattern, text: "Resume", "aria-label": label("Resume"), onclick: () => pauseTypes(l.pattern, true).catch(handleError) })
        : el("button", { type: "button", class: "secondary small", "data-pause": l.pattern, text: "Pause…", "aria-label": label("Pause"), onclick: () => pauseTypes(l.pattern, false).catch(handleError) }),
      hasLimit(l) && el("button", { type: "button", class: "secondary small", "data-edit": l.pattern, text: "Edit", "aria-label": label("Edit the limit of"), onclick: () => editLimit(l) }),
      hasLimit(l) && el("button", { type: "button", class: "danger small", "data-remove": l.pattern, text: "Remove…", "aria-label": label("Remove the limit of"), onclick: () => removeLimit(l) }),
    ].filter(Boolean))]),
  ]);
}

async function showLimits() {
  const { items } = await api(ns("/limits?limit=1000"));
  const body = $("#limits tbody");
  body.replaceChildren(...items.map(limitRow));
  if (!items.length) emptyRow(body, 10, "No limit and no pause in this namespace: every type starts as soon as it is due.");
}

function formError(box, form, error) {
  // The API's error in the form, naming the field; that field's input is marked invalid.
  for (const input of form.elements) input.removeAttribute("aria-invalid");
  if (!error) {
    box.hidden = true;
    return;
  }
  if (error instanceof ApiError && error.status === 401) return handleError(error);
  box.textContent = error.field ? `${error.field}: ${error.message}` : error.message;
  box.hidden = false;
  const input = error.field && form.elements.namedItem(error.field);
  if (input) {
    input.setAttribute("aria-invalid", "true");
    input.focus();
  }
}

function limitBody(form) {
  // Digits become numbers; anything else goes as typed, so the API's answer names the field.
  const body = {};
  for (const name of LIMIT_FIELDS.slice(1)) {
    const value = form.elements.namedItem(name).value.trim();
    if (value) body[name] = /^\d+$/.test(value) && name !== "rate" ? Number(value) : value;
  }
  return body;
}

function requiredPattern(form) {
  const pattern = form.elements.namedItem("pattern").value.trim();
  if (!pattern) {
    const error = new Error("is required: an event type or a glob, e.g. email.*");
    error.field = "pattern";
    throw error;
  }
  return pattern;
}

async function setLimit(event) {
  event.preventDefault();
  const form = $("#limit-form");
  try {
    const pattern = requiredPattern(form);
    const { limit } = await api(ns(`/limits/${encodeURIComponent(pattern)}`), { method: "PUT", body: limitBody(form) });
    formError($("#limit-error"), form, null);
    const parts = [limit.concurrency !== null && `concurrency ${limit.concurrency}`,
      limit.rate !== null && `rate ${limit.rate} (burst ${limit.burst})`,
      limit.partition_by && `per ${limit.partition_by}`].filter(Boolean);
    notice(`Limit on ${pattern} set: ${parts.join(", ")}. Every node applies it within a second.`, "ok");
    form.reset();
    await refresh();
  } catch (error) {
    formError($("#limit-error"), form, error);
  }
}

function editLimit(l) {
  const form = $("#limit-form");
  for (const name of LIMIT_FIELDS) {
    const value = l[name];
    form.elements.namedItem(name).value = value === null || value === undefined ? "" : String(value);
  }
  formError($("#limit-error"), form, null);
  form.elements.namedItem("concurrency").focus();
}

async function removeLimit(l) {
  const ok = await confirmed(`Remove the limit on ${l.pattern}?`,
    `Its types start as fast as workers take them (or under a broader limit that matches them)${l.paused ? "; the pause stays" : ""}.`,
    "Remove limit");
  if (!ok) return;
  try {
    await api(ns(`/limits/${encodeURIComponent(l.pattern)}`), { method: "DELETE" });
    notice(`Limit on ${l.pattern} removed.`, "ok");
    await refresh();
  } catch (error) {
    handleError(error);
  }
}

async function pauseTypes(pattern, resume) {
  if (!resume) {
    const ok = await confirmed(`Pause ${pattern}?`,
      `No node starts a timer whose type ${pattern.includes("*") ? "matches" : "is"} ${pattern} until it is resumed; they stay scheduled, in order. Attempts already running finish.`,
      "Pause");
    if (!ok) return false;
  }
  await api(ns(resume ? "/resume" : "/pause"), { method: "POST", body: { pattern } });
  notice(`${pattern} ${resume ? "resumed: its timers start again, oldest due first" : "paused on every node"}.`, "ok");
  await refresh();
  return true;
}

async function pauseForm(resume) {
  const form = $("#pause-form");
  try {
    const done = await pauseTypes(requiredPattern(form), resume);
    formError($("#pause-error"), form, null);
    if (done) form.reset();
  } catch (error) {
    formError($("#pause-error"), form, error);
  }
}

// -- nodes ---------------------------------------------------------------------------------
async function showNodes() {
  const { items } = await api("v1/nodes");
  const body = $("#nodes tbody");
  body.replaceChildren(...items.map((n) => {
    const offset = n.clock_offset_ms;
    const skewed = offset !== null && offset !== undefined && Math.abs(offset) >= 1000;
    return el("tr", {}, [
      el("td", {}, [el("span", { class: n.alive ? "alive" : "stale", title: n.alive ? "alive" : "no recent heartbeat" })]),
      el("td", { class: "mono", text: n.id, title: n.id }),
      el("td", { text: n.role }),
      el("td", { text: n.host }),
      el("td", { text: String(n.pid) }),
      el("td", { text: relative(n.heartbeat_at) }),
      el("td", { text: String(n.in_flight) }),
      el("td", { class: skewed ? "error mono" : "mono", text: offset === null || offset === undefined ? "–" : `${offset >= 0 ? "+" : "−"}${span(offset)}` }),
      nodeHandlersCell(n),
    ]);
  }));
  if (!items.length) emptyRow(body, 9, "No nodes registered.");
}

// -- views, refresh and the live feed ------------------------------------------------------
const VIEWS = {
  overview: showOverview,
  timers: showTimers,
  timer: showTimer,
  schedules: showSchedules,
  events: showEvents,
  limits: showLimits,
  nodes: showNodes,
  audit: showAudit,
};

function route() {
  // #timer/<key>, #timers?<filter> (the filter's values stay encoded until parsed), #<view>.
  const hash = location.hash.slice(1);
  // A notice speaks of the view it was given in: another view starts without it.
  if (hash !== state.hash) {
    notice(null);
    readRecovered();
    // The charts' range and filters as the address says (the same address, read again for
    // another namespace, keeps what is typed and not applied yet).
    if (hash === "" || hash === "overview" || hash.startsWith("overview?")) chartFromHash(hash);
  }
  state.hash = hash;
  if (hash.startsWith("timer/")) {
    state.view = "timer";
    const key = decodeURIComponent(hash.slice("timer/".length));
    if (key !== state.timerKey) {
      // Nothing of the previous timer stays in sight (or clickable) while this one loads.
      $("#timer-title").replaceChildren(el("span", { class: "mono", text: key }));
      for (const id of ["#timer-fields", "#timer-actions", "#timer-unsubscribed"]) $(id).replaceChildren();
      $("#timer-unsubscribed").hidden = true;
      $("#timer-payload").textContent = "";
    }
    state.timerKey = key;
  } else if (hash === "timers" || hash.startsWith("timers?")) {
    state.view = "timers";
    const filter = Object.fromEntries(new URLSearchParams(hash.slice("timers?".length)));
    if (JSON.stringify(filter) !== JSON.stringify(state.filter)) $("#timers tbody").replaceChildren();
    state.filter = filter;
    writeFilter(state.filter);
  } else {
    state.view = VIEWS[hash] && hash !== "timer" ? hash : "overview";
  }
  for (const view of document.querySelectorAll(".view")) view.hidden = view.id !== `view-${state.view}`;
  for (const tab of document.querySelectorAll(".tabs a")) {
    const current = tab.dataset.view === state.view || (state.view === "timer" && tab.dataset.view === "timers");
    if (current) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
  refresh();
}

async function refresh() {
  // One refresh at a time; a change heard meanwhile runs one more afterwards.
  if (!state.namespace) return;
  if (state.refreshing) {
    state.again = true;
    return;
  }
  state.refreshing = true;
  const hash = state.hash;
  try {
    await oneAtATime(() => VIEWS[state.view]());
    if ($("#notice").classList.contains("error")) fadeNotice();
    readRecovered();
  } catch (error) {
    // A view left meanwhile says nothing of the one in sight (a timer just deleted answers
    // 404 to the read that began before); the next refresh reads the view in sight.
    // So does a read begun while the address was changing (a deleted timer's page, read once
    // more on its way to the list the deletion leads to).
    if (hash === state.hash && location.hash.slice(1) === hash) readFailed(error);
  } finally {
    state.refreshing = false;
    if (state.again && !backingOff()) {
      state.again = false;
      setTimeout(refresh, 250);
    }
  }
}

function oneAtATime(read) {
  // A "load more" that ran beside a refresh would have its rows replaced by the refresh's
  // answer (or append after rows read before it): each read waits for the one in flight.
  const run = state.reading.then(read);
  state.reading = run.catch(() => {});
  return run;
}

function changed() {
  // A busy database says "changed" every second: refresh at most every LIVE_GAP_MS, and once
  // more after the last change heard. Paused, or with the tab hidden, nothing is refreshed:
  // the change is remembered, and the view is read again once live refresh resumes.
  if (state.paused || state.hidden) {
    state.missed = true;
    return;
  }
  if (state.liveTimer || backingOff()) return; // a failing read is retried on its own clock
  const wait = Math.max(0, (state.liveAt || 0) + LIVE_GAP_MS - Date.now());
  state.liveTimer = setTimeout(() => {
    state.liveTimer = null;
    state.liveAt = Date.now();
    refresh();
  }, wait);
}

function setLive(live, text) {
  if (state.paused || state.hidden) {
    $("#live").dataset.feed = live;
    return;
  }
  $("#live").dataset.state = live;
  $("#live-text").textContent = text;
}

async function listen() {
  // The live feed over fetch (EventSource cannot send a bearer token): each "changed" event
  // refreshes the view in sight. The server ends a stream every 25 s (the next opens at once);
  // a broken one is opened again after 2 s.
  if (state.live) state.live.abort();
  const controller = new AbortController();
  state.live = controller;
  const namespace = state.namespace;
  while (!controller.signal.aborted && namespace === state.namespace) {
    const opened = Date.now();
    try {
      const response = await fetch(url(ns("/live")), { headers: headers(), signal: controller.signal });
      if (!response.ok) throw new ApiError(response.status, null);
      setLive("on", "live");
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const message = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (/^event: changed$/m.test(message)) {
            $("#live").dataset.changes = String(Number($("#live").dataset.changes || 0) + 1);
            changed();
          }
        }
      }
      // The server ended this stream in good order: open the next at once, unless it was
      // short-lived (the server is stopping).
      if (Date.now() - opened > 5000) continue;
    } catch (error) {
      if (controller.signal.aborted) return;
      if (error instanceof ApiError && error.status === 401) return handleError(error);
    }
    setLive("off", "reconnecting…");
    // Each failure in a row waits twice as long, up to a minute: a server that is down is not
    // asked every two seconds by every open console.
    state.feedFailures = Date.now() - opened > 5000 ? 1 : (state.feedFailures || 0) + 1;
    await new Promise((resolve) => setTimeout(resolve, backoffMs(state.feedFailures)));
  }
}

async function loadNamespaces() {
  // The listing is paged: follow it to the end (a database holds at most max_namespaces).
  const items = [];
  let cursor = null;
  do {
    const page = await api("v1/namespaces", { params: { limit: 1000, cursor } });
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor);
  const select = $("#namespace");
  select.replaceChildren(...items.map((name) => el("option", { value: name, text: name })));
  const wanted = new URLSearchParams(location.search).get("namespace") || localStorage.getItem(NAMESPACE_KEY);
  state.namespace = items.includes(wanted) ? wanted : items[0] || null;
  if (state.namespace) select.value = state.namespace;
  if (!items.length) notice("No namespaces yet: schedule a timer to create one.", "info");
}

async function start() {
  try {
    const info = await api("v1/info");
    $("#token-form").hidden = !info.auth;
    $("#token").value = state.token;
    await loadAccess();
    await loadNamespaces();
    showAccess();
  } catch (error) {
    handleError(error);
    return;
  }
  route();
  listen();
}

function filterHash(filter) {
  const query = new URLSearchParams(filter).toString();
  return `#timers${query ? `?${query}` : ""}`;
}

function wire() {
  window.addEventListener("hashchange", route);
  $("#namespace").addEventListener("change", (event) => {
    state.namespace = event.target.value;
    localStorage.setItem(NAMESPACE_KEY, state.namespace);
    showAccess();
    $("#schedule-detail").hidden = true;
    route();
    listen();
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
    if (state.live) state.live.abort();
    start();
  });
  $("#filter").addEventListener("submit", (event) => {
    event.preventDefault();
    const hash = filterHash(readFilter());
    if (location.hash === hash) route();
    else location.hash = hash;
  });
  $("#f-clear").addEventListener("click", () => {
    writeFilter({});
    location.hash = "#timers";
  });
  for (const button of document.querySelectorAll("[data-bulk]")) {
    button.addEventListener("click", () => bulk(button.dataset.bulk));
  }
  for (const card of document.querySelectorAll("#counts .count")) {
    card.addEventListener("click", () => { location.hash = filterHash({ status: card.dataset.status }); });
  }
  $("#dead-replay-all").addEventListener("click", () => bulk("replay", { status: "dead" }));
  $("#dead-delete-all").addEventListener("click", () => bulk("delete", { status: "dead" }));
  $("#audit-more").addEventListener("click", () => oneAtATime(() => showAudit({ more: true })).catch(handleError));
  $("#timers-more").addEventListener("click", () => oneAtATime(() => showTimers({ more: true })).catch(handleError));
  $("#schedules-more").addEventListener("click", () => oneAtATime(() => showSchedules({ more: true })).catch(handleError));
  $("#events-more").addEventListener("click", () => oneAtATime(() => showEvents({ more: true })).catch(handleError));
  $("#limit-form").addEventListener("submit", setLimit);
  $("#pause-form").addEventListener("submit", (event) => {
    event.preventDefault();
    pauseForm(false);
  });
  $("#p-resume").addEventListener("click", () => pauseForm(true));
  $("#events-filter").addEventListener("submit", (event) => {
    event.preventDefault();
    state.eventsFilter = { type: $("#e-type").value.trim(), since: $("#e-since").value.trim() };
    $("#events tbody").replaceChildren(); // another filter: its first page, not as many as shown
    refresh();
  });
}

wire();
wireActing();
start();

// -- finding: type suggestions --------------------------------------------------------------
let suggesting = null;
async function suggestTypes(input) {
  // The known types starting with what is typed, as the inputs' shared datalist. What was asked
  // is the namespace and the prefix: the same prefix in another namespace is asked anew.
  const prefix = input.value.trim().replace(/\*.*$/, "");
  const asked = `${state.namespace}\n${prefix}`;
  if (!state.namespace || suggesting === asked) return;
  suggesting = asked;
  try {
    const { items } = await api(ns("/types"), { params: { prefix, limit: 20 } });
    if (suggesting !== asked) return;
    $("#type-suggestions").replaceChildren(...items.map((type) => el("option", { value: type })));
  } catch (_) {
    suggesting = null; // suggestions are a help: a failure stays quiet
  }
}

// -- charts an operator steers --------------------------------------------------------------
const RANGES = { "1h": "the last hour", "24h": "the last 24 hours", "7d": "the last 7 days" };

function drawCharts(charts) {
  const buckets = charts.buckets;
  const per = charts.bucket_seconds === 60 ? "minute" : charts.bucket_seconds === 900 ? "15 min" : "hour";
  const since = charts.range === "1h" ? "60 min ago" : charts.range === "24h" ? "24 h ago" : "7 d ago";
  const outcomes = ["done", "dead", "retrying", "running", "other"];
  const bucket = (b, name) => name === "other"
    ? Object.entries(b.by_status).filter(([s]) => !outcomes.includes(s)).reduce((n, [, c]) => n + c, 0)
    : b.by_status[name] || 0;
  $("#throughput-caption").textContent = `timers fired per ${per}, ${RANGES[charts.range]}, by status now`;
  chart($("#throughput"), buckets, outcomes.map((name) => ({
    name, kind: "bar", values: buckets.map((b) => bucket(b, name)),
  })), { unit: (v) => String(Math.round(v)), label: `Timers fired per ${per} by status`, since });
  chart($("#lateness"), buckets, ["p99", "p95", "p50"].map((p) => ({
    name: p, kind: "line", values: buckets.map((b) => b[`lateness_${p}_ms`]),
  })), { unit: (v) => span(v), label: `Lateness per ${per}: p50, p95 and p99`, since });
  const fired = buckets.reduce((n, b) => n + b.fired, 0);
  const dead = buckets.reduce((n, b) => n + (b.by_status.dead || 0), 0);
  const narrowed = [state.chart.type && `type ${state.chart.type}`, state.chart.node && `node ${state.chart.node}`].filter(Boolean).join(", ");
  $("#throughput-summary").textContent = (fired
    ? `${fired.toLocaleString()} fired in ${RANGES[charts.range]}, ${dead.toLocaleString()} of them dead now.`
    : `Nothing fired in ${RANGES[charts.range]}.`) + (narrowed ? ` (${narrowed})` : "");
  const worst = Math.max(...buckets.map((b) => b.lateness_p99_ms ?? -Infinity));
  const worstMax = Math.max(...buckets.map((b) => b.lateness_max_ms ?? -Infinity));
  $("#lateness-summary").textContent = fired
    ? `Worst ${per}: p99 ${span(worst)} after the due time; the latest start ${span(worstMax)}.`
    : "";
}

function setChart(event) {
  event.preventDefault();
  const hash = chartHash({ range: $("#c-range").value, type: $("#c-type").value.trim(), node: $("#c-node").value.trim() });
  if (location.hash === hash) refresh();
  else location.hash = hash; // the address keeps the range and filters: a reload shows the same
}

// -- live refresh: paused by hand, or while the tab is hidden ------------------------------
function showLiveState() {
  const live = $("#live");
  const button = $("#live-pause");
  button.textContent = state.paused ? "Resume" : "Pause";
  button.setAttribute("aria-pressed", String(state.paused));
  if (state.paused || state.hidden) {
    live.dataset.state = "paused";
    $("#live-text").textContent = state.paused ? "paused" : "paused (tab hidden)";
  } else {
    live.dataset.state = live.dataset.feed || "on";
    $("#live-text").textContent = live.dataset.state === "on" ? "live" : "reconnecting…";
  }
}

function resumeIfMissed() {
  showLiveState();
  if (!state.paused && !state.hidden && state.missed) {
    state.missed = false;
    refresh();
  }
}

// -- acting: edit a timer, create one, run a schedule's next occurrence ----------------------
function whenField(text) {
  // "PT2H" or a number of seconds is a delay; anything else an instant (the API names it).
  const value = text.trim();
  if (/^-?P/i.test(value) || /^\d+(\.\d+)?$/.test(value)) return { delay: /^\d/.test(value) ? Number(value) : value };
  return { at: value };
}

function jsonField(text, field) {
  try {
    return JSON.parse(text);
  } catch (error) {
    const bad = new Error(`is not JSON: ${error.message}`);
    bad.field = field;
    throw bad;
  }
}

function openEdit(timer) {
  const form = $("#edit-form");
  form.dataset.key = timer.key;
  $("#e-when").value = timer.due_at;
  $("#e-payload").value = JSON.stringify(timer.payload, null, 2);
  formError($("#edit-error"), form, null);
  editOpened(timer);
  form.hidden = false;
  $("#e-when").focus();
}

async function saveEdit(event) {
  event.preventDefault();
  const form = $("#edit-form");
  const key = form.dataset.key;
  try {
    const body = { ...whenField($("#e-when").value), payload: jsonField($("#e-payload").value, "payload") };
    await api(ns(`/timers/${keyPath(key)}`), { method: "PATCH", body });
    formError($("#edit-error"), form, null);
    form.hidden = true;
    $("#edit-stale").hidden = true;
    notice(`${key} updated.`, "ok");
    await refresh();
  } catch (error) {
    formError($("#edit-error"), form, error.field === "at" || error.field === "delay" ? Object.assign(error, { field: "when" }) : error);
  }
}

async function createTimer(event) {
  event.preventDefault();
  const form = $("#create-form");
  try {
    const body = { type: $("#n-type").value.trim(), payload: jsonField($("#n-payload").value, "payload"),
      ...whenField($("#n-when").value), on_conflict: "error" };
    if (!body.type) throw Object.assign(new Error("is required: an event type"), { field: "type" });
    if (!$("#n-when").value.trim()) throw Object.assign(new Error("is required: an instant or a delay (PT2H)"), { field: "when" });
    for (const name of ["key", "subject"]) {
      const value = form.elements.namedItem(name).value.trim();
      if (value) body[name] = value;
    }
    const { timer } = await api(ns("/timers"), { method: "POST", body });
    formError($("#create-error"), form, null);
    form.reset();
    $("#n-payload").value = "{}";
    notice(`${timer.key} scheduled for ${instant(timer.due_at)} UTC.`, "ok");
    await refresh();
  } catch (error) {
    formError($("#create-error"), form, error.field === "at" || error.field === "delay" ? Object.assign(error, { field: "when" }) : error);
  }
}

async function runNext(s) {
  const ok = await confirmed(`Run ${s.name}'s next occurrence now?`,
    `The occurrence due ${instant(s.next_at)} UTC runs now, once; the schedule goes on from the one after it.`,
    "Run now");
  if (!ok) return;
  const { timer } = await api(ns(`/schedules/${encodeURIComponent(s.name)}/run-next`), { method: "POST" });
  notice(`${timer.key} made due now.`, "ok");
  await refresh();
}

function wireActing() {
  $("#chart-controls").addEventListener("submit", setChart);
  $("#c-range").addEventListener("change", setChart);
  for (const input of [$("#f-type"), $("#c-type"), $("#n-type")]) {
    input.addEventListener("input", () => suggestTypes(input));
    input.addEventListener("focus", () => suggestTypes(input));
  }
  $("#live-pause").addEventListener("click", () => {
    state.paused = !state.paused;
    resumeIfMissed();
  });
  document.addEventListener("visibilitychange", () => {
    state.hidden = document.visibilityState === "hidden";
    resumeIfMissed();
  });
  $("#edit-form").addEventListener("submit", saveEdit);
  $("#e-cancel").addEventListener("click", () => {
    $("#edit-form").hidden = true;
    $("#edit-stale").hidden = true;
  });
  $("#create-form").addEventListener("submit", createTimer);
}

// -- selection, as in a mail client ---------------------------------------------------------
// Rows are ticked one by one, a shift-click ticks the range from the last row clicked, the
// header's box ticks the page; with the whole page ticked and more below, the selection can be
// widened to every timer the filter takes. Each action first asks the server how many timers
// it would take (dry_run), says that number, and after it the rows it changed are marked.
const KEYS_A_REQUEST = 1000; // the API's most keys in one bulk request
const WIDENED = {
  replay: (n) => `Replay ${n} dead…`, run_now: (n) => `Run ${n} now…`,
  cancel: (n) => `Cancel ${n} pending…`, delete: (n) => `Delete ${n} finished…`,
};

function shownKeys() {
  return [...document.querySelectorAll("#timers tbody tr[data-key]")].map((row) => row.dataset.key);
}

function pickClicked(key, event) {
  const on = event.target.checked;
  let keys = [key];
  if (event.shiftKey && state.anchor) {
    const shown = shownKeys();
    const [from, to] = [shown.indexOf(state.anchor), shown.indexOf(key)];
    if (from >= 0 && to >= 0) keys = shown.slice(Math.min(from, to), Math.max(from, to) + 1);
  }
  state.anchor = key;
  setPicked(keys, on);
}

function setPicked(keys, on) {
  state.allMatching = null;
  state.changedFrom = null;
  for (const key of keys) {
    if (on) state.selected.add(key);
    else state.selected.delete(key);
  }
  showSelection();
}

function showSelection() {
  // Only keys still in sight stay selected (a refresh or another filter may have taken rows
  // away); "every timer the filter takes" holds for the filter it was chosen under only.
  const shown = shownKeys();
  const inSight = new Set(shown);
  for (const key of [...state.selected]) if (!inSight.has(key)) state.selected.delete(key);
  if (state.allMatching && state.allMatching !== JSON.stringify(state.filter)) state.allMatching = null;
  if (state.allMatching) for (const key of shown) state.selected.add(key);
  for (const box of document.querySelectorAll("#timers tbody [data-pick]")) {
    box.checked = state.selected.has(box.dataset.pick);
    box.closest("tr").classList.toggle("picked", box.checked);
  }
  const count = state.selected.size;
  const all = $("#pick-all");
  all.checked = count > 0 && count === shown.length;
  all.indeterminate = count > 0 && count < shown.length;
  const more = !$("#timers-more").hidden;
  $("#selection-count").textContent = state.allMatching
    ? "Every timer this filter takes is selected"
    : count ? `${count.toLocaleString()} selected` : "No row selected";
  $("#selection-widen").hidden = state.allMatching || !more || count === 0 || count !== shown.length;
  $("#selection-widen").textContent = `Select every timer this filter takes, not only these ${count.toLocaleString()}`;
  $("#selection-clear").hidden = count === 0 && !state.allMatching;
  for (const button of document.querySelectorAll("[data-selected]")) {
    button.disabled = count === 0 && !state.allMatching;
    if (!state.allMatching) button.textContent = button.dataset.label;
  }
  markChanged();
  if (state.allMatching) countMatching();
}

async function countMatching() {
  // Widened to the filter, each button says how many timers it would take now.
  const asked = state.allMatching;
  const filter = bulkFilter();
  const counts = await Promise.all(Object.keys(ACTIONS).map((action) =>
    api(ns("/timers/bulk"), { method: "POST", body: { action, filter, dry_run: true } })
      .then((answer) => [action, answer.count]).catch(() => [action, null])));
  if (state.allMatching !== asked) return;
  for (const [action, count] of counts) {
    const button = document.querySelector(`[data-selected="${action}"]`);
    if (button) button.textContent = count === null ? button.dataset.label : WIDENED[action](count.toLocaleString());
  }
}

function markChanged() {
  // The rows the last action changed, as read back: their new status shows, and they stand out.
  const before = state.changedFrom;
  for (const row of document.querySelectorAll("#timers tbody tr[data-key]")) {
    const was = before && before.get(row.dataset.key);
    const changed = Boolean(was && was !== row.dataset.status);
    row.classList.toggle("changed", changed);
    const mark = row.querySelector(".was");
    if (mark) mark.remove();
    if (changed) row.querySelector(".pill").after(el("span", { class: "was", text: ` was ${was}` }));
  }
}

function bulkFilter() {
  const filter = { ...state.filter };
  delete filter.sort; // an order, not a filter
  return filter;
}

async function bulkByKeys(action, keys, dryRun) {
  // A selection larger than one request takes goes in parts; the counts add up.
  let count = 0;
  for (let i = 0; i < keys.length; i += KEYS_A_REQUEST) {
    const body = { action, filter: { keys: keys.slice(i, i + KEYS_A_REQUEST) }, dry_run: dryRun };
    count += (await api(ns("/timers/bulk"), { method: "POST", body })).count;
  }
  return count;
}

async function bulkSelected(action) {
  const what = ACTIONS[action];
  const Verb = `${what.verb[0].toUpperCase()}${what.verb.slice(1)}`;
  const widened = Boolean(state.allMatching);
  const keys = [...state.selected];
  const filter = bulkFilter();
  const run = (dryRun) => widened
    ? api(ns("/timers/bulk"), { method: "POST", body: { action, filter, dry_run: dryRun } }).then((a) => a.count)
    : bulkByKeys(action, keys, dryRun);
  try {
    const count = await run(true);
    const of = widened ? "of the timers this filter takes" : `of the ${keys.length.toLocaleString()} selected timers`;
    if (!count) {
      notice(`None ${of} is ${what.takes}: nothing to ${what.verb}.`, "info");
      return;
    }
    const described = Object.entries(filter).map(([k, v]) => `${k} ${v}`).join(", ") || "no filter: the whole namespace";
    const them = action === "run_now" ? "run them now" : `${what.verb} them`;
    const ok = await confirmed(`${Verb} ${count.toLocaleString()} ${widened ? "" : "selected "}timers?`,
      widened
        ? `${count.toLocaleString()} ${what.takes} timers match (${described}) — ${them}?`
        : `${count.toLocaleString()} of the ${keys.length.toLocaleString()} selected timers are ${what.takes} — ${them}?`,
      `${Verb} ${count.toLocaleString()}`);
    if (!ok) return;
    state.changedFrom = new Map([...document.querySelectorAll("#timers tbody tr[data-key]")]
      .filter((row) => widened || state.selected.has(row.dataset.key))
      .map((row) => [row.dataset.key, row.dataset.status]));
    const done = await run(false);
    state.selected.clear();
    state.allMatching = null;
    notice(`${done.toLocaleString()} ${widened ? "" : "selected "}timers ${what.done}.`, "ok");
    await refresh();
  } catch (error) {
    handleError(error);
  }
}

function wireSelection() {
  for (const button of document.querySelectorAll("[data-selected]")) {
    button.dataset.label = button.textContent;
    button.addEventListener("click", () => bulkSelected(button.dataset.selected));
  }
  $("#pick-all").addEventListener("change", (event) => setPicked(shownKeys(), event.target.checked));
  $("#selection-widen").addEventListener("click", () => {
    state.allMatching = JSON.stringify(state.filter);
    state.changedFrom = null;
    showSelection();
  });
  $("#selection-clear").addEventListener("click", () => {
    state.selected.clear();
    setPicked([], false);
  });
}

wireSelection();

// -- instants whole -------------------------------------------------------------------------
// An instant is shown whole, in UTC (to the millisecond where that matters: an attempt's
// claim, start and end); on hover, the same instant in the reader's own zone and how long ago.
let localTime = null;

function wholeInstant(iso, ms) {
  const [date, time = ""] = iso.replace(/Z$|[+-]00:00$/, "").split("T");
  const [clock, fraction = ""] = time.split(".");
  return ms ? `${date} ${clock}.${fraction.padEnd(3, "0").slice(0, 3)}` : `${date} ${clock}`;
}

function inReadersZone(iso, ms) {
  if (!localTime) {
    localTime = new Intl.DateTimeFormat("en-CA", {
      year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
      second: "2-digit", hourCycle: "h23", timeZoneName: "shortOffset",
    });
  }
  const parts = Object.fromEntries(localTime.formatToParts(new Date(iso)).map((p) => [p.type, p.value]));
  const fraction = ms ? `.${(iso.match(/\.(\d+)/)?.[1] ?? "").padEnd(3, "0").slice(0, 3)}` : "";
  const zone = localTime.resolvedOptions().timeZone;
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second}${fraction} ${zone} (${parts.timeZoneName})`;
}

function instantTitle(iso, ms = false) {
  return `${wholeInstant(iso, ms)} UTC\n${inReadersZone(iso, ms)}, your zone\n${relative(iso)}`;
}

const FIELD_INSTANTS = { due: "due_at", "runs at": "run_at", fired: "fired_at", completed: "completed_at", registered: "registered_at" };

function titleInstants(list, timer) {
  // A timer's instants, each with the reader's zone on hover as in the lists.
  for (const term of list.querySelectorAll("dt")) {
    const iso = timer[FIELD_INSTANTS[term.textContent]];
    if (iso) term.nextElementSibling.title = instantTitle(iso, true);
  }
}

function timeCell(iso, { ms = false } = {}) {
  if (!iso) return el("td", { class: "mono instant", text: "–" });
  return el("td", { class: "mono instant", title: instantTitle(iso, ms) }, [
    el("time", { datetime: iso, text: wholeInstant(iso, ms) }),
  ]);
}

// -- narrow screens: each cell carries its column's name ------------------------------------
// Below a width a table is drawn as cards (console.css); each cell then shows its column's
// header beside it, from data-label, set here on every row a view draws.
function labelCells(table) {
  const names = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
  for (const row of table.querySelectorAll("tbody tr")) {
    [...row.cells].forEach((cell, i) => {
      if (cell.colSpan === 1 && names[i] !== undefined && cell.dataset.label !== names[i]) cell.dataset.label = names[i];
    });
  }
}

function wireCardLabels() {
  for (const table of document.querySelectorAll("table.table")) {
    const body = table.tBodies[0];
    if (!body) continue;
    new MutationObserver(() => labelCells(table)).observe(body, { childList: true });
    labelCells(table);
  }
}

wireCardLabels();

// -- keyboard and screen readers ------------------------------------------------------------
// The view's name is the page's heading and title; "/" goes to the view's search, "?" lists
// the shortcuts; a scrolling block of text (a traceback, a payload) takes the focus, so it
// scrolls from the keyboard too.
const VIEW_NAMES = {
  overview: "Overview", timers: "Timers", timer: "Timer", schedules: "Schedules", events: "Event log",
  limits: "Flow control", nodes: "Nodes", audit: "Audit",
};
const SEARCH = { overview: "#c-type", timers: "#f-type", events: "#e-type", limits: "#l-pattern" };

function nameView() {
  const hash = location.hash.slice(1);
  const view = hash.startsWith("timer/") ? "timer" : hash.split("?")[0];
  const name = view === "timer" ? `Timer ${decodeURIComponent(hash.slice("timer/".length))}` : VIEW_NAMES[view] || VIEW_NAMES.overview;
  $("#view-name").textContent = ` · ${name}`;
  document.title = `${name} · duetime`;
}

function typing(target) {
  return target instanceof HTMLElement
    && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName));
}

function shortcut(event) {
  if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target) || document.querySelector("dialog[open]")) return;
  if (event.key === "/") {
    event.preventDefault();
    const field = SEARCH[state.view];
    if (field) {
      $(field).focus();
      return;
    }
    window.addEventListener("hashchange", () => $("#f-type").focus(), { once: true });
    location.hash = "#timers";
  } else if (event.key === "?") {
    event.preventDefault();
    $("#shortcuts").showModal();
  }
}

function focusableScrolls() {
  for (const block of document.querySelectorAll("pre.code:not([tabindex])")) {
    block.tabIndex = 0;
    block.setAttribute("role", "region");
    block.setAttribute("aria-label", block.id === "timer-payload" ? "Payload" : "Traceback");
  }
  // A cut cell a click shows whole: Enter or Space does it from the keyboard.
  for (const cell of document.querySelectorAll("td.expandable:not([tabindex])")) {
    if (cell.textContent) cell.tabIndex = 0;
  }
}

function expandByKey(event) {
  const cell = event.target;
  if (!(cell instanceof HTMLElement) || !cell.matches("td.expandable") || (event.key !== "Enter" && event.key !== " ")) return;
  event.preventDefault();
  cell.click();
}

function wireKeyboard() {
  document.addEventListener("keydown", shortcut);
  document.addEventListener("keydown", expandByKey);
  window.addEventListener("hashchange", nameView);
  $("#skip-link").addEventListener("click", (event) => {
    event.preventDefault(); // the address holds the view: the link only moves the focus
    $("#content").focus();
  });
  $("#shortcuts-open").addEventListener("click", () => $("#shortcuts").showModal());
  new MutationObserver(focusableScrolls).observe($("main"), { childList: true, subtree: true });
  focusableScrolls();
  nameView();
}

wireKeyboard();

// -- access: what the caller may do, and only those controls shown ---------------------------
async function loadAccess() {
  // GET /v1/me: the token's name, scopes and the namespaces it may change (every one without auth).
  state.me = await api("v1/me");
}

function mayWrite(namespace = state.namespace) {
  const writable = state.me?.writable ?? [];
  return writable.includes("*") || writable.includes(namespace);
}

function showAccess() {
  // access.css hides every control that changes something while body[data-access=read].
  document.body.dataset.access = mayWrite() ? "write" : "read";
  const who = state.me;
  $("#whoami").textContent = !who || !who.auth ? "" :
    `${who.token ?? `token #${who.token_id}`} · ${mayWrite() ? "read and write" : "read only"}`;
  $("#whoami").hidden = !who || !who.auth;
  // Metrics span every namespace: a token of some of them is refused there, so not linked.
  const metrics = document.querySelector('footer a[href="metrics"]');
  if (metrics) metrics.hidden = !(who?.scopes ?? []).includes("metrics");
}

// -- theme: the system's choice, or light or dark, remembered ---------------------------------
const THEME_KEY = "duetime.theme";
const THEME_MEDIA = { system: "(prefers-color-scheme: dark)", light: "not all", dark: "all" };

function applyTheme(theme) {
  // dark.css applies while its <link>'s media does: the system's preference, always or never.
  const chosen = Object.hasOwn(THEME_MEDIA, theme) ? theme : "system";
  $("#dark-css").media = THEME_MEDIA[chosen];
  document.documentElement.dataset.theme = chosen;
  $("#theme").value = chosen;
}

function wireTheme() {
  applyTheme(localStorage.getItem(THEME_KEY));
  $("#theme").addEventListener("change", (event) => {
    localStorage.setItem(THEME_KEY, event.target.value);
    applyTheme(event.target.value);
  });
}

wireTheme(); // here, below its constants: the module runs top to bottom

// -- charts: their range and filters kept in the address -------------------------------------
function chartFromHash(hash) {
  // #overview?range=24h&type=order.*&node=…: a reload, or a link shared, shows the same charts.
  const params = new URLSearchParams(hash.split("?")[1] || "");
  const range = params.get("range");
  state.chart = { range: Object.hasOwn(RANGES, range) ? range : "1h", type: params.get("type") || "", node: params.get("node") || "" };
  $("#c-range").value = state.chart.range;
  $("#c-type").value = state.chart.type;
  $("#c-node").value = state.chart.node;
}

function chartHash(chart) {
  const kept = Object.entries(chart).filter(([name, value]) => value && !(name === "range" && value === "1h"));
  const query = new URLSearchParams(kept).toString();
  return `#overview${query ? `?${query}` : ""}`;
}

// -- nodes: what each one runs here ---------------------------------------------------------
function nodeHandlersCell(n) {
  // The node's subscriptions in the namespace in sight: a Python handler's type alone, a
  // route's type with where it delivers.
  const mine = (n.subscriptions || []).filter((s) => s.namespace === state.namespace);
  const parts = mine.map((s) => s.to.length === 1 && s.to[0] === "handler" ? s.type : `${s.type} → ${s.to.join(", ")}`);
  const text = parts.join(", ") || "–";
  return el("td", { class: "mono handlers", "data-handlers": n.id, text, title: text });
}

// -- failing reads: retried later and later, said once ---------------------------------------
const BACKOFF_FIRST_MS = 2000;
const BACKOFF_CAP_MS = 60000;

function backoffMs(failures) {
  return Math.min(BACKOFF_FIRST_MS * 2 ** Math.max(failures - 1, 0), BACKOFF_CAP_MS);
}

function backingOff() {
  return Date.now() < (state.failing?.until ?? 0);
}

function readFailed(error) {
  // A read that fails is not sent again at every change heard (each two seconds on a busy
  // database): it is retried after 2 s, then 4, 8… up to a minute, and its error said once.
  const failing = state.failing ?? (state.failing = { count: 0, until: 0, timer: null, said: "" });
  failing.count += 1;
  const wait = backoffMs(failing.count);
  failing.until = Date.now() + wait;
  $("#live").dataset.retry = String(wait);
  if (failing.said !== error.message || (error instanceof ApiError && error.status === 401)) {
    failing.said = error.message;
    handleError(error);
  }
  clearTimeout(failing.timer);
  if (error instanceof ApiError && error.status === 401) return; // a token is needed first
  failing.timer = setTimeout(() => {
    failing.timer = null;
    failing.until = 0;
    refresh();
  }, wait);
}

function readRecovered() {
  const failing = state.failing;
  if (!failing) return;
  clearTimeout(failing.timer);
  state.failing = null;
  delete $("#live").dataset.retry;
}

// -- the edit form sees its timer change -----------------------------------------------------
function seenOf(timer) {
  return JSON.stringify([timer.status, timer.attempts, timer.updated_at]);
}

function editOpened(timer) {
  $("#edit-form").dataset.seen = seenOf(timer);
  $("#edit-stale").hidden = true;
  $("#e-save").disabled = false;
}

function editSees(timer, pending) {
  // The timer read again while its form is open: if it fired or was changed meanwhile, the
  // form says so, rather than closing under the reader or saving over what happened.
  const form = $("#edit-form");
  if (form.hidden || form.dataset.key !== timer.key) {
    if (!pending) form.hidden = true;
    return;
  }
  if (form.dataset.seen === seenOf(timer)) return;
  const box = $("#edit-stale");
  box.textContent = pending
    ? `${timer.key} changed while this form was open: it is ${timer.status} now (attempt ${timer.attempts} of ${timer.max_attempts}, updated ${instant(timer.updated_at)} UTC). Saving replaces its due time and payload with these.`
    : `${timer.key} fired while this form was open: it is ${timer.status} now, and can no longer be edited. Nothing was saved.`;
  box.hidden = false;
  $("#e-save").disabled = !pending;
}

// -- schedules: made and changed here, with their next occurrences as the rule is typed ------
const RULE_HINTS = {
  cron: ["minute hour day month weekday", "0 9 * * 1-5"],
  every: ["an interval: PT15M, or seconds", "PT15M"],
  rrule: ["RFC 5545: FREQ=…;BY…", "FREQ=MONTHLY;BYMONTHDAY=-1"],
};
let previewTimer = null;
let previewAsked = "";

function scheduleRowLinks(s) {
  // Its timers (the occurrences made so far) and, for a writer, the form filled with it.
  return [
    el("a", { href: filterHash({ schedule: s.name }), class: "small", "data-schedule-timers": s.name, text: "Timers",
      "aria-label": `The timers of ${s.name}` }),
    el("button", { type: "button", class: "secondary small", "data-edit-schedule": s.name, text: "Edit…",
      "aria-label": `Edit ${s.name}`, onclick: () => editSchedule(s) }),
  ];
}

function scheduleKind() {
  const kind = $("#s-kind").value;
  $("#schedule-form").dataset.kind = kind;
  $("#s-rule-hint").textContent = RULE_HINTS[kind][0];
  $("#s-rule").placeholder = RULE_HINTS[kind][1];
  return kind;
}

function scheduleRuleFields() {
  // The rule as the API takes it: one of cron, every or rrule, with the calendar's options.
  const kind = scheduleKind();
  const rule = $("#s-rule").value.trim();
  const fields = { [kind]: kind === "every" && /^\d+(\.\d+)?$/.test(rule) ? Number(rule) : rule,
    timezone: $("#s-timezone").value.trim() || "UTC" };
  if (kind === "rrule") {
    for (const name of ["dtstart", "holidays", "roll"]) {
      const value = $(`#s-${name}`).value.trim();
      if (value) fields[name] = value;
    }
  }
  return fields;
}

function previewSoon() {
  clearTimeout(previewTimer);
  previewTimer = setTimeout(() => previewSchedule().catch(() => {}), 250);
}

async function previewSchedule() {
  // GET v1/preview stores nothing: the next five occurrences, or the API's sentence on the rule.
  const fields = scheduleRuleFields();
  const kind = $("#s-kind").value;
  const described = $("#s-described");
  const list = $("#s-next");
  if (!$("#s-rule").value.trim()) {
    described.className = "muted";
    described.textContent = "Type a rule to see when it fires.";
    list.replaceChildren();
    return;
  }
  const asked = JSON.stringify(fields);
  previewAsked = asked;
  try {
    const answer = await api("v1/preview", { params: { ...fields, [kind]: String(fields[kind]), count: 5 } });
    if (previewAsked !== asked) return; // a later keystroke asked again
    described.className = "muted";
    described.textContent = answer.description.includes(answer.timezone)
      ? answer.description : `${answer.description} (${answer.timezone})`;
    list.replaceChildren(...answer.occurrences.map((o) => el("li", { class: "mono", text: `${o.local.replace("T", " ")} · ${instant(o.utc)} UTC` })));
    if (!answer.occurrences.length) list.replaceChildren(el("li", { class: "muted", text: "No occurrence to come." }));
  } catch (error) {
    if (previewAsked !== asked) return;
    described.className = "error";
    described.textContent = error.field ? `${ruleField(error.field)}: ${error.message.replace(`${error.field}: `, "")}` : error.message;
    list.replaceChildren();
  }
}

function ruleField(field) {
  // The API names cron, every or rrule; the form has one input for the three.
  return ["cron", "every", "rrule"].includes(field) ? "rule" : field;
}

function editSchedule(s) {
  const form = $("#schedule-form");
  form.dataset.editing = s.name;
  $("#sf-title").textContent = `Edit ${s.name}`;
  $("#s-save").textContent = "Save schedule";
  $("#s-new").hidden = false;
  $("#s-name").value = s.name;
  $("#s-name").readOnly = true;
  $("#s-type").value = s.type;
  $("#s-kind").value = s.cron ? "cron" : s.rrule ? "rrule" : "every";
  $("#s-rule").value = s.cron ?? s.rrule ?? String(s.every);
  $("#s-timezone").value = s.timezone;
  $("#s-dtstart").value = s.dtstart ?? "";
  $("#s-holidays").value = s.holidays ?? "";
  $("#s-roll").value = s.roll ?? "";
  $("#s-payload").value = JSON.stringify(s.payload ?? null, null, 2);
  formError($("#schedule-error"), form, null);
  previewSchedule().catch(() => {});
  $("#s-rule").focus();
}

function newSchedule() {
  const form = $("#schedule-form");
  form.reset();
  delete form.dataset.editing;
  $("#sf-title").textContent = "New schedule";
  $("#s-save").textContent = "Create schedule";
  $("#s-new").hidden = true;
  $("#s-name").readOnly = false;
  $("#s-payload").value = "{}";
  formError($("#schedule-error"), form, null);
  previewSchedule().catch(() => {});
}

async function saveSchedule(event) {
  event.preventDefault();
  const form = $("#schedule-form");
  const editing = form.dataset.editing;
  try {
    const name = $("#s-name").value.trim();
    const type = $("#s-type").value.trim();
    if (!name) throw Object.assign(new Error("is required: a name, e.g. daily-report"), { field: "name" });
    if (!type) throw Object.assign(new Error("is required: an event type"), { field: "type" });
    if (!$("#s-rule").value.trim()) throw Object.assign(new Error("is required: a cron expression, an interval or an RRULE"), { field: "rule" });
    const body = { type, payload: jsonField($("#s-payload").value, "payload"), ...scheduleRuleFields() };
    let saved;
    if (editing) {
      // The kinds not chosen are cleared: a cron schedule made an interval has no cron left.
      for (const kind of ["cron", "every", "rrule"]) if (!(kind in body)) body[kind] = null;
      if (!body.rrule) Object.assign(body, { dtstart: null, holidays: null, roll: null });
      ({ schedule: saved } = await api(ns(`/schedules/${encodeURIComponent(editing)}`), { method: "PATCH", body }));
    } else {
      ({ schedule: saved } = await api(ns("/schedules"), { method: "POST", body: { name, ...body, on_conflict: "error" } }));
    }
    notice(`Schedule ${saved.name} ${editing ? "saved" : "created"}: next ${instant(saved.next_at)} UTC.`, "ok");
    newSchedule();
    await refresh();
  } catch (error) {
    formError($("#schedule-error"), form, error.field ? Object.assign(error, { field: ruleField(error.field) }) : error);
  }
}

function wireSchedules() {
  $("#schedule-form").addEventListener("submit", saveSchedule);
  $("#s-new").addEventListener("click", newSchedule);
  for (const id of ["#s-kind", "#s-rule", "#s-timezone", "#s-dtstart", "#s-holidays", "#s-roll"]) {
    $(id).addEventListener("input", previewSoon);
    $(id).addEventListener("change", previewSoon);
  }
  $("#s-type").addEventListener("input", () => suggestTypes($("#s-type")));
  scheduleKind();
}

wireSchedules();
