// Conformance of the thread operations beyond create/get/search (issue 15)
// through the official JS SDK: updateState (asNode, forking), patchState,
// getState with a checkpoint, getHistory with a metadata filter and the
// config shape of `before`, count, copy, supersteps and select.
//
// Started by test/conformance/conformance_test.go (STEPGRAPH_URL,
// STEPGRAPH_API_KEY).

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";

import { Client, version } from "./sdk-under-test.mjs";

const apiUrl = process.env.STEPGRAPH_URL;
const apiKey = process.env.STEPGRAPH_API_KEY;
if (!apiUrl || !apiKey) {
  throw new Error("STEPGRAPH_URL and STEPGRAPH_API_KEY must be set (run this suite through `go test ./test/conformance/`)");
}
const client = new Client({ apiUrl, apiKey });

test("threads.updateState, patchState, getState at a checkpoint, filtered getHistory", async () => {
  const { thread_id: tid } = await client.threads.create();
  const empty = await client.threads.getState(tid);
  assert.equal(empty.checkpoint, null);
  assert.equal(empty.checkpoint_id, null);

  await client.runs.wait(tid, "counter", { input: { steps: 2 } });
  const thread = await client.threads.get(tid);
  assert.equal(thread.metadata.graph_id, "counter");
  const before = await client.threads.getState(tid);

  const res = await client.threads.updateState(tid, { values: { count: 3 }, asNode: "inc" });
  const newId = res.checkpoint.checkpoint_id;
  const state = await client.threads.getState(tid);
  assert.deepEqual(state.values, { count: 5, steps: 2 });
  assert.equal(state.metadata.source, "update");
  assert.equal(state.checkpoint.checkpoint_id, newId);

  // Fork from the run's first checkpoint.
  const history = await client.threads.getHistory(tid, { limit: 100 });
  const first = history.at(-1).checkpoint.checkpoint_id;
  const fork = await client.threads.updateState(tid, {
    values: { steps: 3 },
    asNode: "__start__",
    checkpoint: { checkpoint_id: first },
  });
  const at = await client.threads.getState(tid, { checkpoint_id: fork.checkpoint.checkpoint_id });
  assert.deepEqual(at.next, ["inc"]);
  assert.equal(at.parent_checkpoint.checkpoint_id, first);
  const byId = await client.threads.getState(tid, fork.checkpoint.checkpoint_id);
  assert.equal(byId.checkpoint.checkpoint_id, fork.checkpoint.checkpoint_id);

  // The JS SDK's before is a config.
  const older = await client.threads.getHistory(tid, {
    limit: 1,
    before: { configurable: { checkpoint_id: newId } },
  });
  assert.equal(older[0].checkpoint.checkpoint_id, before.checkpoint.checkpoint_id);

  await client.threads.patchState(tid, { reviewed: "yes" });
  const patched = await client.threads.getState(tid);
  assert.equal(patched.metadata.reviewed, "yes");
  assert.equal(patched.metadata.source, "update");
  const reviewed = await client.threads.getHistory(tid, { metadata: { reviewed: "yes" } });
  assert.equal(reviewed.length, 1);
  assert.equal(reviewed[0].checkpoint.checkpoint_id, fork.checkpoint.checkpoint_id);
  const updates = await client.threads.getHistory(tid, { limit: 100, metadata: { source: "update" } });
  assert.equal(updates.length, 2);

  await assert.rejects(client.threads.updateState(tid, { values: { count: 1 }, asNode: "ghost" }), /422/);
});

test("threads.count, copy, supersteps and select", async () => {
  const tag = randomBytes(6).toString("hex");
  const ids = [];
  for (let i = 0; i < 3; i++) {
    ids.push((await client.threads.create({ metadata: { tag, n: i } })).thread_id);
  }
  assert.equal(await client.threads.count({ metadata: { tag } }), 3);
  assert.equal(await client.threads.count({ metadata: { tag }, status: "interrupted" }), 0);

  const made = await client.threads.create({
    metadata: { tag },
    graphId: "counter",
    supersteps: [
      { updates: [{ values: { steps: 2 }, asNode: "__start__" }] },
      { updates: [{ values: { count: 1 }, asNode: "inc" }] },
    ],
  });
  assert.deepEqual(made.values, { count: 1, steps: 2 });
  assert.deepEqual(await client.runs.wait(made.thread_id, "counter", { input: null }), { count: 2, steps: 2 });

  const copy = await client.threads.copy(made.thread_id);
  assert.notEqual(copy.thread_id, made.thread_id);
  assert.deepEqual(copy.values, { count: 2, steps: 2 });
  const a = await client.threads.getHistory(made.thread_id, { limit: 100 });
  const b = await client.threads.getHistory(copy.thread_id, { limit: 100 });
  assert.deepEqual(
    b.map((s) => s.checkpoint.checkpoint_id),
    a.map((s) => s.checkpoint.checkpoint_id),
  );

  const selected = await client.threads.search({ ids: [copy.thread_id], select: ["thread_id", "values"] });
  assert.deepEqual(selected, [{ thread_id: copy.thread_id, values: { count: 2, steps: 2 } }]);

  // threads.prune is 1.15.0's only (2.0.0 dropped it): tested below.
  await client.threads.delete(copy.thread_id);
  assert.equal(await client.threads.count({ metadata: { tag } }), 4);
});

// 1.15.0 has threads.prune; 2.0.0 dropped it (so this test is 1.15.0's).
if (version === "1.15.0") {
  test("threads.prune (1.15.0): keep_latest, then delete", async () => {
    assert.equal(typeof client.threads.prune, "function");
    const tag = randomBytes(6).toString("hex");
    const kept = (await client.threads.create({ metadata: { tag } })).thread_id;
    const gone = (await client.threads.create({ metadata: { tag } })).thread_id;
    await client.runs.wait(kept, "counter", { input: { steps: 3 } });
    assert.ok((await client.threads.getHistory(kept, { limit: 100 })).length > 1);

    assert.deepEqual(await client.threads.prune([kept], { strategy: "keep_latest" }), { pruned_count: 1 });
    const history = await client.threads.getHistory(kept, { limit: 100 });
    assert.equal(history.length, 1);
    assert.deepEqual(history[0].values, { count: 3, steps: 3 });

    // The default strategy deletes the threads.
    assert.deepEqual(await client.threads.prune([gone]), { pruned_count: 1 });
    assert.equal(await client.threads.count({ metadata: { tag } }), 1);
    await assert.rejects(client.threads.get(gone), /404/);
  });
}

test("threads.update sets metadata; threads.delete removes the thread", async () => {
  const tag = randomBytes(6).toString("hex");
  const { thread_id: tid } = await client.threads.create({ metadata: { tag } });
  const updated = await client.threads.update(tid, { metadata: { reviewed: "yes" } });
  assert.equal(updated.thread_id, tid);
  const got = await client.threads.get(tid);
  assert.deepEqual(got.metadata, { tag, reviewed: "yes" });
  await client.threads.delete(tid);
  await assert.rejects(client.threads.get(tid), /404/);
  assert.equal(await client.threads.count({ metadata: { tag } }), 0);
});
