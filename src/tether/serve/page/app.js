// The page of `tether serve`: a chat with the agent and a view of its runs, over the server's JSON API.
// Plain JavaScript, no build step and nothing fetched from elsewhere: it works offline. Every URL is relative,
// so the page works where the app is mounted (`app.mount("/agent", agent.to_asgi())`).
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "tether.token";
const state = { sessionId: "", runId: "", controller: null, files: [], maxBytes: Infinity };

// An element with its class, text and children: the one way this page makes DOM (never innerHTML).
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

// --- the server: a token sent on every request; a 401 asks for one -------------------------------------------

function takeTokenFromFragment() {
  const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (!match) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
  history.replaceState(null, "", location.pathname + location.search);  // the token leaves the address bar
}

class Unauthorized extends Error {}

// A request to the server (`path` relative to the page), with the token; `json` is sent as the body.
async function api(path, { json, ...options } = {}) {
  const headers = new Headers(options.headers || {});
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.set("Authorization", `Bearer ${token}`);
  if (json !== undefined) {
    headers.set("Content-Type", "application/json");
    options.body = JSON.stringify(json);
  }
  const response = await fetch(path, { ...options, headers });
  if (response.status === 401) {
    showLogin(token ? "That token was refused." : "");
    throw new Unauthorized("unauthorized");
  }
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      const body = await response.json();
      message = body.error?.message || message;  // {"error": {"code", "message"}}
    } catch { /* not JSON: the status says it */ }
    throw new Error(message);
  }
  return response;
}

const getJson = async (path) => (await api(path)).json();

function showLogin(message) {
  document.body.classList.add("locked");  // nothing else works until a token is accepted
  $("login").hidden = false;
  $("login-error").textContent = message;
  $("token").focus();
}

// Server-sent events read from a fetch body: `event:` and `data:` lines, a blank line ends each event.
async function* readEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let kind = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) kind = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) yield { kind, data: JSON.parse(data.join("\n")) };
    }
  }
}

// --- the conversation ------------------------------------------------------------------------------------------

const log = () => $("log");

// A message on the log; its content is added in the order it comes (text, thinking, tool calls).
function bubble(role, text) {
  const node = el("article", { class: `message ${role}`, "aria-label": role });
  if (text != null) node.append(el("div", { class: "text", text }));
  log().append(node);
  log().scrollTop = log().scrollHeight;
  return node;
}

function toolCallView(call) {
  const result = el("pre", { class: "tool-result", text: "running…" });
  const node = el("details", { class: "tool-call running", "data-call-id": call.id, open: "" },
    el("summary", {}, el("span", { class: "tool-name", text: call.name }), el("span", { class: "tool-state", text: " running" })),
    el("pre", { class: "tool-args", text: JSON.stringify(call.arguments ?? call.raw_arguments ?? {}, null, 2) }),
    result);
  return node;
}

// A call's result, on the latest call of its id (a model may use an id again in a later run).
function finishToolCall(container, result) {
  const node = [...container.querySelectorAll(`[data-call-id="${CSS.escape(result.call_id)}"]`)].pop();
  if (!node) return;
  node.classList.remove("running");
  node.classList.toggle("failed", Boolean(result.is_error));
  node.querySelector(".tool-state").textContent = result.is_error ? ` failed${result.code ? ` (${result.code})` : ""}` : " done";
  node.querySelector(".tool-result").textContent = result.content;
}

function attachmentNames(parts) {
  return parts.filter((p) => p.kind === "attachment").map((p) => p.name || p.media_type);
}

// A stored message (GET /api/sessions/{id}) drawn the way a live run draws it.
function drawMessage(message) {
  if (message.role === "tool") {
    for (const part of message.parts) if (part.kind === "tool_result") finishToolCall(log(), part);
    return;
  }
  const node = bubble(message.role);
  for (const part of message.parts) {
    if (part.kind === "text") node.append(el("div", { class: "text", text: part.text }));
    else if (part.kind === "thinking") node.append(thinkingView(part.text));
    else if (part.kind === "tool_call") node.append(toolCallView(part));
  }
  const names = attachmentNames(message.parts);
  if (names.length) node.append(el("p", { class: "attachments", text: `Attached: ${names.join(", ")}` }));
}

function thinkingView(text = "") {
  return el("details", { class: "thinking" }, el("summary", { text: "Thinking" }), el("div", { class: "thinking-text", text }));
}

