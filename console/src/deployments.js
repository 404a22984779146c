// Deployments: the list with statuses, a new deployment from a git
// repository or a container image, and a deployment's revisions, secrets
// and provisioning log, with redeploy and rollback. Every rule is the
// API's: the form sends what was typed and shows the API's 422 messages
// next to the fields they name (no second set of rules here to drift).
import { useState } from "preact/hooks";
import { client, errText } from "./session.js";
import { html, Field, useFieldErrors, Alert, Status, usePoll, short, when } from "./ui.js";

const api = (method, path, json, params) => client.control.call(method, path, json, params);

// Revision statuses that will still change (the API's unsettled ones).
const MOVING = ["CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING"];
const FAILED = ["CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED"];
const settledDeployment = (d) => d.status !== "AWAITING_DATABASE" && d.status !== "AWAITING_DELETE";

export function Deployments({ id }) {
  const [list, setList] = useState(null);
  const [err, setErr] = useState("");
  const refresh = usePoll(async (alive) => {
    try {
      const page = await api("GET", "/v2/deployments", undefined, { limit: 100 });
      if (!alive()) return false;
      setList(page.resources || []);
      setErr("");
      return page.resources.some((d) => !settledDeployment(d));
    } catch (e) {
      if (alive()) setErr(errText(e));
      throw e; // usePoll decides whether to try again
    }
  }, [id]);
  return html`
    <section class="split">
      <div class="list">
        <h2>Deployments</h2>
        <${Alert} text=${err} />
        <ul id="deployments">
          ${(list || []).map((d) => html`<li><a href="#/deployments/${d.id}" aria-current=${d.id === id ? "true" : null}>${d.name}</a> <${Status} s=${d.status} /> <small>${d.source === "external_docker" ? "image" : "repository"}</small></li>`)}
        </ul>
        ${list && list.length === 0 && html`<p class="hint">No deployments yet.</p>`}
        <a href="#/deployments/new" class="button">New deployment</a>
      </div>
      <div class="detail">
        ${id === "new" && html`<${DeploymentForm} onCreated=${(d) => { refresh(); location.hash = "#/deployments/" + d.id; }} />`}
        ${id && id !== "new" && html`<${Deployment} key=${id} id=${id} onChange=${refresh} />`}
      </div>
    </section>`;
}

// The fields of the form, by the API's names.
const FORM_FIELDS = ["name", "source", "source_config.repo_url", "source_revision_config.repo_ref",
  "source_revision_config.graph_config_path", "source_revision_config.image_uri", "source_config.custom_url",
  "source_config", "source_revision_config", "secrets"];

function DeploymentForm({ onCreated }) {
  const [source, setSource] = useState("hosted_repo");
  const [secrets, setSecrets] = useState([]); // row keys; the values stay in the inputs only
  const [busy, setBusy] = useState(false);
  const fe = useFieldErrors((f) => FORM_FIELDS.includes(f) || /^secrets\[\d+\]\.(name|value)$/.test(f));
  async function submit(ev) {
    ev.preventDefault();
    const f = ev.target.elements;
    const opt = (name) => (f[name] && f[name].value.trim() ? f[name].value.trim() : undefined);
    const body = {
      name: f["name"].value.trim(),
      source,
      source_config: { custom_url: opt("source_config.custom_url") },
      source_revision_config: {},
      secrets: secrets.map((_, i) => ({ name: f[`secrets[${i}].name`].value.trim(), value: f[`secrets[${i}].value`].value })),
    };
    if (source === "hosted_repo") {
      body.source_config.repo_url = opt("source_config.repo_url");
      body.source_revision_config.repo_ref = opt("source_revision_config.repo_ref");
      body.source_revision_config.graph_config_path = opt("source_revision_config.graph_config_path");
    } else body.source_revision_config.image_uri = opt("source_revision_config.image_uri");
    setBusy(true), fe.clear();
    try {
      const d = await api("POST", "/v2/deployments", body);
      fe.clear();
      onCreated(d);
    } catch (e) {
      fe.fail(e);
    } finally {
      setBusy(false);
    }
  }
  const errs = fe.errs;
  return html`
    <form class="stack" id="deployment-form" onSubmit=${submit} ref=${fe.formRef} novalidate>
      <h3>New deployment</h3>
      <${Field} label="Name" name="name" errs=${errs} hint="Lowercase letters, digits and hyphens." autocomplete="off" />
      <fieldset class="field" data-field="source">
        <legend>Source</legend>
        <label class="inline"><input type="radio" name="source" value="hosted_repo" checked=${source === "hosted_repo"} onChange=${() => setSource("hosted_repo")} /> A git repository</label>
        <label class="inline"><input type="radio" name="source" value="external_docker" checked=${source === "external_docker"} onChange=${() => setSource("external_docker")} /> A container image</label>
        ${errs && errs.source && html`<p class="field-error">${errs.source.join("; ")}</p>`}
      </fieldset>
      ${source === "hosted_repo"
        ? html`
          <${Field} label="Repository URL" name="source_config.repo_url" errs=${errs} hint="An https URL; or a file URL for a repository on this server's machine." />
          <${Field} label="Branch, tag or commit" name="source_revision_config.repo_ref" errs=${errs} defaultValue="main" />
          <${Field} label="Graph config path" name="source_revision_config.graph_config_path" errs=${errs} hint="In the repository, e.g. langgraph.json" />`
        : html`<${Field} label="Image" name="source_revision_config.image_uri" errs=${errs} hint="e.g. registry.example.com/team/agent:1.2" />`}
      <${Field} label="Runtime URL (optional)" name="source_config.custom_url" errs=${errs} hint="Where the deployment's function nodes and tools run" />
      <fieldset class="field" data-field="secrets">
        <legend>Secrets</legend>
        ${secrets.map((k, i) => html`<div class="secret-row" key=${k}>
          <${Field} label=${`Secret ${i + 1} name`} name=${`secrets[${i}].name`} errs=${errs} autocomplete="off" />
          <${Field} label=${`Secret ${i + 1} value`} name=${`secrets[${i}].value`} errs=${errs} type="password" autocomplete="new-password" />
          <button type="button" class="secondary" onClick=${() => setSecrets(secrets.filter((x) => x !== k))}>Remove secret ${i + 1}</button>
        </div>`)}
        ${errs && errs.secrets && html`<p class="field-error">${errs.secrets.join("; ")}</p>`}
        <button type="button" class="secondary" id="add-secret" onClick=${() => setSecrets([...secrets, Date.now() + Math.random()])}>Add a secret</button>
      </fieldset>
      <button type="submit" disabled=${busy}>Create deployment</button>
      <${Alert} text=${fe.rest} />
    </form>`;
}

