package graphdoc

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// Template roots, by place.
var (
	stateRoots    = []string{"state", "context"}
	responseRoots = []string{"state", "context", "response"}
	resumeRoots   = []string{"state", "context", "resume"}
	resultRoots   = []string{"state", "context", "result"}
)

const defaultMessages = "messages"

// check applies the rules of one document that its JSON Schema cannot say,
// and parses its templates.
func (d *Document) check(ps *problems) {
	for name, c := range d.spec.State {
		if c == nil {
			d.spec.State[name] = &channelSpec{}
			continue
		}
		d.checkSchema(c.Schema, pointer(d.base, "state", name, "schema"), ps)
	}
	if d.spec.InputSchema != nil {
		d.input = d.checkSchema(d.spec.InputSchema, pointer(d.base, "input_schema"), ps)
	}
	for name, t := range d.spec.Tools {
		if t.Parameters != nil {
			d.checkSchema(t.Parameters, pointer(d.base, "tools", name, "parameters"), ps)
		}
	}
	for name, n := range d.spec.Nodes {
		d.checkNode(name, n, ps)
	}
	d.checkEdges(ps)
}

// checkSchema compiles a JSON Schema the document holds.
func (d *Document) checkSchema(s any, at string, ps *problems) *schema {
	if s == nil {
		return nil
	}
	raw, err := json.Marshal(s)
	if err != nil {
		ps.add(d.file, at, "is not a usable JSON Schema: %v", err)
		return nil
	}
	sch, err := compileSchema(raw)
	if err != nil {
		ps.add(d.file, at, "is not a usable JSON Schema: %v", err)
		return nil
	}
	return &schema{compiled: sch}
}

func (d *Document) checkNode(name string, n *nodeSpec, ps *problems) {
	at := pointer(d.base, "nodes", name)
	switch n.Kind {
	case "chat_model":
		n.messagesChannel = d.checkMessages(n.Messages, pointer(at, "messages"), ps)
		n.system = parseTemplate(n.System, stateRoots, d.file, pointer(at, "system"), ps)
		d.checkToolNames(n.Tools, pointer(at, "tools"), ps)
	case "tools":
		n.messagesChannel = d.checkMessages(n.Messages, pointer(at, "messages"), ps)
		d.checkToolNames(n.Tools, pointer(at, "tools"), ps)
		if len(n.Tools) == 0 && len(d.spec.Tools) == 0 {
			ps.add(d.file, at, "a tools node needs tools: the document declares none")
		}
	case "http":
		q, _ := n.Query.(map[string]any) // the schema holds it to an object here
		n.query = parseTemplates(q, stateRoots, d.file, pointer(at, "query"), ps)
		n.headers = parseTemplates(n.Headers, stateRoots, d.file, pointer(at, "headers"), ps)
		for h := range n.Headers {
			if !isToken(h) {
				ps.add(d.file, pointer(at, "headers", h), "is not a valid header name")
			}
		}
		if n.Body != nil {
			n.body = parseTemplate(n.Body, stateRoots, d.file, pointer(at, "body"), ps)
			if n.Method == http.MethodGet || n.Method == http.MethodDelete {
				ps.add(d.file, pointer(at, "body"), "a %s request has no body (use query)", n.Method)
			}
		}
		n.update = d.parseUpdate(n.Update, responseRoots, pointer(at, "update"), ps)
	case "transform":
		n.update = d.parseUpdate(n.Update, stateRoots, pointer(at, "update"), ps)
	case "interrupt":
		n.value = parseTemplate(n.Value, stateRoots, d.file, pointer(at, "value"), ps)
		n.update = d.parseUpdate(n.Update, resumeRoots, pointer(at, "update"), ps)
	case "store":
		d.checkStoreNode(n, at, ps)
	case "subgraph":
		// The input's keys are the subgraph's channels: the config checks them.
		n.input = parseTemplates(n.Input, stateRoots, d.file, pointer(at, "input"), ps)
		n.update = d.parseUpdate(n.Update, resultRoots, pointer(at, "update"), ps)
	}
}

// parseUpdate parses an update's templates; its keys must be channels.
func (d *Document) parseUpdate(update map[string]any, roots []string, at string, ps *problems) map[string]tmpl {
	for key := range update {
		if _, ok := d.spec.State[key]; !ok {
			ps.add(d.file, pointer(at, key), "is not a state channel")
		}
	}
	return parseTemplates(update, roots, d.file, at, ps)
}

// checkMessages checks the channel a node or edge reads messages from and
// returns its name.
func (d *Document) checkMessages(name, at string, ps *problems) string {
	if name == "" {
		name = defaultMessages
	}
	c, ok := d.spec.State[name]
	switch {
	case !ok:
		ps.add(d.file, at, "the state has no channel %q for messages", name)
	case c.Reducer != string(graph.Messages) && c.Reducer != string(graph.Append):
		ps.add(d.file, at, "channel %q holds messages, so its reducer must be messages or append", name)
	}
	return name
}

func (d *Document) checkToolNames(names []string, at string, ps *problems) {
	for i, t := range names {
		if _, ok := d.spec.Tools[t]; !ok {
			ps.add(d.file, pointer(at, strconv.Itoa(i)), "no tool %q is declared under tools", t)
		}
	}
}

func (d *Document) checkEdges(ps *problems) {
	startFollowed := false
	for i, e := range d.spec.Edges {
		at := pointer(d.base, "edges", strconv.Itoa(i))
		if e.From == graph.Start {
			startFollowed = true
		} else {
			d.checkNodeName(e.From, pointer(at, "from"), ps)
		}
		switch {
		case e.To != nil:
			switch to := e.To.(type) {
			case string:
				e.targets = []string{to}
				d.checkTarget(to, pointer(at, "to"), ps)
			case []any:
				for j, t := range to {
					s, _ := t.(string)
					e.targets = append(e.targets, s)
					d.checkTarget(s, pointer(at, "to", strconv.Itoa(j)), ps)
				}
			}
		case e.When == "tool_calls":
			e.messages = d.checkMessages(e.Messages, pointer(at, "messages"), ps)
			d.checkTarget(e.Then, pointer(at, "then"), ps)
			d.checkTarget(e.Else, pointer(at, "else"), ps)
		default:
			p, err := parsePath(e.When, []string{"state"})
			if err != nil {
				ps.add(d.file, pointer(at, "when"), "%v", err)
			}
			e.field = p
			for value, target := range e.Cases {
				d.checkTarget(target, pointer(at, "cases", value), ps)
			}
			d.checkTarget(e.Default, pointer(at, "default"), ps)
		}
	}
	if !startFollowed {
		ps.add(d.file, pointer(d.base, "edges"), "no edge leaves __start__: add {from: __start__, to: <first node>}")
	}
}

func (d *Document) checkNodeName(name, at string, ps *problems) {
	if _, ok := d.spec.Nodes[name]; !ok {
		ps.add(d.file, at, "no node %q in this graph (nodes: %v)", name, sortedKeys(d.spec.Nodes))
	}
}

// checkTarget checks an edge's target; "" is an absent optional one.
func (d *Document) checkTarget(name, at string, ps *problems) {
	if name != "" && name != graph.End {
		d.checkNodeName(name, at, ps)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// isToken reports whether s is an HTTP token (RFC 9110), the syntax of a
// header name.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !isNameByte(c) && !strings.ContainsRune("!#$%&'*+.^`|~", rune(c)) {
			return false
		}
	}
	return true
}