// One run's events drawn as they come, in one message: text streams in, thinking folds away, each tool call
// appears when it starts and gets its result when it ends.
function runView() {
  let answer = null, text = null, thinking = null;  // the message, and the parts the next deltas extend
  const add = (node) => (answer ??= bubble("assistant")).appendChild(node);
  return (kind, data) => {
    switch (kind) {
      case "run_started":
        state.runId = data.run_id;
        if (data.session_id) rememberSession(data.session_id);
        break;
      case "turn_started": text = thinking = null; break;
      case "thinking_started": text = null; thinking = add(thinkingView()).querySelector(".thinking-text"); break;
      case "thinking_delta":
        thinking ??= add(thinkingView()).querySelector(".thinking-text");
        thinking.textContent += data.text;
        break;
      case "thinking_ended": thinking = null; break;
      case "text_delta": (text ??= add(el("div", { class: "text" }))).textContent += data.text; break;
      case "tool_call_started": text = null; add(toolCallView(data.call)); break;
      case "tool_result_received": finishToolCall(log(), data.result); break;
      case "call_failed": bubble("notice", `The model call failed: ${data.message}`); break;
      case "provider_retry": $("status").textContent = `Retrying the model (attempt ${data.attempt}): ${data.message}`; break;
      case "fallback_taken": bubble("notice", `${data.model} failed (${data.code}): ${data.next_model} answers instead`); break;
      case "handoff_taken": text = null; bubble("notice", `${data.from_agent} handed the conversation to ${data.to_agent}`); break;
      case "compacted": bubble("notice", `Conversation compacted: ${data.tokens_before} → ${data.tokens_after} tokens`); break;
      case "run_completed":
        showOutcome(data.result);
        if (data.result.stop_reason === "paused" && data.result.pending?.length) approvalsView(data.result.run_id, data.result.pending);
        break;
    }
  };
}

function showOutcome(result) {
  const usage = result.usage || {};
  const cost = result.cost ? ` · $${costOf(result.cost).toFixed(4)}` : "";
  const stop = result.stop_reason ? `${result.stop_reason}${result.degraded ? " (degraded)" : ""}` : "done";
  $("status").textContent = `Run ${stop} · ${usage.input_tokens ?? 0} in / ${usage.output_tokens ?? 0} out tokens${cost}`;
  if (result.output != null && typeof result.output !== "string") {
    bubble("assistant").append(el("pre", { class: "output", text: JSON.stringify(result.output, null, 2) }));
  }
  if (result.error) bubble("error", `${result.error.message}${result.error.code ? ` (${result.error.code})` : ""}`);
  else if (result.detail && !["complete", "paused"].includes(result.stop_reason)) bubble("notice", result.detail);  // a pause: its panel says it
}

const costOf = (cost) => (cost.total_usd ?? (cost.input_usd || 0) + (cost.output_usd || 0));

async function readFiles(files) {
  const read = (file) => new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve({
      name: file.name,
      media_type: file.type || "application/octet-stream",
      data: String(reader.result).slice(String(reader.result).indexOf(",") + 1),
    });
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
  return Promise.all([...files].map(read));
}

async function send(event) {
  event.preventDefault();
  const prompt = $("prompt").value.trim();
  if ((!prompt && !state.files.length) || state.controller) return;
  // Base64 makes a file a third larger: a request past the server's limit is refused here, not sent whole.
  const size = prompt.length + state.files.reduce((sum, f) => sum + Math.ceil(f.size / 3) * 4 + f.name.length + 64, 0);
  if (size > state.maxBytes) {
    bubble("error", `Too large to send: this server takes requests of up to ${state.maxBytes} bytes, and the files come to about ${size}.`);
    return;
  }
  const attachments = await readFiles(state.files);
  const mine = bubble("user", prompt);
  if (attachments.length) mine.append(el("p", { class: "attachments", text: `Attached: ${attachments.map((a) => a.name).join(", ")}` }));
  $("prompt").value = "";
  clearFiles();
  const body = { prompt, attachments };
  if (state.sessionId) body.session_id = state.sessionId;
  if ($("model").value) body.model = $("model").value;
  await streamRun("api/runs", body);
}