function Deployment({ id, onChange }) {
  const [d, setD] = useState(null);
  const [revs, setRevs] = useState([]);
  const [logRev, setLogRev] = useState(""); // the revision whose log is shown ("" = the latest)
  const [logs, setLogs] = useState({ build: [], deploy: [] });
  const [err, setErr] = useState("");
  const [note, setNote] = useState("");
  const refresh = usePoll(async (alive) => {
    try {
      // Revisions first: a revision becomes active before it is DEPLOYED,
      // so the deployment read after them is at least as new (read the
      // other way round, a DEPLOYED revision could stand beside an older
      // active one, and the page would stop polling there).
      const page = await api("GET", `/v2/deployments/${id}/revisions`, undefined, { limit: 50 });
      const dep = await api("GET", `/v2/deployments/${id}`);
      const rev = logRev || dep.latest_revision_id;
      const q = { order: "asc", limit: 1000 };
      const [build, deploy] = rev
        ? await Promise.all([
            dep.source === "hosted_repo" ? api("POST", `/v1/projects/${id}/revisions/${rev}/build_logs`, q) : { logs: [] },
            api("POST", `/v1/projects/${id}/revisions/${rev}/deploy_logs`, q),
          ])
        : [{ logs: [] }, { logs: [] }];
      if (!alive()) return false;
      setD(dep), setRevs(page.resources || []), setLogs({ build: build.logs, deploy: deploy.logs }), setErr("");
      return !settledDeployment(dep) || (page.resources || []).some((r) => MOVING.includes(r.status));
    } catch (e) {
      if (alive()) setErr(errText(e));
      throw e; // usePoll decides whether to try again
    }
  }, [id, logRev]);
  const changed = () => {
    refresh();
    onChange();
  };
  async function redeploy(rev, what) {
    setNote("");
    try {
      await api("POST", `/v2/deployments/${id}/revisions/${rev.id}/redeploy`);
      setErr("");
      setNote(`${what} revision ${short(rev.id)} started.`);
      setLogRev(rev.id);
      changed();
    } catch (e) {
      setErr(errText(e));
    }
  }
  if (!d) return err ? html`<${Alert} text=${err} />` : html`<p>Loading…</p>`;
  const sc = d.source_config || {}, rc = d.source_revision_config || {};
  const shownRev = logRev || d.latest_revision_id;
  const activeAt = revs.findIndex((r) => r.id === d.active_revision_id);
  return html`
    <h2 id="deployment-name">${d.name} <${Status} s=${d.status} /></h2>
    <dl class="facts">
      <dt>Source</dt><dd>${d.source === "hosted_repo" ? html`<code>${sc.repo_url}</code> at <code>${rc.repo_ref}</code>, <code>${rc.graph_config_path}</code>` : html`image <code>${rc.image_uri}</code>`}</dd>
      ${sc.custom_url && html`<dt>Runtime</dt><dd><code>${sc.custom_url}</code></dd>`}
      <dt>Active revision</dt><dd><code id="active-revision">${d.active_revision_id || "none yet"}</code></dd>
      <dt>Latest revision</dt><dd><code>${d.latest_revision_id}</code></dd>
      <dt>Created</dt><dd>${when(d.created_at)}</dd>
    </dl>
    <${Alert} text=${err} id="deployment-error" />
    ${note && html`<p class="note" role="status">${note}</p>`}
    <h3>Revisions</h3>
    <div class="scroll">
    <table id="revisions"><thead><tr><th>Revision</th><th>Status</th><th>Why</th><th>Created</th><th><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${revs.map((r, i) => {
        const active = r.id === d.active_revision_id;
        const what = active ? "Redeploy" : activeAt >= 0 && i > activeAt ? "Roll back to" : "Deploy";
        return html`<tr data-revision=${r.id} class=${active ? "active" : null}>
          <td><code title=${r.id}>${short(r.id)}</code>${active && html` <strong>active</strong>`}${r.id === d.latest_revision_id && html` <small>latest</small>`}</td>
          <td data-label="Status"><${Status} s=${r.status} /></td>
          <td class="reason" data-label="Why">${r.status_message || ""}</td>
          <td data-label="Created">${when(r.created_at)}</td>
          <td class="actions">
            <button type="button" class="secondary" aria-pressed=${r.id === shownRev ? "true" : "false"} onClick=${() => setLogRev(r.id)}>Log<span class="sr-only"> of ${short(r.id)}</span></button>
            ${!FAILED.includes(r.status) && html`<button type="button" class="redeploy" disabled=${MOVING.includes(r.status)} onClick=${() => redeploy(r, what === "Redeploy" ? "Redeploying" : what === "Deploy" ? "Deploying" : "Rolling back to")}>${what}<span class="sr-only"> ${short(r.id)}</span></button>`}
          </td>
        </tr>`;
      })}</tbody>
    </table>
    </div>
    <${Secrets} d=${d} onChange=${changed} />
    <h3>Provisioning log <small>revision <code>${short(shownRev)}</code></small></h3>
    ${d.source === "hosted_repo" && html`<h4>Build</h4><${Log} id="build-log" entries=${logs.build} />`}
    <h4>Deploy</h4>
    <${Log} id="deploy-log" entries=${logs.deploy} />`;
}

