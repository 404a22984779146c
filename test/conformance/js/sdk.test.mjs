// Conformance: the official JS SDK (@langchain/langgraph-sdk, unchanged)
// against a running stepgraph server.
//
// Started by test/conformance/conformance_test.go with `node --test`, which
// sets STEPGRAPH_URL, STEPGRAPH_API_KEY and STEPGRAPH_WEBHOOK_SECRET.

import assert from "node:assert/strict";
import { createHmac, randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { deployOnce } from "./deploy.mjs";
import { Client } from "./sdk-under-test.mjs";
// The thread event protocol's client (threads.stream), which the pinned
// 2.0.0 does not ship: 1.15.0, installed under this alias.
import { Client as ProtocolClient, ProtocolSseTransportAdapter } from "langgraph-sdk-protocol";

const apiUrl = process.env.STEPGRAPH_URL;
const apiKey = process.env.STEPGRAPH_API_KEY;
const webhookSecret = process.env.STEPGRAPH_WEBHOOK_SECRET ?? "";
if (!apiUrl || !apiKey) {
  throw new Error(
    "STEPGRAPH_URL and STEPGRAPH_API_KEY must be set (run this suite through `go test ./test/conformance/`)",
  );
}

const client = new Client({ apiUrl, apiKey });
const HI = { messages: [{ role: "user", content: "hi" }] };

async function newThread() {
  const thread = await client.threads.create();
  return thread.thread_id;
}

test("stateless runs.wait on echo", async () => {
  const out = await client.runs.wait(null, "echo", { input: HI });
  assert.deepEqual(out.messages.at(-1), {
    role: "assistant",
    content: "echo: hi",
  });
});

test("thread runs.wait on counter", async () => {
  const tid = await newThread();
  const out = await client.runs.wait(tid, "counter", { input: { steps: 5 } });
  assert.deepEqual(out, { count: 5, steps: 5 });
});

test("ifNotExists create, and missing thread without it", async () => {
  const tid = randomUUID();
  const out = await client.runs.wait(tid, "counter", {
    input: { steps: 1 },
    ifNotExists: "create",
  });
  assert.deepEqual(out, { count: 1, steps: 1 });
  const thread = await client.threads.get(tid);
  assert.equal(thread.thread_id, tid);

  await assert.rejects(
    client.runs.wait(randomUUID(), "counter", { input: { steps: 1 } }),
    (err) => {
      assert.match(String(err), /404/);
      return true;
    },
  );
});

test("interrupt and resume on approval", async () => {
  const tid = await newThread();
  const out = await client.runs.wait(tid, "approval", {
    input: { request: "x" },
  });
  assert.ok("__interrupt__" in out, JSON.stringify(out));
  assert.deepEqual(out.__interrupt__[0].value, { question: "approve x?" });
  let thread = await client.threads.get(tid);
  assert.equal(thread.status, "interrupted");

  const done = await client.runs.wait(tid, "approval", {
    command: { resume: "yes" },
  });
  assert.deepEqual(done, { request: "x", answer: "yes" });
  thread = await client.threads.get(tid);
  assert.equal(thread.status, "idle");
});

test("__error__ makes runs.wait throw", async () => {
  await assert.rejects(client.runs.wait(null, "fail", { input: {} }), (err) => {
    assert.match(String(err), /ValueError/);
    assert.match(String(err), /boom/);
    return true;
  });
});

test("multitaskStrategy reject on a busy thread", async () => {
  const tid = await newThread();
  const run = await client.runs.create(tid, "counter", {
    input: { steps: 1 },
    afterSeconds: 2,
  });
  await assert.rejects(
    client.runs.wait(tid, "counter", {
      input: { steps: 1 },
      multitaskStrategy: "reject",
    }),
    (err) => {
      assert.match(String(err), /409/);
      return true;
    },
  );
  const out = await client.runs.join(tid, run.run_id);
  assert.deepEqual(out, { count: 1, steps: 1 });
});

test("runs.create and runs.join", async () => {
  const tid = await newThread();
  const run = await client.runs.create(tid, "counter", {
    input: { steps: 3 },
  });
  assert.ok(["pending", "running", "success"].includes(run.status), run.status);
  const out = await client.runs.join(tid, run.run_id);
  assert.deepEqual(out, { count: 3, steps: 3 });
  const got = await client.runs.get(tid, run.run_id);
  assert.equal(got.status, "success");
});

test("runs.cancel of a delayed run", async () => {
  const tid = await newThread();
  const run = await client.runs.create(tid, "counter", {
    input: { steps: 1 },
    afterSeconds: 30,
  });
  await client.runs.cancel(tid, run.run_id);
  const deadline = Date.now() + 10_000;
  let got;
  for (;;) {
    got = await client.runs.get(tid, run.run_id);
    if (got.status === "interrupted" || Date.now() > deadline) break;
    await sleep(100);
  }
  assert.equal(got.status, "interrupted");
});

test("threads.getState and getHistory", async () => {
  const tid = await newThread();
  await client.runs.wait(tid, "counter", { input: { steps: 2 } });
  const state = await client.threads.getState(tid);
  assert.deepEqual(state.values, { count: 2, steps: 2 });
  assert.deepEqual(state.next, []);

  const history = await client.threads.getHistory(tid);
  assert.ok(Array.isArray(history) && history.length > 0);
  assert.deepEqual(history[0].values, state.values);
  assert.equal(
    history[0].checkpoint.checkpoint_id,
    state.checkpoint.checkpoint_id,
  );
  // Newest first: each entry's parent is the entry after it, and the step
  // numbers fall.
  for (let i = 0; i + 1 < history.length; i++) {
    assert.equal(
      history[i].parent_checkpoint.checkpoint_id,
      history[i + 1].checkpoint.checkpoint_id,
    );
    assert.ok(history[i].metadata.step > history[i + 1].metadata.step);
  }
});

test("assistants.search lists the system assistants", async () => {
  const found = await client.assistants.search({
    metadata: { created_by: "system" },
    limit: 100,
  });
  const byGraph = new Map(found.map((a) => [a.graph_id, a]));
  for (const graph of ["echo", "counter", "approval", "fail"]) {
    assert.ok(byGraph.has(graph), `no system assistant for ${graph}`);
    assert.equal(byGraph.get(graph).metadata.created_by, "system");
  }
});

test("webhook is delivered once and signed", async () => {
  const hits = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      hits.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(204).end();
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const url = `http://127.0.0.1:${server.address().port}/hook`;
    const out = await client.runs.wait(null, "echo", {
      input: HI,
      webhook: url,
    });
    assert.equal(out.messages.at(-1).content, "echo: hi");

    const deadline = Date.now() + 10_000;
    while (hits.length === 0 && Date.now() < deadline) await sleep(50);
    await sleep(500); // a second (wrong) delivery would show here
    assert.equal(
      hits.length,
      1,
      `webhook POSTs received: ${hits.length} (the server logs 'webhook not delivered' with the reason)`,
    );
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }

  const { headers, body } = hits[0];
  const payload = JSON.parse(body.toString("utf8"));
  assert.equal(payload.status, "success");
  for (const key of ["run_id", "thread_id", "values"]) {
    assert.ok(key in payload, `payload lacks ${key}`);
  }
  assert.deepEqual(payload.values.messages.at(-1), {
    role: "assistant",
    content: "echo: hi",
  });
  // Standard Webhooks: HMAC-SHA256, keyed with the base64 after whsec_, of
  // "<webhook-id>.<webhook-timestamp>.<raw body>"; the timestamp is recent.
  const id = headers["webhook-id"];
  const timestamp = headers["webhook-timestamp"];
  assert.match(id ?? "", /^msg_/);
  assert.ok(
    Math.abs(Date.now() / 1000 - Number(timestamp)) < 300,
    `webhook-timestamp ${timestamp} is not within 5 minutes`,
  );
  const key = Buffer.from(webhookSecret.replace(/^whsec_/, ""), "base64");
  const want =
    "v1," +
    createHmac("sha256", key)
      .update(`${id}.${timestamp}.`)
      .update(body)
      .digest("base64");
  assert.ok(
    (headers["webhook-signature"] ?? "").split(" ").includes(want),
    `webhook-signature ${headers["webhook-signature"]} lacks ${want}`,
  );
});

