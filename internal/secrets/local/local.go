package local

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/secrets"
)

const (
	// KeyFile is the name of the key file in the store's directory.
	KeyFile = "secrets.key"
	// DataFile is the name of the values file in the store's directory.
	DataFile = "secrets.json"

	keySize   = 32 // AES-256
	refRandom = 8  // random bytes in a reference, printed as 16 hex characters
)

var (
	// ErrDecrypt: a stored value does not authenticate under its reference and
	// the store's key (the file was altered, an entry was moved to another
	// reference, or the key file was replaced).
	ErrDecrypt = errors.New("stored secret cannot be decrypted")
	// ErrClosed: the Store was used after Close.
	ErrClosed = errors.New("secrets store is closed")
)

// Store is the local, file-backed secrets.Store. Use Open to get one.
type Store struct {
	dir  string
	aead cipher.AEAD

	mu      sync.RWMutex
	entries map[string]entry
	closed  bool

	// rename replaces secrets.json; a field so tests can make writes fail.
	rename func(oldpath, newpath string) error
}

var _ secrets.Store = (*Store)(nil)

// entry is one sealed value as stored in secrets.json. encoding/json writes
// []byte as standard base64.
type entry struct {
	Nonce      []byte `json:"nonce"`
	Ciphertext []byte `json:"ciphertext"`
}

// Open opens the store in dir, creating the directory (0700), the key and the
// values file as needed, and loads every sealed value into memory.
func Open(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("secrets/local: open: directory is empty")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("secrets/local: create directory: %w", err)
	}
	key, err := loadOrCreateKey(dir)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secrets/local: key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secrets/local: key: %w", err)
	}
	s := &Store{dir: dir, aead: aead, rename: os.Rename}
	if s.entries, err = s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// Close marks the store closed; later calls fail with ErrClosed. Every change
// is already on disk, so there is nothing to flush. Closing twice is fine.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// Create seals value under a new reference "<hint>/<16 hex>" and persists it.
func (s *Store) Create(ctx context.Context, hint string, value []byte) (string, error) {
	if err := secrets.ValidHint(hint); err != nil {
		return "", fmt.Errorf("secrets/local: create: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("secrets/local: create: %w", err)
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("secrets/local: create: nonce: %w", err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", fmt.Errorf("secrets/local: create: %w", ErrClosed)
	}
	unlock, err := s.syncFromDisk(syscall.LOCK_EX)
	if err != nil {
		return "", fmt.Errorf("secrets/local: create: %w", storageErr(err))
	}
	defer unlock()
	ref, err := s.newRef(hint)
	if err != nil {
		return "", err
	}
	s.entries[ref] = entry{Nonce: nonce, Ciphertext: s.aead.Seal(nil, nonce, value, []byte(ref))}
	if err := s.persist(); err != nil {
		delete(s.entries, ref)
		return "", fmt.Errorf("secrets/local: create %q: %w", ref, storageErr(err))
	}
	return ref, nil
}

// Get opens the value sealed under ref.
func (s *Store) Get(ctx context.Context, ref string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("secrets/local: get %q: %w", ref, err)
	}
	s.mu.RLock()
	e, ok := s.entries[ref]
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return nil, fmt.Errorf("secrets/local: get %q: %w", ref, ErrClosed)
	}
	if !ok {
		// Another process (the CLI next to a running server) may have
		// added it since this one last read the file.
		e, ok = s.reread(ref)
	}
	if !ok {
		return nil, fmt.Errorf("secrets/local: get %q: %w", ref, secrets.ErrNotFound)
	}
	// Entries are never changed in place, so e can be read without the lock.
	value, err := s.aead.Open(nil, e.Nonce, e.Ciphertext, []byte(ref))
	if err != nil {
		// The GCM error carries nothing of the plaintext; it is replaced anyway.
		return nil, fmt.Errorf("secrets/local: get %q: %w: the entry in %s does not authenticate under this reference and %s (altered, moved from another reference, or a different key)",
			ref, ErrDecrypt, DataFile, KeyFile)
	}
	if value == nil {
		value = []byte{}
	}
	return value, nil
}

// Delete removes the value under ref; an unknown ref is not an error.
func (s *Store) Delete(ctx context.Context, ref string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("secrets/local: delete %q: %w", ref, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("secrets/local: delete %q: %w", ref, ErrClosed)
	}
	unlock, err := s.syncFromDisk(syscall.LOCK_EX)
	if err != nil {
		return fmt.Errorf("secrets/local: delete %q: %w", ref, storageErr(err))
	}
	defer unlock()
	e, ok := s.entries[ref]
	if !ok {
		return nil
	}
	delete(s.entries, ref)
	if err := s.persist(); err != nil {
		s.entries[ref] = e
		return fmt.Errorf("secrets/local: delete %q: %w", ref, storageErr(err))
	}
	return nil
}

// LockFile serializes writers of the directory across processes.
const LockFile = "secrets.lock"

