package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/secrets"
	"github.com/stepgraph/stepgraph/internal/secrets/secretstest"
)

func TestContract(t *testing.T) {
	secretstest.Run(t, func(t *testing.T) secrets.Store {
		return mustOpen(t, t.TempDir())
	})
}

func TestContractPersistent(t *testing.T) {
	secretstest.RunPersistent(t, func(t *testing.T, dir string) secrets.Store {
		return mustOpen(t, dir)
	})
}

func TestOpenCreatesPrivateDirectoryAndKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "secrets")
	mustOpen(t, dir)

	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != 0o700 {
		t.Errorf("directory mode = %o, want 700", got)
	}
	info, err = os.Stat(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != 0o600 {
		t.Errorf("key file mode = %o, want 600", got)
	}
	if info.Size() != 32 {
		t.Errorf("key file size = %d, want 32", info.Size())
	}
}

func TestKeyIsKeptAcrossOpens(t *testing.T) {
	dir := t.TempDir()
	mustOpen(t, dir)
	first := readFile(t, filepath.Join(dir, KeyFile))
	mustOpen(t, dir)
	if second := readFile(t, filepath.Join(dir, KeyFile)); !bytes.Equal(first, second) {
		t.Fatal("the key changed on reopen")
	}

	other := t.TempDir()
	mustOpen(t, other)
	if bytes.Equal(first, readFile(t, filepath.Join(other, KeyFile))) {
		t.Fatal("two stores got the same key")
	}
}

func TestOpenRefusesKeyOfWrongLength(t *testing.T) {
	for _, n := range []int{0, 16, 31, 33, 64} {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, KeyFile), bytes.Repeat([]byte{7}, n))
		_, err := Open(dir)
		if err == nil {
			t.Fatalf("Open with a %d-byte key file succeeded", n)
		}
		if !strings.Contains(err.Error(), KeyFile) || !strings.Contains(err.Error(), "want exactly 32") {
			t.Errorf("Open with a %d-byte key file: %q, want it to name the file and the 32-byte rule", n, err)
		}
	}
}

func TestRefFormat(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	re := regexp.MustCompile(`^providers/org-1/github/[0-9a-f]{16}$`)
	for range 10 {
		ref := create(t, s, "providers/org-1/github", "v")
		if !re.MatchString(ref) {
			t.Fatalf("ref %q does not match %s", ref, re)
		}
	}
}

func TestDataFileHoldsNoPlaintext(t *testing.T) {
	const plaintext = "correct-horse-battery-staple"
	dir := t.TempDir()
	s := mustOpen(t, dir)
	ref := create(t, s, "leak", plaintext)

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if data := readFile(t, filepath.Join(dir, e.Name())); bytes.Contains(data, []byte(plaintext)) {
			t.Errorf("%s contains the plaintext", e.Name())
		}
	}
	if len(entries) != 3 {
		t.Errorf("directory holds %d files, want only %s, %s and %s (no temporary files left)", len(entries), KeyFile, DataFile, LockFile)
	}

	info, err := os.Stat(filepath.Join(dir, DataFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != 0o600 {
		t.Errorf("%s mode = %o, want 600", DataFile, got)
	}

	// The documented format: ref → {"nonce": base64, "ciphertext": base64}.
	var doc map[string]map[string]string
	if err := json.Unmarshal(readFile(t, filepath.Join(dir, DataFile)), &doc); err != nil {
		t.Fatalf("%s is not a JSON object of objects of strings: %v", DataFile, err)
	}
	e, ok := doc[ref]
	if !ok || len(doc) != 1 {
		t.Fatalf("%s = %v, want exactly the key %q", DataFile, doc, ref)
	}
	if len(e) != 2 || e["nonce"] == "" || e["ciphertext"] == "" {
		t.Fatalf("entry = %v, want nonce and ciphertext", e)
	}
	var typed map[string]entry
	if err := json.Unmarshal(readFile(t, filepath.Join(dir, DataFile)), &typed); err != nil {
		t.Fatal(err)
	}
	if n := len(typed[ref].Nonce); n != 12 {
		t.Errorf("nonce is %d bytes, want 12", n)
	}
	if n := len(typed[ref].Ciphertext); n != len(plaintext)+16 {
		t.Errorf("ciphertext is %d bytes, want %d (plaintext + GCM tag)", n, len(plaintext)+16)
	}
}

func TestTamperingIsDetected(t *testing.T) {
	const a, b = "value-of-A", "value-of-B"
	tests := []struct {
		name   string
		tamper func(m map[string]entry, refA, refB string)
		// which refs must now fail to decrypt
		broken []string
	}{
		{
			name:   "flipped ciphertext byte",
			tamper: func(m map[string]entry, refA, _ string) { m[refA].Ciphertext[0] ^= 0x01 },
			broken: []string{"A"},
		},
		{
			name:   "flipped tag byte",
			tamper: func(m map[string]entry, refA, _ string) { c := m[refA].Ciphertext; c[len(c)-1] ^= 0x80 },
			broken: []string{"A"},
		},
		{
			name:   "flipped nonce byte",
			tamper: func(m map[string]entry, refA, _ string) { m[refA].Nonce[3] ^= 0xff },
			broken: []string{"A"},
		},
		{
			name: "entries swapped between refs",
			tamper: func(m map[string]entry, refA, refB string) {
				m[refA], m[refB] = m[refB], m[refA]
			},
			broken: []string{"A", "B"},
		},
		{
			name: "entry copied to another ref",
			tamper: func(m map[string]entry, refA, refB string) {
				m[refB] = m[refA]
			},
			broken: []string{"B"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir)
			refs := map[string]string{"A": create(t, s, "tamper/a", a), "B": create(t, s, "tamper/b", b)}
			values := map[string]string{"A": a, "B": b}
			closeStore(t, s)

			path := filepath.Join(dir, DataFile)
			var m map[string]entry
			if err := json.Unmarshal(readFile(t, path), &m); err != nil {
				t.Fatal(err)
			}
			tt.tamper(m, refs["A"], refs["B"])
			data, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, data)

			s = mustOpen(t, dir)
			for _, name := range []string{"A", "B"} {
				got, err := s.Get(context.Background(), refs[name])
				broken := strings.Contains(strings.Join(tt.broken, ","), name)
				if !broken {
					if err != nil || string(got) != values[name] {
						t.Errorf("Get(%s) = %q, %v; want the untouched value", name, got, err)
					}
					continue
				}
				if err == nil {
					t.Errorf("Get(%s) = %q, nil; want ErrDecrypt", name, got)
					continue
				}
				if !errors.Is(err, ErrDecrypt) {
					t.Errorf("Get(%s) = %v, want ErrDecrypt", name, err)
				}
				if errors.Is(err, secrets.ErrNotFound) {
					t.Errorf("Get(%s) reports a tampered entry as not found", name)
				}
				if got != nil {
					t.Errorf("Get(%s) returned %d bytes along with the error", name, len(got))
				}
				if strings.Contains(err.Error(), a) || strings.Contains(err.Error(), b) {
					t.Errorf("Get(%s) error contains a secret value: %v", name, err)
				}
				if !strings.Contains(err.Error(), refs[name]) {
					t.Errorf("Get(%s) error %q does not name the ref", name, err)
				}
			}
		})
	}
}

