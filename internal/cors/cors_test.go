package cors

import (
	"net/http/httptest"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		err  bool
	}{
		{"", 0, false},
		{"*", 1, false},
		{" https://smith.langchain.com , http://localhost:3000 ", 2, false},
		{"https://a.example/", 1, false},
		{"https://a.example:8443", 1, false},
		{"https://a.example/path", 0, true},
		{"ftp://a.example", 0, true},
		{"https://*.example.com", 0, true},
		{"a.example", 0, true},
		{"https://user@a.example", 0, true},
		{"https://a.example?x=1", 0, true},
	} {
		got, err := Parse(tc.in)
		if (err != nil) != tc.err || len(got) != tc.want {
			t.Errorf("Parse(%q) = %v, %v", tc.in, got, err)
		}
	}
}

func TestApply(t *testing.T) {
	list := &Policy{Origins: []string{"https://smith.langchain.com", "http://localhost:3000"}}
	for _, tc := range []struct {
		name                     string
		p                        *Policy
		method, origin, asks     string
		preflight, allowed       bool
		allowOrigin, vary, maxAg string
	}{
		{"preflight, listed", list, "OPTIONS", "https://smith.langchain.com", "POST", true, true, "https://smith.langchain.com", "Origin", "7200"},
		{"preflight, case folded", list, "OPTIONS", "http://LOCALHOST:3000", "GET", true, true, "http://LOCALHOST:3000", "Origin", "7200"},
		{"preflight, not listed", list, "OPTIONS", "https://evil.example", "POST", true, false, "", "Origin", ""},
		{"request, listed", list, "POST", "https://smith.langchain.com", "", false, true, "https://smith.langchain.com", "Origin", ""},
		{"request, not listed", list, "GET", "https://evil.example", "", false, false, "", "Origin", ""},
		{"OPTIONS without a preflight's header", list, "OPTIONS", "https://smith.langchain.com", "", false, true, "https://smith.langchain.com", "Origin", ""},
		{"no origin", list, "GET", "", "", false, false, "", "Origin", ""},
		{"wildcard", &Policy{Origins: []string{"*"}}, "OPTIONS", "https://x.example", "PUT", true, true, "*", "", "7200"},
		{"no policy", nil, "OPTIONS", "https://smith.langchain.com", "POST", false, false, "", "", ""},
	} {
		r := httptest.NewRequest(tc.method, "/runs/wait", nil)
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if tc.asks != "" {
			r.Header.Set("Access-Control-Request-Method", tc.asks)
		}
		w := httptest.NewRecorder()
		pre, ok := tc.p.Apply(w.Header(), r)
		h := w.Header()
		if pre != tc.preflight || ok != tc.allowed || h.Get("Access-Control-Allow-Origin") != tc.allowOrigin ||
			h.Get("Vary") != tc.vary || h.Get("Access-Control-Max-Age") != tc.maxAg {
			t.Errorf("%s: preflight %v allowed %v headers %v", tc.name, pre, ok, h)
		}
		if ok && !pre && h.Get("Access-Control-Expose-Headers") == "" {
			t.Errorf("%s: no exposed headers", tc.name)
		}
		if h.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("%s: credentials allowed", tc.name)
		}
	}
}
