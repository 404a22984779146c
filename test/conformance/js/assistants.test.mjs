// Conformance of the assistant operations beyond create/get/search (issue
// 15) through the official JS SDK: update (a new version), getVersions,
// setLatest, count, getSubgraphs, select, and the system assistants that
// cannot be deleted.
//
// Started by test/conformance/conformance_test.go (STEPGRAPH_URL,
// STEPGRAPH_API_KEY).

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";

import { Client } from "./sdk-under-test.mjs";

const apiUrl = process.env.STEPGRAPH_URL;
const apiKey = process.env.STEPGRAPH_API_KEY;
if (!apiUrl || !apiKey) {
  throw new Error("STEPGRAPH_URL and STEPGRAPH_API_KEY must be set (run this suite through `go test ./test/conformance/`)");
}
const client = new Client({ apiUrl, apiKey });

test("assistants.update, getVersions, setLatest, count, search select", async () => {
  const tag = randomBytes(6).toString("hex");
  const a = await client.assistants.create({ graphId: "echo", name: "first", metadata: { tag } });
  const b = await client.assistants.update(a.assistant_id, { name: "second", metadata: { stage: "two" } });
  assert.equal(b.version, 2);
  assert.deepEqual(b.metadata, { tag, stage: "two" });
  const versions = await client.assistants.getVersions(a.assistant_id);
  assert.deepEqual(versions.map((v) => v.version), [2, 1]);
  assert.equal(versions[1].name, "first");
  const back = await client.assistants.setLatest(a.assistant_id, 1);
  assert.equal(back.version, 1);
  assert.equal(back.name, "first");
  assert.equal(await client.assistants.count({ metadata: { tag } }), 1);
  const selected = await client.assistants.search({ metadata: { tag }, select: ["assistant_id", "version"] });
  assert.deepEqual(selected, [{ assistant_id: a.assistant_id, version: 1 }]);
  await client.assistants.delete(a.assistant_id);
  await assert.rejects(client.assistants.getVersions(a.assistant_id), /404/);
});

test("assistants.delete of a system assistant is a 409; getSubgraphs", async () => {
  const echo = await client.assistants.get("echo");
  await assert.rejects(client.assistants.delete(echo.assistant_id), /409/);
  assert.deepEqual(await client.assistants.getSubgraphs(echo.assistant_id, { recurse: true }), {});
});

test("assistants.getSchemas and getGraph describe the graph", async () => {
  // counter: state {count (number, default 0), steps (integer)}; its one
  // node inc loops on itself until the steps are done.
  const counter = await client.assistants.get("counter");
  assert.equal(counter.graph_id, "counter");
  const schemas = await client.assistants.getSchemas(counter.assistant_id);
  assert.equal(schemas.graph_id, "counter");
  for (const s of [schemas.input_schema, schemas.output_schema, schemas.state_schema]) {
    assert.deepEqual(Object.keys(s.properties).sort(), ["count", "steps"]);
    assert.equal(s.properties.steps.type, "integer");
  }
  assert.equal(schemas.context_schema.type, "object");
  const drawing = await client.assistants.getGraph(counter.assistant_id);
  assert.deepEqual(drawing.nodes.map((n) => n.id).sort(), ["__end__", "__start__", "inc"]);
  const edges = drawing.edges.map((e) => `${e.source}->${e.target}`).sort();
  assert.deepEqual(edges, ["__start__->inc", "inc->__end__", "inc->inc"]);
  await assert.rejects(client.assistants.getGraph("00000000-0000-4000-8000-000000000000"), /404/);
});
