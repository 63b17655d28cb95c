// The llmworker web UI: a reference client of the AI SDK UI message
// stream protocol (docs/protocol.md, "Gateway"). It talks to the gateway
// only as useChat does: POST /api/chat with {id, messages, trigger},
// GET /api/chat/{id}/stream to resume, GET /api/chat/{id}/messages for a
// chat's history, and reads server-sent events with fetch and a
// ReadableStream. No build step, no external resources. Model text
// reaches the page only as text nodes (markdown.js).
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  chatId: null,
  messages: [], // UI messages: {id, role, parts, ended?}
  controller: null, // AbortController of the open stream
  streaming: false,
  info: null,
  attachments: [], // the composer's files: AI SDK file parts {type, mediaType, filename, url}
};
// For tests and the curious.
window.llmw = state;

// Credentials: #token=…&prefix=… (kept for the tab), sent as a bearer
// token.
function readHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  if (h.get("token")) sessionStorage.setItem("llmw-token", h.get("token"));
  if (h.get("prefix") !== null) sessionStorage.setItem("llmw-prefix", h.get("prefix") || "");
  return h.get("chat");
}
function headers(json) {
  const h = {};
  if (json) h["Content-Type"] = "application/json";
  const t = sessionStorage.getItem("llmw-token");
  if (t) h["Authorization"] = "Bearer " + t;
  return h;
}
function setHashChat(id) {
  const h = new URLSearchParams(location.hash.slice(1));
  h.delete("token");
  h.set("chat", id);
  history.replaceState(null, "", "#" + h.toString());
}

function newId() {
  const b = new Uint8Array(9);
  crypto.getRandomValues(b);
  return (sessionStorage.getItem("llmw-prefix") || "") + "c" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

function setStatus(s) {
  $("status").textContent = s;
  $("status").dataset.state = s;
  $("stop").disabled = !(s === "streaming" || s === "paused");
}
function showError(msg) {
  $("error").hidden = !msg;
  $("error").textContent = msg || "";
}

// ---- the protocol: server-sent events of UI message chunks ----

async function* readSSE(resp) {
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
      if (!data) continue; // a comment (keep-alive)
      if (data === "[DONE]") return;
      yield JSON.parse(data);
    }
  }
}

async function errorText(resp) {
  const t = await resp.text();
  try {
    return JSON.parse(t).error.message;
  } catch {
    return t || resp.status + " " + resp.statusText;
  }
}

