package main

import (
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/runs"
)

func TestMaxRunningPerOrgFlag(t *testing.T) {
	for _, tc := range []struct {
		env  string // STEPGRAPH_MAX_RUNNING_PER_ORG ("" unset)
		args []string
		want int // as runs.Service.MaxRunningPerOrg takes it
		err  bool
	}{
		{want: runs.DefaultMaxRunningPerOrg},
		{args: []string{"-max-running-per-org", "4"}, want: 4},
		{args: []string{"-max-running-per-org", "0"}, want: -1},
		{env: "8", want: 8},
		{env: "8", args: []string{"-max-running-per-org", "2"}, want: 2},
		{args: []string{"-max-running-per-org", "-1"}, err: true},
		{env: "many", err: true},
	} {
		t.Setenv("STEPGRAPH_MAX_RUNNING_PER_ORG", tc.env)
		c, err := parseServeFlags(tc.args)
		switch {
		case tc.err && (err == nil || !strings.Contains(err.Error(), "-max-running-per-org")):
			t.Errorf("env %q args %v: error %v, want one naming the flag", tc.env, tc.args, err)
		case !tc.err && (err != nil || c.MaxRunningPerOrg != tc.want):
			t.Errorf("env %q args %v: %d, %v; want %d", tc.env, tc.args, c.MaxRunningPerOrg, err, tc.want)
		}
	}
}

func TestCORSOriginsFlag(t *testing.T) {
	for _, tc := range []struct {
		env  string // STEPGRAPH_CORS_ORIGINS ("" unset)
		args []string
		want string // the origins, comma-joined
		err  bool
	}{
		{want: ""},
		{args: []string{"-cors-origins", "https://smith.langchain.com"}, want: "https://smith.langchain.com"},
		{env: "http://localhost:3000, https://smith.langchain.com", want: "http://localhost:3000,https://smith.langchain.com"},
		{env: "https://a.example", args: []string{"-cors-origins", "*"}, want: "*"},
		{args: []string{"-cors-origins", "https://a.example/app"}, err: true},
	} {
		t.Setenv("STEPGRAPH_CORS_ORIGINS", tc.env)
		c, err := parseServeFlags(tc.args)
		switch {
		case tc.err && (err == nil || !strings.Contains(err.Error(), "-cors-origins")):
			t.Errorf("env %q args %v: error %v, want one naming the flag", tc.env, tc.args, err)
		case !tc.err && (err != nil || strings.Join(c.CORSOrigins, ",") != tc.want):
			t.Errorf("env %q args %v: %v, %v; want %q", tc.env, tc.args, c.CORSOrigins, err, tc.want)
		}
	}
}
