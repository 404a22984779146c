package docs

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// testSpec exercises what the page must cope with: tags and an untagged
// path, $refs to schemas, responses and an enum, a self-referencing schema,
// an allOf that includes itself, aliases that refer to each other, 3.1 type
// lists, and markup in descriptions.
const testSpec = `{
  "openapi": "3.1.0",
  "info": {
    "title": "Pet <store>",
    "version": "1.2.3",
    "description": "Manages pets. <script>alert(1)</script> Terms: https://example.com/terms.\n\nUse ` + "`X-Api-Key`" + `."
  },
  "tags": [
    {"name": "pets", "description": "Everything about pets."},
    {"name": "unused"}
  ],
  "security": [{"key": []}],
  "paths": {
    "/pets": {
      "get": {
        "operationId": "listPets",
        "tags": ["pets"],
        "summary": "List pets",
        "parameters": [
          {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}},
          {"name": "kind", "in": "query", "required": true, "description": "Only this kind.", "schema": {"$ref": "#/components/schemas/Kind"}}
        ],
        "responses": {
          "200": {
            "description": "The pets.",
            "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}}}
          }
        }
      },
      "post": {
        "operationId": "createPet",
        "tags": ["pets"],
        "summary": "Add a pet",
        "description": "Stores a pet. <script>alert('owned')</script>",
        "requestBody": {
          "required": true,
          "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}
        },
        "responses": {
          "201": {
            "description": "The new pet.",
            "headers": {"Location": {"description": "Where the pet lives.", "schema": {"type": "string"}}},
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}
          },
          "422": {"$ref": "#/components/responses/Invalid"}
        }
      }
    },
    "/pets/{pet_id}": {
      "parameters": [{"name": "pet_id", "in": "path", "required": true, "schema": {"type": "string"}}],
      "delete": {
        "operationId": "deletePet",
        "tags": ["pets"],
        "summary": "Remove a pet",
        "responses": {"204": {"description": "Removed."}}
      }
    },
    "/health": {
      "get": {
        "operationId": "health",
        "summary": "Liveness",
        "security": [],
        "responses": {"200": {"description": "Up."}}
      }
    }
  },
  "components": {
    "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}},
    "responses": {
      "Invalid": {
        "description": "A broken rule.",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
      }
    },
    "schemas": {
      "Pet": {
        "type": "object",
        "required": ["name", "kind"],
        "properties": {
          "age": {"type": ["integer", "null"], "minimum": 0, "maximum": 99},
          "name": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[a-z]+$", "description": "The pet's <b>name</b>."},
          "kind": {"$ref": "#/components/schemas/Kind"},
          "parent": {"anyOf": [{"$ref": "#/components/schemas/Pet"}, {"type": "null"}]},
          "children": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}},
          "labels": {"type": "object", "additionalProperties": {"type": "string"}},
          "owner": {"type": "object", "properties": {"email": {"type": "string", "format": "email"}}}
        }
      },
      "Kind": {"type": "string", "enum": ["cat", "dog"], "description": "What the pet is."},
      "Error": {"type": "object", "required": ["detail"], "properties": {"detail": {"type": "string"}}},
      "Loop": {"allOf": [{"$ref": "#/components/schemas/Loop"}, {"type": "object", "properties": {"depth": {"type": "integer"}}}]},
      "AliasA": {"$ref": "#/components/schemas/AliasB"},
      "AliasB": {"$ref": "#/components/schemas/AliasA"},
      "Shape": {
        "oneOf": [
          {"type": "object", "properties": {"radius": {"type": "number"}}},
          {"type": "object", "properties": {"width": {"type": "number"}}}
        ]
      }
    }
  }
}`

const testSpecURL = "/openapi.json"

func newHandler(t *testing.T) http.Handler {
	t.Helper()
	h, err := Handler([]byte(testSpec), testSpecURL)
	if err != nil {
		t.Fatalf("Handler: %v", err)
	}
	return h
}

