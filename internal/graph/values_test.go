package graph

import (
	"encoding/json"
	"testing"
)

func TestNumberHelpers(t *testing.T) {
	tests := []struct {
		in      any
		f       float64
		fOK     bool
		i       int64
		iOK     bool
		comment string
	}{
		{json.Number("3"), 3, true, 3, true, "json integer"},
		{json.Number("2.0"), 2, true, 2, true, "integral json float"},
		{json.Number("2.5"), 2.5, true, 0, false, "fraction"},
		{7, 7, true, 7, true, "Go int"},
		{1.5, 1.5, true, 0, false, "Go float"},
		{"3", 0, false, 0, false, "string"},
		{nil, 0, false, 0, false, "null"},
	}
	for _, tt := range tests {
		f, fOK := Float(tt.in)
		i, iOK := Int(tt.in)
		if f != tt.f || fOK != tt.fOK || i != tt.i || iOK != tt.iOK {
			t.Errorf("%s: Float=%v,%v Int=%v,%v", tt.comment, f, fOK, i, iOK)
		}
	}
}

func TestNormalize(t *testing.T) {
	type point struct {
		X int `json:"x"`
	}
	got, err := normalize(map[string]any{"p": point{X: 1}, "l": []int{1, 2}, "f": 2.0})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"p": map[string]any{"x": json.Number("1")}, "l": []any{json.Number("1"), json.Number("2")}, "f": json.Number("2")}
	assertJSON(t, got, `{"p":{"x":1},"l":[1,2],"f":2}`)
	if g, w := got.(map[string]any)["f"], want["f"]; g != w {
		t.Fatalf("f = %#v, want %#v", g, w)
	}
	if _, err := normalize(map[string]any{"c": make(chan int)}); err == nil {
		t.Fatal("normalized a channel")
	}
}
