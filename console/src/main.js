// The stepgraph console: a Preact + htm single page app over the public API,
// through the official @langchain/langgraph-sdk client. Routes live in the
// URL's hash (#/chat, #/threads/…), so the server serves one page at "/".
// The API key lives in sessionStorage only and travels as X-Api-Key (the
// SDK's apiKey option); it is never put in a URL, logged or shown.
import { render } from "preact";
import { useState, useEffect, useRef } from "preact/hooks";
import dagre from "@dagrejs/dagre";
import { KEY, client, setClient, makeClient, errText, pretty, parseJSON } from "./session.js";
import { html, Field, useFieldErrors, Alert, Status, short, when } from "./ui.js";
import { Deployments } from "./deployments.js";
import { Providers } from "./providers.js";

const RUN = "stepgraph.activeRun"; // {threadId, runId, assistantId, lastEventId}

// --- routing ---------------------------------------------------------------
function useRoute() {
  const [hash, setHash] = useState(location.hash || "#/chat");
  useEffect(() => {
    const f = () => setHash(location.hash || "#/chat");
    addEventListener("hashchange", f);
    return () => removeEventListener("hashchange", f);
  }, []);
  const [path, query] = hash.slice(1).split("?");
  return { parts: path.split("/").filter(Boolean), query: new URLSearchParams(query || "") };
}

// --- shell -----------------------------------------------------------------
function App() {
  const [signedIn, setSignedIn] = useState(!!client);
  const route = useRoute();
  if (!signedIn) return html`<${SignIn} onDone=${() => setSignedIn(true)} />`;
  const page = route.parts[0] || "chat";
  const nav = [
    ["chat", "Chat"],
    ["assistants", "Assistants"],
    ["threads", "Threads"],
    ["deployments", "Deployments"],
    ["providers", "OAuth providers"],
  ];
  return html`
    <header>
      <button type="button" class="skip" onClick=${() => document.getElementById("main").focus()}>Skip to content</button>
      <strong>stepgraph</strong>
      <nav aria-label="Pages">
        ${nav.map(([p, label]) => html`<a href="#/${p}" aria-current=${page === p ? "page" : null}>${label}</a>`)}
      </nav>
      <button class="link" onClick=${() => { sessionStorage.clear(); setClient(null); setSignedIn(false); }}>Sign out</button>
    </header>
    <main id="main" tabindex="-1">
      ${page === "assistants" && html`<${Assistants} id=${route.parts[1]} />`}
      ${page === "threads" && html`<${Threads} id=${route.parts[1]} />`}
      ${page === "chat" && html`<${Chat} query=${route.query} />`}
      ${page === "deployments" && html`<${Deployments} id=${route.parts[1]} />`}
      ${page === "providers" && html`<${Providers} id=${route.parts[1] && decodeURIComponent(route.parts[1])} />`}
    </main>`;
}

function SignIn({ onDone }) {
  const [err, setErr] = useState("");
  const [busy, setBusy] = useState(false);
  async function submit(ev) {
    ev.preventDefault();
    const key = ev.target.elements.key.value.trim();
    if (!key) return setErr("Enter an API key.");
    setBusy(true);
    const c = makeClient(key);
    try {
      await c.assistants.search({ limit: 1 });
    } catch (e) {
      setBusy(false);
      return setErr(errText(e));
    }
    sessionStorage.setItem(KEY, key);
    setClient(c);
    onDone();
  }
  return html`
    <main class="signin">
      <h1>stepgraph console</h1>
      <form onSubmit=${submit} id="signin">
        <label for="key">API key</label>
        <input id="key" name="key" type="password" autocomplete="off" autofocus />
        <button type="submit" disabled=${busy}>Sign in</button>
        ${err && html`<p class="error" role="alert">${err}</p>`}
        <p class="hint">The key stays in this tab's session storage and is sent only to this server.</p>
      </form>
    </main>`;
}