// A run's events (POST `path` with `body`: a new run, or a paused run's decisions) drawn into the conversation.
async function streamRun(path, body) {
  state.runId = "";
  busy(true);
  state.controller = new AbortController();
  const draw = runView();
  try {
    const response = await api(path, { method: "POST", json: body, signal: state.controller.signal });
    let ended = false;
    for await (const { kind, data } of readEvents(response)) {
      const l = log(), atEnd = l.scrollHeight - l.scrollTop - l.clientHeight < 48;
      draw(kind, data);
      if (atEnd) l.scrollTop = l.scrollHeight;  // follow the stream, unless the reader scrolled up
      ended ||= kind === "run_completed";
    }
    if (!ended) bubble("error", "The stream ended before the run did.");
  } catch (error) {
    if (error.name !== "AbortError" && !(error instanceof Unauthorized)) bubble("error", error.message);
    $("status").textContent = "";
  } finally {
    state.controller = null;
    busy(false);
  }
}

// --- approvals: a paused run's pending calls, each approved or denied (an external call given its result) ------

// The pending calls of the paused run `runId`, with their buttons. Each call's answer is kept as it is given; once
// every call has one, they are sent (POST api/runs/{id}/decisions) and the resumed run streams in below.
function approvalsView(runId, pending) {
  const decisions = {};
  const panel = el("section", { class: "approvals", role: "group", "aria-label": "Waiting for your decision" },
    el("h2", { text: pending.length > 1 ? "These calls wait for your decision" : "This call waits for your decision" }));
  const decided = (call, fieldset, decision, said) => {
    decisions[call.id] = decision;
    for (const control of fieldset.querySelectorAll("button, input, textarea")) control.disabled = true;
    fieldset.querySelector(".decided").textContent = said;
    if (Object.keys(decisions).length < pending.length) return;
    panel.classList.add("sent");
    streamRun(`api/runs/${encodeURIComponent(runId)}/decisions`, decisions).catch(report);
  };
  for (const call of pending) {
    const reason = el("input", { type: "text", class: "deny-reason", id: `reason-${call.id}`, placeholder: "Why (the model reads it)" });
    const fieldset = el("fieldset", { class: `pending-call ${call.kind}`, "data-call-id": call.id },
      el("legend", { text: call.kind === "external" ? `${call.tool} needs a result` : `Run ${call.tool}?` }),
      call.reason ? el("p", { class: "pending-reason", text: call.reason }) : null,
      el("pre", { class: "tool-args", text: JSON.stringify(call.arguments ?? {}, null, 2) }));
    const deny = el("button", { type: "button", class: "deny", text: "Deny" });
    deny.addEventListener("click", () => decided(call, fieldset, { decision: "reject", reason: reason.value.trim() }, "Denied"));
    if (call.kind === "external") {
      const box = el("textarea", { class: "external-result", id: `result-${call.id}`, rows: "3" });
      const give = el("button", { type: "button", class: "give-result", text: "Send result" });
      const error = el("p", { class: "error", role: "alert" });
      give.addEventListener("click", () => {
        let content;
        try { content = JSON.parse(box.value); } catch { error.textContent = "The result must be JSON (a string in quotes)."; return; }
        error.textContent = "";
        decided(call, fieldset, { decision: "external_result", content }, "Result sent");
      });
      fieldset.append(el("label", { for: box.id, text: "Result (JSON)" }), box, error, give);
    } else {
      const approve = el("button", { type: "button", class: "approve", text: "Approve" });
      approve.addEventListener("click", () => decided(call, fieldset, { decision: "approve", digest: call.digest }, "Approved"));
      fieldset.append(approve);
    }
    fieldset.append(el("label", { for: reason.id, text: "Reason to deny" }), reason, deny, el("p", { class: "decided", role: "status" }));
    panel.append(fieldset);
  }
  log().append(panel);
  panel.querySelector("button")?.focus();
  return panel;
}

function busy(running) {
  for (const id of ["send", "session", "model", "delete-session"]) $(id).disabled = running;
  if (!running) $("delete-session").disabled = !state.sessionId;
  $("stop").disabled = !running;
  log().setAttribute("aria-busy", String(running));  // a screen reader reads the answer once, when it is whole
  if (running) $("status").textContent = "Running…";
  else (log().querySelector(".approvals:not(.sent) button:not(:disabled)") ?? $("prompt")).focus();  // a pause: its first button
}

// Stop asks the server to cancel the run (its stream then ends with the cancelled result); before the run has
// an id, or if that fails, the request is dropped, which cancels the run too (the server's disconnect rule).
async function stop() {
  const cancel = () => api(`api/runs/${encodeURIComponent(state.runId)}/cancel`, { method: "POST" });
  const asked = state.runId ? await cancel().then(() => true, () => false) : false;
  if (!asked) state.controller?.abort();
}

