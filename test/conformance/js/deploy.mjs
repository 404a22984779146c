// deployOnce deploys a repository as a named deployment and waits until it
// is READY. The JS suites run once per SDK version against one server
// (conformance_test.go), so the second run finds the deployment the first
// made (409: the name is taken) and waits for that one instead: the
// deployment is the suites' fixture, the SDK is what they test (the
// support agent's is the Python suite's too: whichever suite comes first
// makes it). configPath is the graph config's path in the repository;
// customUrl the runtime serving its functions; secrets the deployment's
// secrets. With untilDeployed it also waits for the latest revision to be
// DEPLOYED (its graphs served), as the Python suite does.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";

export async function deployOnce({
  apiUrl,
  apiKey,
  name,
  repo,
  deadlineMs,
  configPath = "stepgraph.yaml",
  customUrl,
  secrets,
  untilDeployed = false,
}) {
  const headers = { "X-Api-Key": apiKey, "Content-Type": "application/json" };
  const res = await fetch(`${apiUrl}/v2/deployments`, {
    method: "POST",
    headers,
    body: JSON.stringify({
      name,
      source: "github",
      source_config: { repo_url: repo, ...(customUrl ? { custom_url: customUrl } : {}) },
      source_revision_config: { repo_ref: "main", langgraph_config_path: configPath },
      ...(secrets ? { secrets } : {}),
    }),
  });
  let dep;
  if (res.status === 409) {
    const list = await fetch(`${apiUrl}/v2/deployments?name=${encodeURIComponent(name)}`, { headers });
    assert.equal(list.status, 200, await list.clone().text());
    const { resources } = await list.json();
    assert.equal(resources.length, 1, `deployments named ${name}: ${JSON.stringify(resources)}`);
    dep = resources[0];
  } else {
    assert.equal(res.status, 201, await res.clone().text());
    dep = await res.json();
  }
  const deadline = Date.now() + deadlineMs;
  while (dep.status !== "READY") {
    assert.ok(!dep.status.includes("FAILED"), JSON.stringify(dep));
    assert.ok(Date.now() < deadline, JSON.stringify(dep));
    await sleep(100);
    dep = await (await fetch(`${apiUrl}/v2/deployments/${dep.id}`, { headers })).json();
  }
  while (untilDeployed) {
    const rev = await (await fetch(`${apiUrl}/v2/deployments/${dep.id}/revisions/${dep.latest_revision_id}`, { headers })).json();
    assert.ok(!rev.status.includes("FAILED"), JSON.stringify(rev));
    if (rev.status === "DEPLOYED") break;
    assert.ok(Date.now() < deadline, JSON.stringify(rev));
    await sleep(100);
  }
  return dep;
}
