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

// testAssistantVersions: a created assistant is its version 1 (or the
// version it was made with); UpdateAssistant adds the next version and
// makes it current; SetAssistantVersion goes back to one; versions list
// highest first, filter by metadata and page; Count follows Search;
// another organization sees none of it; deletion takes the versions.
func testAssistantVersions(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	a := newAssistant(org, "agent", "v", at(0), `{"stage": "one"}`)
	a.Version = 1
	must(t, "CreateAssistant", s.CreateAssistant(ctx(), a))

	upd := a
	upd.Name, upd.Config, upd.Metadata, upd.UpdatedAt = "v2", []byte(`{"x": 2}`), []byte(`{"stage": "two"}`), at(5)
	got, err := s.UpdateAssistant(ctx(), upd)
	must(t, "UpdateAssistant", err)
	want := upd
	want.Version = 2
	eqAssistant(t, got, want)
	eqAssistant(t, mustAssistant(t, s, org, a.ID), want)

	upd3 := upd
	upd3.Name, upd3.Metadata, upd3.UpdatedAt = "v3", []byte(`{"stage": "two", "last": true}`), at(6)
	if got, err = s.UpdateAssistant(ctx(), upd3); err != nil || got.Version != 3 {
		t.Fatalf("second UpdateAssistant: version %d, %v; want 3", got.Version, err)
	}

	versions, err := s.AssistantVersions(ctx(), org, a.ID, store.AssistantVersionFilter{})
	must(t, "AssistantVersions", err)
	var nums []int
	for _, v := range versions {
		nums = append(nums, v.Version)
	}
	checkRest(t, "versions, highest first", nums, []int{3, 2, 1})
	if len(versions) == 3 {
		if versions[2].Name != "v" || versions[1].Name != "v2" || versions[0].Name != "v3" {
			t.Errorf("versions keep their fields: %q %q %q", versions[2].Name, versions[1].Name, versions[0].Name)
		}
		checkTime(t, "version 2 CreatedAt (when it was made)", versions[1].CreatedAt, at(5))
	}
	two, err := s.AssistantVersions(ctx(), org, a.ID, store.AssistantVersionFilter{Metadata: []byte(`{"stage": "two"}`)})
	must(t, "AssistantVersions by metadata", err)
	if len(two) != 2 || two[0].Version != 3 {
		t.Errorf("versions with stage two: %d", len(two))
	}
	paged, err := s.AssistantVersions(ctx(), org, a.ID, store.AssistantVersionFilter{Limit: 1, Offset: 1})
	must(t, "AssistantVersions paged", err)
	if len(paged) != 1 || paged[0].Version != 2 {
		t.Errorf("versions limit 1 offset 1: %+v", paged)
	}

	back, err := s.SetAssistantVersion(ctx(), org, a.ID, 1, at(9))
	must(t, "SetAssistantVersion", err)
	if back.Version != 1 || back.Name != "v" || string(back.Metadata) != `{"stage": "one"}` {
		t.Errorf("after SetAssistantVersion(1): %+v", back)
	}
	checkTime(t, "UpdatedAt after SetAssistantVersion", back.UpdatedAt, at(9))
	checkTime(t, "CreatedAt after SetAssistantVersion", back.CreatedAt, a.CreatedAt)
	// The next update is above the highest version, not the current one.
	if got, err = s.UpdateAssistant(ctx(), upd); err != nil || got.Version != 4 {
		t.Errorf("UpdateAssistant after going back: version %d, %v; want 4", got.Version, err)
	}

	_, err = s.SetAssistantVersion(ctx(), org, a.ID, 99, at(9))
	wantErr(t, "SetAssistantVersion of a missing version", err, store.ErrNotFound)
	_, err = s.SetAssistantVersion(ctx(), other, a.ID, 1, at(9))
	wantErr(t, "SetAssistantVersion in another organization", err, store.ErrNotFound)
	_, err = s.AssistantVersions(ctx(), other, a.ID, store.AssistantVersionFilter{})
	wantErr(t, "AssistantVersions in another organization", err, store.ErrNotFound)
	foreign := upd
	foreign.OrgID = other
	_, err = s.UpdateAssistant(ctx(), foreign)
	wantErr(t, "UpdateAssistant in another organization", err, store.ErrNotFound)

	// Versions never show in searches or counts.
	b := newAssistant(org, "agent", "b", at(1), `{"stage": "one"}`)
	must(t, "CreateAssistant", s.CreateAssistant(ctx(), b))
	for _, tc := range []struct {
		f    store.AssistantFilter
		want int
	}{{store.AssistantFilter{}, 2}, {store.AssistantFilter{Metadata: []byte(`{"stage": "one"}`)}, 1}, {store.AssistantFilter{NameContains: "v"}, 1}, {store.AssistantFilter{GraphID: "none"}, 0}} {
		n, err := s.CountAssistants(ctx(), org, tc.f)
		must(t, "CountAssistants", err)
		list, err := s.SearchAssistants(ctx(), org, tc.f)
		must(t, "SearchAssistants", err)
		if n != tc.want || len(list) != tc.want {
			t.Errorf("filter %+v: count %d, search %d; want %d", tc.f, n, len(list), tc.want)
		}
	}
	if n, err := s.CountAssistants(ctx(), other, store.AssistantFilter{}); err != nil || n != 0 {
		t.Errorf("CountAssistants of another organization: %d, %v", n, err)
	}

	must(t, "DeleteAssistant", s.DeleteAssistant(ctx(), org, a.ID))
	_, err = s.AssistantVersions(ctx(), org, a.ID, store.AssistantVersionFilter{})
	wantErr(t, "AssistantVersions of a deleted assistant", err, store.ErrNotFound)
	again := newAssistant(org, "agent", "again", at(10), `{}`)
	again.ID, again.Version = a.ID, 1
	must(t, "CreateAssistant with a deleted assistant's id", s.CreateAssistant(ctx(), again))
	versions, err = s.AssistantVersions(ctx(), org, a.ID, store.AssistantVersionFilter{})
	must(t, "AssistantVersions", err)
	if len(versions) != 1 || versions[0].Name != "again" {
		t.Errorf("a new assistant with an old id has %d versions, want its own only", len(versions))
	}
}

func mustAssistant(t *testing.T, s store.Store, org, id string) store.Assistant {
	t.Helper()
	a, err := s.Assistant(ctx(), org, id)
	must(t, "Assistant", err)
	return a
}