function clearFiles() {
  state.files = [];
  $("files").value = "";
  $("attached").replaceChildren();
}

function pickFiles() {
  state.files = [...$("files").files];
  $("files").value = "";  // the same file can be picked again after it is removed
  drawFiles();
}

function drawFiles() {
  $("attached").replaceChildren(...state.files.map((file, index) => {
    const remove = el("button", { type: "button", class: "remove", "aria-label": `Remove ${file.name}`, text: "×" });
    remove.addEventListener("click", () => { state.files.splice(index, 1); drawFiles(); });
    return el("li", {}, `${file.name} (${file.size} bytes) `, remove);
  }));
}

// --- sessions and models ---------------------------------------------------------------------------------------

function rememberSession(id) {
  state.sessionId = id;
  const select = $("session");
  if (![...select.options].some((o) => o.value === id)) select.append(el("option", { value: id, text: id }));
  select.value = id;
  $("delete-session").disabled = false;
}

async function loadSessions() {
  const body = await getJson("api/sessions");
  const sessions = body.sessions;
  const options = sessions.map((s) => el("option", { value: s.id, text: s.title ? `${s.title} (${s.id})` : s.id }));
  $("session").replaceChildren(el("option", { value: "", text: "New session" }), ...options);
  $("session").value = state.sessionId;
}

async function openSession() {
  state.sessionId = $("session").value;
  $("delete-session").disabled = !state.sessionId;
  log().replaceChildren();
  if (!state.sessionId) return;
  const session = await getJson(`api/sessions/${encodeURIComponent(state.sessionId)}`);
  for (const message of session.messages || []) drawMessage(message);
  if (session.paused?.pending?.length) approvalsView(session.paused.run_id, session.paused.pending);
}

async function deleteSession() {
  if (!state.sessionId || !confirm("Delete this session?")) return;
  await api(`api/sessions/${encodeURIComponent(state.sessionId)}`, { method: "DELETE" });
  state.sessionId = "";
  $("delete-session").disabled = true;
  log().replaceChildren();
  await loadSessions();
}

async function loadInfo() {
  const info = await getJson("api/info");
  $("agent-name").textContent = info.name || "tether";
  state.maxBytes = info.max_request_bytes ?? Infinity;
  document.title = `${info.name || "tether"} · tether`;
  const models = [...new Set([info.model, ...(info.models || [])].filter(Boolean))];
  $("model").replaceChildren(...models.map((m) => el("option", { value: m, text: m })));
  if (info.model) $("model").value = info.model;
}

// --- runs: the list, and one run's turns as a timeline ---------------------------------------------------------

// This server's runs (each opens its timeline) and, for a durable agent, the durable runs of its database that
// ran elsewhere (a worker, a batch): listed with their state, their turns kept by the workflow store.
async function loadRuns() {
  const body = await getJson("api/runs");
  $("run-list").replaceChildren(...body.runs.map((run) => el("li", {},
    el("button", { type: "button", class: "run-link", "data-run-id": run.run_id },
      el("span", { class: "run-prompt", text: (run.prompt || run.run_id).slice(0, 80) }),
      el("span", { class: "run-state", text: ` · ${run.stop_reason || run.status || ""}` })))));
  const served = new Set(body.runs.map((run) => run.run_id));
  const elsewhere = (body.durable_runs || []).filter((run) => !served.has(run.run_id));
  $("durable-runs").replaceChildren(...elsewhere.map((run) => el("li", { class: "durable-run" },
    el("span", { class: "run-prompt", text: (run.prompt_head || run.run_id).slice(0, 80) }),
    el("span", { class: "run-state", text: ` · ${run.stop_reason || run.status} · ${run.agent}${run.queue ? ` on ${run.queue}` : ""}` }))));
  $("durable").hidden = elsewhere.length === 0;
}