function Log({ id, entries }) {
  if (!entries.length) return html`<p class="hint" id=${id}>Nothing logged yet.</p>`;
  return html`<ol class="log" id=${id}>${entries.map((l) => html`<li class=${"level-" + String(l.level).toLowerCase()}><time>${when(l.timestamp)}</time> <span class="level">${l.level}</span> ${l.message}</li>`)}</ol>`;
}

// Secrets by name, values masked as the API answers them ("********"):
// a value is written, never read back. Setting or removing one makes a new
// revision.
function Secrets({ d, onChange }) {
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const fe = useFieldErrors((f) => f === "secrets[0].name" || f === "secrets[0].value");
  async function set(ev) {
    ev.preventDefault();
    const form = ev.target;
    const f = form.elements;
    setBusy(true), fe.clear();
    try {
      await api("PATCH", `/v2/deployments/${d.id}`, { secrets: [{ name: f["secrets[0].name"].value.trim(), value: f["secrets[0].value"].value }] });
      form.reset();
      fe.clear();
      onChange();
    } catch (e) {
      fe.fail(e);
    } finally {
      setBusy(false);
    }
  }
  async function remove(name) {
    try {
      await api("PATCH", `/v2/deployments/${d.id}`, { secrets: [{ name, value: null }] });
      setErr("");
      onChange();
    } catch (e) {
      setErr(errText(e));
    }
  }
  return html`
    <h3>Secrets</h3>
    <${Alert} text=${err} />
    ${(d.secrets || []).length
      ? html`<table id="secrets"><thead><tr><th>Name</th><th>Value</th><th><span class="sr-only">Actions</span></th></tr></thead><tbody>
          ${d.secrets.map((s) => html`<tr><td><code>${s.name}</code></td><td data-label="Value">${s.value}</td><td><button type="button" class="secondary" disabled=${busy} onClick=${() => remove(s.name)}>Remove<span class="sr-only"> ${s.name}</span></button></td></tr>`)}
        </tbody></table>`
      : html`<p class="hint">No secrets.</p>`}
    <form class="stack inline-form" id="secret-form" onSubmit=${set} ref=${fe.formRef} novalidate>
      <${Field} label="Secret name" name="secrets[0].name" errs=${fe.errs} autocomplete="off" hint="A new name adds a secret, a known one replaces its value (a new revision)." />
      <${Field} label="Value" name="secrets[0].value" errs=${fe.errs} type="password" autocomplete="new-password" />
      <button type="submit" disabled=${busy}>Set secret</button>
      <${Alert} text=${fe.rest} />
    </form>`;
}
