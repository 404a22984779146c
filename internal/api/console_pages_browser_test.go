package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The console's pages beyond the chat (deployments, OAuth providers, a
// thread's state), at a narrow width and by keyboard, each test with its
// own browser (console_browser_test.go has the browser and its helpers).

// signIn signs in by keyboard alone: the key typed, then Enter.
func (b *browser) signIn(url, key string) {
	b.t.Helper()
	b.run("sign in", visit(url+"/", `!!document.getElementById("key")`),
		typeIn("#key", key+kb.Enter), shown("#composer"))
}

// The steps below find elements with scripts run in the page: a wait ends
// on what the page shows now, without chromedp's own copy of the DOM.

// shown waits until the element is in the page with a box.
func shown(sel string) chromedp.Action[chromedp.Void] {
	return until(fmt.Sprintf(`(() => { const n = document.querySelector(%q); return !!n && n.getClientRects().length > 0; })()`, sel))
}

// press operates the element by keyboard, once it is shown and enabled (a
// button may be disabled while the page waits for an answer): focus, then
// Enter (Space for a radio button or a checkbox), as a keyboard user does.
// Unlike a mouse click at the element's place, it cannot land elsewhere
// when the page moves under it (a list arriving above it, say).
func press(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		ready := fmt.Sprintf(`(() => { const n = document.querySelector(%q); return !!n && n.getClientRects().length > 0 && !n.disabled; })()`, sel)
		if _, err := until(ready)(ctx, t); err != nil {
			return err
		}
		kind, err := chromedp.Evaluate[string](fmt.Sprintf(`(() => { const n = document.querySelector(%q); n.focus();
			if (document.activeElement !== n) throw new Error("cannot focus %s"); return n.type || ""; })()`, sel, strings.ReplaceAll(sel, `"`, `'`)))(ctx, t)
		if err != nil {
			return err
		}
		key := kb.Enter
		if kind == "radio" || kind == "checkbox" {
			key = " "
		}
		_, err = chromedp.KeyEvent(key)(ctx, t)
		return err
	})
}

// typeIn focuses the field and types text with the keyboard.
func typeIn(sel, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(shown(sel), chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).focus()`, sel)), chromedp.KeyEvent(text))
}

// fieldValue answers what a field holds.
func fieldValue(sel string) chromedp.Action[string] {
	return chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).value`, sel))
}

// fieldError answers the expression of the API's message shown under the
// form field named field (the API's name for it).
func fieldError(field string) string {
	return fmt.Sprintf(`(document.querySelector('[data-field=%q] .field-error')?.textContent || "")`, field)
}

// setSelect picks a value of a select as a person would (a change event).
func setSelect(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const s = document.querySelector(%q); s.value = %q; s.dispatchEvent(new Event("change", {bubbles: true})); })()`, sel, value))
}

// expect says that the page will be refused n more times with status (the
// browser logs each refused request as an error): checkClean accepts
// exactly those.
func (b *browser) expect(status, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.expected == nil {
		b.expected = map[string]int{}
	}
	b.expected[fmt.Sprintf("the server responded with a status of %d", status)] += n
}

// retype replaces the text of a field with text, typed.
func retype(sel, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).value = ""`, sel)), typeIn(sel, text))
}