async function openRun(runId) {
  $("runs-status").textContent = "";
  const run = await getJson(`api/runs/${encodeURIComponent(runId)}`);  // its result's summary too, once ended
  const turns = run.turn_records || [];
  const durations = turns.flatMap((t) => [t.duration_ms || 0, ...(t.tool_calls || []).map((c) => c.duration_ms || 0)]);
  const longest = Math.max(...durations, 0) || 1;
  const usage = run.usage || {};
  const summary = el("dl", { class: "run-summary" },
    el("dt", { text: "Stop" }), el("dd", { text: `${run.stop_reason || run.status}${run.degraded ? " (degraded)" : ""}` }),
    el("dt", { text: "Tokens" }), el("dd", { text: `${usage.input_tokens ?? 0} in / ${usage.output_tokens ?? 0} out` }),
    el("dt", { text: "Cost" }), el("dd", { text: run.cost ? `$${costOf(run.cost).toFixed(4)}` : "unknown" }),
    el("dt", { text: "Duration" }), el("dd", { text: ms(run.duration_ms || 0) }));
  const rows = turns.map((turn) => turnRow(turn, longest));
  $("run-detail").replaceChildren(el("h2", { text: run.prompt || `Run ${runId}` }), el("p", { class: "run-id", text: runId }), summary,
    run.error ? el("p", { class: "error", text: `${run.error.message} (${run.error.code})` })
      : run.detail ? el("p", { class: "detail", text: run.detail }) : null,
    el("ol", { class: "timeline", "aria-label": "Turns" }, ...rows));
}

const ms = (value) => `${value < 10 ? value.toFixed(1) : Math.round(value)} ms`;

// A duration as a bar, its width a share of the run's longest turn or tool call.
function durationBar(duration, longest, kind) {
  const bar = el("div", { class: `bar ${kind}`, role: "img", "aria-label": `${kind} ${ms(duration || 0)}` });
  bar.style.width = `${Math.max(0.5, (100 * (duration || 0)) / longest)}%`;
  return bar;
}

function turnRow(turn, longest) {
  const usage = turn.usage || {};
  const calls = (turn.tool_calls || []).map((c) => el("li", { class: c.is_error ? "tool-call failed" : "tool-call" },
    el("span", { class: "tool-name", text: c.name }),
    el("span", { text: ` ${c.duration_ms == null ? "" : ms(c.duration_ms)}${c.is_error ? ` failed${c.code ? ` (${c.code})` : ""}` : ""}` }),
    c.duration_ms == null ? null : durationBar(c.duration_ms, longest, "tool")));
  const head = `${turn.compaction ? "Compaction" : `Turn ${turn.turn}`}${turn.attempt > 1 ? ` (attempt ${turn.attempt})` : ""}`
    + ` · ${ms(turn.duration_ms || 0)} · ${usage.input_tokens ?? 0} in / ${usage.output_tokens ?? 0} out`
    + `${turn.cost ? ` · $${costOf(turn.cost).toFixed(4)}` : ""}${turn.model ? ` · ${turn.model}` : ""}${turn.cached ? " · cached" : ""}`;
  return el("li", { class: `turn${turn.error ? " failed" : ""}${turn.compaction ? " compaction" : ""}` },
    el("div", { class: "turn-head", text: head }),
    durationBar(turn.duration_ms, longest, "model"),
    turn.error ? el("p", { class: "error", text: `Failed: ${turn.error}` }) : null,  // the error's code
    calls.length ? el("ul", { class: "tool-calls", "aria-label": "Tool calls" }, ...calls) : null);
}

// --- wiring ----------------------------------------------------------------------------------------------------

function show(view) {
  $("chat-view").hidden = view !== "chat";
  $("runs-view").hidden = view !== "runs";
  $("show-chat").setAttribute("aria-pressed", String(view === "chat"));
  $("show-runs").setAttribute("aria-pressed", String(view === "runs"));
  if (view === "runs") loadRuns().catch(report);
}

// A failed request, said where the reader is looking (a 401 has shown the sign-in form already).
function report(error) {
  if (error instanceof Unauthorized) return;
  $($("runs-view").hidden ? "status" : "runs-status").textContent = error.message;
}

async function start() {
  await loadInfo();
  $("login").hidden = true;
  document.body.classList.remove("locked");
  await loadSessions();
}

document.addEventListener("DOMContentLoaded", () => {
  takeTokenFromFragment();
  $("composer").addEventListener("submit", (e) => send(e).catch(report));
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); $("composer").requestSubmit(); }
  });
  $("stop").addEventListener("click", () => stop());
  $("files").addEventListener("change", pickFiles);
  $("session").addEventListener("change", () => openSession().catch(report));
  $("delete-session").addEventListener("click", () => deleteSession().catch(report));
  $("show-chat").addEventListener("click", () => show("chat"));
  $("show-runs").addEventListener("click", () => show("runs"));
  $("refresh-runs").addEventListener("click", () => loadRuns().catch(report));
  $("run-list").addEventListener("click", (e) => {
    const button = e.target.closest(".run-link");
    if (button) openRun(button.dataset.runId).catch(report);
  });
  $("login").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value);
    start().catch(report);
  });
  start().catch(report);
});
