// Conformance of client.crons.* with the official JS SDK
// (@langchain/langgraph-sdk, unchanged) against a running stepgraph server:
// what each call answers means what upstream's server means, and a cron that
// fires makes a run one can see.
//
// Started by test/conformance/conformance_test.go with `node --test`
// (STEPGRAPH_URL, STEPGRAPH_API_KEY).

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { Client } from "./sdk-under-test.mjs";

const apiUrl = process.env.STEPGRAPH_URL;
const apiKey = process.env.STEPGRAPH_API_KEY;
if (!apiUrl || !apiKey) {
  throw new Error("STEPGRAPH_URL and STEPGRAPH_API_KEY must be set (run this suite through `go test ./test/conformance/`)");
}
const client = new Client({ apiUrl, apiKey });

// A firing waits for the next minute boundary and a scheduler tick: the
// deadline is only a safety net.
const FIRE_DEADLINE_MS = 150_000;

// An assistant of its own keeps this file's crons apart from the other
// suites' (searches filter by it).
async function ownAssistant() {
  const a = await client.assistants.create({ graphId: "echo", name: "crons-js-" + randomUUID() });
  return a.assistant_id;
}

test("crons: create, createForThread, search, count, update, delete", async () => {
  const assistantId = await ownAssistant();
  const marker = randomUUID();
  const cron = await client.crons.create(assistantId, {
    schedule: "0 9 * * 1-5",
    input: { messages: [{ role: "user", content: "standup" }] },
    metadata: { marker },
    onRunCompleted: "keep",
  });
  assert.equal(cron.thread_id, null);
  assert.equal(cron.assistant_id, assistantId);
  assert.equal(cron.on_run_completed, "keep");
  assert.equal(cron.enabled, true);
  assert.equal(cron.end_time, null);
  assert.deepEqual(cron.metadata, { marker });
  const next = new Date(cron.next_run_date);
  assert.ok(next > new Date(), "next_run_date is in the future");
  assert.equal(next.getUTCHours(), 9);
  assert.ok(next.getUTCDay() >= 1 && next.getUTCDay() <= 5);

  const thread = await client.threads.create();
  const tcron = await client.crons.createForThread(thread.thread_id, assistantId, {
    schedule: "*/30 * * * *",
    multitaskStrategy: "enqueue",
    enabled: false,
  });
  assert.equal(tcron.thread_id, thread.thread_id);
  assert.equal(tcron.enabled, false);

  let found = await client.crons.search({ assistantId });
  assert.deepEqual(found.map((c) => c.cron_id), [tcron.cron_id, cron.cron_id]);
  found = await client.crons.search({ assistantId, sortOrder: "asc", limit: 1 });
  assert.deepEqual(found.map((c) => c.cron_id), [cron.cron_id]);
  found = await client.crons.search({ assistantId, enabled: false });
  assert.deepEqual(found.map((c) => c.cron_id), [tcron.cron_id]);
  found = await client.crons.search({ threadId: thread.thread_id, select: ["cron_id", "enabled"] });
  assert.deepEqual(found, [{ cron_id: tcron.cron_id, enabled: false }]);
  assert.equal(await client.crons.count({ assistantId }), 2);
  assert.equal(await client.crons.count({ threadId: thread.thread_id }), 1);

  let updated = await client.crons.update(cron.cron_id, {
    schedule: "30 6 * * *",
    endTime: "2099-01-01T00:00:00Z",
    metadata: { extra: 1 },
    enabled: false,
  });
  assert.equal(updated.schedule, "30 6 * * *");
  assert.equal(updated.end_time, "2099-01-01T00:00:00Z");
  assert.equal(updated.enabled, false);
  assert.deepEqual(updated.metadata, { marker, extra: 1 });
  assert.equal(new Date(updated.next_run_date).getUTCHours(), 6);
  assert.equal(new Date(updated.next_run_date).getUTCMinutes(), 30);
  updated = await client.crons.update(cron.cron_id, { endTime: null });
  assert.equal(updated.end_time, null);

  await assert.rejects(client.crons.create(assistantId, { schedule: "every day" }), (err) => {
    assert.match(String(err), /422/);
    return true;
  });

  await client.crons.delete(cron.cron_id);
  await client.crons.delete(tcron.cron_id);
  assert.equal(await client.crons.count({ assistantId }), 0);
  await assert.rejects(client.crons.delete(cron.cron_id), (err) => {
    assert.match(String(err), /404/);
    return true;
  });
});

test("crons: a firing makes a run", async () => {
  const assistantId = await ownAssistant();
  const marker = randomUUID();
  const cron = await client.crons.create(assistantId, {
    schedule: "* * * * *",
    input: { messages: [{ role: "user", content: "tick " + marker }] },
    metadata: { marker },
    onRunCompleted: "keep",
  });
  try {
    const deadline = Date.now() + FIRE_DEADLINE_MS;
    let threads = [];
    while (Date.now() < deadline) {
      threads = await client.threads.search({ metadata: { cron_id: cron.cron_id } });
      if (threads.length > 0) break;
      await sleep(1000);
    }
    assert.ok(threads.length > 0, "the cron did not fire within the deadline");
    const tid = threads[0].thread_id;
    const runs = await client.runs.list(tid);
    const run = runs.at(-1);
    assert.equal(run.assistant_id, assistantId);
    assert.equal(run.metadata.cron_id, cron.cron_id);
    assert.equal(run.metadata.marker, marker);
    const out = await client.runs.join(tid, run.run_id);
    assert.equal(out.messages.at(-1).content, "echo: tick " + marker);
  } finally {
    await client.crons.delete(cron.cron_id);
  }
  assert.equal(await client.crons.count({ assistantId }), 0);
});
