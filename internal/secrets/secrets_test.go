package secrets_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/secrets"
)

func TestValidHint(t *testing.T) {
	tests := []struct {
		name string
		hint string
		ok   bool
	}{
		{"single letter", "a", true},
		{"all allowed characters", "AZaz09/_.-", true},
		{"path-like", "providers/org-1/github_app.v2", true},
		{"dots only", "..", true},
		{"slash only", "/", true},
		{"max length", strings.Repeat("x", secrets.MaxHintLen), true},
		{"empty", "", false},
		{"too long", strings.Repeat("x", secrets.MaxHintLen+1), false},
		{"space", "a b", false},
		{"tab", "a\tb", false},
		{"newline", "a\nb", false},
		{"colon", "a:b", false},
		{"plus", "a+b", false},
		{"at", "a@b", false},
		{"backslash", `a\b`, false},
		{"star", "a*", false},
		{"nul", "a\x00", false},
		{"non-ASCII", "café", false},
		{"non-ASCII within length", strings.Repeat("é", 50), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := secrets.ValidHint(tt.hint)
			if tt.ok {
				if err != nil {
					t.Fatalf("ValidHint(%q) = %v, want nil", tt.hint, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidHint(%q) = nil, want an error", tt.hint)
			}
			if !errors.Is(err, secrets.ErrInvalidHint) {
				t.Errorf("ValidHint(%q) = %v, want it to wrap ErrInvalidHint", tt.hint, err)
			}
			if !strings.Contains(err.Error(), "[A-Za-z0-9/_.-]") || !strings.Contains(err.Error(), "1-200") {
				t.Errorf("ValidHint(%q) = %q, want the message to name the rule", tt.hint, err)
			}
		})
	}
}