// ---- run streams (runs.stream, runs.joinStream) -----------------------------

async function collect(stream) {
  const parts = [];
  for await (const part of stream) parts.push(part);
  return parts;
}

const names = (parts) => parts.map((p) => p.event);

test("runs.stream values and updates on a thread, onRunCreated", async () => {
  const tid = await newThread();
  let created;
  const parts = await collect(
    client.runs.stream(tid, "counter", {
      input: { steps: 2 },
      streamMode: ["values", "updates"],
      onRunCreated: (meta) => {
        created = meta;
      },
    }),
  );
  assert.deepEqual(names(parts), ["metadata", "values", "updates", "values", "updates", "values"]);
  const runId = parts[0].data.run_id;
  assert.deepEqual(parts[0].data, { run_id: runId, attempt: 1 });
  assert.deepEqual(created, { run_id: runId, thread_id: tid });
  assert.deepEqual(
    parts.slice(1).map((p) => p.data),
    [
      { count: 0, steps: 2 },
      { inc: { count: 1 } },
      { count: 1, steps: 2 },
      { inc: { count: 1 } },
      { count: 2, steps: 2 },
    ],
  );
  assert.ok(parts.every((p) => p.id === undefined), "a run that is not resumable sends no ids");
});

test("runs.stream stateless, default values", async () => {
  const parts = await collect(client.runs.stream(null, "echo", { input: HI }));
  assert.deepEqual(names(parts), ["metadata", "values", "values"]);
  assert.deepEqual(parts.at(-1).data.messages.at(-1), { role: "assistant", content: "echo: hi" });
});