// --- assistants --------------------------------------------------------------
function Assistants({ id }) {
  const [list, setList] = useState(null);
  const [err, setErr] = useState("");
  const [tick, setTick] = useState(0);
  useEffect(() => {
    client.assistants.search({ limit: 100 }).then(setList, (e) => setErr(errText(e)));
  }, [tick]);
  return html`
    <section class="split">
      <div class="list">
        <h2>Assistants</h2>
        ${err && html`<p class="error" role="alert">${err}</p>`}
        <ul>
          ${(list || []).map((a) => html`<li><a href="#/assistants/${a.assistant_id}" aria-current=${a.assistant_id === id ? "true" : null}>${a.name}</a> <small>${a.graph_id}</small></li>`)}
        </ul>
        <a href="#/assistants/new" class="button">New assistant</a>
      </div>
      <div class="detail">
        ${id === "new" && html`<${AssistantForm} onSaved=${(a) => { setTick(tick + 1); location.hash = "#/assistants/" + a.assistant_id; }} />`}
        ${id && id !== "new" && html`<${Assistant} id=${id} onSaved=${() => setTick(tick + 1)} />`}
      </div>
    </section>`;
}

function AssistantForm({ assistant, onSaved }) {
  const [err, setErr] = useState("");
  async function submit(ev) {
    ev.preventDefault();
    const f = ev.target.elements;
    try {
      const body = {
        name: f.name.value || undefined,
        config: parseJSON(f.config.value, "config"),
        context: parseJSON(f.context.value, "context"),
        metadata: parseJSON(f.metadata.value, "metadata"),
      };
      const a = assistant
        ? await client.assistants.update(assistant.assistant_id, { ...body, graphId: assistant.graph_id })
        : await client.assistants.create({ ...body, graphId: f.graph.value });
      setErr("");
      onSaved(a);
    } catch (e) {
      setErr(errText(e));
    }
  }
  const a = assistant || {};
  return html`
    <form class="stack" onSubmit=${submit} id="assistant-form">
      <h3>${assistant ? "Edit assistant" : "New assistant"}</h3>
      ${!assistant && html`<label>Graph id <input name="graph" required /></label>`}
      <label>Name <input name="name" value=${a.name || ""} /></label>
      <label>Config (JSON) <textarea name="config" rows="3">${a.config ? pretty(a.config) : ""}</textarea></label>
      <label>Context (JSON) <textarea name="context" rows="3">${a.context ? pretty(a.context) : ""}</textarea></label>
      <label>Metadata (JSON) <textarea name="metadata" rows="3">${a.metadata ? pretty(a.metadata) : ""}</textarea></label>
      <button type="submit">Save</button>
      ${err && html`<p class="error" role="alert">${err}</p>`}
    </form>`;
}

function Assistant({ id, onSaved }) {
  const [a, setA] = useState(null);
  const [graph, setGraph] = useState(null);
  const [schemas, setSchemas] = useState(null);
  const [err, setErr] = useState("");
  useEffect(() => {
    setA(null), setGraph(null), setSchemas(null), setErr("");
    client.assistants.get(id).then(setA, (e) => setErr(errText(e)));
    client.assistants.getGraph(id).then(setGraph, (e) => setErr(errText(e)));
    client.assistants.getSchemas(id).then(setSchemas, () => {});
  }, [id]);
  if (err) return html`<p class="error" role="alert">${err}</p>`;
  if (!a) return html`<p>Loading…</p>`;
  return html`
    <h2>${a.name} <small>${a.graph_id} · v${a.version}</small></h2>
    <p><a class="button" href="#/chat?assistant=${a.assistant_id}">Chat with it</a></p>
    <h3>Graph</h3>
    ${graph ? html`<${GraphView} graph=${graph} />` : html`<p>Loading graph…</p>`}
    <${AssistantForm} assistant=${a} onSaved=${(x) => { setA(x); onSaved(); }} />
    ${schemas && html`
      <details><summary>Input schema</summary><pre>${pretty(schemas.input_schema)}</pre></details>
      <details><summary>Output schema</summary><pre>${pretty(schemas.output_schema)}</pre></details>
      <details><summary>Config schema</summary><pre>${pretty(schemas.config_schema)}</pre></details>`}`;
}

