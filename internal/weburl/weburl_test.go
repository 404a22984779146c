package weburl

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		raw      string
		loopback bool
		want     string // "" = accepted, else a fragment of the message
	}{
		{"https://example.com/token", false, ""},
		{"http://127.0.0.1:8080/x", true, ""},
		{"http://localhost/x", true, ""},
		{"http://[::1]/x", true, ""},
		{"http://127.0.0.1/x", false, "must use https"},
		{"http://example.com/x", true, "must use https"},
		{"", false, "must not be empty"},
		{"/relative", false, "absolute URL"},
		{"https://example.com/#frag", false, "fragment"},
		{"https://u:p@example.com/", false, "credentials"},
		{"ftp://example.com/", false, "must use https"},
		{"https://example.com/" + strings.Repeat("a", MaxLen), false, "at most"},
		{"https://example.com:443/x", false, ""},
		{"https://example.com:1/x", false, ""},
		{"https://example.com:65535/x", false, ""},
		{"http://127.0.0.1:65535/x", true, ""},
		{"https://example.com:0/x", false, "port between 1 and 65535"},
		{"https://example.com:65536/x", false, "port between 1 and 65535"},
		{"https://example.com:99999999999999999999/x", false, "port between 1 and 65535"},
		{"https://example.com:/x", false, ""}, // an empty port is the default one
		{"http://[::1]:70000/x", true, "port between 1 and 65535"},
		{"https://example.com/a b", false, "spaces or control characters"},
		{" https://example.com/", false, "spaces or control characters"},
		{"https://example.com/a\tb", false, "spaces or control characters"},
		{"https://example.com/a\nb", false, "spaces or control characters"},
		{"https://example.com/\x00", false, "spaces or control characters"},
		{"https://example.com/\x7f", false, "spaces or control characters"},
		{"https://example.com/\u0085", false, "spaces or control characters"},
		{"https://example.com/\u00a0", false, "spaces or control characters"},
		{"https://example.com/a%20b", false, ""},
		{"https://exa mple.com/", false, "spaces or control characters"},
	}
	for _, c := range cases {
		err := Check("url", c.raw, c.loopback)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: unexpected error %v", c.raw, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "url: ")):
			t.Errorf("%q: error %v, want one naming url and %q", c.raw, err, c.want)
		}
	}
}