// syncFromDisk takes the directory's file lock (how: syscall.LOCK_EX or
// LOCK_SH) and reloads the entries, so a change starts from what every
// process wrote. Callers hold s.mu for writing and call unlock when done.
func (s *Store) syncFromDisk(how int) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(s.dir, LockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", LockFile, err)
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", LockFile, err)
	}
	unlock = func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
	entries, err := s.load()
	if err != nil {
		unlock()
		return nil, err
	}
	s.entries = entries
	return unlock, nil
}

// reread reloads the file and looks ref up again.
func (s *Store) reread(ref string) (entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return entry{}, false
	}
	unlock, err := s.syncFromDisk(syscall.LOCK_SH)
	if err != nil {
		return entry{}, false
	}
	unlock()
	e, ok := s.entries[ref]
	return e, ok
}

// newRef returns an unused reference for hint. Callers hold s.mu.
func (s *Store) newRef(hint string) (string, error) {
	var b [refRandom]byte
	for range 8 {
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("secrets/local: create: reference: %w", err)
		}
		ref := hint + "/" + hex.EncodeToString(b[:])
		if _, taken := s.entries[ref]; !taken {
			return ref, nil
		}
	}
	return "", errors.New("secrets/local: create: could not find an unused reference")
}

// persist writes s.entries to secrets.json atomically. Callers hold s.mu for
// writing and roll their change back when it fails.
func (s *Store) persist() (err error) {
	data, err := json.Marshal(s.entries)
	if err != nil {
		return fmt.Errorf("encode %s: %w", DataFile, err)
	}
	tmp, err := os.CreateTemp(s.dir, DataFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", DataFile, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("write %s: %w", DataFile, err)
	}
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", DataFile, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: sync: %w", DataFile, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", DataFile, err)
	}
	if err = s.rename(tmp.Name(), filepath.Join(s.dir, DataFile)); err != nil {
		return fmt.Errorf("replace %s: %w", DataFile, err)
	}
	if err = syncDir(s.dir); err != nil {
		return fmt.Errorf("replace %s: %w", DataFile, err)
	}
	return nil
}

// storageErrnos are the failures of the file system under the directory
// (rather than of the store): full, over quota or the file size limit,
// read-only, failing, or no longer writable by this process.
var storageErrnos = []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG,
	syscall.EROFS, syscall.EIO, syscall.EACCES, syscall.EPERM}

// storageErr classifies err as fail.Unavailable when the file system caused
// it: the write was rolled back, so it may succeed once the disk recovers.
// The caller-safe message is the system's ("no space left on device"); the
// path stays in the wrapped error, for logs.
func storageErr(err error) error {
	for _, errno := range storageErrnos {
		if errors.Is(err, errno) {
			return fail.Unavailable(errno.Error(), err)
		}
	}
	return err
}

// load reads and checks secrets.json; a missing file is an empty store.
func (s *Store) load() (map[string]entry, error) {
	path := filepath.Join(s.dir, DataFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]entry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secrets/local: read %s: %w", path, err)
	}
	var entries map[string]entry
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("secrets/local: %s is corrupt (want a JSON object of reference → {nonce, ciphertext}): %w", path, err)
	}
	if entries == nil { // the file held JSON null
		return nil, fmt.Errorf("secrets/local: %s is corrupt: it holds null, want a JSON object", path)
	}
	minCipher := s.aead.Overhead()
	for ref, e := range entries {
		switch {
		case ref == "":
			return nil, fmt.Errorf("secrets/local: %s is corrupt: an entry has an empty reference", path)
		case len(e.Nonce) != s.aead.NonceSize():
			return nil, fmt.Errorf("secrets/local: %s is corrupt: entry %q has a %d-byte nonce, want %d", path, ref, len(e.Nonce), s.aead.NonceSize())
		case len(e.Ciphertext) < minCipher:
			return nil, fmt.Errorf("secrets/local: %s is corrupt: entry %q has a %d-byte ciphertext, shorter than the %d-byte tag", path, ref, len(e.Ciphertext), minCipher)
		}
	}
	return entries, nil
}

// loadOrCreateKey returns the key in dir/secrets.key, creating it with 32
// random bytes (mode 0600) when there is none.
func loadOrCreateKey(dir string) ([]byte, error) {
	path := filepath.Join(dir, KeyFile)
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createKey(dir, path)
	}
	if err != nil {
		return nil, fmt.Errorf("secrets/local: read key file %s: %w", path, err)
	}
	if len(key) != keySize {
		return nil, fmt.Errorf("secrets/local: key file %s holds %d bytes, want exactly %d (raw AES-256 key); refusing to use it", path, len(key), keySize)
	}
	return key, nil
}

func createKey(dir, path string) (key []byte, err error) {
	key = make([]byte, keySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("secrets/local: generate key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("secrets/local: create key file %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(path) // never leave a short key behind
		}
	}()
	if _, err = f.Write(key); err != nil {
		return nil, fmt.Errorf("secrets/local: write key file %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return nil, fmt.Errorf("secrets/local: write key file %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return nil, fmt.Errorf("secrets/local: write key file %s: %w", path, err)
	}
	if err = syncDir(dir); err != nil {
		return nil, fmt.Errorf("secrets/local: create key file %s: %w", path, err)
	}
	return key, nil
}

// syncDir makes a rename or create in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return fmt.Errorf("sync directory: %w", err)
	}
	return d.Close()
}