func TestDifferentKeyCannotDecrypt(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	ref := create(t, s, "rekey", "sealed under the first key")
	closeStore(t, s)

	writeFile(t, filepath.Join(dir, KeyFile), bytes.Repeat([]byte{0x42}, 32))
	s = mustOpen(t, dir)
	if got, err := s.Get(context.Background(), ref); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("Get with another key = %q, %v; want ErrDecrypt", got, err)
	}
}

func TestOpenRejectsCorruptDataFile(t *testing.T) {
	validNonce := `"AAAAAAAAAAAAAAAA"`          // 12 bytes
	validCipher := `"AAAAAAAAAAAAAAAAAAAAAA=="` // 16 bytes
	tests := map[string]string{
		"empty file":         ``,
		"truncated":          `{"a/0123456789abcdef": {"nonce": `,
		"not JSON":           `this is not json`,
		"array":              `[]`,
		"null":               `null`,
		"string entry":       `{"a/0": "x"}`,
		"bad base64":         `{"a/0": {"nonce": "!!!", "ciphertext": ` + validCipher + `}}`,
		"missing nonce":      `{"a/0": {"ciphertext": ` + validCipher + `}}`,
		"short nonce":        `{"a/0": {"nonce": "AAAA", "ciphertext": ` + validCipher + `}}`,
		"missing ciphertext": `{"a/0": {"nonce": ` + validNonce + `}}`,
		"short ciphertext":   `{"a/0": {"nonce": ` + validNonce + `, "ciphertext": "AAAA"}}`,
		"empty ref":          `{"": {"nonce": ` + validNonce + `, "ciphertext": ` + validCipher + `}}`,
	}
	for name, content := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			mustOpen(t, dir) // creates the key
			writeFile(t, filepath.Join(dir, DataFile), []byte(content))
			s, err := Open(dir)
			if err == nil {
				t.Fatalf("Open succeeded on a corrupt %s", DataFile)
			}
			if s != nil {
				t.Error("Open returned a Store along with the error")
			}
			if msg := err.Error(); !strings.Contains(msg, DataFile) || !strings.Contains(msg, "corrupt") {
				t.Errorf("Open: %q, want it to say %s is corrupt", msg, DataFile)
			}
		})
	}

	t.Run("well-formed entries load", func(t *testing.T) {
		dir := t.TempDir()
		mustOpen(t, dir)
		writeFile(t, filepath.Join(dir, DataFile), []byte(`{"a/0": {"nonce": `+validNonce+`, "ciphertext": `+validCipher+`}}`))
		s := mustOpen(t, dir)
		if _, err := s.Get(context.Background(), "a/0"); !errors.Is(err, ErrDecrypt) {
			t.Fatalf("Get of a forged entry: %v, want ErrDecrypt", err)
		}
	})
}

