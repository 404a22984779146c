// OAuth providers: list, register, rotate the client secret. The secret is
// write-only here as in the API: typed into a password field, read from it
// only when the form is sent, the field emptied after; it is never kept in
// the page's state, never shown, and the API never answers it.
import { useState } from "preact/hooks";
import { client, errText } from "./session.js";
import { html, Field, useFieldErrors, Alert, usePoll, when } from "./ui.js";

const api = (method, path, json) => client.control.call(method, path, json);

export function Providers({ id }) {
  const [list, setList] = useState(null);
  const [err, setErr] = useState("");
  const refresh = usePoll(async (alive) => {
    try {
      const l = await api("GET", "/v2/auth/providers");
      if (alive()) setList(l), setErr("");
    } catch (e) {
      if (alive()) setErr(errText(e));
    }
    return false;
  }, [id]);
  return html`
    <section class="split">
      <div class="list">
        <h2>OAuth providers</h2>
        <${Alert} text=${err} />
        <ul id="providers">
          ${(list || []).map((p) => html`<li><a href="#/providers/${encodeURIComponent(p.provider_id)}" aria-current=${p.provider_id === id ? "true" : null}>${p.name}</a> <small>${p.provider_id}</small></li>`)}
        </ul>
        ${list && list.length === 0 && html`<p class="hint">No providers yet.</p>`}
        <a href="#/providers/new" class="button">New provider</a>
      </div>
      <div class="detail">
        ${id === "new" && html`<${ProviderForm} onCreated=${(p) => { refresh(); location.hash = "#/providers/" + encodeURIComponent(p.provider_id); }} />`}
        ${id && id !== "new" && html`<${Provider} key=${id} id=${id} onChange=${refresh} />`}
      </div>
    </section>`;
}

const FIELDS = ["provider_id", "name", "client_id", "client_secret", "auth_url", "token_url", "revocation_url",
  "uses_pkce", "code_challenge_method", "token_endpoint_auth_method", "provider_type"];