// GraphView lays the graph out with dagre and draws it as SVG.
function GraphView({ graph }) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: 30, ranksep: 40, marginx: 10, marginy: 10 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of graph.nodes || []) {
    const label = String(n.name ?? n.id);
    g.setNode(String(n.id), { label, width: Math.max(70, label.length * 8 + 24), height: 32 });
  }
  for (const e of graph.edges || []) g.setEdge(String(e.source), String(e.target), { conditional: !!e.conditional });
  dagre.layout(g);
  const { width, height } = g.graph();
  return html`
    <svg class="graph" role="img" aria-label="Graph of the assistant" viewBox="0 0 ${width} ${height}" width=${width} height=${height}>
      <defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" /></marker></defs>
      ${g.edges().map((e) => {
        const ed = g.edge(e);
        const d = ed.points.map((p, i) => `${i ? "L" : "M"}${p.x},${p.y}`).join(" ");
        return html`<path class=${ed.conditional ? "edge conditional" : "edge"} d=${d} marker-end="url(#arrow)" />`;
      })}
      ${g.nodes().map((v) => {
        const n = g.node(v);
        return html`<g class="node" data-node=${v}>
          <rect x=${n.x - n.width / 2} y=${n.y - n.height / 2} width=${n.width} height=${n.height} rx="6" />
          <text x=${n.x} y=${n.y + 4} text-anchor="middle">${n.label}</text>
        </g>`;
      })}
    </svg>`;
}

// --- chat ------------------------------------------------------------------
// applyMessage merges one message (or streamed chunk) into the list by id.
function applyMessage(list, msg, chunk) {
  const i = list.findIndex((m) => m.id && m.id === msg.id);
  if (i < 0) return [...list, { ...msg }];
  const next = list.slice();
  if (chunk) {
    const old = next[i];
    next[i] = { ...old, content: String(old.content || "") + String(msg.content || ""), tool_call_chunks: [...(old.tool_call_chunks || []), ...(msg.tool_call_chunks || [])] };
  } else next[i] = { ...msg };
  return next;
}

