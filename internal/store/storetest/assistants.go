package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

func eqAssistant(t *testing.T, got, want store.Assistant) {
	t.Helper()
	checkTime(t, "assistant CreatedAt", got.CreatedAt, want.CreatedAt)
	checkTime(t, "assistant UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	checkBytes(t, "assistant Config", got.Config, want.Config)
	checkBytes(t, "assistant Context", got.Context, want.Context)
	checkBytes(t, "assistant Metadata", got.Metadata, want.Metadata)
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	got.UpdatedAt, want.UpdatedAt = time.Time{}, time.Time{}
	got.Config, want.Config, got.Context, want.Context = nil, nil, nil, nil
	got.Metadata, want.Metadata = nil, nil
	checkRest(t, "assistant", got, want)
}

func newAssistant(org, graph, name string, created time.Time, metadata string) store.Assistant {
	return store.Assistant{
		ID:          newID(),
		OrgID:       org,
		GraphID:     graph,
		Name:        name,
		Description: "the " + name + " assistant",
		Config:      doc("config-" + name),
		Context:     []byte(`{"user": "ü"}`),
		Metadata:    []byte(metadata),
		Version:     3,
		CreatedAt:   created,
		UpdatedAt:   created.Add(time.Millisecond),
	}
}

func testAssistants(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	a := newAssistant(org, "agent", "helper", at(0), `{"env": "prod"}`)
	must(t, "CreateAssistant", s.CreateAssistant(ctx(), a))
	got, err := s.Assistant(ctx(), org, a.ID)
	must(t, "Assistant", err)
	eqAssistant(t, got, a)

	dup := newAssistant(org, "other-graph", "dup", at(1), `{}`)
	dup.ID = a.ID
	wantErr(t, "CreateAssistant with a taken ID", s.CreateAssistant(ctx(), dup), store.ErrConflict)
	got, err = s.Assistant(ctx(), org, a.ID)
	must(t, "Assistant after conflict", err)
	eqAssistant(t, got, a)

	inOther := newAssistant(other, "agent", "same id elsewhere", at(2), `{}`)
	inOther.ID = a.ID
	must(t, "CreateAssistant with the same ID in another org", s.CreateAssistant(ctx(), inOther))
	got, err = s.Assistant(ctx(), other, a.ID)
	must(t, "Assistant of the other org", err)
	eqAssistant(t, got, inOther)

	for _, c := range []struct{ org, id string }{{org, newID()}, {newID(), a.ID}, {"", a.ID}} {
		_, err := s.Assistant(ctx(), c.org, c.id)
		wantErr(t, fmt.Sprintf("Assistant(%q, %q)", c.org, c.id), err, store.ErrNotFound)
	}

	wantErr(t, "DeleteAssistant from a third org", s.DeleteAssistant(ctx(), newID(), a.ID), store.ErrNotFound)
	must(t, "DeleteAssistant", s.DeleteAssistant(ctx(), org, a.ID))
	_, err = s.Assistant(ctx(), org, a.ID)
	wantErr(t, "Assistant after delete", err, store.ErrNotFound)
	wantErr(t, "DeleteAssistant again", s.DeleteAssistant(ctx(), org, a.ID), store.ErrNotFound)
	got, err = s.Assistant(ctx(), other, a.ID)
	must(t, "Assistant of the other org after delete", err)
	eqAssistant(t, got, inOther)
	must(t, "CreateAssistant after delete", s.CreateAssistant(ctx(), a))
}

func testAssistantSearch(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	mk := func(graph, name string, off int, metadata string) store.Assistant {
		a := newAssistant(org, graph, name, at(off), metadata)
		must(t, "CreateAssistant "+name, s.CreateAssistant(ctx(), a))
		return a
	}
	a1 := mk("chat", "Support Bot", 10, `{"env": "prod", "team": {"a": 1, "b": [1, "x"]}, "n": 1}`)
	a2 := mk("chat", "sales bot", 11, `{"env": "dev", "n": 2}`)
	a3 := mk("search", "Support Search", 12, `{"n": 1.0, "env": "prod", "flag": true, "nil": null}`)
	a4 := mk("search", "tie", 12, `{"env": "staging"}`) // same CreatedAt as a3, inserted later
	a5 := mk("chat", "elsewhere", 13, `{"env": "prod"}`)
	foreign := newAssistant(newOrg(t, s), "chat", "Support Bot", at(14), `{"env": "prod"}`)
	must(t, "CreateAssistant in another org", s.CreateAssistant(ctx(), foreign))

	all, err := s.SearchAssistants(ctx(), org, store.AssistantFilter{})
	must(t, "SearchAssistants", err)
	checkRest(t, "SearchAssistants order (newest first, ties: later insert first)",
		idsOf(all), []string{a5.ID, a4.ID, a3.ID, a2.ID, a1.ID})
	eqAssistant(t, all[4], a1)

	tests := []struct {
		name string
		f    store.AssistantFilter
		want []string
	}{
		{"graph", store.AssistantFilter{GraphID: "search"}, []string{a4.ID, a3.ID}},
		{"name contains (case-sensitive)", store.AssistantFilter{NameContains: "Support"}, []string{a3.ID, a1.ID}},
		{"name and graph", store.AssistantFilter{NameContains: "bot", GraphID: "chat"}, []string{a2.ID}},
		{"metadata string", store.AssistantFilter{Metadata: []byte(`{"env": "prod"}`)}, []string{a5.ID, a3.ID, a1.ID}},
		{"metadata number 1 = 1.0", store.AssistantFilter{Metadata: []byte(`{"n": 1}`)}, []string{a3.ID, a1.ID}},
		{"metadata object, other key order and spelling", store.AssistantFilter{Metadata: []byte(`{"team":{"b":[1.0,"x"],"a":1}}`)}, []string{a1.ID}},
		{"metadata object is compared whole", store.AssistantFilter{Metadata: []byte(`{"team": {"a": 1}}`)}, nil},
		{"metadata array order matters", store.AssistantFilter{Metadata: []byte(`{"team": {"a": 1, "b": ["x", 1]}}`)}, nil},
		{"metadata bool", store.AssistantFilter{Metadata: []byte(`{"flag": true}`)}, []string{a3.ID}},
		{"metadata null", store.AssistantFilter{Metadata: []byte(`{"nil": null}`)}, []string{a3.ID}},
		{"metadata missing key is not null", store.AssistantFilter{Metadata: []byte(`{"absent": null}`)}, nil},
		{"metadata string is not number", store.AssistantFilter{Metadata: []byte(`{"n": "1"}`)}, nil},
		{"metadata all keys", store.AssistantFilter{Metadata: []byte(`{"env": "prod", "n": 1}`)}, []string{a3.ID, a1.ID}},
		{"metadata one key differs", store.AssistantFilter{Metadata: []byte(`{"env": "prod", "n": 2}`)}, nil},
		{"metadata empty object", store.AssistantFilter{Metadata: []byte(`{}`)}, []string{a5.ID, a4.ID, a3.ID, a2.ID, a1.ID}},
		{"metadata with graph", store.AssistantFilter{Metadata: []byte(`{"env": "prod"}`), GraphID: "chat"}, []string{a5.ID, a1.ID}},
		{"metadata paged", store.AssistantFilter{Metadata: []byte(`{"env": "prod"}`), Limit: 1, Offset: 1}, []string{a3.ID}},
		{"metadata page past the end", store.AssistantFilter{Metadata: []byte(`{"env": "prod"}`), Offset: 3}, nil},
		{"paged", store.AssistantFilter{Limit: 2, Offset: 1}, []string{a4.ID, a3.ID}},
		{"no match", store.AssistantFilter{GraphID: "none"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.SearchAssistants(ctx(), org, tc.f)
			must(t, "SearchAssistants", err)
			want := tc.want
			if want == nil {
				want = []string{}
			}
			checkRest(t, "SearchAssistants", idsOf(got), want)
		})
	}

	t.Run("default limit 10", func(t *testing.T) {
		org := newOrg(t, s)
		for i := 0; i < 12; i++ {
			must(t, "CreateAssistant", s.CreateAssistant(ctx(), newAssistant(org, "g", fmt.Sprint(i), at(100+i), `{"k": 1}`)))
		}
		for _, f := range []store.AssistantFilter{{}, {Metadata: []byte(`{"k": 1}`)}} {
			got, err := s.SearchAssistants(ctx(), org, f)
			must(t, "SearchAssistants", err)
			if len(got) != 10 || got[0].Name != "11" {
				t.Errorf("SearchAssistants(%s) with Limit 0 = %d assistants (first %v), want 10 from the newest", f.Metadata, len(got), idsOf(got[:1]))
			}
			f.Offset = 10
			got, err = s.SearchAssistants(ctx(), org, f)
			must(t, "SearchAssistants", err)
			if len(got) != 2 || got[1].Name != "0" {
				t.Errorf("SearchAssistants(%s) from offset 10 = %d assistants, want the 2 oldest", f.Metadata, len(got))
			}
		}
	})
}
