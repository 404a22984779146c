package git

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/sources"
	"github.com/stepgraph/stepgraph/internal/sources/gittest"
)

// An https repository on a loopback address is refused by the guard
// before a byte is sent, however its address is written, unless the
// checker's client allows private addresses; the message names the rule,
// not the address or the kernel's error.
func TestFetchGuard(t *testing.T) {
	srv := gittest.NewServer(t)
	repo := srv.AddFiles(t, "agent", map[string][]byte{"langgraph.json": []byte(`{"graphs": {}}`)})
	u, err := url.Parse(repo)
	must(t, err)
	port := u.Port()
	spellings := []string{
		repo,
		"https://localhost:" + port + "/agent.git",
		"https://[::ffff:127.0.0.1]:" + port + "/agent.git",
		"https://0.0.0.0:" + port + "/agent.git",
		"https://user:s3cr3t@127.0.0.1:" + port + "/agent.git",
	}
	checkers := map[string]*Checker{
		"zero Checker (default guarded client)": {},
		"guarded client trusting the server":    {HTTPClient: srv.Client(false)},
	}
	for name, c := range checkers {
		for _, target := range spellings {
			t.Run(name+"/"+target, func(t *testing.T) {
				_, err := c.Check(context.Background(), target, "main", "langgraph.json")
				se := assertSourceError(t, err, "not reachable: its host is a private, loopback, link-local or metadata address, which this server does not call")
				if strings.Contains(se.Reason, "s3cr3t") || strings.Contains(se.Reason, "dial") {
					t.Errorf("message %q shows a secret or the raw network error", se.Reason)
				}
			})
		}
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("the git server answered %d requests; the guard must refuse before any", n)
	}
	// The same server is reachable by a client that allows private
	// addresses: the refusals above were the guard's.
	co, err := (&Checker{HTTPClient: srv.Client(true)}).Check(context.Background(), repo, "main", "langgraph.json")
	if err != nil || len(co.CommitSHA) != 40 {
		t.Fatalf("allowed: %v %v", co, err)
	}
}

// A fetch reads at most MaxBytes from the network; past it the check fails
// naming the limit, and its temporary directory is gone either way.
func TestFetchLimit(t *testing.T) {
	srv := gittest.NewServer(t)
	big := make([]byte, 3<<20)
	_, _ = rand.Read(big) // incompressible
	small := srv.AddFiles(t, "small", map[string][]byte{"langgraph.json": []byte(`{"graphs": {}}`)})
	large := srv.AddFiles(t, "large", map[string][]byte{"langgraph.json": []byte(`{"graphs": {}}`), "blob.bin": big})

	tests := []struct {
		name     string
		maxBytes int64
		url      string
		want     string // "" succeeds
	}{
		{"small repository, 1 MiB limit", 1 << 20, small, ""},
		{"large repository, default limit", 0, large, ""},
		{"large repository, 1 MiB limit", 1 << 20, large, `repository "` + large + `" is larger than this server's fetch limit of 1 MiB`},
		{"large repository, odd limit", 2<<20 + 1, large, "fetch limit of 2097153 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			c := &Checker{HTTPClient: srv.Client(true), MaxBytes: tt.maxBytes, TempDir: tmp}
			co, err := c.Check(context.Background(), tt.url, "main", "langgraph.json")
			if tt.want == "" {
				if err != nil || len(co.CommitSHA) != 40 {
					t.Fatalf("Check: %v %v", co, err)
				}
			} else {
				assertSourceError(t, err, tt.want)
			}
			left, _ := os.ReadDir(tmp)
			if len(left) != 0 {
				t.Errorf("left in the temporary directory: %v", left)
			}
		})
	}
}