function Chat({ query }) {
  const [assistants, setAssistants] = useState([]);
  const [assistantId, setAssistantId] = useState(query.get("assistant") || "");
  const [threadId, setThreadId] = useState(query.get("thread") || "");
  // A fork: the next run starts from this checkpoint (then the thread goes
  // on from the run's own checkpoints).
  const [checkpointId, setCheckpointId] = useState(query.get("checkpoint") || "");
  const [messages, setMessagesState] = useState([]);
  const [progress, setProgressState] = useState([]);
  // Refs mirror what is shown, so each streamed event can be saved with
  // its id in sessionStorage and a reload picks up exactly there.
  const shown = useRef({ messages: [], progress: [] });
  const setMessages = (l) => { shown.current.messages = l; setMessagesState(l); };
  const setProgress = (l) => { shown.current.progress = l; setProgressState(l); };
  const [interrupts, setInterrupts] = useState([]);
  const [values, setValues] = useState(null);
  const [running, setRunning] = useState(null); // run id while streaming
  const [err, setErr] = useState("");
  const [mode, setMode] = useState("message");
  const abort = useRef(null);

  useEffect(() => {
    client.assistants.search({ limit: 100 }).then((l) => {
      setAssistants(l);
      if (!assistantId && l.length) setAssistantId(l[0].assistant_id);
    }, (e) => setErr(errText(e)));
    // A run this tab was streaming before a reload: join it again.
    const saved = JSON.parse(sessionStorage.getItem(RUN) || "null");
    if (saved && (!query.get("thread") || query.get("thread") === saved.threadId)) {
      setAssistantId(saved.assistantId);
      setThreadId(saved.threadId);
      threadIdRef.current = saved.threadId;
      setMessages(saved.messages || []);
      setProgress(saved.progress || []);
      Promise.resolve().then(() => consume(client.runs.joinStream(saved.threadId, saved.runId, { lastEventId: saved.lastEventId || undefined }), saved));
    } else if (query.get("thread")) loadThread(query.get("thread"));
    return () => abort.current && abort.current.abort();
  }, []);

  async function loadThread(id) {
    try {
      const st = await client.threads.getState(id);
      setValues(st.values);
      setMessages((st.values && st.values.messages) || []);
      setInterrupts((st.tasks || []).flatMap((t) => t.interrupts || []));
    } catch (e) {
      setErr(errText(e));
    }
  }

  // consume reads a stream of the SDK, saving the last event id so a reload
  // can join the run where it was.
  async function consume(stream, saved) {
    setErr("");
    setInterrupts([]);
    let run = saved || null;
    if (run) setRunning(run.runId);
    try {
      for await (const part of stream) {
        if (part.event === "metadata" && part.data && part.data.run_id && !run) {
          run = { threadId: threadIdRef.current, runId: part.data.run_id, assistantId: assistantIdRef.current };
          setRunning(run.runId);
        }
        const ev = part.event.split("|")[0];
        if (ev === "messages") {
          const [msg] = part.data;
          setMessages(applyMessage(shown.current.messages, msg, msg.type === "AIMessageChunk" || msg.type === "ai_chunk"));
        } else if (ev === "updates") {
          for (const [node, upd] of Object.entries(part.data || {})) {
            if (node === "__interrupt__") setInterrupts(upd);
            else setProgress([...shown.current.progress, node]);
          }
        } else if (ev === "values") {
          setValues(part.data);
          if (part.data && Array.isArray(part.data.messages)) setMessages(part.data.messages);
        } else if (ev === "error") {
          setErr(typeof part.data === "string" ? part.data : part.data.message || pretty(part.data));
        }
        if (run && part.id) {
          run.lastEventId = part.id;
          sessionStorage.setItem(RUN, JSON.stringify({ ...run, messages: shown.current.messages, progress: shown.current.progress }));
        }
      }
    } catch (e) {
      if (e.name !== "AbortError") setErr(errText(e));
    } finally {
      sessionStorage.removeItem(RUN);
      setRunning(null);
      if (threadIdRef.current) loadThread(threadIdRef.current);
    }
  }
  const threadIdRef = useRef(threadId);
  threadIdRef.current = threadId;
  const assistantIdRef = useRef(assistantId);
  assistantIdRef.current = assistantId;

  async function start(payload) {
    setErr("");
    let tid = threadId;
    try {
      if (!tid) {
        tid = (await client.threads.create()).thread_id;
        setThreadId(tid);
        threadIdRef.current = tid;
        history.replaceState(null, "", `#/chat?assistant=${assistantId}&thread=${tid}`);
      }
    } catch (e) {
      return setErr(errText(e));
    }
    setProgress([]);
    abort.current = new AbortController();
    const stream = client.runs.stream(tid, assistantId, {
      ...payload,
      streamMode: ["messages-tuple", "updates", "values"],
      streamResumable: true,
      onDisconnect: "continue",
      checkpointId: checkpointId || undefined,
      signal: abort.current.signal,
    });
    if (checkpointId) {
      setCheckpointId("");
      history.replaceState(null, "", `#/chat?assistant=${assistantId}&thread=${tid}`);
    }
    await consume(stream, null);
  }

  function send(ev) {
    ev.preventDefault();
    const f = ev.target.elements;
    let input;
    try {
      input = mode === "message" ? { messages: [{ role: "user", content: f.text.value }] } : parseJSON(f.text.value, "input");
    } catch (e) {
      return setErr(e.message);
    }
    f.text.value = "";
    if (mode === "message") setMessages([...shown.current.messages, { type: "human", content: input.messages[0].content, id: "local-" + Date.now() }]);
    start({ input });
  }

  async function cancel() {
    try {
      await client.runs.cancel(threadId, running);
    } catch (e) {
      setErr(errText(e));
    }
  }

  return html`
    <section class="chat">
      <div class="toolbar">
        <label>Assistant
          <select id="assistant" value=${assistantId} onChange=${(e) => setAssistantId(e.target.value)}>
            ${assistants.map((a) => html`<option value=${a.assistant_id}>${a.name} (${a.graph_id})</option>`)}
          </select>
        </label>
        <span>Thread: <code id="thread-id">${threadId || "new"}</code></span>
        ${checkpointId && html`<span>Forking from checkpoint <code>${checkpointId}</code> <button type="button" id="fork-run" disabled=${!!running} onClick=${() => start({ input: null })}>Run from here</button> or send a new input</span>`}
        <button class="link" onClick=${() => { setThreadId(""); setMessages([]); setValues(null); setInterrupts([]); setProgress([]); location.hash = "#/chat?assistant=" + assistantId; }}>New thread</button>
      </div>
      <ol class="messages" aria-live="polite" id="messages">
        ${messages.map((m) => html`<${Message} m=${m} />`)}
      </ol>
      ${progress.length > 0 && html`<p class="progress" id="progress">Nodes: ${progress.join(" → ")}${running ? " …" : ""}</p>`}
      ${interrupts.length > 0 && html`<${Interrupts} interrupts=${interrupts} onAnswer=${(command) => start({ command })} disabled=${!!running} />`}
      ${err && html`<p class="error" role="alert">${err}</p>`}
      <form class="composer" onSubmit=${send} id="composer">
        <select name="mode" aria-label="Input kind" value=${mode} onChange=${(e) => setMode(e.target.value)}>
          <option value="message">Message</option>
          <option value="json">JSON input</option>
        </select>
        <textarea name="text" id="text" rows="2" aria-label="Message" placeholder=${mode === "message" ? "Say something" : '{"request": "…"}'}></textarea>
        ${running
          ? html`<button type="button" id="cancel" onClick=${cancel}>Cancel run</button>`
          : html`<button type="submit" id="send" disabled=${!assistantId}>Send</button>`}
      </form>
      ${values && html`<details><summary>State</summary><pre id="state">${pretty(values)}</pre></details>`}
    </section>`;
}