test("runs.stream messages-tuple and messages", async () => {
  const parts = await collect(
    client.runs.stream(null, "echo", { input: HI, streamMode: ["messages-tuple", "messages"] }),
  );
  assert.deepEqual(names(parts), ["metadata", "messages", "messages/metadata", "messages/complete"]);
  const [message, meta] = parts[1].data;
  assert.equal(message.type, "ai");
  assert.equal(message.content, "echo: hi");
  assert.ok(message.id);
  assert.equal(meta.langgraph_node, "echo");
  assert.deepEqual(parts[2].data, { [message.id]: { metadata: meta } });
  assert.deepEqual(parts[3].data, [message]);
});

test("runs.stream tasks, checkpoints, debug and events", async () => {
  const tid = await newThread();
  const parts = await collect(
    client.runs.stream(tid, "echo", { input: HI, streamMode: ["tasks", "checkpoints", "debug", "events"] }),
  );
  const tasks = parts.filter((p) => p.event === "tasks").map((p) => p.data);
  assert.equal(tasks.length, 2);
  assert.deepEqual(tasks[0].triggers, ["branch:to:echo"]);
  assert.deepEqual(tasks[1].result, { messages: { role: "assistant", content: "echo: hi" } });
  const checkpoints = parts.filter((p) => p.event === "checkpoints").map((p) => p.data);
  const state = await client.threads.getState(tid);
  assert.equal(checkpoints.at(-1).checkpoint.checkpoint_id, state.checkpoint.checkpoint_id);
  assert.deepEqual(checkpoints.at(-1).values, state.values);
  const debug = parts.filter((p) => p.event === "debug").map((p) => p.data.type);
  assert.deepEqual(debug, ["checkpoint", "checkpoint", "task", "task_result", "checkpoint"]);
  const chain = parts.filter((p) => p.event === "events").map((p) => `${p.data.event} ${p.data.name}`);
  assert.deepEqual(chain, ["on_chain_start LangGraph", "on_chain_start echo", "on_chain_end echo", "on_chain_end LangGraph"]);
});

test("runs.stream interrupt and resume", async () => {
  const tid = await newThread();
  const parts = await collect(
    client.runs.stream(tid, "approval", { input: { request: "x" }, streamMode: ["values", "updates"] }),
  );
  assert.deepEqual(names(parts), ["metadata", "values", "updates", "values"]);
  const interrupt = parts[2].data.__interrupt__;
  assert.deepEqual(interrupt[0].value, { question: "approve x?" });
  assert.deepEqual(parts[3].data, { request: "x", __interrupt__: interrupt });
  const resumed = await collect(
    client.runs.stream(tid, "approval", { command: { resume: "yes" }, streamMode: "values" }),
  );
  assert.deepEqual(resumed.at(-1).data, { request: "x", answer: "yes" });
});