// consume applies a stream's chunks to the messages, rendering as it goes.
// A resumed or replayed stream (fromStart) holds the turn from its first
// event: it replaces the message's parts; the answer to an approval
// continues them.
async function consume(resp, fromStart) {
  const ctl = state.controller;
  state.streaming = true;
  setStatus("streaming");
  let msg = null;
  const byId = {}; // text/reasoning part by chunk id
  const tool = (id) => msg.parts.find((p) => p.toolCallId === id);
  let ended = "idle";
  try {
    for await (const c of readSSE(resp)) {
      switch (c.type) {
        case "start": {
          msg = state.messages.find((m) => m.id === c.messageId);
          if (!msg) {
            msg = { id: c.messageId, role: "assistant", parts: [] };
            state.messages.push(msg);
          }
          msg.ended = null;
          if (fromStart) {
            msg.parts = [];
            msg.error = null;
          }
          break;
        }
        case "start-step":
          msg.parts.push({ type: "step-start" });
          break;
        case "text-start":
        case "reasoning-start": {
          const p = { type: c.type === "text-start" ? "text" : "reasoning", text: "", state: "streaming" };
          if (c.providerMetadata) p.providerMetadata = c.providerMetadata;
          byId[c.id] = p;
          msg.parts.push(p);
          break;
        }
        case "text-delta":
        case "reasoning-delta":
          byId[c.id].text += c.delta;
          break;
        case "text-end":
        case "reasoning-end":
          byId[c.id].state = "done";
          break;
        case "tool-input-start": {
          const p = { type: "tool-" + c.toolName, toolName: c.toolName, toolCallId: c.toolCallId, state: "input-streaming", inputText: "" };
          if (c.providerMetadata) p.callProviderMetadata = c.providerMetadata;
          msg.parts.push(p);
          break;
        }
        case "tool-input-delta":
          tool(c.toolCallId).inputText += c.inputTextDelta;
          break;
        case "tool-input-available":
        case "tool-input-error": {
          let p = tool(c.toolCallId);
          if (!p) {
            p = { type: "tool-" + c.toolName, toolName: c.toolName, toolCallId: c.toolCallId };
            msg.parts.push(p);
          }
          p.input = c.input;
          p.state = c.type === "tool-input-error" ? "output-error" : "input-available";
          if (c.providerMetadata) p.callProviderMetadata = c.providerMetadata;
          if (c.errorText) p.errorText = c.errorText;
          break;
        }
        case "tool-approval-request":
          tool(c.toolCallId).state = "approval-requested";
          tool(c.toolCallId).approval = { id: c.approvalId };
          break;
        case "tool-output-available":
          Object.assign(tool(c.toolCallId), { state: "output-available", output: c.output });
          break;
        case "tool-output-error":
          Object.assign(tool(c.toolCallId), { state: "output-error", errorText: c.errorText });
          break;
        case "tool-output-denied":
          tool(c.toolCallId).state = "output-denied";
          break;
        case "error":
          msg.error = c.errorText;
          break;
        case "finish":
          msg.ended = c.finishReason || "paused";
          break;
        case "abort":
          msg.ended = "aborted";
          msg.error = c.reason || "stopped";
          break;
        case "finish-step":
          break;
        default:
          if (c.type.startsWith("data-")) {
            const old = c.id && msg.parts.find((p) => p.type === c.type && p.id === c.id);
            if (old) old.data = c.data;
            else msg.parts.push({ type: c.type, id: c.id, data: c.data });
          }
      }
      render();
    }
    if (msg && msg.parts.some((p) => p.state === "approval-requested")) ended = "paused";
    else if (msg && msg.error) ended = "error";
  } catch (e) {
    if (e.name !== "AbortError") {
      showError("stream: " + e.message);
      ended = "error";
    }
  } finally {
    if (state.controller === ctl) {
      state.streaming = false;
      state.controller = null;
      setStatus(ended);
    }
    render();
    loadSessions();
  }
  if (state.controller === null) sendAnswers();
}

// sendAnswers is useChat's sendAutomaticallyWhen
// (lastAssistantMessageIsCompleteWithApprovalResponses): once the person
// answered every approval request of the last message and no stream is
// open, the answers go to the gateway. A sub-agent may pause while
// another still runs: its answer waits for the stream to end.
function sendAnswers() {
  const last = state.messages[state.messages.length - 1];
  if (!state.answered || state.streaming || !last || last.role !== "assistant") return;
  if (last.parts.some((p) => p.state === "approval-requested")) return;
  state.answered = false;
  send(state.messages);
}

function abortStream() {
  if (state.controller) state.controller.abort();
  state.controller = null;
}

// send is what useChat's sendMessage does: the whole conversation to
// POST /api/chat.
async function send(messages) {
  abortStream();
  showError("");
  state.controller = new AbortController();
  const body = { id: state.chatId, messages: messages.map(wireMessage), trigger: "submit-message" };
  const model = $("model").value;
  if (model && state.info && model !== state.info.model) body.model = model;
  let resp;
  try {
    resp = await fetch("/api/chat", { method: "POST", headers: headers(true), body: JSON.stringify(body), signal: state.controller.signal });
  } catch (e) {
    showError("send: " + e.message);
    setStatus("error");
    return;
  }
  if (!resp.ok) {
    showError(await errorText(resp));
    setStatus("error");
    state.controller = null;
    return;
  }
  await consume(resp);
}

// wireMessage is a UI message as the protocol carries it. The gateway
// reads only the last message (the session holds the rest), so earlier
// messages' files go without their bytes.
function wireMessage(m, i, all) {
  return {
    id: m.id,
    role: m.role,
    parts: m.parts.map((p) => {
      if (p.type === "file") {
        const f = { type: "file", mediaType: p.mediaType, filename: p.filename };
        if (i === all.length - 1) f.url = p.url;
        return f;
      }
      if (!p.toolCallId) return p.type === "text" ? { type: "text", text: p.text } : { type: p.type };
      const o = { type: p.type, toolCallId: p.toolCallId, state: p.state, input: p.input };
      if (p.approval) o.approval = p.approval;
      return o;
    }),
  };
}