function Message({ m }) {
  const role = m.type === "human" || m.role === "user" ? "user" : m.type === "tool" ? "tool" : "ai";
  const calls = m.tool_calls && m.tool_calls.length ? m.tool_calls : null;
  const content = typeof m.content === "string" ? m.content : pretty(m.content);
  return html`<li class="msg ${role}" data-id=${m.id}>
    <span class="who">${role === "tool" ? `tool ${m.name || ""}` : role}</span>
    ${content && html`<div class="text">${content}</div>`}
    ${calls && calls.map((c) => html`<div class="call">calls <code>${c.name}</code> <pre>${pretty(c.args)}</pre></div>`)}
  </li>`;
}

function Interrupts({ interrupts, onAnswer, disabled }) {
  const [err, setErr] = useState("");
  function submit(ev) {
    ev.preventDefault();
    const f = ev.target.elements;
    try {
      if (f.kind.value === "command") onAnswer(parseJSON(f.answer.value, "command"));
      else {
        let v = f.answer.value;
        try {
          v = JSON.parse(v);
        } catch (_) {
          /* a plain string is a fine resume value */
        }
        onAnswer({ resume: v });
      }
      setErr("");
    } catch (e) {
      setErr(e.message);
    }
  }
  return html`<div class="interrupt" id="interrupt" role="region" aria-label="Interrupt">
    <h3>The run is waiting for you</h3>
    ${interrupts.map((i) => html`<pre>${pretty(i.value)}</pre>`)}
    <form onSubmit=${submit}>
      <select name="kind" aria-label="Answer kind"><option value="resume">Resume with value</option><option value="command">JSON command</option></select>
      <input name="answer" id="answer" aria-label="Answer" />
      <button type="submit" id="resume" disabled=${disabled}>Answer</button>
      ${err && html`<p class="error" role="alert">${err}</p>`}
    </form>
  </div>`;
}