test("runs.stream error event", async () => {
  const parts = await collect(client.runs.stream(null, "fail", { input: {} }));
  assert.equal(parts.at(-1).event, "error");
  assert.deepEqual(parts.at(-1).data, { error: "ValueError", message: "boom" });
});

test("runs.stream unknown stream mode is a 422", async () => {
  await assert.rejects(
    collect(client.runs.stream(null, "echo", { input: HI, streamMode: ["values", "tokens"] })),
    (err) => {
      assert.match(String(err), /422/);
      assert.match(String(err), /stream_mode/);
      return true;
    },
  );
});

test("runs.joinStream with lastEventId replays a resumable run", async () => {
  const tid = await newThread();
  const parts = await collect(
    client.runs.stream(tid, "counter", {
      input: { steps: 3 },
      streamMode: ["values", "updates"],
      streamResumable: true,
    }),
  );
  assert.deepEqual(
    parts.map((p) => p.id),
    parts.map((_, i) => String(i)),
  );
  const runId = parts[0].data.run_id;
  const rest = await collect(client.runs.joinStream(tid, runId, { lastEventId: parts[2].id }));
  assert.deepEqual(rest, parts.slice(3));
  const all = await collect(client.runs.joinStream(tid, runId, { lastEventId: "-1" }));
  assert.deepEqual(all, parts);
  const updates = await collect(
    client.runs.joinStream(tid, runId, { lastEventId: "-1", streamMode: "updates" }),
  );
  assert.deepEqual([...new Set(names(updates))], ["metadata", "updates"]);
});

test("runs.stream with streamSubgraphs names subgraph events", async () => {
  const repo = process.env.STEPGRAPH_NESTED_REPO_JS;
  assert.ok(repo, "STEPGRAPH_NESTED_REPO_JS is not set");
  await deployOnce({ apiUrl, apiKey, name: "js-nested", repo, deadlineMs: 60_000 });

  const parts = await collect(
    client.runs.stream(null, "js_nested", {
      input: { topic: "owls" },
      streamMode: ["updates", "values"],
      streamSubgraphs: true,
    }),
  );
  const inner = names(parts).filter((n) => n.includes("|"));
  assert.ok(inner.length > 0, JSON.stringify(names(parts)));
  assert.ok(inner.every((n) => n.split("|")[1].startsWith("research:")), JSON.stringify(inner));
  const update = parts.find((p) => p.event.startsWith("updates|")).data;
  assert.equal(update.write.report, "A report on owls");
  assert.equal(parts.at(-1).event, "values");
  assert.equal(parts.at(-1).data.report, "A report on owls");
});

// ---- every stream mode x thread/stateless x subgraphs on/off ----------------
//
// On desk (test/conformance/agent_test.go deskYAML): classify emits a
// custom event, then the support agent runs as the subgraph "answer" (a
// custom event, the chat model's token chunks, a tool call). Its
// deployment is shared with the Python suite (deployOnce: whichever suite
// comes first makes it).

let supportAgent;
function deploySupportAgent() {
  const repo = process.env.STEPGRAPH_AGENT_REPO;
  const customUrl = process.env.STEPGRAPH_AGENT_RUNTIME;
  const key = process.env.STEPGRAPH_AGENT_API_KEY;
  assert.ok(repo && customUrl && key, "the agent fixtures are not set");
  supportAgent ??= deployOnce({
    apiUrl,
    apiKey,
    name: "support-agent",
    repo,
    customUrl,
    configPath: "agent/stepgraph.yaml",
    secrets: [{ name: "OPENAI_API_KEY", value: key }],
    untilDeployed: true,
    deadlineMs: 60_000,
  });
  return supportAgent;
}

const STREAM_MODES = ["values", "updates", "messages-tuple", "messages", "custom", "tasks", "checkpoints", "debug", "events"];
const ORDER_42 = { messages: [{ role: "user", content: "Where is my order 42?" }] };

// expectedEvents are the event names a run of desk streams in mode besides
// metadata, a subgraph's namespace cut to its node ("answer").
function expectedEvents(mode, subgraphs) {
  if (mode === "messages") {
    // No namespace, as upstream; the model's chunks come from the subgraph.
    return ["messages/complete", "messages/metadata", ...(subgraphs ? ["messages/partial"] : [])].sort();
  }
  if (mode === "events") return ["events"]; // no namespace, as upstream
  const event = mode === "messages-tuple" ? "messages" : mode;
  if (!subgraphs) return [event];
  // With subgraphs, the messages answer writes were streamed from the
  // subgraph already and are not sent again (LangGraph dedupes by id).
  if (mode === "messages-tuple") return ["messages|answer"];
  return [event, `${event}|answer`].sort();
}