func get(t *testing.T, h http.Handler, method, target string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func getPage(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := get(t, h, "GET", "/docs", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /docs: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	return rec.Body.String()
}

func TestPageListsEveryOperation(t *testing.T) {
	body := getPage(t, newHandler(t))
	for _, op := range []struct{ method, path, id string }{
		{"GET", "/pets", "listPets"},
		{"POST", "/pets", "createPet"},
		{"DELETE", "/pets/{pet_id}", "deletePet"},
		{"GET", "/health", "health"},
	} {
		head := `<span class="method m-` + strings.ToLower(op.method) + `">` + op.method + `</span> <code class="path">` + op.path + `</code>`
		if !strings.Contains(body, head) {
			t.Errorf("page lacks %s %s", op.method, op.path)
		}
		if !strings.Contains(body, `<code class="operation-id">`+op.id+`</code>`) {
			t.Errorf("page lacks operationId %s", op.id)
		}
		if !strings.Contains(body, `id="op-`+op.id+`"`) || !strings.Contains(body, `href="#op-`+op.id+`"`) {
			t.Errorf("operation %s has no anchor or contents entry", op.id)
		}
	}
	for _, want := range []string{
		"<h1>Pet &lt;store&gt;</h1>",
		"version 1.2.3",
		"OpenAPI 3.1.0",
		`<a class="raw" href="/openapi.json">`,
		"<p>Use <code>X-Api-Key</code>.</p>",
		// Grouping: the tag with its description, the untagged path on its own.
		`<section class="group" id="tag-pets"`, "Everything about pets.",
		`<section class="group" id="path-health"`,
		// Parameters, with path-level ones merged in and enum values from a $ref.
		`<code class="field-name">limit</code>`, "max: <code>100</code>", "default: <code>20</code>",
		`<code class="field-name">kind</code> <span class="req">required</span>`,
		`<a href="#schema-Kind">Kind</a> (string)`, "<code>&#34;cat&#34;</code> <code>&#34;dog&#34;</code>",
		`<code class="field-name">pet_id</code> <span class="req">required</span></td><td>path</td>`,
		// Request body and responses, the root $ref expanded into fields.
		"Request body <span class=\"req\">required</span>",
		`<span class="type"><a href="#schema-Pet">Pet</a></span>`,
		`<span class="status">201</span>`, "The new pet.", `<code class="field-name">Location</code>`,
		`<span class="status">422</span>`, "A broken rule.", `<a href="#schema-Error">Error</a>`,
		`<span class="type">array of <a href="#schema-Pet">Pet</a></span>`,
		// Types: 3.1 type lists, maps, nested inline objects, constraints.
		`<code class="field-name">age</code> <span class="type">integer | null</span>`,
		`<code class="field-name">labels</code> <span class="type">map of string</span>`,
		`<code class="field-name">email</code> <span class="type">string</span>`, "format: <code>email</code>",
		"pattern: <code>^[a-z]&#43;$</code>", "min length: <code>1</code>",
		// Security.
		"API key in header X-Api-Key", "<dt>Authentication</dt><dd>none</dd>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n := strings.Count(body, `id="op-`); n != 4 {
		t.Errorf("%d operation sections, want 4", n)
	}
	if strings.Contains(body, "unused") {
		t.Error("a tag without operations got a section")
	}
}

func TestSchemasSection(t *testing.T) {
	body := getPage(t, newHandler(t))
	for _, name := range []string{"Pet", "Kind", "Error", "Loop", "AliasA", "AliasB", "Shape"} {
		if !strings.Contains(body, `<article class="component" id="schema-`+name+`">`) {
			t.Errorf("Schemas section lacks %s", name)
		}
		if !strings.Contains(body, `<li><a href="#schema-`+name+`">`+name+`</a></li>`) {
			t.Errorf("contents lack %s", name)
		}
	}
	pet := section(t, body, `id="schema-Pet"`, `</article>`)
	for _, want := range []string{
		// Required properties come first.
		`<code class="field-name">name</code> <span class="type">string</span> <span class="req">required</span>`,
		// The cycle is a link, not an expansion.
		`<code class="field-name">parent</code> <span class="type"><a href="#schema-Pet">Pet</a> | null</span>`,
		`<code class="field-name">children</code> <span class="type">array of <a href="#schema-Pet">Pet</a></span>`,
		"The pet&#39;s &lt;b&gt;name&lt;/b&gt;.",
	} {
		if !strings.Contains(pet, want) {
			t.Errorf("Pet schema lacks %q", want)
		}
	}
	if strings.Index(pet, `field-name">name<`) > strings.Index(pet, `field-name">age<`) {
		t.Error("required property name is not listed before age")
	}
	loop := section(t, body, `id="schema-Loop"`, `</article>`)
	if strings.Count(loop, `field-name">depth<`) != 1 {
		t.Errorf("Loop should list its own field once:\n%s", loop)
	}
	shape := section(t, body, `id="schema-Shape"`, `</article>`)
	for _, want := range []string{"one of #1", "one of #2", `field-name">radius<`, `field-name">width<`} {
		if !strings.Contains(shape, want) {
			t.Errorf("Shape lacks %q", want)
		}
	}
	alias := section(t, body, `id="schema-AliasA"`, `</article>`)
	if !strings.Contains(alias, `<a href="#schema-AliasB">AliasB</a>`) {
		t.Errorf("AliasA does not link AliasB:\n%s", alias)
	}
}

// section returns body from the first from to the next to after it.
func section(t *testing.T, body, from, to string) string {
	t.Helper()
	i := strings.Index(body, from)
	if i < 0 {
		t.Fatalf("page lacks %q", from)
	}
	j := strings.Index(body[i:], to)
	if j < 0 {
		t.Fatalf("no %q after %q", to, from)
	}
	return body[i : i+j]
}

func TestDescriptionsAreEscaped(t *testing.T) {
	body := getPage(t, newHandler(t))
	if strings.Contains(body, "<script>alert") {
		t.Error("a <script> from the document reached the page unescaped")
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks escaped %q", want)
		}
	}
	if n := strings.Count(body, "<script"); n != 1 {
		t.Errorf("%d script elements, want only the embedded one", n)
	}
}

func TestCurlExamples(t *testing.T) {
	body := getPage(t, newHandler(t))
	create := section(t, body, `id="op-createPet"`, `</pre>`)
	for _, want := range []string{
		`curl -X POST &#34;$BASE_URL/pets&#34;`,
		`-H &#34;X-Api-Key: $API_KEY&#34;`,
		`-H &#34;Content-Type: application/json&#34;`,
		`&#34;kind&#34;: &#34;cat&#34;`,
		`&#34;name&#34;: &#34;string&#34;`,
	} {
		if !strings.Contains(create, want) {
			t.Errorf("createPet example lacks %q", want)
		}
	}
	if list := section(t, body, `id="op-listPets"`, `</pre>`); !strings.Contains(list, `&#34;$BASE_URL/pets?kind=cat&#34;`) {
		t.Errorf("listPets example lacks the required query parameter")
	}
	if health := section(t, body, `id="op-health"`, `</pre>`); strings.Contains(health, "X-Api-Key") {
		t.Error("the public operation's example sends a key")
	}
}

var refAttr = regexp.MustCompile(`(?i)\b(?:href|src)\s*=\s*"([^"]*)"`)

func TestAssetsAreReferencedAndServed(t *testing.T) {
	h := newHandler(t)
	body := getPage(t, h)
	want := map[string]string{"docs.css": "text/css; charset=utf-8", "docs.js": "text/javascript; charset=utf-8"}
	seen := map[string]bool{}
	for _, m := range refAttr.FindAllStringSubmatch(body, -1) {
		ref := m[1]
		switch {
		case strings.HasPrefix(ref, "#"), ref == testSpecURL:
			continue
		case !strings.HasPrefix(ref, "/docs/assets/"):
			t.Errorf("page references %q, outside /docs/assets/ and the document", ref)
			continue
		}
		name := strings.SplitN(strings.TrimPrefix(ref, "/docs/assets/"), "?", 2)[0]
		seen[name] = true
		rec := get(t, h, "GET", ref, nil)
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d", ref, rec.Code)
			continue
		}
		if ct := rec.Header().Get("Content-Type"); ct != want[name] {
			t.Errorf("%s Content-Type = %q, want %q", name, ct, want[name])
		}
		if rec.Header().Get("Cache-Control") == "" {
			t.Errorf("%s has no Cache-Control", name)
		}
		embedded, err := fs.ReadFile(static, "static/"+name)
		if err != nil || !bytes.Equal(rec.Body.Bytes(), embedded) {
			t.Errorf("%s body differs from the embedded file (%v)", name, err)
		}
		etag := rec.Header().Get("ETag")
		if again := get(t, h, "GET", ref, http.Header{"If-None-Match": {etag}}); etag == "" || again.Code != http.StatusNotModified {
			t.Errorf("%s revalidation with ETag %q: %d", name, etag, again.Code)
		}
		if head := get(t, h, "HEAD", ref, nil); head.Code != http.StatusOK || head.Body.Len() != 0 || head.Header().Get("Content-Type") != want[name] {
			t.Errorf("HEAD %s: %d, %d bytes", ref, head.Code, head.Body.Len())
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("page does not reference %s", name)
		}
	}
	if head := get(t, h, "HEAD", "/docs", nil); head.Code != http.StatusOK || head.Body.Len() != 0 {
		t.Errorf("HEAD /docs: %d, %d bytes", head.Code, head.Body.Len())
	}
}

