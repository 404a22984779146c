package agentauth

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNormalizeScopes(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
		err  string
	}{
		{in: []string{}, want: []string{}},
		{in: []string{"b", "a", "b"}, want: []string{"a", "b"}},
		{in: []string{"repo", "read:user"}, want: []string{"read:user", "repo"}},
		{in: []string{"a b"}, err: "entry 0"},
		{in: []string{""}, err: "entry 0"},
		{in: []string{"ok", `q"uote`}, err: "entry 1"},
		{in: []string{"é"}, err: "entry 0"},
		{in: []string{strings.Repeat("a", 201)}, err: "1-200"},
		{in: make([]string, 51), err: "at most 50"},
	} {
		got, err := normalizeScopes(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "scopes: ") {
				t.Errorf("%q: err %v, want one naming scopes and %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		have, want []string
		ok         bool
	}{
		{[]string{"a", "b"}, []string{"a"}, true},
		{[]string{"a", "b"}, []string{}, true},
		{[]string{"a"}, []string{"a", "b"}, false},
		{[]string{}, []string{"a"}, false},
	} {
		if covers(tc.have, tc.want) != tc.ok {
			t.Errorf("covers(%q, %q) != %v", tc.have, tc.want, tc.ok)
		}
	}
}

// TestChallenge checks S256 against a value computed apart, with
// `printf %s VERIFIER | openssl dgst -sha256 -binary | base64 | tr '+/' '-_' | tr -d =`.
// (The end-to-end tests have the OAuth server verify it too.)
func TestChallenge(t *testing.T) {
	v := "dBjftJeZ4CVP-mJ92K27uhbUJU1p1r_wW1gFWFOEjXk"
	if got := challenge("S256", v); got != "ngF5GsXcbwljx6u133FFr3Xht9xooA_DuaX_3QwODtc" {
		t.Errorf("S256 = %s", got)
	}
	if challenge("plain", v) != v {
		t.Errorf("plain must be the verifier")
	}
}

func TestProviderErrorCode(t *testing.T) {
	for in, want := range map[string]string{
		"access_denied":         "access_denied",
		"invalid_grant":         "invalid_grant",
		"<script>":              "(unreadable)",
		"":                      "(unreadable)",
		"a b":                   "(unreadable)",
		strings.Repeat("x", 65): "(unreadable)",
	} {
		if got := providerErrorCode(in); got != want {
			t.Errorf("%q = %q, want %q", in, got, want)
		}
	}
}

func TestParseTokenResponse(t *testing.T) {
	for _, tc := range []struct {
		ct, body string
		ok       bool
		expires  time.Duration
	}{
		{"application/json", `{"access_token":"x","token_type":"Bearer","expires_in":3600}`, true, time.Hour},
		{"application/json", `{"access_token":"x"}`, true, 0},
		{"application/x-www-form-urlencoded", `access_token=x&token_type=bearer&expires_in=60`, true, time.Minute},
		{"application/json", `{"access_token":""}`, false, 0},
		{"application/json", `{"access_token":"x","token_type":"mac"}`, false, 0},
		{"application/json", `{"access_token":"x","expires_in":-1}`, false, 0},
		{"application/json", `{"access_token":"x","expires_in":"soon"}`, false, 0},
		{"text/html", `<html>`, false, 0},
	} {
		tr, ok := parseTokenResponse(tc.ct, []byte(tc.body))
		if ok != tc.ok {
			t.Errorf("%s %s: ok %v, want %v", tc.ct, tc.body, ok, tc.ok)
			continue
		}
		now := time.Unix(1000, 0)
		if ok && tc.expires != 0 && !tr.expiry(now).Equal(now.Add(tc.expires)) {
			t.Errorf("%s: expiry %v", tc.body, tr.expiry(now))
		}
		if ok && tc.expires == 0 && !tr.expiry(now).IsZero() {
			t.Errorf("%s: expiry %v, want none", tc.body, tr.expiry(now))
		}
	}
}