function ProviderForm({ onCreated }) {
  const [busy, setBusy] = useState(false);
  const [pkce, setPkce] = useState(false);
  const fe = useFieldErrors((f) => FIELDS.includes(f));
  async function submit(ev) {
    ev.preventDefault();
    const form = ev.target;
    const f = form.elements;
    const opt = (name) => (f[name].value.trim() ? f[name].value.trim() : undefined);
    const body = {
      provider_id: f.provider_id.value.trim(),
      name: f.name.value.trim(),
      client_id: f.client_id.value.trim(),
      auth_url: f.auth_url.value.trim(),
      token_url: f.token_url.value.trim(),
      revocation_url: opt("revocation_url"),
      uses_pkce: f.uses_pkce.checked,
      code_challenge_method: pkce ? f.code_challenge_method.value : undefined,
      token_endpoint_auth_method: f.token_endpoint_auth_method.value,
      provider_type: f.provider_type.value || undefined,
    };
    // The secret goes from the field into the request, nowhere else.
    if (f.client_secret.value !== "") body.client_secret = f.client_secret.value;
    setBusy(true), fe.clear();
    try {
      const p = await api("POST", "/v2/auth/providers", body);
      form.reset();
      fe.clear();
      onCreated(p);
    } catch (e) {
      f.client_secret.value = "";
      fe.fail(e);
    } finally {
      setBusy(false);
    }
  }
  const errs = fe.errs;
  return html`
    <form class="stack" id="provider-form" onSubmit=${submit} ref=${fe.formRef} novalidate>
      <h3>New OAuth provider</h3>
      <${Field} label="Provider id" name="provider_id" errs=${errs} hint="Letters, digits, '.', '_' or '-'; agents name the provider by it." autocomplete="off" />
      <${Field} label="Name" name="name" errs=${errs} autocomplete="off" />
      <${Field} label="Client id" name="client_id" errs=${errs} autocomplete="off" />
      <${Field} label="Client secret" name="client_secret" errs=${errs} type="password" autocomplete="new-password" hint="Write-only: stored in the secrets store, never shown again. Leave empty for a public client (authentication method none)." />
      <${Field} label="Authorization URL" name="auth_url" errs=${errs} type="url" />
      <${Field} label="Token URL" name="token_url" errs=${errs} type="url" />
      <${Field} label="Revocation URL (optional)" name="revocation_url" errs=${errs} type="url" />
      <${Field} label="Token endpoint authentication" name="token_endpoint_auth_method" errs=${errs} as="select">
        <option value="client_secret_post">client_secret_post</option>
        <option value="client_secret_basic">client_secret_basic</option>
        <option value="none">none (public client)</option>
      <//>
      <div class="field" data-field="uses_pkce">
        <label class="inline"><input type="checkbox" name="uses_pkce" id="f-uses_pkce" checked=${pkce} onChange=${(e) => setPkce(e.target.checked)} /> Uses PKCE</label>
      </div>
      ${pkce && html`<${Field} label="Code challenge method" name="code_challenge_method" errs=${errs} as="select"><option>S256</option><option>plain</option><//>`}
      <${Field} label="Provider type (optional)" name="provider_type" errs=${errs} as="select">
        <option value="">generic</option><option>microsoft</option><option>salesforce</option><option>slack</option>
      <//>
      <button type="submit" disabled=${busy}>Register provider</button>
      <${Alert} text=${fe.rest} />
    </form>`;
}

function Provider({ id, onChange }) {
  const [p, setP] = useState(null);
  const [err, setErr] = useState("");
  const [note, setNote] = useState("");
  const [busy, setBusy] = useState(false);
  const fe = useFieldErrors((f) => f === "client_secret");
  usePoll(async (alive) => {
    setP(null), setNote(""), fe.clear();
    try {
      const x = await api("GET", `/v2/auth/providers/${encodeURIComponent(id)}`);
      if (alive()) setP(x), setErr("");
    } catch (e) {
      if (alive()) setErr(errText(e));
    }
    return false;
  }, [id]);
  async function rotate(ev) {
    ev.preventDefault();
    const form = ev.target;
    const secret = form.elements.client_secret.value;
    setBusy(true), setNote(""), fe.clear();
    try {
      // An empty secret is sent as it is: the API says why it is refused.
      const x = await api("PATCH", `/v2/auth/providers/${encodeURIComponent(id)}`, { client_secret: secret });
      setP(x);
      fe.clear();
      setNote(`The client secret was replaced (${when(x.updated_at)}). It is not shown again.`);
      onChange();
    } catch (e) {
      fe.fail(e);
    } finally {
      form.reset(); // the typed secret leaves the page either way
      setBusy(false);
    }
  }
  if (!p) return err ? html`<${Alert} text=${err} />` : html`<p>Loading…</p>`;
  const isPublic = p.token_endpoint_auth_method === "none";
  return html`
    <h2 id="provider-name">${p.name} <small>${p.provider_id}</small></h2>
    <dl class="facts">
      <dt>Client id</dt><dd><code>${p.client_id}</code></dd>
      <dt>Client secret</dt><dd>${isPublic ? "none (public client)" : "stored, write-only"}</dd>
      <dt>Authorization URL</dt><dd><code>${p.auth_url}</code></dd>
      <dt>Token URL</dt><dd><code>${p.token_url}</code></dd>
      ${p.revocation_url && html`<dt>Revocation URL</dt><dd><code>${p.revocation_url}</code></dd>`}
      <dt>Authentication</dt><dd>${p.token_endpoint_auth_method}${p.uses_pkce ? `, PKCE ${p.code_challenge_method}` : ""}</dd>
      <dt>Redirect URI</dt><dd><code>${location.origin}/v2/auth/callback/${p.provider_id}</code></dd>
      <dt>Updated</dt><dd id="provider-updated">${when(p.updated_at)}</dd>
    </dl>
    ${!isPublic && html`
      <h3>Rotate the client secret</h3>
      <form class="stack" id="rotate-form" onSubmit=${rotate} ref=${fe.formRef} novalidate>
        <${Field} label="New client secret" name="client_secret" errs=${fe.errs} type="password" autocomplete="new-password" hint="Replaces the stored secret; the old one stops being used at once." />
        <button type="submit" id="rotate" disabled=${busy}>Rotate secret</button>
        <${Alert} text=${fe.rest} />
      </form>`}
    ${note && html`<p class="note" role="status" id="rotated">${note}</p>`}`;
}
