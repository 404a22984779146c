package sqlite

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/store"
)

// Rows written before migration 0021 (whole data, no manifest, no size)
// are read as they are, a child of one is stored split again after its
// first whole version, and the usage counts both as put.
func TestCheckpointsStoredBeforeTheFormat(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	org := uuid.NewString()
	th := store.Thread{ID: uuid.NewString(), OrgID: org, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := db.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 3)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7()).String()
	}
	data := func(id string, n int) []byte {
		msgs := make([]string, n)
		for i := range msgs {
			msgs[i] = strings.Repeat("m", 500)
		}
		b, _ := json.Marshal(map[string]any{"v": 1, "id": id, "values": map[string]any{"messages": msgs}})
		return b
	}
	old := data(ids[0], 1)
	// As a server before the migration wrote it (data whole; no manifest, no size).
	if _, err := db.exec(ctx, `INSERT INTO checkpoints (org_id, thread_id, id, parent_id, run_id, created_at, data)
		VALUES (?, ?, ?, '', '', ?, ?)`, org, th.ID, ids[0], micros(time.Now()), old); err != nil {
		t.Fatal(err)
	}
	children := [][]byte{data(ids[1], 2), data(ids[2], 3)}
	for i, d := range children {
		cp := store.Checkpoint{ThreadID: th.ID, ID: ids[i+1], ParentID: ids[i], CreatedAt: time.Now(), Data: d}
		if err := db.PutCheckpoint(ctx, org, cp); err != nil {
			t.Fatal(err)
		}
	}
	list, err := db.ListCheckpoints(ctx, org, th.ID, "", 10)
	if err != nil || len(list) != 3 {
		t.Fatalf("ListCheckpoints: %d, %v", len(list), err)
	}
	for i, want := range [][]byte{children[1], children[0], old} {
		if !bytes.Equal(list[i].Data, want) {
			t.Fatalf("checkpoint %d: %q", i, list[i].Data)
		}
	}
	var manifests, bases int
	if err := db.db.QueryRow(`SELECT count(manifest) FROM checkpoints WHERE thread_id = ?`, th.ID).Scan(&manifests); err != nil {
		t.Fatal(err)
	}
	if err := db.db.QueryRow(`SELECT count(*) FROM checkpoint_blobs WHERE thread_id = ? AND base != ''`, th.ID).Scan(&bases); err != nil {
		t.Fatal(err)
	}
	if manifests != 2 || bases != 1 {
		t.Fatalf("%d checkpoints split, %d appends: want the two new ones split, the second an append to the first", manifests, bases)
	}
	u, err := db.Usage(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len("{}") + len(old) + len(children[0]) + len(children[1])); u.Bytes != want {
		t.Fatalf("usage %d bytes, want %d", u.Bytes, want)
	}
}

// LatestCheckpointIfNot answers "same" for exactly the latest checkpoint's
// bytes without reading its values, and the latest checkpoint otherwise.
func TestLatestCheckpointIfNot(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	org := uuid.NewString()
	th := store.Thread{ID: uuid.NewString(), OrgID: org, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := db.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	var last []byte
	parent := ""
	for n := 1; n <= 3; n++ {
		id := uuid.Must(uuid.NewV7()).String()
		msgs := make([]string, n)
		for i := range msgs {
			msgs[i] = strings.Repeat("m", 500)
		}
		last, _ = json.Marshal(map[string]any{"v": 1, "id": id, "values": map[string]any{"messages": msgs, "n": n}})
		if err := db.PutCheckpoint(ctx, org, store.Checkpoint{ThreadID: th.ID, ID: id, ParentID: parent, CreatedAt: time.Now(), Data: last}); err != nil {
			t.Fatal(err)
		}
		parent = id
	}
	other := bytes.Replace(last, []byte(`"n":3`), []byte(`"n":4`), 1)
	for _, tc := range []struct {
		name  string
		known []byte
		same  bool
	}{
		{"the latest's bytes", last, true},
		{"other bytes", other, false},
		{"nothing known", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp, same, err := db.LatestCheckpointIfNot(ctx, org, th.ID, tc.known)
			if err != nil || same != tc.same || cp.ID != parent || !bytes.Equal(cp.Data, last) {
				t.Fatalf("got %s same=%v err=%v; want the latest (%s), same=%v", cp.Data, same, err, parent, tc.same)
			}
		})
	}
	if _, _, err := db.LatestCheckpointIfNot(ctx, uuid.NewString(), th.ID, last); err != store.ErrNotFound {
		t.Fatalf("another organization's thread: %v, want ErrNotFound", err)
	}
	// "Same" does not read the values: with the versions gone it still
	// answers, while a read of them fails.
	if _, err := db.exec(ctx, `DELETE FROM checkpoint_blobs WHERE thread_id = ?`, th.ID); err != nil {
		t.Fatal(err)
	}
	if _, same, err := db.LatestCheckpointIfNot(ctx, org, th.ID, last); err != nil || !same {
		t.Fatalf("same=%v err=%v: the values were read", same, err)
	}
	if _, _, err := db.LatestCheckpointIfNot(ctx, org, th.ID, other); err == nil {
		t.Fatal("other bytes: the values were not read")
	}
}
