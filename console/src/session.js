// The signed-in session and what every page shares to talk to the API: the
// SDK's Client, a control-plane client built on the SDK's own base client,
// and the API's error messages made readable (per field for a 422).
import { Client } from "@langchain/langgraph-sdk";

export const KEY = "stepgraph.apiKey";

export function apiKey() {
  return sessionStorage.getItem(KEY);
}

// The SDK has no client for the deployment and OAuth provider routes (the
// control plane upstream is LangSmith's). ControlPlane extends the SDK's
// base client, the class its assistants/threads/runs clients extend: the
// same X-Api-Key header, retries, error type (HTTPError with the status
// and the body) and fetch as every other call of the console.
function controlPlane(config, sdk) {
  const BaseClient = Object.getPrototypeOf(sdk.assistants.constructor);
  class ControlPlane extends BaseClient {
    // call sends one request; json is the body, params the query.
    call(method, path, json, params) {
      return this.fetch(path, { method, json, params, signal: undefined });
    }
  }
  return new ControlPlane(config);
}

export function makeClient(key) {
  // fetch is bound to window: the SDK calls it detached from its object.
  const config = { apiUrl: location.origin, apiKey: key, callerOptions: { fetch: (...a) => window.fetch(...a) } };
  const c = new Client(config);
  c.control = controlPlane(config, c);
  return c;
}

// client is the signed-in session's (null when signed out); importers see
// it change (an ES module's live binding).
export let client = apiKey() ? makeClient(apiKey()) : null;
export function setClient(c) {
  client = c;
}

// detailOf answers the API's detail of a failed call, or null.
function detailOf(e) {
  const m = String((e && (e.text ?? e.message)) || e || "");
  const i = m.indexOf("{");
  if (i < 0) return null;
  try {
    const d = JSON.parse(m.slice(i)).detail;
    return d === undefined ? null : d;
  } catch (_) {
    return null; // not JSON: no detail
  }
}

// errText turns an SDK/HTTP error into the API's own words.
export function errText(e) {
  if (!e) return "";
  const d = detailOf(e);
  if (d !== null) return typeof d === "string" ? d : JSON.stringify(d);
  return String(e.message || e);
}

// A field of the API's messages: "name", "source_config.repo_url",
// "secrets[0].value".
const FIELD = /^([A-Za-z_][\w.]*(?:\[\d+\][\w.]*)*): ([\s\S]*)$/;

// fieldErrors splits the API's refusal (a 422 lists every broken rule as
// "field: rule; field: rule", a 409 may name its field the same way) into
// the rules of the fields the form shows and the rest, so each message can
// stand next to its field. known(field) says whether the form shows it.
export function fieldErrors(e, known) {
  const d = detailOf(e);
  const text = d === null ? errText(e) : typeof d === "string" ? d : JSON.stringify(d);
  const byField = {};
  const rest = [];
  for (const part of text.split(/; (?=[A-Za-z_][\w.]*(?:\[\d+\][\w.]*)*: )/)) {
    const m = FIELD.exec(part);
    if (m && known(m[1])) (byField[m[1]] = byField[m[1]] || []).push(m[2]);
    else rest.push(part);
  }
  return { byField, rest: rest.join("; ") };
}

export const pretty = (v) => JSON.stringify(v, null, 2);

export function parseJSON(text, field) {
  if (!text || !text.trim()) return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`${field}: not valid JSON (${e.message})`);
  }
}
