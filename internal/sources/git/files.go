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

// ReadDir lists a directory of the tree ("." is its root), so a caller may
// walk the whole tree (fs.WalkDir): a LangGraph app's repository is kept
// whole. Symbolic links and submodules are listed with their type, not
// followed; .git is never listed.
func (t *treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	fail := func(err error) ([]fs.DirEntry, error) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	if !fs.ValidPath(name) {
		return fail(fs.ErrInvalid)
	}
	tree := t.tree
	if name != "." {
		for _, part := range strings.Split(name, "/") {
			if strings.EqualFold(part, ".git") {
				return fail(fs.ErrNotExist)
			}
		}
		sub, err := t.tree.Tree(name)
		if err != nil {
			return fail(fs.ErrNotExist)
		}
		tree = sub
	}
	out := make([]fs.DirEntry, 0, len(tree.Entries))
	for _, e := range tree.Entries {
		if strings.EqualFold(e.Name, ".git") {
			continue
		}
		var mode fs.FileMode
		switch e.Mode {
		case filemode.Dir:
			mode = fs.ModeDir | 0o555
		case filemode.Symlink:
			mode = fs.ModeSymlink | 0o444
		case filemode.Submodule:
			mode = fs.ModeIrregular
		default:
			mode = 0o444
		}
		out = append(out, dirEntry{name: e.Name, mode: mode})
	}
	return out, nil
}

// dirEntry is an entry ReadDir lists.
type dirEntry struct {
	name string
	mode fs.FileMode
}

func (d dirEntry) Name() string               { return d.name }
func (d dirEntry) IsDir() bool                { return d.mode.IsDir() }
func (d dirEntry) Type() fs.FileMode          { return d.mode.Type() }
func (d dirEntry) Info() (fs.FileInfo, error) { return dirInfo(d), nil }

type dirInfo dirEntry

func (d dirInfo) Name() string       { return d.name }
func (d dirInfo) Size() int64        { return 0 }
func (d dirInfo) Mode() fs.FileMode  { return d.mode }
func (d dirInfo) ModTime() time.Time { return time.Time{} }
func (d dirInfo) IsDir() bool        { return d.mode.IsDir() }
func (d dirInfo) Sys() any           { return nil }

var _ fs.ReadDirFS = (*treeFS)(nil)

// Stat describes a file or a directory of the tree (fs.WalkDir starts with
// its root).
func (t *treeFS) Stat(name string) (fs.FileInfo, error) {
	if name == "." {
		return dirInfo{name: ".", mode: fs.ModeDir | 0o555}, nil
	}
	if fs.ValidPath(name) {
		if _, err := t.tree.Tree(name); err == nil && !strings.EqualFold(path.Base(name), ".git") {
			return dirInfo{name: path.Base(name), mode: fs.ModeDir | 0o555}, nil
		}
	}
	f, err := t.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

var _ fs.StatFS = (*treeFS)(nil)