const NODES = ["classify", "answer", "agent", "tools"];

// checkPayload asserts the payload of one event of mode, as the Python
// server sends it.
function checkPayload(mode, event, data) {
  const show = JSON.stringify(data);
  switch (mode) {
    case "values":
      assert.ok(Array.isArray(data.messages), show);
      break;
    case "updates":
      assert.equal(Object.keys(data).length, 1, show);
      assert.ok(NODES.includes(Object.keys(data)[0]), show);
      break;
    case "messages-tuple": {
      const [message, meta] = data;
      assert.ok(["AIMessageChunk", "ai", "tool"].includes(message.type) && "content" in message, show);
      assert.ok(NODES.includes(meta.langgraph_node), show);
      break;
    }
    case "messages":
      if (event === "messages/metadata") {
        const entries = Object.entries(data);
        assert.equal(entries.length, 1, show);
        assert.ok(entries[0][1].metadata.langgraph_node, show);
      } else {
        assert.ok(Array.isArray(data) && data.every((m) => m.id && "content" in m), show);
      }
      break;
    case "custom":
      assert.deepEqual(data, { step: "classify", topic: "orders" });
      break;
    case "tasks":
      assert.ok(data.id && NODES.includes(data.name), show);
      assert.ok(("input" in data && "triggers" in data) || ("result" in data && "error" in data && "interrupts" in data), show);
      break;
    case "checkpoints":
      for (const k of ["config", "parent_config", "values", "metadata", "next", "tasks"]) assert.ok(k in data, show);
      break;
    case "debug":
      assert.ok(["checkpoint", "task", "task_result"].includes(data.type), show);
      for (const k of ["step", "timestamp", "payload"]) assert.ok(k in data, show);
      break;
    case "events":
      assert.ok(data.event.startsWith("on_") && data.name && data.run_id, show);
      break;
  }
}

for (const mode of STREAM_MODES) {
  for (const onThread of [true, false]) {
    for (const subgraphs of [false, true]) {
      const label = `runs.stream ${mode}, ${onThread ? "thread" : "stateless"}, ${subgraphs ? "with" : "without"} subgraphs`;
      test(label, async () => {
        await deploySupportAgent();
        const tid = onThread ? await newThread() : null;
        const parts = await collect(
          client.runs.stream(tid, "desk", { input: ORDER_42, streamMode: mode, streamSubgraphs: subgraphs }),
        );
        assert.equal(parts[0]?.event, "metadata", JSON.stringify(names(parts)));
        const runId = parts[0].data.run_id;
        assert.deepEqual(parts[0].data, { run_id: runId, attempt: 1 });
        const rest = parts.slice(1);
        const got = [...new Set(rest.map((p) => p.event.split(":")[0]))].sort();
        assert.deepEqual(got, expectedEvents(mode, subgraphs), JSON.stringify(names(parts)));
        for (const p of rest) checkPayload(mode, p.event.split("|")[0], p.data);
        if (mode === "custom") {
          // classify emits in the graph, and in the subgraph (seen only with subgraphs).
          assert.equal(rest.length, subgraphs ? 2 : 1, JSON.stringify(names(parts)));
        }
        // The stream ended with the run, which succeeded.
        if (onThread) assert.equal((await client.runs.get(tid, runId)).status, "success");
      });
    }
  }
}

