package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/stepgraph/stepgraph/internal/testmodel"
)

// browser is a headless Debian chromium driven over CDP, recording what a
// person would not want to see: console errors, exceptions, CSP
// violations, and every URL the page asks for.
type browser struct {
	t    *testing.T
	ctx  context.Context
	root context.Context // the browser's, for a screenshot after ctx ends
	mu   sync.Mutex
	errs []string
	urls []string
	// requests: every request the page sent, with its body.
	requests []sentRequest
	// expected counts the errors a test provokes on purpose (a refused
	// request, which the browser logs), by a piece of their text.
	expected map[string]int
	shot     string // screenshot folder
}

type sentRequest struct{ method, url, body string }

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: run scripts/install-test-deps.sh")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1200, 900),
		chromedp.Flag("disable-gpu", true), chromedp.UserDataDir(t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{t: t, shot: filepath.Join("..", "..", "build", "console-screenshots")}
	ctx, cancelB := chromedp.NewContext(actx, chromedp.WithListener(b.record))
	t.Cleanup(func() { cancelB(); cancelA() })
	// The first Do starts the browser and opens the tab (the listener sees
	// their events from then on; chromedp enables the log and network domains).
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	// A safety net only (a wait ends on what the page shows): the steps
	// run in a child context, the browser living as long as ctx.
	b.root = ctx
	var cancelC context.CancelFunc
	b.ctx, cancelC = context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(cancelC)
	if err := os.MkdirAll(b.shot, 0o755); err != nil {
		t.Fatal(err)
	}
	return b
}

// record keeps what the page says is wrong, and every URL it asks for.
func (b *browser) record(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			b.errs = append(b.errs, "console."+string(ev.Type)+": "+strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil {
			text += " " + d.Exception.Description
		}
		b.errs = append(b.errs, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, text))
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError {
			b.errs = append(b.errs, "log: "+ev.Entry.Text+" "+ev.Entry.URL)
		}
	case *network.EventRequestWillBeSent:
		b.urls = append(b.urls, ev.Request.URL+ev.Request.URLFragment)
		var body strings.Builder
		for _, p := range ev.Request.PostDataEntries {
			body.Write(p.Bytes)
		}
		b.requests = append(b.requests, sentRequest{ev.Request.Method, ev.Request.URL, body.String()})
	}
}

// run does the steps; a step that waits ends on what the page shows, the
// browser's context (the test's) being the only deadline.
func (b *browser) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		if png, err := chromedp.Run(b.root, chromedp.FullScreenshot(100)); err == nil {
			_ = os.WriteFile(filepath.Join(b.shot, "failed.png"), png, 0o644)
		}
		// What the page showed, for a failure seen only in CI's log.
		text, _ := chromedp.Run(b.root, chromedp.Evaluate[string](`location.hash + "\n" + document.body.innerText`))
		b.t.Fatalf("%s: %v (browser errors so far: %v)\npage:\n%s", what, err, b.errors(), text)
	}
}

// value runs one step that answers a value.
func value[T any](b *browser, what string, step chromedp.Action[T]) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, step)
	if err != nil {
		b.t.Fatalf("%s: %v (browser errors so far: %v)", what, err, b.errors())
	}
	return v
}

func (b *browser) errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slicesClone(b.errs)
}

// takeErrors answers the errors so far and forgets them.
func (b *browser) takeErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	errs := b.errs
	b.errs = nil
	return errs
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// screenshot writes the page to build/console-screenshots/NAME.png.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	png := value(b, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(b.shot, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// textContains waits until the element's text holds want.
func textContains(sel, want string) chromedp.Action[chromedp.Void] {
	return until(fmt.Sprintf(`(document.querySelector(%q)?.textContent || "").includes(%q)`, sel, want))
}

// until waits for a JavaScript condition (no timeout of its own: the test's
// deadline is the safety net).
func until(cond string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0))
}

// open loads url as a new document (a hash change alone would keep the
// page's state): the tab keeps its session storage. It ends when the
// signed-in page is drawn.
func open(url string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(chromedp.Navigate("about:blank"), visit(url, `!!document.getElementById("main")`))
}

// visit navigates to url and waits until cond holds in the new document.
// A script sent right after a navigation may reach the old document's
// context, gone by then: that refusal is retried (it says nothing about
// the page), any other error ends the step.
func visit(url, cond string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		if _, err := chromedp.Navigate(url)(ctx, t); err != nil {
			return err
		}
		for {
			_, err := until(fmt.Sprintf(`location.href === %q && (%s)`, url, cond))(ctx, t)
			if err == nil || ctx.Err() != nil {
				return err
			}
			if msg := err.Error(); !strings.Contains(msg, "Cannot find context") && !strings.Contains(msg, "context was destroyed") {
				return err
			}
		}
	})
}

