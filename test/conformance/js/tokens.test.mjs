// Conformance: token streaming with the official JS SDK, and the core of
// its React hook useStream run headless (react-test-renderer, no DOM):
// the hook sends a message, streams the model's tokens, answers an
// interrupt and reconnects to a run in progress.
//
// The graph js_assist (test/conformance/agent_test.go chatRepo): a chat
// model that streams "You said: <message>." in pieces of three characters,
// then an interrupt asking whether to send it. A message containing "wait"
// holds the model after two pieces until STEPGRAPH_CHAT_RELEASE_JS is
// POSTed to. Started by test/conformance/conformance_test.go.

import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import React from "react";
import TestRenderer from "react-test-renderer";

import { randomUUID } from "node:crypto";

// The thread event protocol's client (threads.stream): the pinned 1.15.0.
import { Client as ProtocolClient } from "langgraph-sdk-protocol";
import { deployOnce } from "./deploy.mjs";
import { Client, react } from "./sdk-under-test.mjs";
const { useStream } = await react();

const apiUrl = process.env.STEPGRAPH_URL;
const apiKey = process.env.STEPGRAPH_API_KEY;
const chatRepo = process.env.STEPGRAPH_CHAT_REPO_JS;
const release = process.env.STEPGRAPH_CHAT_RELEASE_JS;
if (!apiUrl || !apiKey || !chatRepo || !release) {
  throw new Error(
    "STEPGRAPH_URL, STEPGRAPH_API_KEY, STEPGRAPH_CHAT_REPO_JS and STEPGRAPH_CHAT_RELEASE_JS must be set (run this suite through `go test ./test/conformance/`)",
  );
}

const client = new Client({ apiUrl, apiKey });

// A deadline for waiting on the server: a safety net, not a timing
// assertion.
const DEADLINE_MS = 60_000;

async function until(what, cond) {
  const deadline = Date.now() + DEADLINE_MS;
  while (!cond()) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await sleep(20);
  }
}

let deployed;
function deployChat() {
  deployed ??= deployOnce({ apiUrl, apiKey, name: "js-chat", repo: chatRepo, deadlineMs: DEADLINE_MS });
  return deployed;
}

const said = (text) => `You said: ${text}.`;

async function collect(stream) {
  const out = [];
  for await (const part of stream) out.push(part);
  return out;
}

test("runs.stream messages-tuple, messages and events carry the model's tokens", async () => {
  await deployChat();
  const thread = await client.threads.create();
  const parts = await collect(
    client.runs.stream(thread.thread_id, "js_assist", {
      input: { messages: [{ role: "user", content: "hello world" }] },
      streamMode: ["messages-tuple", "messages", "events", "updates"],
    }),
  );
  const names = parts.map((p) => p.event);
  const replyDone = parts.findIndex((p) => p.event === "updates" && "reply" in p.data);
  const chunks = parts.map((p, i) => [i, p]).filter(([, p]) => p.event === "messages");
  assert.ok(chunks.length > 3, JSON.stringify(names));
  for (const [i, p] of chunks) {
    const [message, metadata] = p.data;
    assert.ok(i < replyDone, "a chunk after its node ended");
    assert.equal(message.type, "AIMessageChunk");
    assert.equal(metadata.langgraph_node, "reply");
  }
  assert.equal(chunks.map(([, p]) => p.data[0].content).join(""), said("hello world"));
  const partials = parts.filter((p) => p.event === "messages/partial").map((p) => p.data[0]);
  assert.equal(partials.length, chunks.length);
  assert.equal(partials.at(-1).content, said("hello world"));
  assert.equal(partials.at(-1).type, "ai");
  assert.equal(names.filter((n) => n === "messages/metadata").length, 1);
  assert.ok(!names.includes("messages/complete"), JSON.stringify(names));
  const modelEvents = parts
    .map((p, i) => [i, p.data])
    .filter(([, e]) => typeof e?.event === "string" && e.event.startsWith("on_chat_model"));
  assert.deepEqual(
    [modelEvents[0][1].event, modelEvents.at(-1)[1].event],
    ["on_chat_model_start", "on_chat_model_end"],
  );
  const streamed = modelEvents.filter(([, e]) => e.event === "on_chat_model_stream");
  assert.ok(streamed.every(([i]) => i < replyDone), "an on_chat_model_stream after its node ended");
  assert.equal(streamed.map(([, e]) => e.data.chunk.content).join(""), said("hello world"));
  assert.equal(modelEvents.at(-1)[1].data.output.content, said("hello world"));
  const state = await client.threads.getState(thread.thread_id);
  assert.equal(state.values.messages.at(-1).id, chunks[0][1].data[0].id);
  assert.deepEqual(state.next, ["approve"]);
});

