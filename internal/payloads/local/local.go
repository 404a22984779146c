// Package local is the payload store in a local directory (one file per
// key, written to a temporary file and renamed, so a reader never sees a
// partial object) or, with NewMemory, in memory. It serves unit tests of
// other packages and the local shape; the contract suite
// (internal/payloads/payloadstest) runs on both forms.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/stepgraph/stepgraph/internal/payloads"
)

// Store is a payloads.Store in a directory or in memory.
type Store struct {
	dir string // "" for memory

	mu  sync.RWMutex
	mem map[string][]byte
}

var _ payloads.Store = (*Store)(nil)

// New returns a store of files under dir (created when missing).
func New(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("payloads/local: empty directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("payloads/local: %w", err)
	}
	return &Store{dir: dir}, nil
}

// NewMemory returns a store in memory.
func NewMemory() *Store { return &Store{mem: map[string][]byte{}} }

func (s *Store) path(key string) string { return filepath.Join(s.dir, filepath.FromSlash(key)) }

// Put implements payloads.Store.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := payloads.CheckPut(key, data); err != nil {
		return err
	}
	if s.dir == "" {
		s.mu.Lock()
		s.mem[key] = append([]byte(nil), data...)
		s.mu.Unlock()
		return nil
	}
	p := s.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("payloads/local: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".put-*")
	if err != nil {
		return fmt.Errorf("payloads/local: %w", err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), p)
	}
	if werr != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("payloads/local: %w", werr)
	}
	return nil
}

// Get implements payloads.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := payloads.CheckKey(key); err != nil {
		return nil, err
	}
	if s.dir == "" {
		s.mu.RLock()
		defer s.mu.RUnlock()
		v, ok := s.mem[key]
		if !ok {
			return nil, payloads.ErrNotFound
		}
		return append([]byte(nil), v...), nil
	}
	f, err := os.Open(s.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, payloads.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("payloads/local: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, payloads.ErrNotFound
	}
	data, err := io.ReadAll(io.LimitReader(f, payloads.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("payloads/local: %w", err)
	}
	if len(data) > payloads.MaxBytes {
		return nil, payloads.ErrTooLarge
	}
	return data, nil
}

// Delete implements payloads.Store.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	for _, k := range keys {
		if err := payloads.CheckKey(k); err != nil {
			return err
		}
	}
	if s.dir == "" {
		s.mu.Lock()
		for _, k := range keys {
			delete(s.mem, k)
		}
		s.mu.Unlock()
		return nil
	}
	for _, k := range keys {
		if err := os.Remove(s.path(k)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			if st, serr := os.Stat(s.path(k)); serr == nil && st.IsDir() {
				continue // a "directory" key is no object
			}
			return fmt.Errorf("payloads/local: %w", err)
		}
	}
	return nil
}

// DeletePrefix implements payloads.Store. A prefix is a key followed by
// "/", so on disk it is a directory (removed whole) and, in memory, keys
// beginning with it.
func (s *Store) DeletePrefix(ctx context.Context, prefix string) error {
	if err := payloads.CheckPrefix(prefix); err != nil {
		return err
	}
	if s.dir == "" {
		s.mu.Lock()
		for k := range s.mem {
			if strings.HasPrefix(k, prefix) {
				delete(s.mem, k)
			}
		}
		s.mu.Unlock()
		return nil
	}
	if err := os.RemoveAll(s.path(strings.TrimSuffix(prefix, "/"))); err != nil {
		return fmt.Errorf("payloads/local: %w", err)
	}
	return nil
}