func TestFailedWriteRollsBack(t *testing.T) {
	const kept = "kept-value"
	const lost = "value-that-fails-to-persist"
	ctx := context.Background()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	keptRef := create(t, s, "rollback", kept)
	before := readFile(t, filepath.Join(dir, DataFile))

	s.rename = func(string, string) error { return errors.New("disk on fire") }

	ref, err := s.Create(ctx, "rollback", []byte(lost))
	if err == nil {
		t.Fatalf("Create succeeded (%q) although the write failed", ref)
	}
	if ref != "" {
		t.Errorf("failed Create returned ref %q", ref)
	}
	if strings.Contains(err.Error(), lost) {
		t.Errorf("Create error contains the value: %v", err)
	}
	if !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("Create error %q hides the cause", err)
	}
	if len(s.entries) != 1 {
		t.Errorf("after a failed Create the store holds %d entries, want 1", len(s.entries))
	}

	if err := s.Delete(ctx, keptRef); err == nil {
		t.Fatal("Delete succeeded although the write failed")
	}
	if got, err := s.Get(ctx, keptRef); err != nil || string(got) != kept {
		t.Fatalf("after a failed Delete, Get = %q, %v; want the value still there", got, err)
	}

	if after := readFile(t, filepath.Join(dir, DataFile)); !bytes.Equal(before, after) {
		t.Error("a failed write changed secrets.json")
	}
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		if n := f.Name(); n != KeyFile && n != DataFile && n != LockFile {
			t.Errorf("a failed write left %s in the directory", n)
		}
	}

	s.rename = os.Rename
	if err := s.Delete(ctx, keptRef); err != nil {
		t.Fatalf("Delete after the disk recovered: %v", err)
	}
	closeStore(t, s)
	s = mustOpen(t, dir)
	if _, err := s.Get(ctx, keptRef); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("after reopen Get = %v, want ErrNotFound", err)
	}
	if len(s.entries) != 0 {
		t.Fatalf("after reopen the store holds %d entries, want 0", len(s.entries))
	}
}

func TestClosedStore(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, t.TempDir())
	ref := create(t, s, "closed", "v")
	closeStore(t, s)
	closeStore(t, s) // twice is fine

	if _, err := s.Create(ctx, "closed", []byte("v")); !errors.Is(err, ErrClosed) {
		t.Errorf("Create after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Get(ctx, ref); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
	if err := s.Delete(ctx, ref); !errors.Is(err, ErrClosed) {
		t.Errorf("Delete after Close: %v, want ErrClosed", err)
	}
}

func TestCancelledContext(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	ref := create(t, s, "ctx", "v")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Create(ctx, "ctx", []byte("v")); !errors.Is(err, context.Canceled) {
		t.Errorf("Create: %v, want context.Canceled", err)
	}
	if _, err := s.Get(ctx, ref); !errors.Is(err, context.Canceled) {
		t.Errorf("Get: %v, want context.Canceled", err)
	}
	if err := s.Delete(ctx, ref); !errors.Is(err, context.Canceled) {
		t.Errorf("Delete: %v, want context.Canceled", err)
	}
	if got, err := s.Get(context.Background(), ref); err != nil || string(got) != "v" {
		t.Errorf("after a cancelled Delete, Get = %q, %v; want the value", got, err)
	}
}

func TestEmptyValue(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	ref := create(t, s, "empty", "")
	closeStore(t, s)
	s = mustOpen(t, dir)
	got, err := s.Get(context.Background(), ref)
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("Get of an empty value = %#v, %v; want a non-nil empty slice", got, err)
	}
}

func mustOpen(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func closeStore(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func create(t *testing.T, s *Store, hint, value string) string {
	t.Helper()
	ref, err := s.Create(context.Background(), hint, []byte(value))
	if err != nil {
		t.Fatalf("Create(%q): %v", hint, err)
	}
	return ref
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Two stores on one directory (the server and the CLI) see each other's
// writes and never erase them.
func TestTwoProcessesShareTheDirectory(t *testing.T) {
	dir := t.TempDir()
	server, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fromCLI, err := cli.Create(ctx, "orgs/a", []byte("made-by-cli"))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := server.Get(ctx, fromCLI); err != nil || string(v) != "made-by-cli" {
		t.Fatalf("server reads the CLI's secret: %q %v", v, err)
	}
	fromServer, err := server.Create(ctx, "orgs/b", []byte("made-by-server"))
	if err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{fromCLI: "made-by-cli", fromServer: "made-by-server"} {
		if v, err := reopened.Get(ctx, ref); err != nil || string(v) != want {
			t.Errorf("%s after both wrote: %q %v", ref, v, err)
		}
	}
}
