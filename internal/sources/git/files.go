package git

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// MaxFileSize is the largest file the fs.FS of CheckFiles opens; a larger
// one fails to open, naming the limit.
const MaxFileSize = MaxConfigSize

// treeFS is a commit's tree as a read-only fs.FS of regular files:
// symbolic links are followed while they stay inside the tree, each file is
// read whole (up to MaxFileSize) when it is opened. Directories cannot be
// opened or listed: the graph documents are named, not searched for.
type treeFS struct {
	objects storer.EncodedObjectStorer
	tree    *object.Tree
	src     *source
}

func (t *treeFS) Open(name string) (fs.File, error) {
	fail := func(err error) (fs.File, error) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if !fs.ValidPath(name) {
		return fail(fs.ErrInvalid)
	}
	for _, part := range strings.Split(name, "/") {
		if strings.EqualFold(part, ".git") {
			return fail(fs.ErrNotExist)
		}
	}
	p := name
	for hops := 0; ; hops++ {
		entry, err := t.tree.FindEntry(p)
		if err != nil {
			if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) ||
				errors.Is(err, object.ErrFileNotFound) || errors.Is(err, plumbing.ErrObjectNotFound) ||
				strings.HasPrefix(err.Error(), "invalid path") {
				return fail(fs.ErrNotExist)
			}
			return fail(errors.New(t.src.sanitize(err.Error())))
		}
		switch entry.Mode {
		case filemode.Dir, filemode.Submodule:
			return fail(errors.New("is a directory, not a file"))
		case filemode.Symlink:
			if hops >= maxSymlinkHops {
				return fail(errors.New("too many levels of symbolic links"))
			}
			target, err := readBlob(t.objects, entry.Hash, 4096)
			if err != nil {
				return fail(errors.New(t.src.sanitize(err.Error())))
			}
			next := path.Join(path.Dir(p), string(target))
			if path.IsAbs(string(target)) || escapes(next) {
				return fail(errors.New("is a symbolic link that points outside the repository"))
			}
			p = next
			continue
		}
		data, err := readBlob(t.objects, entry.Hash, MaxFileSize)
		if errors.Is(err, errTooLarge) {
			return fail(fmt.Errorf("is larger than %d bytes", MaxFileSize))
		}
		if err != nil {
			return fail(errors.New(t.src.sanitize(err.Error())))
		}
		return &memFile{name: path.Base(name), Reader: bytes.NewReader(data), size: int64(len(data))}, nil
	}
}

// memFile is an opened file, held in memory.
type memFile struct {
	*bytes.Reader
	name string
	size int64
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f, nil }
func (f *memFile) Close() error               { return nil }
func (f *memFile) Name() string               { return f.name }
func (f *memFile) Size() int64                { return f.size }
func (f *memFile) Mode() fs.FileMode          { return 0o444 }
func (f *memFile) ModTime() time.Time         { return time.Time{} }
func (f *memFile) IsDir() bool                { return false }
func (f *memFile) Sys() any                   { return nil }

var _ io.ReaderAt = (*memFile)(nil)