// resume is useChat's resumeStream: reattach to the chat's running or
// paused turn (204: nothing to resume).
async function resume() {
  abortStream();
  state.controller = new AbortController();
  const resp = await fetch("/api/chat/" + encodeURIComponent(state.chatId) + "/stream", { headers: headers(false), signal: state.controller.signal });
  if (resp.status === 204) {
    state.controller = null;
    setStatus("idle");
    return;
  }
  if (!resp.ok) {
    state.controller = null;
    showError(await errorText(resp));
    return;
  }
  await consume(resp, true);
}

// replayTurn reads a turn of the session again, replacing its message.
async function replayTurn(turnId) {
  state.controller = new AbortController();
  const resp = await fetch("/api/chat/" + encodeURIComponent(state.chatId) + "/stream?turn=" + encodeURIComponent(turnId), { headers: headers(false), signal: state.controller.signal });
  if (resp.ok) await consume(resp, true);
}

// openChat shows a chat's history — the user's messages and the
// assistant's turns, as the gateway reads them from the session's events
// — and resumes its last turn when that runs or waits for approval.
async function openChat(id) {
  abortStream();
  state.chatId = id;
  state.messages = [];
  setHashChat(id);
  $("chat-title").textContent = id;
  showError("");
  render();
  let history = [];
  try {
    const resp = await fetch("/api/chat/" + encodeURIComponent(id) + "/messages", { headers: headers(false) });
    if (!resp.ok) {
      showError(await errorText(resp));
      return;
    }
    history = (await resp.json()).messages || [];
  } catch (e) {
    showError("history: " + e.message);
    return;
  }
  if (state.chatId !== id) return; // another chat was opened meanwhile
  state.messages = history.map(fromHistory);
  render();
  loadSessions();
  const last = history[history.length - 1];
  const st = last && last.metadata ? last.metadata.status : "";
  if (st === "running" || st === "paused") await resume();
  else setStatus("idle");
}

// fromHistory is a message of GET /api/chat/{id}/messages as the page
// keeps it: an assistant message's end from its metadata, as its stream's
// last parts would set it.
function fromHistory(m) {
  const md = m.metadata;
  if (m.role !== "assistant" || !md) return m;
  const ended = { completed: md.finishReason || "stop", failed: "error", aborted: "aborted" }[md.status] || null;
  return Object.assign({}, m, { ended, error: md.error || null });
}

function newChat() {
  abortStream();
  state.chatId = newId();
  state.messages = [];
  setHashChat(state.chatId);
  $("chat-title").textContent = "New chat";
  setStatus("idle");
  showError("");
  render();
}

async function loadSessions() {
  let list = [];
  try {
    const resp = await fetch("/api/sessions", { headers: headers(false) });
    if (resp.ok) list = (await resp.json()).sessions || [];
  } catch {}
  const ul = $("sessions");
  ul.replaceChildren(
    ...list.map((s) => {
      const li = document.createElement("li");
      li.dataset.id = s.id;
      li.className = s.id === state.chatId ? "current" : "";
      li.append(s.id);
      const st = document.createElement("span");
      st.className = "st";
      st.textContent = s.status;
      li.append(st);
      li.onclick = () => openChat(s.id);
      return li;
    }),
  );
  return list;
}

// ---- rendering ----

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function pretty(v) {
  if (typeof v === "string") {
    try {
      return JSON.stringify(JSON.parse(v), null, 2);
    } catch {
      return v;
    }
  }
  return JSON.stringify(v, null, 2);
}

// render brings #messages up to date with state.messages. Each message
// and each finished text block keeps its DOM node while it is unchanged,
// so that a streaming answer re-renders only its growing block: no
// flicker, and a selection or an opened "thinking" elsewhere stays.
function render() {
  const box = $("messages");
  const atEnd = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  syncChildren(box, state.messages.length ? state.messages.map(renderMessage) : [emptyHint()]);
  if (atEnd) box.scrollTop = box.scrollHeight;
}

// syncChildren makes kids the children of parent, moving only what
// differs.
function syncChildren(parent, kids) {
  kids.forEach((k, i) => {
    if (parent.childNodes[i] !== k) parent.insertBefore(k, parent.childNodes[i] || null);
  });
  while (parent.childNodes.length > kids.length) parent.lastChild.remove();
}

