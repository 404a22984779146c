// Package secretstest is the contract every secrets.Store adapter must honour.
// An adapter's tests call Run (and RunPersistent, when values outlive the
// process) with a function that opens a fresh, empty store.
package secretstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stepgraph/stepgraph/internal/secrets"
)

// Run checks the behaviour of the secrets.Store that open returns. Each
// subtest calls open once and expects an empty store; when the store is an
// io.Closer, Run closes it at the end of the subtest.
func Run(t *testing.T, open func(t *testing.T) secrets.Store) {
	t.Helper()
	fresh := func(t *testing.T) secrets.Store {
		t.Helper()
		s := open(t)
		if s == nil {
			t.Fatal("open returned a nil Store")
		}
		closeAtCleanup(t, s)
		return s
	}

	t.Run("CreateGetRoundtrip", func(t *testing.T) { testRoundtrip(t, fresh(t)) })
	t.Run("SameHintGivesDistinctRefs", func(t *testing.T) { testDistinctRefs(t, fresh(t)) })
	t.Run("RefBeginsWithHint", func(t *testing.T) { testRefPrefix(t, fresh(t)) })
	t.Run("ValuesAreCopied", func(t *testing.T) { testCopies(t, fresh(t)) })
	t.Run("GetUnknown", func(t *testing.T) { testGetUnknown(t, fresh(t)) })
	t.Run("DeleteThenGet", func(t *testing.T) { testDeleteThenGet(t, fresh(t)) })
	t.Run("DeleteTwice", func(t *testing.T) { testDeleteTwice(t, fresh(t)) })
	t.Run("DeleteUnknown", func(t *testing.T) { testDeleteUnknown(t, fresh(t)) })
	t.Run("InvalidHintRejected", func(t *testing.T) { testInvalidHint(t, fresh(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, fresh(t)) })
	t.Run("ErrorsNeverContainValue", func(t *testing.T) { testErrorsHideValue(t, fresh(t)) })
}

// RunPersistent checks that values outlive the store: open is called more
// than once with the same dir, and each store is closed (when it is an
// io.Closer) before the next one is opened.
func RunPersistent(t *testing.T, open func(t *testing.T, dir string) secrets.Store) {
	t.Helper()
	ctx := context.Background()
	// reopen opens the store on dir and returns a function that closes it
	// once; the close also runs at cleanup if the subtest stops early.
	reopen := func(t *testing.T, dir string) (secrets.Store, func()) {
		t.Helper()
		s := open(t, dir)
		if s == nil {
			t.Fatal("open returned a nil Store")
		}
		var once sync.Once
		closeFn := func() { once.Do(func() { closeNow(t, s) }) }
		t.Cleanup(closeFn)
		return s, closeFn
	}

	t.Run("ValuesSurviveReopen", func(t *testing.T) {
		dir := t.TempDir()
		s, closeS := reopen(t, dir)
		values := map[string][]byte{}
		for i, v := range sampleValues() {
			values[mustCreate(t, s, fmt.Sprintf("persist/v%d", i), v.value)] = v.value
		}
		closeS()

		s, closeS = reopen(t, dir)
		for ref, want := range values {
			assertValue(t, s, ref, want)
		}
		// The reopened store keeps working and does not reuse references.
		ref := mustCreate(t, s, "persist/after", []byte("after reopen"))
		if _, dup := values[ref]; dup {
			t.Errorf("Create after reopen returned the existing ref %q", ref)
		}
		values[ref] = []byte("after reopen")
		closeS()

		s, _ = reopen(t, dir)
		for ref, want := range values {
			assertValue(t, s, ref, want)
		}
	})

	t.Run("DeletesSurviveReopen", func(t *testing.T) {
		dir := t.TempDir()
		s, closeS := reopen(t, dir)
		kept := mustCreate(t, s, "persist/kept", []byte("kept value"))
		gone := mustCreate(t, s, "persist/gone", []byte("gone value"))
		if err := s.Delete(ctx, gone); err != nil {
			t.Fatalf("Delete(%q): %v", gone, err)
		}
		closeS()

		s, _ = reopen(t, dir)
		assertValue(t, s, kept, []byte("kept value"))
		assertNotFound(t, s, gone)
		if err := s.Delete(ctx, gone); err != nil {
			t.Errorf("Delete(%q) of a value deleted before reopen: %v", gone, err)
		}
	})
}

type sample struct {
	name  string
	value []byte
}

func sampleValues() []sample {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	big := make([]byte, 64<<10)
	for i := range big {
		big[i] = byte(i*7 + i>>8)
	}
	return []sample{
		{"text", []byte("hunter2")},
		{"single zero byte", []byte{0}},
		{"single space", []byte(" ")},
		{"newline", []byte("\n")},
		{"every byte value", all},
		{"invalid UTF-8", []byte{0xff, 0xfe, 0xc3, 0x28, 0x00, 0x80}},
		{"JSON-looking", []byte(`{"nonce":"x","ciphertext":"y"}`)},
		{"64 KiB", big},
	}
}

func testRoundtrip(t *testing.T, s secrets.Store) {
	for _, v := range sampleValues() {
		t.Run(v.name, func(t *testing.T) {
			ref := mustCreate(t, s, "roundtrip", v.value)
			assertValue(t, s, ref, v.value)
		})
	}
}

func testDistinctRefs(t *testing.T, s secrets.Store) {
	a := mustCreate(t, s, "same/hint", []byte("first"))
	b := mustCreate(t, s, "same/hint", []byte("second"))
	if a == b {
		t.Fatalf("two Creates with the same hint returned the same ref %q", a)
	}
	assertValue(t, s, a, []byte("first"))
	assertValue(t, s, b, []byte("second"))
}

func testRefPrefix(t *testing.T, s secrets.Store) {
	for _, hint := range []string{"a", "providers/org-1/github", "x.y_z-0", strings.Repeat("h", secrets.MaxHintLen)} {
		ref := mustCreate(t, s, hint, []byte("v"))
		if !strings.HasPrefix(ref, hint) {
			t.Errorf("Create(hint %q) returned ref %q, want it to begin with the hint", hint, ref)
		}
		if ref == hint {
			t.Errorf("Create(hint %q) returned the hint itself as the ref", hint)
		}
	}
}

func testCopies(t *testing.T, s secrets.Store) {
	in := []byte("original")
	ref := mustCreate(t, s, "copies", in)
	copy(in, "XXXXXXXX")
	got := assertValue(t, s, ref, []byte("original"))
	if len(got) > 0 {
		got[0] = 'Y'
	}
	assertValue(t, s, ref, []byte("original"))
}

func testGetUnknown(t *testing.T, s secrets.Store) {
	assertNotFound(t, s, "unknown/0123456789abcdef")
	assertNotFound(t, s, "")
	ref := mustCreate(t, s, "known", []byte("v"))
	assertNotFound(t, s, "known")          // the hint alone is not a ref
	assertNotFound(t, s, ref+"0")          // nor is a longer string
	assertNotFound(t, s, ref[:len(ref)-1]) // nor a shorter one
}

func testDeleteThenGet(t *testing.T, s secrets.Store) {
	ref := mustCreate(t, s, "delete", []byte("to be deleted"))
	other := mustCreate(t, s, "delete", []byte("stays"))
	if err := s.Delete(context.Background(), ref); err != nil {
		t.Fatalf("Delete(%q): %v", ref, err)
	}
	assertNotFound(t, s, ref)
	assertValue(t, s, other, []byte("stays"))
}

func testDeleteTwice(t *testing.T, s secrets.Store) {
	ctx := context.Background()
	ref := mustCreate(t, s, "delete/twice", []byte("v"))
	for i := range 2 {
		if err := s.Delete(ctx, ref); err != nil {
			t.Fatalf("Delete #%d of %q: %v", i+1, ref, err)
		}
	}
	assertNotFound(t, s, ref)
}

func testDeleteUnknown(t *testing.T, s secrets.Store) {
	for _, ref := range []string{"unknown/0123456789abcdef", "never-created"} {
		if err := s.Delete(context.Background(), ref); err != nil {
			t.Errorf("Delete(%q) of an unknown ref: %v, want nil", ref, err)
		}
	}
}

func invalidHints() map[string]string {
	return map[string]string{
		"empty":     "",
		"too long":  strings.Repeat("h", secrets.MaxHintLen+1),
		"space":     "has space",
		"newline":   "line\nbreak",
		"colon":     "a:b",
		"star":      "a*",
		"non-ASCII": "café",
	}
}

func testInvalidHint(t *testing.T, s secrets.Store) {
	for name, hint := range invalidHints() {
		t.Run(name, func(t *testing.T) {
			ref, err := s.Create(context.Background(), hint, []byte("value"))
			if err == nil {
				t.Fatalf("Create(hint %q) = %q, nil; want an error", hint, ref)
			}
			if !errors.Is(err, secrets.ErrInvalidHint) {
				t.Errorf("Create(hint %q) = %v, want it to wrap secrets.ErrInvalidHint", hint, err)
			}
			if ref != "" {
				t.Errorf("Create(hint %q) failed but returned ref %q", hint, ref)
			}
		})
	}
}

func testConcurrent(t *testing.T, s secrets.Store) {
	const workers = 20
	ctx := context.Background()
	refs := make([]string, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			value := []byte(fmt.Sprintf("concurrent value %d", i))
			ref, err := s.Create(ctx, "concurrent", value)
			if err != nil {
				t.Errorf("worker %d: Create: %v", i, err)
				return
			}
			refs[i] = ref
			for range 5 {
				got, err := s.Get(ctx, ref)
				if err != nil {
					t.Errorf("worker %d: Get(%q): %v", i, ref, err)
					return
				}
				if !bytes.Equal(got, value) {
					t.Errorf("worker %d: Get(%q) = %q, want %q", i, ref, got, value)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := map[string]int{}
	for i, ref := range refs {
		if j, dup := seen[ref]; dup {
			t.Errorf("workers %d and %d got the same ref %q", j, i, ref)
		}
		seen[ref] = i
		assertValue(t, s, ref, []byte(fmt.Sprintf("concurrent value %d", i)))
	}
}

func testErrorsHideValue(t *testing.T, s secrets.Store) {
	const marker = "s3cr3t-MARKER-do-not-leak"
	value := []byte(marker)
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			return
		}
		for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
			if strings.Contains(text, marker) {
				t.Errorf("%s: error contains the secret value: %s", what, text)
			}
		}
	}

	for name, hint := range invalidHints() {
		_, err := s.Create(context.Background(), hint, value)
		if err == nil {
			t.Errorf("Create(invalid hint %s) succeeded", name)
		}
		check("Create with invalid hint "+name, err)
	}

	// A hint that is itself fine must not be echoed with the value either.
	ref := mustCreate(t, s, "leak/check", value)
	_, err := s.Get(context.Background(), ref+"x")
	check("Get unknown", err)

	// Cancelled contexts may or may not fail; if they do, no value in the error.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Create(cancelled, "leak/cancelled", value)
	check("Create with a cancelled context", err)
	_, err = s.Get(cancelled, ref)
	check("Get with a cancelled context", err)
	check("Delete with a cancelled context", s.Delete(cancelled, ref))
}

func mustCreate(t *testing.T, s secrets.Store, hint string, value []byte) string {
	t.Helper()
	ref, err := s.Create(context.Background(), hint, value)
	if err != nil {
		t.Fatalf("Create(hint %q, %d bytes): %v", hint, len(value), err)
	}
	if ref == "" {
		t.Fatalf("Create(hint %q) returned an empty ref", hint)
	}
	return ref
}

func assertValue(t *testing.T, s secrets.Store, ref string, want []byte) []byte {
	t.Helper()
	got, err := s.Get(context.Background(), ref)
	if err != nil {
		t.Fatalf("Get(%q): %v", ref, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) returned %d bytes that differ from the %d bytes stored", ref, len(got), len(want))
	}
	return got
}

func assertNotFound(t *testing.T, s secrets.Store, ref string) {
	t.Helper()
	got, err := s.Get(context.Background(), ref)
	if !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("Get(%q) = %d bytes, %v; want secrets.ErrNotFound", ref, len(got), err)
	}
}

func closeAtCleanup(t *testing.T, s secrets.Store) {
	t.Helper()
	t.Cleanup(func() { closeNow(t, s) })
}

func closeNow(t *testing.T, s secrets.Store) {
	t.Helper()
	if c, ok := s.(io.Closer); ok {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}
