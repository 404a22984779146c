package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The decoder sees the body as the schema validator saw it (security review
// F16): a key that differs only in case from a declared property is an
// unknown field, ignored, and a repeated key counts once, with its last
// value. Before, encoding/json filled the property from the case-folded key
// (and merged repeated objects), values no schema rule had checked.
func TestBodyIsDecodedAsTheSchemaSawIt(t *testing.T) {
	e := newEnv(t)
	for range 12 {
		e.newThread(e.keyA)
	}
	search := []struct {
		name string
		body string
		want int // threads answered
	}{
		{"a case-folded duplicate is ignored", `{"limit":5,"Limit":5000}`, 5},
		{"a case-folded duplicate first is ignored too", `{"Limit":5000,"limit":5}`, 5},
		{"a case-folded key alone is ignored: the default limit", `{"LIMIT":5000}`, 10},
		{"an exactly repeated key: its last value", `{"limit":5000,"limit":3}`, 3},
		{"unknown keys stay ignored", `{"limit":4,"lim1t":5000}`, 4},
	}
	for _, c := range search {
		t.Run("threads/search: "+c.name, func(t *testing.T) {
			r := e.do("POST", "/threads/search", e.keyA, c.body)
			var got []any
			if r.Status != 200 || json.Unmarshal(r.Body, &got) != nil {
				t.Fatalf("%s: %d %s", c.body, r.Status, r.Body)
			}
			if len(got) != c.want {
				t.Errorf("%s: %d threads, want %d", c.body, len(got), c.want)
			}
		})
	}

	t.Run("providers: Auth_URL", func(t *testing.T) {
		body := `{"provider_id":"f16","name":"P","client_id":"c","client_secret":"` + secret("cs-f16-Kw2") + `",
			"auth_url":"https://a.example/x","Auth_URL":"javascript:alert(1)","token_url":"https://a.example/t"}`
		r := e.do("POST", "/v2/auth/providers", e.keyA, body)
		if r.Status != 200 || r.json(t)["auth_url"] != "https://a.example/x" {
			t.Fatalf("create: %d %s; want 200 with the exact key's auth_url", r.Status, r.Body)
		}
		r = e.do("PATCH", "/v2/auth/providers/f16", e.keyA, `{"name":"Q","NAME":"","Token_URL":"ftp://x"}`)
		if got := r.json(t); r.Status != 200 || got["name"] != "Q" || got["token_url"] != "https://a.example/t" {
			t.Errorf("PATCH with case-folded keys: %d %s", r.Status, r.Body)
		}
	})

	// A nested object: config is validated as the last one sent and
	// recursion_limit only under its exact name.
	runs := []struct{ name, body string }{
		{"a repeated object is not merged", `{"assistant_id":"echo","input":{"messages":[]},
			"config":{"recursion_limit":0},"config":{"tags":["x"]}}`},
		{"a case-folded nested key is ignored", `{"assistant_id":"echo","input":{"messages":[]},
			"config":{"Recursion_Limit":0,"tags":["x"]}}`},
	}
	for _, c := range runs {
		t.Run("runs/wait: "+c.name, func(t *testing.T) {
			r := e.do("POST", "/runs/wait", e.keyA, c.body)
			if r.Status != http.StatusOK || strings.Contains(string(r.Body), "__error__") {
				t.Errorf("%d %s", r.Status, r.Body)
			}
		})
	}

	// Free-form objects keep every key as sent: there the schema declares
	// nothing, and keys differing in case are different keys.
	t.Run("metadata keeps keys that differ in case", func(t *testing.T) {
		r := e.do("POST", "/threads", e.keyA, `{"metadata":{"Limit":1,"limit":2}}`)
		md, _ := r.json(t)["metadata"].(map[string]any)
		if r.Status != 200 || md["Limit"] != float64(1) || md["limit"] != float64(2) {
			t.Errorf("%d %s", r.Status, r.Body)
		}
	})
}