const nodes = new WeakMap(); // message or part → {key, node}
function cached(obj, key, build) {
  const c = nodes.get(obj);
  if (c && c.key === key) return c.node;
  const node = build(c && c.node);
  nodes.set(obj, { key, node });
  return node;
}

// emptyHint is what an empty chat shows: what to do.
function emptyHint() {
  return cached(state, "hint:" + JSON.stringify(state.info), () => {
    const d = el("div", "hint");
    d.append(el("h2", null, "Start a chat"));
    d.append(el("p", null, "Type a message below and press Enter (Shift+Enter for a new line). The answer streams in: the model's thinking, its tool calls and their results, then its text."));
    const info = state.info;
    if (info && info.prompt) {
      const p = el("p");
      p.append("Demo prompt fills in ", el("q", null, info.prompt), " — the question the default model's recording answers.");
      d.append(p);
    }
    if (info && /^replay:/.test(info.model || "")) {
      d.append(el("p", null, "The model " + info.model + " plays recorded provider streams (--replay): no API key and no network, and it plays its recording whatever you ask."));
    }
    d.append(el("p", null, "Attach (or paste, or drop on the message box) adds images (PNG, JPEG, GIF, WebP) and PDFs to your message: the model is sent them, and the chat shows them."));
    d.append(el("p", null, "A tool call that a hook holds for approval waits for your Approve, Deny or Edit; Stop cancels the running turn. Chats stay in the list on the left: reopen one, or reload the page, and it picks up where it is."));
    return d;
  });
}

function renderMessage(m) {
  const kids = [el("div", "who", m.role === "user" ? "you" : "assistant")];
  for (const p of m.parts) {
    if (ownerOf(m, p)) continue; // drawn under the call that runs its turn
    const r = renderPart(m, p);
    if (r) kids.push(r);
  }
  if (m.error) kids.push(el("div", "ended error", m.error));
  else if (m.ended && m.ended !== "paused") kids.push(el("div", "ended", "finished: " + m.ended));
  const d = cached(m, m.role, () => el("div", "msg " + m.role));
  d.dataset.id = m.id;
  syncChildren(d, kids);
  return d;
}

// partRenderers draw a message's parts by type (tool parts, "tool-<name>",
// by renderTool; a type without one is for programs, not drawn). A part's
// node is kept while the part is unchanged.
const partRenderers = {
  text: (m, p) => {
    if (m.role !== "assistant") return el("div", "part-text plain", p.text);
    const d = el("div", "part-text md");
    d.append(renderMarkdown(p.text));
    return d;
  },
  reasoning: (m, p, old) => {
    const det = el("details", "reasoning");
    det.open = !!(old && old.open);
    det.append(el("summary", null, p.state === "done" ? "thinking" : "thinking…"), el("div", null, p.text));
    return det;
  },
  "step-start": () => el("div", "step"),
  file: (m, p) => {
    if (/^image\//.test(p.mediaType || "")) {
      const img = el("img", "thumb");
      img.alt = p.filename || p.mediaType;
      img.title = p.filename || "";
      loadURL(p.url).then((u) => (img.src = u), (e) => (img.alt = "image not loaded: " + e.message));
      return img;
    }
    const chip = el("button", "chip file-chip");
    chip.type = "button";
    chip.title = "open " + (p.filename || p.mediaType);
    const kind = p.mediaType === "application/pdf" ? "PDF" : (p.mediaType || "file").split("/").pop().toUpperCase();
    chip.append(el("b", "kind", kind), el("span", "name", p.filename || p.mediaType));
    chip.onclick = () => openFile(p).catch((e) => showError("open " + (p.filename || "file") + ": " + e.message));
    return chip;
  },
  "data-llmw-usage": (m, p) => {
    const t = p.data.total || {};
    return el("div", "data usage", "usage: " + (t.input_tokens ?? "?") + " in, " + (t.output_tokens ?? "?") + " out");
  },
  "data-llmw-hook-decision": (m, p) => {
    const x = p.data;
    return el("div", "data hook-decision", "hook " + x.hook + " (" + x.event + "): " + x.result + (x.reason ? " — " + x.reason : ""));
  },
  "data-llmw-hook-message": (m, p) => {
    const texts = (p.data.messages || []).flatMap((mm) => (mm.content || []).map((c) => c.text || "")).join("\n");
    return el("div", "data hook-message", "hook " + p.data.hook + ": " + texts);
  },
  "data-llmw-paused": (m, p) => el("div", "data paused", "⏸ paused: " + p.data.reason),
  "data-llmw-compacted": (m, p) =>
    el("div", "data compacted", "── earlier messages " + (String(p.data.policy).includes("summary") ? "summarized" : "compacted") + " ──"),
  "data-llmw-turn": (m, p) => el("div", "data turn", "model " + (p.data.model || "?")),
};