// --- threads -----------------------------------------------------------------
function Threads({ id }) {
  const [list, setList] = useState(null);
  const [err, setErr] = useState("");
  async function search(ev) {
    if (ev) ev.preventDefault();
    const f = ev ? ev.target.elements : null;
    try {
      const metadata = f ? parseJSON(f.metadata.value, "metadata") : undefined;
      const status = f && f.status.value ? f.status.value : undefined;
      setList(await client.threads.search({ metadata, status, limit: 50 }));
      setErr("");
    } catch (e) {
      setErr(errText(e));
    }
  }
  useEffect(() => {
    search();
  }, []);
  return html`
    <section class="split">
      <div class="list">
        <h2>Threads</h2>
        <form class="stack" onSubmit=${search} id="thread-search">
          <label>Metadata (JSON) <input name="metadata" placeholder='{"user": "ann"}' /></label>
          <label>Status <select name="status"><option value="">any</option>${["idle", "busy", "interrupted", "error"].map((s) => html`<option>${s}</option>`)}</select></label>
          <button type="submit">Search</button>
        </form>
        ${err && html`<p class="error" role="alert">${err}</p>`}
        <ul>${(list || []).map((t) => html`<li><a href="#/threads/${t.thread_id}">${t.thread_id.slice(0, 8)}</a> <span class="status ${t.status}">${t.status}</span> <small>${when(t.updated_at)}</small></li>`)}</ul>
      </div>
      <div class="detail">${id && html`<${Thread} key=${id} id=${id} />`}</div>
    </section>`;
}

function Thread({ id }) {
  const [thread, setThread] = useState(null);
  const [history, setHistory] = useState(null);
  const [runs, setRuns] = useState(null);
  const [runErrors, setRunErrors] = useState({}); // run id → its error, as the API tells it
  const [nodes, setNodes] = useState(null); // the graph's nodes, for as_node
  const [editing, setEditing] = useState(""); // the checkpoint whose state is being edited
  const [made, setMade] = useState(""); // the checkpoint the last edit made
  const [err, setErr] = useState("");
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let alive = true;
    const ok = (f) => (v) => alive && f(v);
    const bad = (e) => alive && setErr(errText(e));
    if (!tick) setThread(null), setHistory(null), setRuns(null), setRunErrors({}), setNodes(null), setEditing(""), setMade(""), setErr("");
    client.threads.get(id).then(ok(setThread), bad);
    client.threads.getHistory(id, { limit: 50 }).then(ok(setHistory), bad);
    client.runs.list(id, { limit: 50 }).then(ok((l) => {
      setRuns(l);
      // A failed run's error is its result: join answers it at once.
      for (const r of l.filter((r) => r.status === "error")) {
        client.runs.join(id, r.run_id).then(ok((res) => {
          const e = res && res.__error__;
          setRunErrors((m) => ({ ...m, [r.run_id]: e ? [e.error, e.message].filter(Boolean).join(": ") : "failed (no error recorded)" }));
        }), (e) => alive && setRunErrors((m) => ({ ...m, [r.run_id]: errText(e) })));
      }
      const assistant = l[0] && l[0].assistant_id;
      if (assistant) client.assistants.getGraph(assistant).then(ok((g) => setNodes((g.nodes || []).map((n) => String(n.id)))), () => {});
    }), bad);
    return () => (alive = false);
  }, [id, tick]);
  const assistantOf = (cp) => (cp.metadata && cp.metadata.assistant_id) || (runs && runs[0] && runs[0].assistant_id) || "";
  const taskErrors = (cp) => (cp.tasks || []).filter((t) => t.error);
  return html`
    <h2>Thread <code>${id}</code> ${thread && html`<${Status} s=${thread.status} />`}</h2>
    <p><a class="button" href="#/chat?thread=${id}">Open in chat</a></p>
    <${Alert} text=${err} />
    <h3>Runs</h3>
    <div class="scroll">
    <table id="runs"><thead><tr><th>Run</th><th>Status</th><th>Error</th><th>Assistant</th><th>Created</th></tr></thead>
      <tbody>${(runs || []).map((r) => html`<tr data-run=${r.run_id}><td><code title=${r.run_id}>${short(r.run_id)}</code></td><td data-label="Status"><${Status} s=${r.status} /></td>
        <td class="run-error" data-label="Error">${runErrors[r.run_id] || ""}</td>
        <td data-label="Assistant"><a href="#/assistants/${r.assistant_id}">${short(r.assistant_id)}</a></td><td data-label="Created">${when(r.created_at)}</td></tr>`)}</tbody>
    </table>
    </div>
    ${runs && runs.length === 0 && html`<p class="hint">No runs yet.</p>`}
    <h3>History</h3>
    ${made && html`<p class="note" role="status" id="state-saved">Saved as checkpoint <code>${made}</code>.</p>`}
    <ol class="timeline" id="history">
      ${(history || []).map((cp) => {
        const cid = cp.checkpoint.checkpoint_id;
        return html`<li data-checkpoint=${cid} class=${cid === made ? "new" : null}>
        <div><strong>step ${cp.metadata && cp.metadata.step}</strong> · ${cp.metadata && cp.metadata.source} · next: ${(cp.next || []).join(", ") || "—"} · <code>${cid}</code></div>
        ${taskErrors(cp).map((t) => html`<p class="error">${t.name} failed: ${t.error}</p>`)}
        <details><summary>State</summary><pre>${pretty(cp.values)}</pre></details>
        <div class="actions">
          <a class="button fork" href="#/chat?assistant=${assistantOf(cp)}&thread=${id}&checkpoint=${cid}">Fork from here</a>
          <button type="button" class="secondary edit-state" aria-expanded=${editing === cid ? "true" : "false"} onClick=${() => setEditing(editing === cid ? "" : cid)}>Edit state<span class="sr-only"> at step ${cp.metadata && cp.metadata.step}</span></button>
        </div>
        ${editing === cid && html`<${EditState} threadId=${id} cp=${cp} nodes=${nodes}
          onSaved=${(newId) => { setEditing(""); setMade(newId); setTick((t) => t + 1); }} onCancel=${() => setEditing("")} />`}
      </li>`;
      })}
    </ol>`;
}

