package sources

import "testing"

func TestIsTagRef(t *testing.T) {
	tests := []struct {
		ref  string
		want bool
	}{
		{"refs/tags/v1", true},
		{"refs/tags/release/2024", true},
		{"refs/tags/", false},
		{"v1", false},
		{"main", false},
		{"refs/heads/main", false},
		{"refs/heads/refs/tags/x", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsTagRef(tt.ref); got != tt.want {
			t.Errorf("IsTagRef(%q) = %v, want %v", tt.ref, got, tt.want)
		}
	}
}