// Chat renders a useStream hook and hands every render's result to
// onRender: the test drives the hook through it, as a UI would.
function Chat({ options, onRender }) {
  const stream = useStream(options);
  onRender(stream);
  return null;
}

// memoryStorage is the session storage reconnectOnMount keeps the run id
// in (a page's sessionStorage).
function memoryStorage() {
  const items = new Map();
  return {
    getItem: (k) => (items.has(k) ? items.get(k) : null),
    setItem: (k, v) => items.set(k, String(v)),
    removeItem: (k) => items.delete(k),
  };
}

// A hook instance: its renders, and what its UI shows (the messages'
// type and content) at each.
function mount(options) {
  const hook = { latest: null, renders: [] };
  const onRender = (stream) => {
    hook.latest = stream;
    hook.renders.push({
      loading: stream.isLoading,
      messages: stream.messages.map((m) => ({ type: m.type, content: m.content, id: m.id })),
      interrupt: stream.interrupt,
    });
  };
  // A legacy root renders at once; the hook's effects and stream updates
  // run on React's scheduler, as in a page.
  const renderer = TestRenderer.create(React.createElement(Chat, { options, onRender }));
  hook.unmount = () => renderer.unmount();
  hook.idle = () => until("the hook to finish", () => hook.latest && !hook.latest.isLoading);
  return hook;
}

test("useStream (headless) sends a message, streams tokens, answers an interrupt and reconnects", async () => {
  await deployChat();
  // reconnectOnMount reads the page's storage only where there is a window.
  globalThis.window ??= globalThis;
  const storage = memoryStorage();
  let threadId;
  // The first page: its connections can be cut, as closing the page does.
  const page = new AbortController();
  const callerOptions = {
    fetch: (url, init = {}) =>
      fetch(url, { ...init, signal: init.signal ? AbortSignal.any([init.signal, page.signal]) : page.signal }),
  };
  const options = {
    apiUrl,
    apiKey,
    assistantId: "js_assist",
    reconnectOnMount: () => storage,
    onThreadId: (id) => {
      threadId = id;
    },
    callerOptions,
  };
  const first = mount(options);

  // 1. Send a message: the hook creates a thread and streams the answer.
  await first.latest.submit({ messages: [{ type: "human", content: "hello world" }] });
  await until("the run to start", () => first.renders.some((r) => r.loading));
  await first.idle();
  assert.ok(threadId, "the hook did not report its thread");
  const answer = said("hello world");
  // Tokens: while the run was going, the UI showed the answer growing.
  const growing = first.renders
    .filter((r) => r.loading)
    .map((r) => r.messages.find((m) => m.type === "ai")?.content)
    .filter((c) => typeof c === "string" && c.length > 0);
  assert.ok(
    growing.some((c) => c.length < answer.length && answer.startsWith(c)),
    `no partial answer was shown: ${JSON.stringify(growing)}`,
  );
  assert.deepEqual(
    first.latest.messages.map((m) => [m.type, m.content]),
    [
      ["human", "hello world"],
      ["ai", answer],
    ],
  );
  // 2. The interrupt: the hook shows it; answering resumes the run.
  assert.deepEqual(first.latest.interrupt?.value, { question: "Send this answer?" });
  await first.latest.submit(undefined, { command: { resume: "yes" } });
  await until("the resumed run", () => first.latest.values?.approved === "yes" && !first.latest.isLoading);
  assert.equal(first.latest.interrupt, undefined);

  // 3. Reconnect: a message whose answer the model holds; the page goes
  // away while the run goes on (its connection cut, the run id kept in
  // the page's storage); a new page on the thread rejoins the run.
  const wanted = said("please wait");
  const before = first.renders.length;
  // Not awaited: 1.15.0's submit settles only when the run's stream ends
  // (2.0.0's once it started), and this run holds until the page is gone.
  const held = first.latest.submit({ messages: [{ type: "human", content: "please wait" }] });
  // The model holds after two pieces: the page shows the start of the answer.
  await until("the held run's first tokens", () =>
    first.renders.slice(before).some((r) => {
      const last = r.messages.at(-1);
      return r.loading && last?.type === "ai" && last.content.length > 0 && last.content.length < wanted.length
        && wanted.startsWith(last.content);
    }),
  );
  const key = `lg:stream:${threadId}`;
  const runId = storage.getItem(key);
  assert.ok(runId, "the hook did not keep the run id for reconnecting");
  page.abort();
  first.unmount();
  // Cut off, the submit settles either way (1.15.0 resolves, 2.0.0 had
  // already); what matters is the run, below.
  await held.catch(() => {});
  const run = await client.runs.get(threadId, runId);
  assert.ok(["pending", "running"].includes(run.status), `the run is ${run.status}: closing the page must not stop it`);

  const second = mount({ apiUrl, apiKey, assistantId: "js_assist", threadId, reconnectOnMount: () => storage });
  await until("the reconnect", () => second.renders.some((r) => r.loading));
  // The run still waits on the model: let it answer.
  const res = await fetch(release, { method: "POST" });
  assert.equal(res.status, 200);
  await second.idle();
  assert.equal(second.latest.error, undefined);
  const shown = second.renders
    .filter((r) => r.loading)
    .map((r) => r.messages.at(-1))
    .filter((m) => m?.type === "ai" && m.content !== answer)
    .map((m) => m.content);
  assert.ok(shown.includes(wanted), `the rejoined stream did not show the answer: ${JSON.stringify(shown)}`);
  assert.deepEqual(
    second.latest.messages.map((m) => [m.type, m.content]),
    [
      ["human", "hello world"],
      ["ai", answer],
      ["human", "please wait"],
      ["ai", wanted],
    ],
  );
  assert.deepEqual(second.latest.interrupt?.value, { question: "Send this answer?" });
  assert.equal(storage.getItem(key), null, "the finished run is still kept for reconnecting");
  assert.equal((await client.runs.get(threadId, runId)).status, "success");
  second.unmount();
});