var absoluteURL = regexp.MustCompile(`(?i)https?://[^\s"'<>)\\]*`)

func TestNothingExternal(t *testing.T) {
	h := newHandler(t)
	inSpec := map[string]bool{}
	for _, u := range absoluteURL.FindAllString(testSpec, -1) {
		inSpec[strings.TrimRight(u, ".")] = true
	}
	check := func(name, text string) {
		for _, u := range absoluteURL.FindAllString(text, -1) {
			if !inSpec[strings.TrimRight(u, ".")] {
				t.Errorf("%s contains the external URL %q", name, u)
			}
		}
	}
	body := getPage(t, h)
	check("page", body)
	if !strings.Contains(body, "https://example.com/terms") {
		t.Error("a URL written in the document's text was dropped")
	}
	entries, err := fs.ReadDir(static, "static")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		rec := get(t, h, "GET", "/docs/assets/"+e.Name(), nil)
		check(e.Name(), rec.Body.String())
		for _, banned := range []string{"@import", "url(", "fetch(", "XMLHttpRequest", "import("} {
			if strings.Contains(rec.Body.String(), banned) {
				t.Errorf("%s uses %s", e.Name(), banned)
			}
		}
	}
	if csp := get(t, h, "GET", "/docs", nil).Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
}

func detail(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var body struct {
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return body.Detail
}

func TestUnknownAsset(t *testing.T) {
	h := newHandler(t)
	rec := get(t, h, "GET", "/docs/assets/x", nil)
	if rec.Code != http.StatusNotFound {
		t.Fatalf("status %d", rec.Code)
	}
	if got := strings.TrimSpace(rec.Body.String()); got != `{"detail":"no docs asset \"x\""}` {
		t.Errorf("body = %s", got)
	}
	detail(t, rec)
	for _, target := range []string{"/docs/assets/", "/docs/assets/static/docs.css", "/docs/assets/..%2fdocs.go", "/docs/other"} {
		if rec := get(t, h, "GET", target, nil); rec.Code != http.StatusNotFound || detail(t, rec) == "" {
			t.Errorf("GET %s: %d %s", target, rec.Code, rec.Body)
		}
	}
}

func TestOnlyGetAndHead(t *testing.T) {
	h := newHandler(t)
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		for _, target := range []string{"/docs", "/docs/assets/docs.css"} {
			rec := get(t, h, method, target, nil)
			if rec.Code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d", method, target, rec.Code)
				continue
			}
			if allow := rec.Header().Get("Allow"); allow != "GET, HEAD" {
				t.Errorf("%s %s: Allow = %q", method, target, allow)
			}
			if d := detail(t, rec); !strings.Contains(d, method) {
				t.Errorf("%s %s: detail %q", method, target, d)
			}
		}
	}
}