// partKeys say when a part must be drawn again, for parts whose JSON is
// large: a file's bytes never change, and a turn's input is not drawn.
const partKeys = {
  file: (p) => p.mediaType + "|" + p.filename + "|" + (p.url || "").length,
  "data-llmw-turn": (p) => p.data.model,
};

function renderPart(m, p) {
  const r = partRenderers[p.type] || (p.toolCallId ? renderTool : null);
  if (!r) return null;
  if (partKeys[p.type]) return cached(p, m.role + partKeys[p.type](p), (old) => r(m, p, old));
  // A tool's start and progress are other parts, drawn in the tool, and
  // so is the sub-agent turn a call runs, with all its parts.
  const prog = p.toolCallId && dataOf(m, "data-llmw-tool-progress", "progress-" + p.toolCallId);
  const started = p.toolCallId && dataOf(m, "data-llmw-tool-started", "started-" + p.toolCallId);
  const sub = p.toolCallId && dataOf(m, "data-llmw-child", "child-" + p.toolCallId);
  const subKey = sub ? JSON.stringify(sub.data) + JSON.stringify(turnParts(m, sub.data.child_turn_id, true)) : "";
  return cached(p, m.role + JSON.stringify(p) + (prog ? JSON.stringify(prog.data) : "") + (started ? "|started" : "") + subKey, (old) => r(m, p, old));
}

// dataOf is the message's data part of type and id.
function dataOf(m, type, id) {
  return m.parts.find((x) => x.type === type && x.id === id);
}

// ownerOf is the sub-agent turn a part belongs to (null: the message's
// own turn): text, reasoning and tool parts name it in their
// providerMetadata.llmw, the child's data parts have ids that begin with
// "<turn_id>.", "started-<turn_id>.", … (docs/protocol.md, "Gateway").
function ownerOf(m, p) {
  const md = p.providerMetadata || p.callProviderMetadata;
  if (md && md.llmw && md.llmw.turnId) return md.llmw.turnId;
  if (!p.id || !p.type.startsWith("data-")) return null;
  const id = p.id.replace(/^(started|progress|child)-/, "");
  for (const x of m.parts) {
    if (x.type === "data-llmw-child" && x.data && id.startsWith(x.data.child_turn_id + ".")) return x.data.child_turn_id;
  }
  return null;
}

// turnParts are the parts of sub-agent turn id (deep: and of its own
// sub-agents).
function turnParts(m, id, deep) {
  const own = m.parts.filter((p) => ownerOf(m, p) === id);
  if (!deep) return own;
  const kids = own.filter((p) => p.type === "data-llmw-child").map((p) => p.data.child_turn_id);
  return own.concat(...kids.map((k) => turnParts(m, k, true)));
}

// renderChild draws the sub-agent turn a call runs, under the call: its
// status as the parent tells it, then its text, tools (their own
// sub-agents nested again) and approvals.
function renderChild(m, sub) {
  const x = sub.data;
  const d = el("div", "child");
  d.dataset.turnId = x.child_turn_id;
  d.dataset.status = x.status;
  d.dataset.depth = x.depth;
  const head = el("div", "child-head", "sub-agent " + (x.agent || x.name));
  head.append(el("span", "state", x.status + (x.code ? ": " + x.code : "")));
  d.append(head);
  for (const p of turnParts(m, x.child_turn_id, false)) {
    const r = renderPart(m, p);
    if (r) d.append(r);
  }
  return d;
}