// The thread event protocol (threads.stream of the pinned 1.15.0 client):
// the model's text arrives as deltas while it is still answering (a
// message with "wait" holds it after two pieces until released), and the
// message the deltas make is the one the thread keeps.
test("threads.stream streams the model's tokens as deltas of its message", { timeout: DEADLINE_MS }, async () => {
  await deployChat();
  const protocolClient = new ProtocolClient({ apiUrl, apiKey });
  const threadId = randomUUID();
  const said = "You said: please wait.";
  const thread = protocolClient.threads.stream(threadId, { assistantId: "js_assist" });
  let started;
  let messageId;
  try {
    started = await thread.run.start({ input: { messages: [{ role: "user", content: "please wait" }] } });
    const { value: message } = await thread.messages[Symbol.asyncIterator]().next();
    assert.equal(message.node, "reply");
    const deltas = message.text[Symbol.asyncIterator]();
    const first = [(await deltas.next()).value, (await deltas.next()).value];
    assert.deepEqual(first, ["You", " sa"]);
    // The model holds: the run has not ended, yet its first tokens came.
    const run = await client.runs.get(threadId, started.run_id);
    assert.equal(run.status, "running");
    const res = await fetch(release, { method: "POST" });
    assert.equal(res.status, 200);
    const rest = [];
    for (let d = await deltas.next(); !d.done; d = await deltas.next()) rest.push(d.value);
    assert.ok(rest.length > 1, JSON.stringify(rest));
    assert.equal([...first, ...rest].join(""), said);
    assert.equal(await message.text, said);
    messageId = message.id;
  } finally {
    await thread.close();
  }
  await client.runs.join(threadId, started.run_id);
  const state = await client.threads.getState(threadId);
  const last = state.values.messages.at(-1);
  assert.equal(last.content, said);
  assert.equal(last.id, messageId);
  assert.deepEqual(state.next, ["approve"]);
});