// checkClean: nothing went wrong in the page, the API key is in session
// storage only, no request left the origin, and none of the secrets is in
// the page (its markup or a field's value), a requested URL, the browser's
// storage or its console.
func (b *browser) checkClean(origin, key string, secrets ...string) {
	b.t.Helper()
	b.mu.Lock()
	left := map[string]int{}
	for k, v := range b.expected {
		left[k] = v
	}
	b.mu.Unlock()
	var unexpected []string
next:
	for _, e := range b.errors() {
		for k, n := range left {
			if n > 0 && strings.Contains(e, k) {
				left[k]--
				continue next
			}
		}
		unexpected = append(unexpected, e)
	}
	if len(unexpected) > 0 {
		b.t.Errorf("browser errors:\n%s", strings.Join(unexpected, "\n"))
	}
	for k, n := range left {
		if n != 0 {
			b.t.Errorf("%d fewer errors %q than the refusals the test provoked", n, k)
		}
	}
	type seen struct{ Session, Local, Cookie, Page string }
	got := value(b, "storage", chromedp.Evaluate[seen](`({Session: JSON.stringify(sessionStorage), Local: JSON.stringify(localStorage), Cookie: document.cookie,
		Page: document.documentElement.outerHTML + [...document.querySelectorAll("input, textarea, select")].map((i) => i.value).join("\n")})`))
	if !strings.Contains(got.Session, key) {
		b.t.Error("the key is not in session storage")
	}
	if strings.Contains(got.Local, key) || strings.Contains(got.Cookie, key) || strings.Contains(got.Page, key) {
		b.t.Errorf("the key is kept or shown elsewhere: local %s, cookie %q", got.Local, got.Cookie)
	}
	for _, s := range secrets {
		for where, text := range map[string]string{"session storage": got.Session, "local storage": got.Local, "a cookie": got.Cookie, "the page": got.Page,
			"the browser's log": strings.Join(b.errors(), "\n")} {
			if strings.Contains(text, s) {
				b.t.Errorf("a secret is in %s", where)
			}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, u := range b.urls {
		if strings.Contains(u, key) {
			b.t.Errorf("the key is in a URL: %s", u)
		}
		for _, s := range secrets {
			if strings.Contains(u, s) {
				b.t.Errorf("a secret is in a URL: %s", u)
			}
		}
		if !strings.HasPrefix(u, origin+"/") && !strings.HasPrefix(u, "data:") {
			b.t.Errorf("a request left the origin: %s", u)
		}
	}
}

// TestConsoleDeploymentsInABrowser: a deployment made with the form from
// a local git repository — first refused (as an image, then as a
// repository), the API's 422 messages next to the fields they name —
// reaches READY on the page with its provisioning
// log; a secret set on the page makes a new revision, shown masked; a
// rollback and a redeploy; a failed revision shows why.
func TestConsoleDeploymentsInABrowser(t *testing.T) {
	e := newEnv(t)
	rt := newTestRuntime(t)
	repo := agentRepo(t, newFakeModel(t).url)
	modelKey, flag := secret("sk-console-deploy-Jr8v"), secret("flag-value-Qm4z")

	b := newBrowser(t)
	b.signIn(e.url, e.keyA)
	b.run("deployments", press(`nav a[href="#/deployments"]`), shown("#deployments"),
		press(`a[href="#/deployments/new"]`), shown("#deployment-form"))

	// From an image that is not an image reference: the API's message
	// under the image's field.
	b.run("bad image", press(`input[name=source][value=external_docker]`), shown("#f-source_revision_config-image_uri"),
		typeIn("#f-source_revision_config-image_uri", "Not An Image!"), press(`#deployment-form button[type=submit]`),
		until(fieldError("source_revision_config.image_uri")+`.includes("container image reference")`))
	b.screenshot("deployment-form-image-422")

	// From a repository: a bad name and a repository URL that is neither
	// https nor file; the API says what is wrong with each, next to each.
	b.run("bad form", press(`input[name=source][value=hosted_repo]`), shown("#f-source_config-repo_url"),
		retype("#f-name", "Console_Agent"),
		typeIn("#f-source_config-repo_url", "ftp://example.com/agent.git"),
		typeIn("#f-source_revision_config-graph_config_path", "agent/stepgraph.yaml"),
		press(`#deployment-form button[type=submit]`),
		until(fieldError("name")+`.includes("lowercase letters")`),
		until(fieldError("source_config.repo_url")+`.includes("https:// or file://")`))
	if got := value(b, "focus", chromedp.Evaluate[string](`document.activeElement.name`)); got != "name" {
		t.Errorf("after the refusal the focus is on %q, not on the first field named", got)
	}
	if got := value(b, "described", chromedp.Evaluate[string](`document.getElementById("f-name").getAttribute("aria-describedby")`)); !strings.Contains(got, "f-name-err") {
		t.Errorf("the name's message is not tied to the field: aria-describedby %q", got)
	}
	if other := value(b, "other field", chromedp.Evaluate[string](fieldError("source_revision_config.graph_config_path"))); other != "" {
		t.Errorf("a message under a field the API did not name: %q", other)
	}
	b.expect(422, 2)
	b.screenshot("deployment-form-422")

	// Fixed: created, provisioned, READY with its revision DEPLOYED.
	b.run("good form", retype("#f-name", "console-agent"), retype("#f-source_config-repo_url", repo),
		typeIn("#f-source_config-custom_url", rt.url),
		press("#add-secret"), shown("#f-secrets-0--name"),
		typeIn("#f-secrets-0--name", "OPENAI_API_KEY"), typeIn("#f-secrets-0--value", modelKey),
		press(`#deployment-form button[type=submit]`),
		textContains("#deployment-name", "READY"), textContains("#revisions", "DEPLOYED"),
		textContains("#build-log", "BUILDING"), textContains("#deploy-log", "the revision serves its graphs"),
		textContains("#deployments", "console-agent"))
	id := strings.TrimPrefix(value(b, "hash", chromedp.Evaluate[string](`location.hash`)), "#/deployments/")
	d := e.must(200, "GET", "/v2/deployments/"+id, e.keyA, nil)
	first := d["latest_revision_id"].(string)
	if d["status"] != "READY" || d["active_revision_id"] != first || d["name"] != "console-agent" {
		t.Fatalf("the deployment made on the page: %v", d)
	}
	if sc := d["source_config"].(map[string]any); sc["repo_url"] != repo || sc["custom_url"] != rt.url {
		t.Errorf("source_config: %v", sc)
	}
	b.run("masked", textContains("#secrets", "OPENAI_API_KEY"), textContains("#secrets", "********"))
	b.screenshot("deployment")

	// A secret set on the page: a new revision, which becomes active.
	b.run("set secret", typeIn("#f-secrets-0--name", "FEATURE_FLAG"), typeIn("#f-secrets-0--value", flag),
		press(`#secret-form button[type=submit]`), textContains("#secrets", "FEATURE_FLAG"),
		until(`document.querySelectorAll("#revisions tbody tr").length === 2`),
		until(`document.querySelector("#revisions tbody tr:first-child").textContent.includes("DEPLOYED")`),
		until(`document.querySelector("#revisions tbody tr:first-child").textContent.includes("active")`))
	if v := value(b, "cleared", fieldValue("#f-secrets-0--value")); v != "" {
		t.Errorf("the secret's field keeps the value after it was set")
	}
	d = e.must(200, "GET", "/v2/deployments/"+id, e.keyA, nil)
	second := d["latest_revision_id"].(string)
	if second == first || d["active_revision_id"] != second {
		t.Fatalf("after setting a secret: %v", d)
	}

	// Roll back to the first revision, then redeploy it: each time the
	// page shows it active and its log one more deployment.
	served := func(n int) string {
		return fmt.Sprintf(`document.querySelector("#deploy-log").textContent.split("the revision serves its graphs").length === %d`, n+1)
	}
	b.run("rollback", press(fmt.Sprintf(`tr[data-revision=%q] button.redeploy`, first)),
		textContains("#active-revision", first), textContains(fmt.Sprintf(`tr[data-revision=%q]`, first), "DEPLOYED"), until(served(2)))
	if d = e.must(200, "GET", "/v2/deployments/"+id, e.keyA, nil); d["active_revision_id"] != first {
		t.Errorf("after the rollback the active revision is %v", d["active_revision_id"])
	}
	b.run("redeploy", until(fmt.Sprintf(`document.querySelector('tr[data-revision=%q] button.redeploy').textContent.startsWith("Redeploy")`, first)),
		press(fmt.Sprintf(`tr[data-revision=%q] button.redeploy`, first)),
		until(served(3)), textContains(fmt.Sprintf(`tr[data-revision=%q]`, first), "DEPLOYED"), textContains("#active-revision", first))
	b.screenshot("deployment-rollback")

	// A secret removed: a third revision, without it.
	b.run("remove secret", press(`#secrets tr:nth-child(2) button`),
		until(`!document.querySelector("#secrets").textContent.includes("FEATURE_FLAG")`),
		until(`document.querySelectorAll("#revisions tbody tr").length === 3`),
		until(`document.querySelector("#revisions tbody tr:first-child").textContent.includes("DEPLOYED")`))
	d = e.must(200, "GET", "/v2/deployments/"+id, e.keyA, nil)
	if s := d["secrets"].([]any); len(s) != 1 || s[0].(map[string]any)["name"] != "OPENAI_API_KEY" {
		t.Errorf("secrets after removing one: %v", s)
	}

	// A revision that fails shows why, on the page and in its log; it has
	// no redeploy button.
	bad := agentDeployment("broken-agent", repo, rt.url, modelKey)
	bad["source_revision_config"].(map[string]any)["graph_config_path"] = "agent/missing.yaml"
	broken := e.must(201, "POST", "/v2/deployments", e.keyA, bad)
	b.run("failed", open(e.url+"/#/deployments/"+broken["id"].(string)), textContains("#revisions", "FAILED"),
		until(`document.querySelector("#revisions td.reason").textContent.includes("missing.yaml")`),
		textContains("#build-log", "missing.yaml"), until(fmt.Sprintf(`!document.querySelector(%q)`, "#revisions button.redeploy")),
		textContains("#deployments", "broken-agent"))
	b.screenshot("deployments")

	b.checkClean(e.url, e.keyA, modelKey, flag)
}

// TestConsoleProvidersInABrowser: a provider registered with the form
// (first refused, the messages by the fields), its client secret rotated;
// the secrets go from their fields into the requests that set them and
// nowhere else.
func TestConsoleProvidersInABrowser(t *testing.T) {
	e := newEnv(t)
	first, rotated := secret("cs-console-first-Lp3w"), secret("cs-console-rotated-Vn6t")

	b := newBrowser(t)
	b.signIn(e.url, e.keyA)
	b.run("providers", press(`nav a[href="#/providers"]`), shown("#providers"),
		press(`a[href="#/providers/new"]`), shown("#provider-form"))
	fill := chromedp.Steps(typeIn("#f-provider_id", "github"), typeIn("#f-name", "GitHub"),
		typeIn("#f-client_id", "Iv1.console"),
		typeIn("#f-token_url", "https://github.com/login/oauth/access_token"))
	// Without a secret and with an authorization URL that is not https.
	b.run("bad form", fill, typeIn("#f-auth_url", "http://github.example.com/authorize"),
		press(`#provider-form button[type=submit]`),
		until(fieldError("auth_url")+`.includes("https")`), until(fieldError("client_secret")+`.length > 0`))
	if got := value(b, "focus", chromedp.Evaluate[string](`document.activeElement.name`)); got != "client_secret" && got != "auth_url" {
		t.Errorf("after the refusal the focus is on %q", got)
	}
	b.expect(422, 1)
	b.screenshot("provider-form-422")
	b.run("good form", retype("#f-auth_url", "https://github.com/login/oauth/authorize"),
		typeIn("#f-client_secret", first), press(`#provider-form button[type=submit]`),
		textContains("#provider-name", "GitHub"), textContains("#providers", "github"), textContains(".facts", "write-only"))
	before := e.must(200, "GET", "/v2/auth/providers/github", e.keyA, nil)

	// Rotation: an empty secret is refused by the API, next to the field;
	// a new one replaces the stored one.
	b.run("empty rotation", press("#rotate"), until(fieldError("client_secret")+`.includes("must not be empty")`))
	b.expect(422, 1)
	b.run("rotate", typeIn("#f-client_secret", rotated), press("#rotate"),
		textContains("#rotated", "replaced"), until(fieldError("client_secret")+` === ""`))
	if v := value(b, "cleared", fieldValue("#f-client_secret")); v != "" {
		t.Error("the rotated secret stays in its field")
	}
	after := e.must(200, "GET", "/v2/auth/providers/github", e.keyA, nil)
	if after["updated_at"] == before["updated_at"] {
		t.Errorf("the rotation changed nothing: %v", after)
	}
	b.screenshot("provider")

	// Each secret was sent once, in the body of the request that set it.
	b.mu.Lock()
	var carried []string
	for _, r := range b.requests {
		for _, s := range []string{first, rotated} {
			if strings.Contains(r.body, s) {
				carried = append(carried, r.method+" "+strings.TrimPrefix(r.url, e.url)+" "+s)
			}
		}
	}
	b.mu.Unlock()
	want := []string{"POST /v2/auth/providers " + first, "PATCH /v2/auth/providers/github " + rotated}
	if strings.Join(carried, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests carrying a secret:\n%s\nwant:\n%s", strings.Join(carried, "\n"), strings.Join(want, "\n"))
	}
	b.checkClean(e.url, e.keyA, first, rotated)
}

// TestConsoleThreadStateInABrowser: a thread's state edited at a
// checkpoint (update_state with as_node) makes a new checkpoint the page
// shows; a bad edit shows the API's message by the field; a failed run
// shows its error.
func TestConsoleThreadStateInABrowser(t *testing.T) {
	e := newEnv(t)
	thread := e.must(200, "POST", "/threads", e.keyA, map[string]any{})["thread_id"].(string)
	e.must(200, "POST", "/threads/"+thread+"/runs/wait", e.keyA, map[string]any{"assistant_id": e.assistantOf(e.keyA, "approval"), "input": map[string]any{"request": "the release"}})
	failed := e.must(200, "POST", "/threads", e.keyA, map[string]any{})["thread_id"].(string)
	e.do("POST", "/threads/"+failed+"/runs/wait", e.keyA, map[string]any{"assistant_id": e.assistantOf(e.keyA, "fail"), "input": map[string]any{}})

	b := newBrowser(t)
	b.signIn(e.url, e.keyA)
	latest := `#history li:first-child`
	b.run("thread", open(e.url+"/#/threads/"+thread), shown(latest), textContains(".detail h2", "interrupted"),
		press(latest+" button.edit-state"), shown(latest+" form select"))
	// The form starts from the state at the checkpoint.
	if v := value(b, "values", fieldValue(latest+" textarea")); !strings.Contains(v, `"the release"`) {
		t.Errorf("the form does not start from the checkpoint's state: %q", v)
	}
	// Values that are not an object: the API's message by the field.
	b.run("bad edit", retype(latest+" textarea", `[1, 2]`),
		press(latest+" form button[type=submit]"), until(fieldError("values")+`.length > 0`))
	b.expect(422, 1)
	// A new request, written as the ask node: the next step is the end.
	b.run("edit", retype(latest+" textarea", `{"request": "the rollout", "answer": "later"}`),
		setSelect(latest+" select", "ask"), press(latest+" form button[type=submit]"),
		shown("#state-saved"), shown("#history li.new"))
	made := value(b, "new checkpoint", chromedp.Evaluate[string](`document.querySelector("#history li.new").dataset.checkpoint`))
	state := e.must(200, "GET", "/threads/"+thread+"/state", e.keyA, nil)
	if v := state["values"].(map[string]any); v["request"] != "the rollout" || v["answer"] != "later" || state["checkpoint"].(map[string]any)["checkpoint_id"] != made {
		t.Errorf("state after the edit (page says checkpoint %s): %v", made, state)
	}
	if md := state["metadata"].(map[string]any); md["source"] != "update" {
		t.Errorf("the new checkpoint's metadata: %v", md)
	}
	if first := value(b, "first", chromedp.Evaluate[string](`document.querySelector("#history li:first-child").dataset.checkpoint`)); first != made {
		t.Errorf("the newest checkpoint listed is %s, not the edit's %s", first, made)
	}
	b.screenshot("thread-state-edited")

	// A failed run: its error as the API tells it.
	b.run("failed run", open(e.url+"/#/threads/"+failed), textContains("#runs", "error"), textContains("#runs .run-error", "boom"))
	b.screenshot("thread-failed-run")
	b.checkClean(e.url, e.keyA)
}

// TestConsoleAtNarrowWidthByKeyboard: every page at 375 px wide has no
// horizontal scrolling; the header is reached in order by Tab with a
// visible focus; on each page every control can be reached with Tab; a
// form is filled and sent by keyboard alone.
func TestConsoleAtNarrowWidthByKeyboard(t *testing.T) {
	e := newEnv(t)
	rt := newTestRuntime(t)
	d := e.must(201, "POST", "/v2/deployments", e.keyA, agentDeployment("narrow-agent", agentRepo(t, newFakeModel(t).url), rt.url, secret("sk-narrow-Tz5q")))
	e.waitFor(e.keyA, "/v2/deployments/"+d["id"].(string), status("READY"))
	e.must(200, "POST", "/v2/auth/providers", e.keyA, validProvider("narrow"))
	approval := e.assistantOf(e.keyA, "approval")
	thread := e.must(200, "POST", "/threads", e.keyA, map[string]any{})["thread_id"].(string)
	e.must(200, "POST", "/threads/"+thread+"/runs/wait", e.keyA, map[string]any{"assistant_id": approval, "input": map[string]any{"request": "x"}})

	b := newBrowser(t)
	b.run("narrow", chromedp.EmulateViewport(375, 800, chromedp.EmulateMobile))
	b.signIn(e.url, e.keyA)

	// The header, by Tab from the top of a fresh page, in reading order,
	// each with a focus outline.
	b.run("top", open(e.url+"/#/chat"), shown("#composer"))
	type focused struct{ Text, Outline string }
	var order []string
	for range 7 {
		b.run("tab", chromedp.KeyEvent(kb.Tab))
		f := value(b, "focused", chromedp.Evaluate[focused](
			`(() => { const a = document.activeElement, s = getComputedStyle(a); return {Text: a.textContent.trim(), Outline: s.outlineStyle + " " + s.outlineWidth}; })()`))
		order = append(order, f.Text)
		if f.Outline == "" || strings.HasPrefix(f.Outline, "none") || strings.HasSuffix(f.Outline, " 0px") {
			t.Errorf("%q has no visible focus (outline %q)", f.Text, f.Outline)
		}
	}
	if got, want := strings.Join(order, ", "), "Skip to content, Chat, Assistants, Threads, Deployments, OAuth providers, Sign out"; got != want {
		t.Errorf("Tab order of the header: %s, want %s", got, want)
	}

	pages := []struct{ name, hash, ready string }{
		{"chat", "#/chat", "#composer"},
		{"assistants", "#/assistants/" + approval, "svg.graph .node"},
		{"threads", "#/threads", "#thread-search"},
		{"thread", "#/threads/" + thread, "#history li"},
		{"deployments", "#/deployments", "#deployments li"},
		{"deployment-new", "#/deployments/new", "#deployment-form"},
		{"deployment", "#/deployments/" + d["id"].(string), "#revisions tbody tr"},
		{"providers", "#/providers", "#providers li"},
		{"provider-new", "#/providers/new", "#provider-form"},
		{"provider", "#/providers/narrow", "#rotate-form"},
	}
	for _, p := range pages {
		b.run(p.name, open(e.url+"/"+p.hash), shown(p.ready))
		// Against 375 itself: a mobile browser widens its window to the page.
		if w := value(b, "width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 375 {
			wide := value(b, "wide", chromedp.Evaluate[string](`[...document.querySelectorAll("body *")].filter((n) => n.getBoundingClientRect().right > 376).slice(0, 5).map((n) => n.tagName + "." + n.className + "#" + n.id).join(", ")`))
			t.Errorf("%s at 375 px is %d px wide: %s", p.name, w, wide)
		}
		b.screenshot("narrow-" + p.name)
		b.tabReachesEverything(p.name)
	}

	// A form by keyboard alone: Tab to the provider's secret field, type a
	// new one, Enter.
	typed := secret("cs-narrow-keyboard-Hh2x")
	b.run("keyboard form", open(e.url+"/#/providers/narrow"), shown("#rotate-form"))
	for i := 0; value(b, "focus", chromedp.Evaluate[string](`document.activeElement.id`)) != "f-client_secret"; i++ {
		if i > 40 {
			t.Fatal("Tab never reaches the secret's field")
		}
		b.run("tab", chromedp.KeyEvent(kb.Tab))
	}
	b.run("type", chromedp.KeyEvent(typed), chromedp.KeyEvent(kb.Enter), textContains("#rotated", "replaced"))
	b.checkClean(e.url, e.keyA, typed)
}

// tabReachesEverything presses Tab through the page and checks that every
// visible control (link, button, field, summary) got the focus, and that
// nothing that looks clickable (a pointer cursor) is out of reach.
func (b *browser) tabReachesEverything(page string) {
	b.t.Helper()
	b.run("mark", chromedp.Evaluate[chromedp.Void](`(() => {
		window.__reached = new Set();
		window.__controls = () => [...document.querySelectorAll("a[href], button, input, select, textarea, summary")]
			.filter((n) => !n.disabled && n.getClientRects().length > 0 && getComputedStyle(n).visibility !== "hidden" && !n.closest("details:not([open]) > :not(summary)"));
		window.__unseen = [];
		document.addEventListener("focusin", (e) => {
			window.__reached.add(e.target);
			const s = getComputedStyle(e.target);
			if (s.outlineStyle === "none" || s.outlineWidth === "0px") window.__unseen.push(e.target.tagName.toLowerCase() + " " + (e.target.textContent || e.target.name || "").trim().slice(0, 30));
		}, true);
		document.activeElement && document.activeElement.blur();
	})()`))
	n := value(b, "count", chromedp.Evaluate[int](`window.__controls().length`))
	for range n + 2 {
		b.run("tab", chromedp.KeyEvent(kb.Tab))
	}
	type result struct {
		Missed  []string
		Pointer []string
		Unseen  []string
	}
	r := value(b, "reached", chromedp.Evaluate[result](`(() => {
		const name = (n) => n.tagName.toLowerCase() + (n.id ? "#" + n.id : "") + " " + (n.textContent || n.name || "").trim().slice(0, 30);
		const radios = new Set();
		const missed = window.__controls().filter((n) => {
			if (window.__reached.has(n)) return false;
			// One radio of a group is in the Tab order; arrows move within it.
			if (n.type === "radio") { if (radios.has(n.name)) return false; radios.add(n.name); return ![...document.getElementsByName(n.name)].some((r) => window.__reached.has(r)); }
			return true;
		}).map(name);
		const pointer = [...document.querySelectorAll("body *")].filter((n) => getComputedStyle(n).cursor === "pointer" &&
			!n.closest("a[href], button, input, select, textarea, summary, label")).map(name);
		return {Missed: missed, Pointer: pointer, Unseen: window.__unseen};
	})()`))
	if len(r.Missed) > 0 {
		b.t.Errorf("%s: Tab never reaches %v", page, r.Missed)
	}
	if len(r.Unseen) > 0 {
		b.t.Errorf("%s: no visible focus on %v", page, r.Unseen)
	}
	if len(r.Pointer) > 0 {
		b.t.Errorf("%s: clickable but not a control: %v", page, r.Pointer)
	}
}