// openFile opens a PDF in a new tab and downloads any other file. A blob
// of this page's origin is never made a page of another type: an HTML
// attachment would run as this UI.
async function openFile(p) {
  if (/^https:/i.test(p.url || "")) {
    window.open(p.url, "_blank", "noopener");
    return;
  }
  const pdf = p.mediaType === "application/pdf";
  const u = URL.createObjectURL(new Blob([await fileBytes(p.url)], { type: pdf ? "application/pdf" : "application/octet-stream" }));
  if (pdf) window.open(u, "_blank");
  else Object.assign(document.createElement("a"), { href: u, download: p.filename || "file" }).click();
}

// fileBytes reads a file part's bytes: a data URL's, or the gateway's
// media endpoint's with the page's credentials.
async function fileBytes(url) {
  if (/^data:/i.test(url || "")) return Uint8Array.from(atob(url.slice(url.indexOf(",") + 1)), (c) => c.charCodeAt(0));
  if (/^\/api\//.test(url || "")) {
    const resp = await fetch(url, { headers: headers(false) });
    if (!resp.ok) throw new Error(await errorText(resp));
    return resp.arrayBuffer();
  }
  throw new Error("no copy of it here");
}

// loadURL resolves a file part's url to one the page can show: a data URL
// as it is; the gateway's media endpoint (an attachment stored in
// LLMW_MEDIA) read with the page's credentials, as a blob URL.
const blobs = new Map(); // url → Promise of a blob URL
function loadURL(url) {
  if (!/^\/api\//.test(url || "")) return Promise.resolve(url);
  if (!blobs.has(url)) {
    blobs.set(
      url,
      fetch(url, { headers: headers(false) }).then(async (resp) => {
        if (!resp.ok) throw new Error(await errorText(resp));
        return URL.createObjectURL(await resp.blob());
      }),
    );
  }
  return blobs.get(url);
}

function renderTool(m, p) {
  const d = el("div", "tool");
  d.dataset.callId = p.toolCallId;
  d.dataset.state = p.state;
  // A call runs from its llmw.tool.started until its output: a tool that
  // starts early runs while the answer still streams.
  const running = !String(p.state).startsWith("output") && !!dataOf(m, "data-llmw-tool-started", "started-" + p.toolCallId);
  if (running) d.dataset.running = "1";
  const head = el("div", "head", p.toolName || p.type.slice(5));
  head.append(el("span", "state", running ? "running" : p.state));
  d.append(head);
  const input = p.input !== undefined ? pretty(p.input) : p.inputText;
  if (input) d.append(el("pre", "input", input));
  const prog = dataOf(m, "data-llmw-tool-progress", "progress-" + p.toolCallId);
  if (prog && !String(p.state).startsWith("output")) {
    const bar = el("progress");
    if (prog.data.total) {
      bar.max = prog.data.total;
      bar.value = prog.data.progress;
    }
    d.append(bar);
    if (prog.data.message) d.append(el("div", "data", prog.data.message));
  }
  if (p.state === "output-available") d.append(el("pre", "output", pretty(p.output)));
  if (p.state === "output-error") d.append(el("pre", "output error", p.errorText));
  if (p.state === "output-denied") d.append(el("div", "data", "denied"));
  if (p.state === "approval-requested") d.append(approvalButtons(m, p));
  const sub = dataOf(m, "data-llmw-child", "child-" + p.toolCallId);
  if (sub) d.append(renderChild(m, sub));
  return d;
}

function approvalButtons(m, p) {
  const box = el("div", "approval");
  const actions = el("div", "actions");
  const answer = (approved, reason, input) => {
    p.state = "approval-responded";
    p.approval = { id: p.approval.id, approved, reason };
    if (input !== undefined) p.input = input;
    state.answered = true;
    render();
    sendAnswers();
  };
  const approve = el("button", "approve primary", "Approve");
  approve.type = "button";
  approve.onclick = () => answer(true);
  const deny = el("button", "deny", "Deny");
  deny.type = "button";
  deny.onclick = () => answer(false, "denied in the web UI");
  const edit = el("button", "edit", "Edit");
  edit.type = "button";
  edit.onclick = () => {
    const ta = el("textarea");
    ta.rows = 4;
    ta.value = pretty(p.input ?? {});
    const ok = el("button", "approve-edited primary", "Approve edited input");
    ok.type = "button";
    ok.onclick = () => {
      try {
        answer(true, undefined, JSON.parse(ta.value));
      } catch (e) {
        showError("edited input: " + e.message);
      }
    };
    box.replaceChildren(ta, ok);
  };
  actions.append(approve, deny, edit);
  box.append(actions);
  return box;
}

// ---- attachments ----

// Attachable: what every provider reads (images) and PDFs.
const attachable = ["image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"];

function readDataURL(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result);
    r.onerror = () => reject(r.error);
    r.readAsDataURL(file);
  });
}

