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

import { Client } from "@langchain/langgraph-sdk";

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