test("threads.joinStream lifecycle sees a run start and end", async () => {
  const tid = await newThread();
  const seen = [];
  const controller = new AbortController();
  const follower = (async () => {
    try {
      for await (const part of client.threads.joinStream(tid, {
        streamMode: "lifecycle",
        signal: controller.signal,
      })) {
        seen.push(part);
      }
    } catch (err) {
      if (!controller.signal.aborted) throw err;
    }
  })();
  const done = (runId) =>
    seen.some((p) => p.data?.status === "run_done" && p.data?.run_id === runId);
  const until = async (cond) => {
    const deadline = Date.now() + 60_000;
    while (!cond()) {
      assert.ok(Date.now() < deadline, JSON.stringify(seen));
      await sleep(50);
    }
  };
  try {
    // Warm-up runs until the follower sees one end: from then on it is
    // subscribed, whatever the machine's load.
    let subscribed = false;
    for (let i = 0; i < 60 && !subscribed; i++) {
      const warm = await client.runs.create(tid, "echo", { input: HI });
      await client.runs.join(tid, warm.run_id);
      const until1s = Date.now() + 1000;
      while (!done(warm.run_id) && Date.now() < until1s) await sleep(50);
      subscribed = done(warm.run_id);
    }
    assert.ok(subscribed, `the thread stream never saw a run end: ${JSON.stringify(seen)}`);
    const before = seen.length;
    const run = await client.runs.create(tid, "echo", { input: HI });
    await until(() => done(run.run_id));
    assert.deepEqual(
      seen.slice(before).map((p) => [p.event, p.data]),
      [
        ["metadata", { run_id: run.run_id, attempt: 1 }],
        ["metadata", { status: "run_done", run_id: run.run_id }],
      ],
    );
  } finally {
    controller.abort();
    await follower;
  }
});

// --- The thread event protocol (threads.stream) ---------------------------

const protocolClient = new ProtocolClient({ apiUrl, apiKey });

test("thread event protocol: messages, values and output (threads.stream)", async () => {
  const thread = protocolClient.threads.stream(randomUUID(), { assistantId: "echo" });
  try {
    // Subscribe first, as a UI does: the client widens one event stream
    // as projections are added, resuming where it was, so a projection
    // opened after the run's messages went by would miss them.
    const messages = thread.messages;
    const reading = (async () => {
      const texts = [];
      for await (const message of messages) texts.push(await message.text);
      return texts;
    })();
    const started = await thread.run.start({ input: HI });
    assert.ok(started.run_id, JSON.stringify(started));
    assert.deepEqual(await reading, ["echo: hi"]);
    const out = await thread.output;
    assert.deepEqual(out.messages.at(-1), { role: "assistant", content: "echo: hi" });
  } finally {
    await thread.close();
  }
});

const ALL_CHANNELS = ["values", "updates", "messages", "tools", "lifecycle", "input", "checkpoints", "tasks", "custom"];

function rootLifecycle(event, ...phases) {
  return event.method === "lifecycle" && event.params.namespace.length === 0 && phases.includes(event.params.data?.event);
}

// Reads a protocol event stream until stop(event), or limit events.
async function readEvents(handle, stop, limit = Infinity) {
  const out = [];
  await handle.ready;
  for await (const event of handle.events) {
    out.push(event);
    if (stop(event) || out.length >= limit) break;
  }
  handle.close();
  return out;
}

test("thread event protocol: an interrupt answered with input.respond, then a resume with since", async () => {
  const tid = randomUUID();
  const thread = protocolClient.threads.stream(tid, { assistantId: "approval" });
  try {
    await thread.run.start({ input: { request: "a day off" } });
    const snapshots = [];
    for await (const values of thread.values) snapshots.push(values);
    assert.equal(thread.interrupted, true);
    assert.equal(thread.interrupts.length, 1);
    const [pending] = thread.interrupts;
    assert.deepEqual(pending.payload, { question: "approve a day off?" });
    assert.deepEqual(pending.namespace, []);
    await thread.input.respond({ interrupt_id: pending.interruptId, response: "yes", namespace: [] });
    const lifecycle = await thread.subscribe({ channels: ["lifecycle"] });
    for await (const event of lifecycle) if (rootLifecycle(event, "completed")) break;
  } finally {
    await thread.close();
  }
  const state = await protocolClient.threads.getState(tid);
  assert.deepEqual(state.values, { request: "a day off", answer: "yes" });

  // Disconnect and resume with since: nothing missed, nothing repeated.
  const transport = new ProtocolSseTransportAdapter({ apiUrl, threadId: tid, defaultHeaders: { "x-api-key": apiKey } });
  try {
    const done = (e) => rootLifecycle(e, "completed");
    const full = await readEvents(transport.openEventStream({ channels: ALL_CHANNELS }), done);
    assert.deepEqual(full.map((e) => e.seq), full.map((_, i) => i + 1));
    assert.equal(full.filter((e) => e.method === "input.requested").length, 1);
    const cut = Math.floor(full.length / 2);
    const part = await readEvents(transport.openEventStream({ channels: ALL_CHANNELS }), done, cut);
    const rest = await readEvents(transport.openEventStream({ channels: ALL_CHANNELS, since: part.at(-1).seq }), done);
    assert.deepEqual([...part, ...rest], full);
  } finally {
    await transport.close();
  }
});