// addFiles reads the chosen files into the composer's attachments, as
// useChat does: AI SDK file parts whose url is a data URL.
async function addFiles(files) {
  showError("");
  for (const f of files) {
    if (!attachable.includes(f.type)) {
      showError(f.name + ": " + (f.type || "unknown type") + " cannot be attached (images: PNG, JPEG, GIF, WebP; PDF)");
      continue;
    }
    try {
      state.attachments.push({ type: "file", mediaType: f.type, filename: f.name, url: await readDataURL(f) });
    } catch (e) {
      showError(f.name + ": " + e.message);
    }
  }
  renderAttachments();
}

function renderAttachments() {
  $("attachments").replaceChildren(
    ...state.attachments.map((a, i) => {
      const c = el("span", "chip");
      if (a.mediaType.startsWith("image/")) c.append(Object.assign(el("img"), { src: a.url, alt: "" }));
      else c.append(el("b", "kind", "PDF"));
      c.append(el("span", null, a.filename));
      const x = el("button", "remove", "×");
      x.type = "button";
      x.title = "remove " + a.filename;
      x.onclick = () => {
        state.attachments.splice(i, 1);
        renderAttachments();
      };
      c.append(x);
      return c;
    }),
  );
}

// ---- wiring ----

$("composer").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("prompt").value.trim();
  if ((!text && !state.attachments.length) || state.streaming) return;
  $("prompt").value = "";
  const parts = state.attachments.slice();
  if (text) parts.push({ type: "text", text });
  state.attachments = [];
  renderAttachments();
  state.messages.push({ id: "u" + Date.now(), role: "user", parts });
  render();
  send(state.messages);
});
$("attach").onclick = () => $("file").click();
// A pasted screenshot and dropped files are attached as chosen ones are.
$("prompt").addEventListener("paste", (ev) => {
  const files = Array.from((ev.clipboardData && ev.clipboardData.files) || []);
  if (files.length) {
    ev.preventDefault();
    addFiles(files);
  }
});
$("composer").addEventListener("dragover", (ev) => {
  if (ev.dataTransfer && Array.from(ev.dataTransfer.types).includes("Files")) ev.preventDefault();
});
$("composer").addEventListener("drop", (ev) => {
  const files = Array.from((ev.dataTransfer && ev.dataTransfer.files) || []);
  if (files.length) {
    ev.preventDefault();
    addFiles(files);
  }
});
$("file").addEventListener("change", async () => {
  await addFiles(Array.from($("file").files));
  $("file").value = "";
});
$("prompt").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) {
    ev.preventDefault();
    $("composer").requestSubmit();
  }
});
$("stop").onclick = async () => {
  const resp = await fetch("/api/chat/" + encodeURIComponent(state.chatId) + "/stop", { method: "POST", headers: headers(false) });
  if (!resp.ok) {
    showError(await errorText(resp));
    return;
  }
  if (state.streaming) return; // the open stream shows the end
  // A paused turn has no open stream: wait for its end, then show the
  // turn as stored.
  for (let i = 0; i < 50; i++) {
    const s = (await loadSessions()).find((x) => x.id === state.chatId);
    if (s && s.status !== "running" && s.status !== "paused") {
      await replayTurn(s.lastTurn);
      return;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
};
$("new-chat").onclick = newChat;
$("demo").onclick = () => {
  $("prompt").value = state.info.prompt;
  $("prompt").focus();
};

(async function init() {
  const chat = readHash();
  try {
    const resp = await fetch("/api/info", { headers: headers(false) });
    if (resp.ok) {
      state.info = await resp.json();
      $("model").replaceChildren(...state.info.models.map((m) => Object.assign(el("option", null, m), { value: m, selected: m === state.info.model })));
      $("demo").hidden = !state.info.prompt;
    } else showError(await errorText(resp));
  } catch (e) {
    showError(e.message);
  }
  if (chat) await openChat(chat);
  else {
    newChat();
    loadSessions();
  }
  document.body.dataset.ready = "1";
})();