func TestInvalidSpec(t *testing.T) {
	for name, spec := range map[string]string{
		"empty":          ``,
		"not JSON":       `openapi: 3.1.0`,
		"truncated":      `{"openapi": "3.1.0", "paths": {}`,
		"trailing data":  `{"openapi": "3.1.0", "paths": {}} {}`,
		"array":          `[{"openapi": "3.1.0", "paths": {}}]`,
		"no openapi":     `{"info": {"title": "x"}, "paths": {}}`,
		"openapi number": `{"openapi": 3.1, "paths": {}}`,
		"swagger 2":      `{"openapi": "2.0", "paths": {}}`,
		"no paths":       `{"openapi": "3.1.0"}`,
		"paths list":     `{"openapi": "3.1.0", "paths": []}`,
		"too deep":       `{"openapi": "3.1.0", "paths": {}, "x": ` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}`,
	} {
		if h, err := Handler([]byte(spec), testSpecURL); err == nil || h != nil {
			t.Errorf("%s: Handler accepted it", name)
		}
	}
}

func TestMinimalSpec(t *testing.T) {
	h, err := Handler([]byte(`{"openapi": "3.0.3", "paths": {}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	body := getPage(t, h)
	if !strings.Contains(body, "<h1>API reference</h1>") || strings.Contains(body, `class="raw"`) {
		t.Errorf("minimal page:\n%s", body)
	}
}

func TestPageIsBuiltOnceAndStable(t *testing.T) {
	a, b := getPage(t, newHandler(t)), getPage(t, newHandler(t))
	if a != b {
		t.Error("two handlers from one document render different pages")
	}
	h := newHandler(t)
	first := get(t, h, "GET", "/docs", nil)
	if again := get(t, h, "GET", "/docs", http.Header{"If-None-Match": {first.Header().Get("ETag")}}); again.Code != http.StatusNotModified {
		t.Errorf("page revalidation: %d", again.Code)
	}
}

func TestProse(t *testing.T) {
	got := string(prose("One `a<b>` two\nthree.\n\n- x & y\n- `z`\n  more\n\nunmatched ` tick"))
	want := "<p>One <code>a&lt;b&gt;</code> two three.</p>" +
		"<ul><li>x &amp; y</li><li><code>z</code> more</li></ul>" +
		"<p>unmatched ` tick</p>"
	if got != want {
		t.Errorf("prose:\n got %s\nwant %s", got, want)
	}
}