// ---- the long-term memory store (client.store.*) ---------------------------
// Each test under a namespace of its own: the store is per organization.

function storeNs(...labels) {
  return ["conf-js", randomUUID().slice(0, 12), ...labels];
}

test("store putItem, getItem, deleteItem", async () => {
  const ns = storeNs("users", "u1");
  await client.store.putItem(ns, "prefs", { theme: "dark", size: 3 });
  const item = await client.store.getItem(ns, "prefs");
  assert.deepEqual(item.namespace, ns);
  assert.equal(item.key, "prefs");
  assert.deepEqual(item.value, { theme: "dark", size: 3 });
  assert.ok(item.createdAt && item.updatedAt);
  await client.store.putItem(ns, "prefs", { theme: "light" });
  const again = await client.store.getItem(ns, "prefs", { refreshTtl: false });
  assert.deepEqual(again.value, { theme: "light" });
  assert.equal(again.createdAt, item.createdAt);
  assert.equal(await client.store.getItem(ns, "nope"), null);
  await client.store.deleteItem(ns, "prefs");
  assert.equal(await client.store.getItem(ns, "prefs"), null);
});

test("store searchItems with filter, limit and offset", async () => {
  const ns = storeNs();
  for (const [key, value] of [
    ["a", { kind: "note", score: 3 }],
    ["b", { kind: "task", score: 5 }],
    ["c", { kind: "note", score: 7 }],
  ]) {
    await client.store.putItem([...ns, "docs"], key, value, { index: false });
  }
  let found = await client.store.searchItems(ns);
  assert.deepEqual(found.items.map((i) => i.key), ["c", "b", "a"]);
  found = await client.store.searchItems(ns, { filter: { kind: "note" } });
  assert.deepEqual(found.items.map((i) => i.key), ["c", "a"]);
  found = await client.store.searchItems(ns, { filter: { score: { $lt: 7 } }, limit: 1, offset: 1 });
  assert.deepEqual(found.items.map((i) => i.key), ["a"]);
});

test("store TTL: put with ttl, reads with and without refresh, bad ttl refused", async () => {
  const ns = storeNs();
  await client.store.putItem(ns, "short", { v: 1 }, { ttl: 5 });
  assert.deepEqual((await client.store.getItem(ns, "short", { refreshTtl: false })).value, { v: 1 });
  const found = await client.store.searchItems(ns, { refreshTtl: true });
  assert.deepEqual(found.items.map((i) => i.key), ["short"]);
  await assert.rejects(client.store.putItem(ns, "bad", { v: 1 }, { ttl: 0 }), (err) => {
    assert.match(String(err), /422/);
    return true;
  });
});

test("store listNamespaces with prefix, suffix, maxDepth", async () => {
  const root = storeNs();
  for (const labels of [["a", "b", "c"], ["a", "x", "c"], ["b"]]) {
    await client.store.putItem([...root, ...labels], "k", { x: 1 }, { index: false });
  }
  const strip = (res) => res.namespaces.map((ns) => ns.slice(root.length));
  assert.deepEqual(strip(await client.store.listNamespaces({ prefix: root })), [["a", "b", "c"], ["a", "x", "c"], ["b"]]);
  assert.deepEqual(strip(await client.store.listNamespaces({ prefix: root, suffix: ["c"] })), [["a", "b", "c"], ["a", "x", "c"]]);
  assert.deepEqual(strip(await client.store.listNamespaces({ prefix: root, maxDepth: root.length + 1 })), [["a"], ["b"]]);
});

test("store semantic search ranks by similarity", async () => {
  const ns = storeNs("memories");
  await client.store.putItem(ns, "cats", { text: "cats purr and cats sleep all day" });
  await client.store.putItem(ns, "dogs", { text: "dogs bark at the mailman" });
  const found = await client.store.searchItems(ns, { query: "do cats sleep" });
  assert.equal(found.items[0].key, "cats");
  assert.ok(found.items[0].score > found.items[1].score);
});
