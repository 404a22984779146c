package cpcodec

import (
	"strings"
	"testing"
)

func TestSameValuesKnowsTheStoredCheckpointWithoutItsBlobs(t *testing.T) {
	long := `"` + strings.Repeat("a", 2*InlineMax) + `"`
	msgs := `[{"c":` + long + `}]`
	stored := []byte(`{"v":1,"id":"c2","values":{"count":3,"messages":` + msgs + `,"text":` + long + `},"next":[]}`)
	// A child of stored's parent appended to messages: SameValues must hold
	// for a version that is a delta in the store.
	parent := Encode([]byte(`{"v":1,"id":"c1","values":{"count":2,"messages":[{"c":`+long+`}],"text":`+long+`},"next":[]}`), nil)
	child := `[{"c":` + long + `},{"c":"b"}]`
	storedChild := []byte(`{"v":1,"id":"c2","values":{"count":3,"messages":` + child + `,"text":` + long + `},"next":[]}`)
	cases := []struct {
		name         string
		stored, data []byte
		parent       *Manifest
		want         bool
	}{
		{name: "the same bytes", stored: stored, data: stored, want: true},
		{name: "the same bytes, stored as an append", stored: storedChild, parent: parent.M, data: storedChild, want: true},
		{name: "an inline value changed", stored: stored, data: []byte(strings.Replace(string(stored), `"count":3`, `"count":4`, 1))},
		{name: "a blob's value changed, same length", stored: stored, data: []byte(strings.Replace(string(stored), `"text":"a`, `"text":"b`, 1))},
		{name: "the head changed", stored: stored, data: []byte(strings.Replace(string(stored), `"id":"c2"`, `"id":"c3"`, 1))},
		{name: "a channel more", stored: stored, data: []byte(strings.Replace(string(stored), `"count":3`, `"count":3,"x":1`, 1))},
		{name: "channels in another order", stored: stored, data: []byte(`{"v":1,"id":"c2","values":{"messages":` + msgs + `,"count":3,"text":` + long + `},"next":[]}`)},
		{name: "not a checkpoint", stored: stored, data: []byte(`[1]`)},
		{name: "spaced JSON", stored: stored, data: []byte(strings.Replace(string(stored), `"count":3`, `"count": 3`, 1))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := Encode(tc.stored, tc.parent)
			if e.M == nil {
				t.Fatal("the stored checkpoint was not split")
			}
			if tc.parent != nil && (len(e.Blobs) != 1 || e.Blobs[0].Base == "") {
				t.Fatalf("the child was not stored as an append: %+v", e.Blobs)
			}
			if got := SameValues(tc.data, e.Head, e.M); got != tc.want {
				t.Errorf("SameValues = %v, want %v", got, tc.want)
			}
		})
	}
	if SameValues(stored, stored, nil) {
		t.Error("SameValues without a manifest (stored whole) must say no: the caller compares the bytes")
	}
}
