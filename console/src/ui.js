// Pieces the pages share: form fields that show the API's message for
// them, status badges, polling.
import { h } from "preact";
import { useState, useEffect, useLayoutEffect, useRef } from "preact/hooks";
import htm from "htm";
import { fieldErrors } from "./session.js";

export const html = htm.bind(h);

const fieldId = (name) => "f-" + name.replace(/[^\w-]/g, "-");

// Field is a labelled input (or select/textarea, by `as`) with the API's
// messages for it underneath, tied to it by aria-describedby so a screen
// reader reads them with the field. name is the API's field name.
export function Field({ label, name, errs, as = "input", hint, children, ...props }) {
  const id = fieldId(name);
  const msgs = errs && errs[name];
  const described = [hint && id + "-hint", msgs && id + "-err"].filter(Boolean).join(" ") || null;
  const control = h(as, { id, name, "aria-invalid": msgs ? "true" : null, "aria-describedby": described, ...props }, children);
  return html`<div class="field" data-field=${name}>
    <label for=${id}>${label}</label>
    ${control}
    ${hint && html`<small id=${id + "-hint"}>${hint}</small>`}
    ${msgs && html`<p class="field-error" id=${id + "-err"}>${msgs.join("; ")}</p>`}
  </div>`;
}

// useFieldErrors keeps a form's API refusal: errs by field, and the rest
// for the form's own alert. After a refusal, focus goes to the first field
// the API named (or to the alert), so a keyboard user lands on the problem;
// a layout effect, so the focus moves in the same update that shows the
// messages.
export function useFieldErrors(known) {
  const [state, setState] = useState({ errs: null, rest: "" });
  const formRef = useRef(null);
  useLayoutEffect(() => {
    const f = formRef.current;
    if (!f || (!state.errs && !state.rest)) return;
    const target = f.querySelector("[aria-invalid=true]") || f.querySelector("[role=alert]");
    if (target) target.focus();
  }, [state]);
  return {
    formRef,
    errs: state.errs,
    rest: state.rest,
    fail(e) {
      const { byField, rest } = fieldErrors(e, known);
      setState({ errs: Object.keys(byField).length ? byField : null, rest });
    },
    clear() {
      setState({ errs: null, rest: "" });
    },
  };
}

// Alert shows a message the page must say now; focusable (tabindex -1)
// so a form can move focus to it.
export function Alert({ text, id }) {
  return text ? html`<p class="error" role="alert" tabindex="-1" id=${id}>${text}</p>` : null;
}

export function Status({ s }) {
  return html`<span class=${"status " + String(s || "").toLowerCase()}>${s}</span>`;
}

// usePoll calls load now, and again every interval while it answers true
// (something is still changing); it stops when the page goes away.
export function usePoll(load, deps, interval = 1000) {
  const gen = useRef(0);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const mine = ++gen.current;
    let timer = null;
    const step = async () => {
      let again = false;
      try {
        again = await load(() => gen.current === mine);
      } catch (e) {
        // load showed the error; one the server may get over (a 5xx, the
        // network) is tried again, one of the request (a 4xx) is not.
        again = !(e && e.status >= 400 && e.status < 500);
      }
      if (again && gen.current === mine) timer = setTimeout(step, interval);
    };
    step();
    return () => {
      gen.current++;
      clearTimeout(timer);
    };
  }, [...deps, tick]);
  // refresh loads again now (after an action changed something).
  return () => setTick((t) => t + 1);
}

export const short = (id) => String(id || "").slice(0, 8);
export const when = (t) => (t ? new Date(typeof t === "number" ? t : Date.parse(t)).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "");