// EditState writes the state at a checkpoint anew (update_state): the
// values go through the graph's reducers as if as_node had written them,
// and make a new checkpoint on that one (a fork when it is not the latest).
function EditState({ threadId, cp, nodes, onSaved, onCancel }) {
  const [busy, setBusy] = useState(false);
  const fe = useFieldErrors((f) => f === "values" || f === "as_node");
  async function submit(ev) {
    ev.preventDefault();
    const f = ev.target.elements;
    setBusy(true), fe.clear();
    try {
      const values = parseJSON(f.values.value, "values");
      const r = await client.threads.updateState(threadId, { values: values === undefined ? null : values, asNode: f.as_node.value || undefined, checkpointId: cp.checkpoint.checkpoint_id });
      fe.clear();
      onSaved(r.checkpoint_id || (r.checkpoint && r.checkpoint.checkpoint_id) || (r.configurable && r.configurable.checkpoint_id));
    } catch (e) {
      fe.fail(e);
    } finally {
      setBusy(false);
    }
  }
  const wrote = Object.keys((cp.metadata && cp.metadata.writes) || {});
  return html`<form class="stack edit-state-form" onSubmit=${submit} ref=${fe.formRef} novalidate>
    <${Field} label="Values (JSON)" name="values" errs=${fe.errs} as="textarea" rows="6" hint="Applied through the graph's reducers (a list channel appends, for example)." defaultValue=${pretty(cp.values)} />
    ${nodes
      ? html`<${Field} label="As node" name="as_node" errs=${fe.errs} as="select" hint="The node the update is written as; its successors run next.">
          <option value="">${wrote.length === 1 ? `default (${wrote[0]}, which wrote this checkpoint)` : "default"}</option>
          ${nodes.map((n) => html`<option value=${n}>${n}</option>`)}
        <//>`
      : html`<${Field} label="As node (optional)" name="as_node" errs=${fe.errs} autocomplete="off" />`}
    <div class="actions">
      <button type="submit" disabled=${busy}>Save as a new checkpoint</button>
      <button type="button" class="secondary" onClick=${onCancel}>Cancel</button>
    </div>
    <${Alert} text=${fe.rest} />
  </form>`;
}

render(html`<${App} />`, document.getElementById("app"));