// A large repository streams to disk: the heap does not grow with it. A
// repository whose files are many streams through; one whose file would be
// too large to index (here: zeros, a thousandfold smaller compressed, so
// well within MaxBytes) is refused before it is inflated.
func TestFetchMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches repositories of 32 and 128 MiB")
	}
	srv := gittest.NewServer(t)
	config := []byte(`{"graphs": {}}`)
	many := map[string][]byte{"langgraph.json": config}
	for i := range 16 {
		b := make([]byte, 2<<20)
		_, _ = rand.Read(b) // incompressible
		many[fmt.Sprintf("data/%02d.bin", i)] = b
	}
	manyURL := srv.AddFiles(t, "many", many)
	many = nil
	zerosURL := srv.AddFiles(t, "zeros", map[string][]byte{"langgraph.json": config, "zeros.bin": make([]byte, 128<<20)})

	tests := []struct {
		name, url string
		want      string // "" succeeds
	}{
		{"16 files of 2 MiB", manyURL, ""},
		{"a file of 128 MiB of zeros", zerosURL, `cannot be fetched at ref "main": it holds a file or object of 128 MiB, larger than this server's limit of 64 MiB per object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Checker{HTTPClient: srv.Client(true), TempDir: t.TempDir()}
			var (
				co  sources.Checkout
				err error
			)
			growth := peakHeapGrowth(func() { co, err = c.Check(context.Background(), tt.url, "main", "langgraph.json") })
			if tt.want == "" {
				if err != nil || len(co.CommitSHA) != 40 {
					t.Fatalf("Check: %v %v", co, err)
				}
			} else {
				assertSourceError(t, err, tt.want)
			}
			t.Logf("peak heap growth: %d KiB", growth>>10)
			// Memory storage held the whole pack, go-git's indexer the
			// whole file; streamed to disk and checked first, a fetch needs
			// buffers, one small object and garbage between collections.
			if growth > 16<<20 {
				t.Errorf("the heap grew by %d MiB", growth>>20)
			}
		})
	}
}

// peakHeapGrowth runs f and returns how far the heap rose above where it
// was before, sampled every millisecond or two.
func peakHeapGrowth(f func()) int64 {
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	runtime.GC()
	base := heap()
	var peak atomic.Uint64
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if h := heap(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	<-sampled
	return int64(peak.Load()) - int64(base)
}

// At most MaxConcurrent checks run at once; another waits for a slot
// (within its own context) before its time limit starts.
func TestMaxConcurrent(t *testing.T) {
	f := newFixture(t)
	c := &Checker{LocalDirs: []string{f.dir}, MaxConcurrent: 1, Timeout: time.Minute}
	entered, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := c.CheckFiles(context.Background(), f.url, "main", "langgraph.json", func(fs.FS) error {
			close(entered)
			<-release
			return nil
		})
		first <- err
	}()
	<-entered

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	ran := false
	_, err := c.CheckFiles(ctx, f.url, "main", "langgraph.json", func(fs.FS) error { ran = true; return nil })
	assertSourceError(t, err, "timed out")
	if !errors.Is(err, context.DeadlineExceeded) || ran {
		t.Errorf("second check: %v (ran: %v), want it to wait for the slot and give up", err, ran)
	}

	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first check: %v", err)
	}
	if _, err := c.Check(context.Background(), f.url, "main", "langgraph.json"); err != nil {
		t.Errorf("after the slot is free: %v", err)
	}
}

// checkPack reads sizes from the object headers, and for a delta from its
// instructions: the object a delta makes counts, not its few bytes.
func TestCheckPack(t *testing.T) {
	const limit = 1000
	blob := func(n int) packObject { return packObject{typ: 3, data: make([]byte, n)} }
	// A delta on the first object: base size, target size, one copy op.
	delta := func(target int) packObject {
		d := append(varint(100), varint(target)...)
		d = append(d, 0x90|0x00, 100) // copy 100 bytes from offset 0 (size byte only)
		return packObject{typ: 6, data: d, ofsDelta: true}
	}
	tests := []struct {
		name    string
		objects []packObject
		want    string // "" passes
	}{
		{"small objects", []packObject{blob(100), delta(200)}, ""},
		{"object at the limit", []packObject{blob(limit)}, ""},
		{"object over the limit", []packObject{blob(limit + 1)}, "a file or object of 1001 bytes, larger than this server's limit of 1000 bytes per object"},
		{"delta making an object over the limit", []packObject{blob(100), delta(1 << 30)}, "a file or object of 1024 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := os.CreateTemp(t.TempDir(), "pack")
			must(t, err)
			defer f.Close()
			_, err = f.Write(buildPack(t, tt.objects))
			must(t, err)
			err = (&Checker{MaxObjectBytes: limit}).checkPack(f)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("checkPack: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("checkPack = %v, want %q", err, tt.want)
			}
		})
	}
}

type packObject struct {
	typ      byte
	data     []byte
	ofsDelta bool // a delta on the object before it
}

func varint(n int) []byte {
	var b []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// buildPack writes a version 2 pack file of objects.
func buildPack(t *testing.T, objects []packObject) []byte {
	var buf bytes.Buffer
	buf.WriteString("PACK")
	_ = binary.Write(&buf, binary.BigEndian, uint32(2))
	_ = binary.Write(&buf, binary.BigEndian, uint32(len(objects)))
	prev := 0
	for _, o := range objects {
		start := buf.Len()
		n := len(o.data)
		c := o.typ<<4 | byte(n&0x0f)
		n >>= 4
		for n > 0 {
			buf.WriteByte(c | 0x80)
			c = byte(n & 0x7f)
			n >>= 7
		}
		buf.WriteByte(c)
		if o.ofsDelta {
			buf.WriteByte(byte(start - prev)) // offsets below 128 only
		}
		z := zlib.NewWriter(&buf)
		_, err := z.Write(o.data)
		must(t, err)
		must(t, z.Close())
		prev = start
	}
	sum := sha1.Sum(buf.Bytes())
	buf.Write(sum[:])
	return buf.Bytes()
}

// The server's own disk failing is not the source's fault: an error to
// retry (not a *sources.Error, which fails the revision), and no message
// to the deployment's author naming the server's paths.
func TestFetchDiskFailure(t *testing.T) {
	srv := gittest.NewServer(t)
	repo := srv.AddFiles(t, "agent", map[string][]byte{"langgraph.json": []byte(`{"graphs": {}}`)})
	notDir := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(notDir, nil, 0o644))
	_, err := (&Checker{HTTPClient: srv.Client(true), TempDir: notDir}).Check(context.Background(), repo, "main", "langgraph.json")
	var se *sources.Error
	if err == nil || errors.As(err, &se) {
		t.Errorf("no temporary directory: %v, want an error that is not a *sources.Error", err)
	}

	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "objects"), nil, 0o644)) // where objects/pack must go
	err = (&Checker{}).receivePack(dir, strings.NewReader("PACK"))
	var de *diskError
	if !errors.As(err, &de) {
		t.Errorf("receivePack on a broken directory: %v, want a diskError", err)
	}
	m := &meter{limit: 1}
	if got := (&Checker{}).fetchError(context.Background(), err, m, &source{display: "https://h/x.git"}, &refWant{raw: "main"}); errors.As(got, &se) || !errors.As(got, &de) {
		t.Errorf("fetchError(diskError) = %v, want the diskError itself", got)
	}
}