// The console in a real browser: sign in with an API key, chat with a
// deployed chat-model agent and see its tokens while the model is still
// answering, reload in the middle of a run and see the stream resume,
// answer an interrupt, look at the graph and a thread's history; no
// console error, and the key only in session storage.
func TestConsoleInABrowser(t *testing.T) {
	e := newEnv(t)
	apiKey := secret("sk-console-model-7Qw2")
	var holdMu sync.Mutex
	var hold chan struct{} // the current answer waits on it after two pieces
	model := testmodel.Start(t, apiKey, func(r testmodel.Request) testmodel.Turn {
		msgs := r.Messages()
		if last := msgs[len(msgs)-1]; last["role"] != "tool" {
			return testmodel.Turn{ToolCalls: []testmodel.ToolCall{{ID: "call_1", Name: "lookup_order", Args: []string{`{"order_id": "42"}`}}}}
		}
		holdMu.Lock()
		defer holdMu.Unlock()
		return testmodel.Turn{Content: []string{"Order ", "42", " is ", "shipped", " (carrier UPS)."}, Hold: hold, HoldAfter: 2}
	})
	// setHold makes the next answer wait; its release also runs when the
	// test ends early, so the server's runs can finish.
	setHold := func() func() {
		holdMu.Lock()
		defer holdMu.Unlock()
		ch := make(chan struct{})
		hold = ch
		release := sync.OnceFunc(func() { close(ch) })
		t.Cleanup(release)
		return release
	}
	rt := newTestRuntime(t)
	d := e.must(201, "POST", "/v2/deployments", e.keyA, agentDeployment("console-agent", agentRepo(t, model.URL+"/v1"), rt.url, apiKey))
	e.waitFor(e.keyA, "/v2/deployments/"+d["id"].(string), status("READY"))
	support, approval := e.assistantOf(e.keyA, "support"), e.assistantOf(e.keyA, "approval")

	b := newBrowser(t)
	// Sign in: a wrong key is refused with the API's words, the right one kept.
	b.run("open", chromedp.Navigate(e.url+"/"), chromedp.WaitVisible(chromedp.ID("key")))
	b.screenshot("signin")
	b.run("wrong key", chromedp.SendKeys(chromedp.ID("key"), "not-a-key"), chromedp.Click(chromedp.CSS("#signin button")),
		chromedp.WaitVisible(chromedp.CSS("#signin .error")))
	// The refused key's 401 is the one error the browser may log.
	if errs := b.takeErrors(); len(errs) != 1 || !strings.Contains(errs[0], "401") {
		t.Errorf("browser errors after a wrong key: %v", errs)
	}
	b.run("sign in", chromedp.Evaluate[chromedp.Void](`document.getElementById("key").value = ""`), chromedp.SendKeys(chromedp.ID("key"), e.keyA),
		chromedp.Click(chromedp.CSS("#signin button")), chromedp.WaitVisible(chromedp.CSS("#composer")))

	// Chat: the answer's first pieces show while the model holds the rest.
	release := setHold()
	b.run("ask", open(e.url+"/#/chat?assistant="+support), chromedp.WaitVisible(chromedp.CSS("#composer")),
		chromedp.SendKeys(chromedp.ID("text"), "Where is my order 42?"), press("#send"),
		textContains("#messages", "Order 42"), chromedp.WaitVisible(chromedp.ID("cancel")))
	partial := value(b, "partial answer", chromedp.TextContent(chromedp.ID("messages")))
	if strings.Contains(partial, "Order 42 is") {
		t.Fatalf("the held part of the answer is shown: %q", partial)
	}
	b.screenshot("chat-streaming")
	release()
	b.run("answer", textContains("#messages", "Order 42 is shipped (carrier UPS)."), chromedp.WaitVisible(chromedp.ID("send")))
	if !strings.Contains(partial, "lookup_order") {
		t.Errorf("the tool call is not shown: %q", partial)
	}
	b.screenshot("chat")

	// Reload in the middle of a run: the page joins the run again from the
	// last event it saw, and the rest of the answer arrives.
	release = setHold()
	b.run("ask again", chromedp.SendKeys(chromedp.ID("text"), "And now?"), press("#send"),
		chromedp.WaitVisible(chromedp.ID("cancel")), until(`document.querySelector("#messages").textContent.split("Order 42").length > 2`))
	b.run("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("cancel")))
	release()
	b.run("resumed", until(`document.querySelector("#messages").textContent.split("Order 42 is shipped (carrier UPS).").length === 3`),
		chromedp.WaitVisible(chromedp.ID("send")))

	// An interrupt, answered in place.
	b.run("approval", open(e.url+"/#/chat?assistant="+approval), chromedp.WaitVisible(chromedp.CSS("#composer")),
		chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector("select[name=mode]"); s.value = "json"; s.dispatchEvent(new Event("change", {bubbles: true})); })()`),
		chromedp.SendKeys(chromedp.ID("text"), `{"request": "the release"}`), press("#send"),
		textContains("#interrupt", "approve the release?"))
	b.screenshot("interrupt")
	// The answer button is enabled once the interrupted run's stream has
	// ended (the interrupt shows a moment before, while it is still open).
	// Buttons on a page that changes as events arrive are operated by
	// keyboard (press): a mouse click at their place could land elsewhere
	// when the page moves; the sign-in form, which does not, by the mouse.
	b.run("answer interrupt", chromedp.WaitEnabled(chromedp.ID("resume")), chromedp.SendKeys(chromedp.ID("answer"), "yes"), press("#resume"),
		chromedp.WaitNotPresent(chromedp.ID("interrupt")), textContains("#state", `"answer": "yes"`),
		// The state shows from the run's stream, before the run has ended
		// and its checkpoint is stored: Send comes back once it has.
		chromedp.WaitVisible(chromedp.ID("send")))
	thread := value(b, "thread id", chromedp.TextContent(chromedp.ID("thread-id")))
	state := e.must(200, "GET", "/threads/"+thread+"/state", e.keyA, nil)
	if v := state["values"].(map[string]any); v["answer"] != "yes" || v["request"] != "the release" {
		t.Errorf("state after the answer: %v", v)
	}

	// The graph, laid out as SVG; a thread's runs and history.
	b.run("graph", open(e.url+"/#/assistants/"+support), chromedp.WaitVisible(chromedp.CSS("svg.graph .node")))
	nodes := value(b, "nodes", chromedp.Evaluate[int](`document.querySelectorAll("svg.graph .node").length`))
	if nodes < 3 {
		t.Errorf("%d nodes drawn", nodes)
	}
	b.screenshot("assistant")
	b.run("thread", open(e.url+"/#/threads/"+thread), chromedp.WaitVisible(chromedp.CSS("#history li")),
		textContains("#runs", "success"))
	b.screenshot("thread")

	// Fork from the thread's first checkpoint with another request: the
	// run asks about it and takes another answer.
	b.run("fork", press("#history li:last-child a.fork"), chromedp.WaitVisible(chromedp.ID("fork-run")),
		chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector("select[name=mode]"); s.value = "json"; s.dispatchEvent(new Event("change", {bubbles: true})); })()`),
		chromedp.SendKeys(chromedp.ID("text"), `{"request": "the rollback"}`), press("#send"),
		textContains("#interrupt", "approve the rollback?"),
		chromedp.WaitEnabled(chromedp.ID("resume")), chromedp.SendKeys(chromedp.ID("answer"), `"no"`), press("#resume"),
		chromedp.WaitNotPresent(chromedp.ID("interrupt")), textContains("#state", `"answer": "no"`), chromedp.WaitVisible(chromedp.ID("send")))
	state = e.must(200, "GET", "/threads/"+thread+"/state", e.keyA, nil)
	if v := state["values"].(map[string]any); v["answer"] != "no" || v["request"] != "the rollback" {
		t.Errorf("state after the fork: %v", v)
	}
	history := e.do("POST", "/threads/"+thread+"/history", e.keyA, map[string]any{"limit": 20})
	if n := strings.Count(string(history.Body), `"checkpoint_id"`); n < 5 {
		t.Errorf("the fork made no new checkpoints: %s", history.Body)
	}
	b.screenshot("fork")

	// Nothing went wrong in the page; the key stayed in session storage.
	b.checkClean(e.url, e.keyA)
}

// assistantOf is the id of the assistant of graph (one per graph in the
// deployments these tests make) that key's organization sees.
func (e *env) assistantOf(key, graph string) string {
	e.t.Helper()
	r := e.do("POST", "/assistants/search", key, map[string]any{"graph_id": graph, "limit": 1})
	var l []map[string]any
	if err := json.Unmarshal(r.Body, &l); err != nil || len(l) != 1 {
		e.t.Fatalf("assistant of %s: %s", graph, r.Body)
	}
	return l[0]["assistant_id"].(string)
}
