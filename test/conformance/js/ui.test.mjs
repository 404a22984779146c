// The JS SDK's client["~ui"].getComponent (both versions): POST
// /ui/{assistant_id}, which stepgraph answers as upstream does for a graph
// without a generative UI bundle (api/ui.py handle_ui): 404, and the SDK
// rejects.
//
// Started by test/conformance/conformance_test.go (STEPGRAPH_URL,
// STEPGRAPH_API_KEY).

import assert from "node:assert/strict";
import { test } from "node:test";

import { Client } from "./sdk-under-test.mjs";

const apiUrl = process.env.STEPGRAPH_URL;
const apiKey = process.env.STEPGRAPH_API_KEY;
if (!apiUrl || !apiKey) {
  throw new Error("STEPGRAPH_URL and STEPGRAPH_API_KEY must be set (run this suite through `go test ./test/conformance/`)");
}

test('client["~ui"].getComponent of a graph without a UI bundle', async () => {
  const requests = [];
  const client = new Client({
    apiUrl,
    apiKey,
    callerOptions: { maxRetries: 0 },
    onRequest: (url, init) => {
      requests.push({ url: url.toString(), method: init.method, body: init.body });
      return init;
    },
  });
  const assistant = await client.assistants.create({ graphId: "echo" });
  await assert.rejects(client["~ui"].getComponent(assistant.assistant_id, "weather"), (err) => {
    assert.match(String(err), /404/);
    return true;
  });
  assert.equal(requests.length, 2, JSON.stringify(requests));
  assert.equal(requests[1].method, "POST");
  assert.equal(new URL(requests[1].url).pathname, `/ui/${assistant.assistant_id}`);
  assert.deepEqual(JSON.parse(requests[1].body), { name: "weather" });
  // A wrong key is refused before anything is looked up.
  const stranger = new Client({ apiUrl, apiKey: "sg_not-a-key", callerOptions: { maxRetries: 0 } });
  await assert.rejects(stranger["~ui"].getComponent(assistant.assistant_id, "other"), /401/);
  await client.assistants.delete(assistant.assistant_id);
});
