// Conformance of runs.createBatch (issue 15) and of the thread metadata a
// run stamps, through the official JS SDK, and of runs.cancelMany (1.15.0
// only: 2.0.0 dropped it).
//
// Started by test/conformance/conformance_test.go (STEPGRAPH_URL,
// STEPGRAPH_API_KEY).

import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, version } from "./sdk-under-test.mjs";

const apiUrl = process.env.STEPGRAPH_URL;
const apiKey = process.env.STEPGRAPH_API_KEY;
if (!apiUrl || !apiKey) {
  throw new Error("STEPGRAPH_URL and STEPGRAPH_API_KEY must be set (run this suite through `go test ./test/conformance/`)");
}
const client = new Client({ apiUrl, apiKey });

test("runs.createBatch, and a run stamps its thread", async () => {
  // createBatch sends each payload as given but for assistantId: the
  // other keys go in the wire's snake_case.
  const runs = await client.runs.createBatch([
    { assistantId: "counter", input: { steps: 2 }, on_completion: "keep" },
    { assistantId: "counter", input: { steps: 4 }, on_completion: "keep" },
  ]);
  assert.equal(runs.length, 2);
  const out = await client.runs.join(runs[1].thread_id, runs[1].run_id);
  assert.deepEqual(out, { count: 4, steps: 4 });

  const { thread_id: tid } = await client.threads.create({ metadata: { owner: "js" } });
  await client.runs.wait(tid, "counter", { input: { steps: 1 } });
  const thread = await client.threads.get(tid);
  const counter = await client.assistants.get("counter");
  assert.deepEqual(thread.metadata, { owner: "js", graph_id: "counter", assistant_id: counter.assistant_id });
  const listed = await client.threads.search({ metadata: { graph_id: "counter", owner: "js" } });
  assert.ok(listed.some((t) => t.thread_id === tid));
});

// 1.15.0 has runs.cancelMany (POST /runs/cancel); 2.0.0 dropped it.
if (version === "1.15.0") {
  test("runs.cancelMany (1.15.0): by ids, interrupt and rollback", async () => {
    assert.equal(typeof client.runs.cancelMany, "function");
    const hi = { messages: [{ role: "user", content: "hi" }] };
    const { thread_id: tid } = await client.threads.create();
    const first = await client.runs.create(tid, "echo", { input: hi, afterSeconds: 3600 });
    const second = await client.runs.create(tid, "echo", { input: hi, afterSeconds: 3600 });
    await client.runs.cancelMany({ threadId: tid, runIds: [first.run_id] });
    assert.equal((await client.runs.get(tid, first.run_id)).status, "interrupted");
    assert.equal((await client.runs.get(tid, second.run_id)).status, "pending");
    await client.runs.cancelMany({ threadId: tid, runIds: [second.run_id], action: "rollback" });
    await assert.rejects(client.runs.get(tid, second.run_id), /404/);
    // A run id the thread does not have is a 404. (Cancelling by status
    // would reach the runs of the suites beside this one on the same key:
    // internal/api's TestRunBatchAndCancel covers it.)
    await assert.rejects(
      client.runs.cancelMany({ threadId: tid, runIds: ["00000000-0000-4000-8000-000000000000"] }),
      /404/,
    );
  });
}

test("runs.delete removes a finished run", async () => {
  const { thread_id: tid } = await client.threads.create();
  const run = await client.runs.create(tid, "counter", { input: { steps: 1 } });
  assert.deepEqual(await client.runs.join(tid, run.run_id), { count: 1, steps: 1 });
  await client.runs.delete(tid, run.run_id);
  await assert.rejects(client.runs.get(tid, run.run_id), /404/);
  assert.deepEqual((await client.runs.list(tid)).map((r) => r.run_id), []);
});
