package docs

import (
	"html/template"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// page is everything the template shows, computed once from the document.
type page struct {
	Title       string
	Version     string
	OpenAPI     string
	Description template.HTML
	Servers     []server
	SpecURL     string
	CSS, JS     string // asset URLs
	Groups      []*group
	Schemas     []*schemaEntry
	Operations  int
}

type server struct {
	URL         string
	Description string
}

type group struct {
	ID          string
	Name        string
	Description template.HTML
	Ops         []*operation
}

type operation struct {
	ID          string // anchor
	Method      string
	MethodClass string
	Path        string
	Summary     string
	Description template.HTML
	OperationID string
	Deprecated  bool
	Tags        []string
	Public      bool
	Auth        []string // alternatives, each "A + B"
	Params      []*node
	Body        *requestBody
	Responses   []*response
	Curl        string
	Search      string // lower-cased text the filter box matches
}

type requestBody struct {
	Required    bool
	Description template.HTML
	Contents    []*content
}

type content struct {
	MediaType string
	Schema    *node // nil: no schema given
}

type response struct {
	Code        string
	Class       string // s2xx, s4xx, ...
	Description template.HTML
	Headers     []*node
	Contents    []*content
}

type schemaEntry struct {
	ID   string
	Name string
	Root *node
}

// methods in the order an operation list shows them.
var methods = []string{"get", "put", "post", "patch", "delete", "head", "options", "trace", "query"}

type builder struct {
	doc       *object
	ids       map[string]bool
	schemaIDs map[string]string // component schema name → anchor
}

func build(doc *object, specURL, css, js string) *page {
	b := &builder{doc: doc, ids: map[string]bool{}, schemaIDs: map[string]string{}}
	for _, reserved := range []string{"top", "main", "contents", "schemas"} {
		b.ids[reserved] = true
	}
	info := doc.obj("info")
	p := &page{
		Title:       info.str("title"),
		Version:     info.str("version"),
		OpenAPI:     doc.str("openapi"),
		Description: prose(info.str("description")),
		SpecURL:     specURL,
		CSS:         css,
		JS:          js,
	}
	if p.Title == "" {
		p.Title = "API reference"
	}
	for _, s := range doc.list("servers") {
		if so, ok := s.(*object); ok && so.str("url") != "" {
			p.Servers = append(p.Servers, server{URL: so.str("url"), Description: so.str("description")})
		}
	}

	// Anchors of component schemas first: operations link to them.
	schemas := doc.obj("components").obj("schemas")
	if schemas != nil {
		for _, name := range schemas.keys() {
			b.schemaIDs[name] = b.id("schema-" + name)
		}
	}

	p.Groups = b.groups()
	for _, g := range p.Groups {
		p.Operations += len(g.Ops)
	}

	if schemas != nil {
		for _, name := range schemas.keys() {
			s := schemas.get(name)
			p.Schemas = append(p.Schemas, &schemaEntry{
				ID:   b.schemaIDs[name],
				Name: name,
				Root: b.field("", s, false, true, []string{"#/components/schemas/" + escapeToken(name)}, 0),
			})
		}
	}
	return p
}

var notSlug = regexp.MustCompile(`[^A-Za-z0-9_.]+`)

// id returns a unique element id derived from base.
func (b *builder) id(base string) string {
	s := strings.Trim(notSlug.ReplaceAllString(base, "-"), "-")
	if s == "" {
		s = "section"
	}
	id := s
	for i := 2; b.ids[id]; i++ {
		id = s + "-" + strconv.Itoa(i)
	}
	b.ids[id] = true
	return id
}

func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// groups puts every operation in the group of its first tag: the document's
// tags in their order first, then tags only operations name, then one group
// per path for untagged operations.
func (b *builder) groups() []*group {
	type pending struct {
		op   *object
		item *object
		path string
		verb string
	}
	byTag := map[string][]pending{}
	var tagOrder []string
	var untagged []pending
	paths := b.doc.obj("paths")
	for _, path := range paths.keys() {
		item := b.deref(paths.get(path))
		if item == nil {
			continue
		}
		for _, m := range methods {
			op := item.obj(m)
			if op == nil {
				continue
			}
			pe := pending{op, item, path, m}
			tag := ""
			for _, t := range op.list("tags") {
				if s, ok := t.(string); ok && s != "" {
					tag = s
					break
				}
			}
			if tag == "" {
				untagged = append(untagged, pe)
				continue
			}
			if _, ok := byTag[tag]; !ok {
				tagOrder = append(tagOrder, tag)
			}
			byTag[tag] = append(byTag[tag], pe)
		}
	}

	tagDocs := map[string]*object{}
	var order []string
	for _, t := range b.doc.list("tags") {
		to, ok := t.(*object)
		if !ok || to.str("name") == "" {
			continue
		}
		name := to.str("name")
		if _, dup := tagDocs[name]; dup {
			continue
		}
		tagDocs[name] = to
		if _, used := byTag[name]; used {
			order = append(order, name)
		}
	}
	for _, t := range tagOrder {
		if !slices.Contains(order, t) {
			order = append(order, t)
		}
	}

	var out []*group
	for _, tag := range order {
		g := &group{ID: b.id("tag-" + tag), Name: tag, Description: prose(tagDocs[tag].str("description"))}
		for _, pe := range byTag[tag] {
			g.Ops = append(g.Ops, b.operation(pe.path, pe.verb, pe.item, pe.op))
		}
		out = append(out, g)
	}
	var last *group
	for _, pe := range untagged {
		if last == nil || last.Name != pe.path {
			last = &group{ID: b.id("path-" + pe.path), Name: pe.path, Description: prose(pe.item.str("description"))}
			out = append(out, last)
		}
		last.Ops = append(last.Ops, b.operation(pe.path, pe.verb, pe.item, pe.op))
	}
	return out
}

// deref follows $ref chains of parameters, responses, request bodies,
// headers and path items.
func (b *builder) deref(v any) *object {
	for range 16 {
		o, ok := v.(*object)
		if !ok {
			return nil
		}
		ref := o.str("$ref")
		if ref == "" {
			return o
		}
		ptr, ok := fragmentPointer(ref)
		if !ok {
			return nil
		}
		v = lookup(b.doc, ptr)
	}
	return nil
}

func (b *builder) operation(path, verb string, item, op *object) *operation {
	o := &operation{
		Method:      strings.ToUpper(verb),
		MethodClass: "m-" + verb,
		Path:        path,
		Summary:     op.str("summary"),
		Description: prose(op.str("description")),
		OperationID: op.str("operationId"),
		Deprecated:  op.boolean("deprecated"),
	}
	if o.OperationID != "" {
		o.ID = b.id("op-" + o.OperationID)
	} else {
		o.ID = b.id("op-" + verb + "-" + path)
	}
	for _, t := range op.list("tags") {
		if s, ok := t.(string); ok && s != "" {
			o.Tags = append(o.Tags, s)
		}
	}

	security := b.doc.list("security")
	if op.has("security") {
		security = op.list("security")
	}
	o.Public = len(security) == 0
	for _, req := range security {
		o.Auth = append(o.Auth, b.requirement(req))
	}

	params := b.parameters(item, op)
	for _, p := range params {
		o.Params = append(o.Params, p.node)
	}
	var bodySchema, bodyExample any
	hasJSONBody := false
	if rb := b.deref(op.get("requestBody")); rb != nil {
		o.Body = &requestBody{Required: rb.boolean("required"), Description: prose(rb.str("description"))}
		o.Body.Contents = b.contents(rb.obj("content"))
		if _, media := jsonMedia(rb.obj("content")); media != nil {
			hasJSONBody = true
			bodySchema = media.get("schema")
			bodyExample = mediaExample(media)
		}
	}
	if responses := op.obj("responses"); responses != nil {
		for _, code := range responses.keys() {
			r := b.deref(responses.get(code))
			if r == nil {
				continue
			}
			resp := &response{Code: code, Class: statusClass(code), Description: prose(r.str("description"))}
			if headers := r.obj("headers"); headers != nil {
				for _, name := range headers.keys() {
					h := b.deref(headers.get(name))
					if h == nil {
						continue
					}
					n := b.field(name, h.get("schema"), h.boolean("required"), false, nil, 0)
					if d := h.str("description"); d != "" {
						n.Description = prose(d)
					}
					resp.Headers = append(resp.Headers, n)
				}
			}
			resp.Contents = b.contents(r.obj("content"))
			o.Responses = append(o.Responses, resp)
		}
	}

	o.Curl = b.curl(o, params, security, hasJSONBody, bodySchema, bodyExample)
	o.Search = strings.ToLower(strings.Join(append([]string{o.Method, o.Path, o.Summary, o.OperationID}, o.Tags...), " "))
	return o
}

type param struct {
	name, in string
	required bool
	schema   any
	example  any
	node     *node
}

// parameters merges path-level and operation-level parameters; the
// operation's win when name and location match.
func (b *builder) parameters(item, op *object) []*param {
	var out []*param
	index := map[string]int{}
	for _, list := range [][]any{item.list("parameters"), op.list("parameters")} {
		for _, raw := range list {
			po := b.deref(raw)
			if po == nil || po.str("name") == "" {
				continue
			}
			p := &param{name: po.str("name"), in: po.str("in"), required: po.boolean("required") || po.str("in") == "path"}
			p.schema = po.get("schema")
			if p.schema == nil {
				if _, media := firstMedia(po.obj("content")); media != nil {
					p.schema = media.get("schema")
				}
			}
			p.example = po.get("example")
			n := b.field(p.name, p.schema, p.required, false, nil, 0)
			n.In = p.in
			if d := po.str("description"); d != "" {
				n.Description = prose(d)
			}
			if po.boolean("deprecated") {
				n.setFact("deprecated", "")
			}
			if v, ok := po.vals["example"]; ok {
				n.setFact("example", jsonText(v))
			}
			p.node = n
			key := p.in + "\x00" + p.name
			if i, ok := index[key]; ok {
				out[i] = p
				continue
			}
			index[key] = len(out)
			out = append(out, p)
		}
	}
	return out
}

func (b *builder) contents(c *object) []*content {
	if c == nil {
		return nil
	}
	var out []*content
	for _, mt := range c.keys() {
		media, _ := c.get(mt).(*object)
		ct := &content{MediaType: mt}
		if media.has("schema") {
			ct.Schema = b.field("", media.get("schema"), false, true, nil, 0)
		}
		out = append(out, ct)
	}
	return out
}

func firstMedia(c *object) (string, *object) {
	if c.len() == 0 {
		return "", nil
	}
	m, _ := c.get(c.keys()[0]).(*object)
	return c.keys()[0], m
}

// jsonMedia picks the JSON media type of a content map, if any.
func jsonMedia(c *object) (string, *object) {
	if c == nil {
		return "", nil
	}
	for _, mt := range c.keys() {
		base := strings.TrimSpace(strings.SplitN(mt, ";", 2)[0])
		if base == "application/json" || strings.HasSuffix(base, "+json") {
			m, _ := c.get(mt).(*object)
			if m == nil {
				m = newObject()
			}
			return mt, m
		}
	}
	return "", nil
}

func mediaExample(media *object) any {
	if v, ok := media.vals["example"]; ok {
		return v
	}
	if ex := media.obj("examples"); ex != nil {
		for _, k := range ex.keys() {
			if e, ok := ex.get(k).(*object); ok && e.has("value") {
				return e.get("value")
			}
		}
	}
	return nil
}

func statusClass(code string) string {
	if len(code) == 3 && code[0] >= '1' && code[0] <= '5' {
		return "s" + code[:1] + "xx"
	}
	return "sdefault"
}

// requirement describes one security requirement object.
func (b *builder) requirement(req any) string {
	ro, ok := req.(*object)
	if !ok || ro.len() == 0 {
		return "none"
	}
	var parts []string
	for _, name := range ro.keys() {
		parts = append(parts, b.schemeText(name, ro.list(name)))
	}
	return strings.Join(parts, " + ")
}

func (b *builder) schemeText(name string, scopes []any) string {
	s := b.deref(b.doc.obj("components").obj("securitySchemes").get(name))
	var t string
	switch s.str("type") {
	case "apiKey":
		t = "API key in " + s.str("in") + " " + s.str("name")
	case "http":
		t = "HTTP " + s.str("scheme")
	case "oauth2":
		t = "OAuth 2"
	case "openIdConnect":
		t = "OpenID Connect"
	case "mutualTLS":
		t = "mutual TLS"
	default:
		t = name
	}
	var sc []string
	for _, v := range scopes {
		if str, ok := v.(string); ok {
			sc = append(sc, str)
		}
	}
	if len(sc) > 0 {
		t += " (scopes: " + strings.Join(sc, ", ") + ")"
	}
	return t
}
