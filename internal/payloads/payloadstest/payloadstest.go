// Package payloadstest is the contract suite of the payloads port, run by
// every adapter's tests (internal/payloads/local in memory and on disk,
// internal/payloads/s3 on MiniStack over HTTP).
package payloadstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"

	"github.com/stepgraph/stepgraph/internal/payloads"
)

// Run runs the contract on the store open returns. Stores may be shared
// between subtests: every test uses keys of its own.
func Run(t *testing.T, open func(t *testing.T) payloads.Store) {
	ctx := context.Background()
	ns := func(t *testing.T) string {
		buf := make([]byte, 6)
		_, _ = rand.Read(buf)
		return fmt.Sprintf("contract/%x", buf)
	}

	t.Run("PutGetReplaceDelete", func(t *testing.T) {
		st, base := open(t), ns(t)
		k := base + "/a"
		if _, err := st.Get(ctx, k); !errors.Is(err, payloads.ErrNotFound) {
			t.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
		}
		for _, v := range [][]byte{[]byte(`{"v":1}`), []byte(`{"v":2, "replaced": true}`), {}} {
			if err := st.Put(ctx, k, v); err != nil {
				t.Fatalf("Put: %v", err)
			}
			got, err := st.Get(ctx, k)
			if err != nil || !bytes.Equal(got, v) {
				t.Fatalf("Get = %q, %v; want %q", got, err, v)
			}
		}
		if err := st.Delete(ctx, k, base+"/never-written"); err != nil {
			t.Fatalf("Delete (one missing): %v", err)
		}
		if _, err := st.Get(ctx, k); !errors.Is(err, payloads.ErrNotFound) {
			t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
		}
	})

	t.Run("LargeObjectWhole", func(t *testing.T) {
		st, base := open(t), ns(t)
		big := make([]byte, 5<<20+123)
		_, _ = rand.Read(big)
		if err := st.Put(ctx, base+"/big", big); err != nil {
			t.Fatalf("Put 5 MB: %v", err)
		}
		got, err := st.Get(ctx, base+"/big")
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("Get 5 MB: %d bytes, %v", len(got), err)
		}
	})

	t.Run("Bounded", func(t *testing.T) {
		st, base := open(t), ns(t)
		if err := st.Put(ctx, base+"/huge", make([]byte, payloads.MaxBytes+1)); !errors.Is(err, payloads.ErrTooLarge) {
			t.Fatalf("Put over MaxBytes: %v, want ErrTooLarge", err)
		}
		if _, err := st.Get(ctx, base+"/huge"); !errors.Is(err, payloads.ErrNotFound) {
			t.Fatalf("a refused Put left an object: %v", err)
		}
	})

	t.Run("Keys", func(t *testing.T) {
		st, base := open(t), ns(t)
		for _, k := range []string{"", "/abs", "a//b", "a/../b", "a/./b", "a b", "a\x00b", "trailing/", string(make([]byte, payloads.MaxKeyBytes+1))} {
			if err := st.Put(ctx, k, []byte("x")); err == nil {
				t.Errorf("Put accepted the key %q", k)
			}
			if _, err := st.Get(ctx, k); err == nil || errors.Is(err, payloads.ErrNotFound) {
				t.Errorf("Get of the invalid key %q: %v, want a key error", k, err)
			}
		}
		if err := st.Put(ctx, base+"/T#org#th=1/x.y_z-0", []byte("ok")); err != nil {
			t.Fatalf("Put of a valid key: %v", err)
		}
		if err := st.DeletePrefix(ctx, base); err == nil {
			t.Fatal("DeletePrefix accepted a prefix without a trailing /")
		}
	})

	t.Run("DeletePrefix", func(t *testing.T) {
		st, base := open(t), ns(t)
		in := []string{base + "/p/1", base + "/p/2", base + "/p/q/3"}
		out := []string{base + "/pp/1", base + "/other/1"}
		for _, k := range append(append([]string{}, in...), out...) {
			if err := st.Put(ctx, k, []byte(k)); err != nil {
				t.Fatalf("Put %s: %v", k, err)
			}
		}
		if err := st.DeletePrefix(ctx, base+"/p/"); err != nil {
			t.Fatalf("DeletePrefix: %v", err)
		}
		for _, k := range in {
			if _, err := st.Get(ctx, k); !errors.Is(err, payloads.ErrNotFound) {
				t.Errorf("%s survived DeletePrefix: %v", k, err)
			}
		}
		for _, k := range out {
			if got, err := st.Get(ctx, k); err != nil || string(got) != k {
				t.Errorf("%s (outside the prefix) = %q, %v", k, got, err)
			}
		}
		if err := st.DeletePrefix(ctx, base+"/nothing/"); err != nil {
			t.Fatalf("DeletePrefix of nothing: %v", err)
		}
	})

	t.Run("ManyKeysUnderOnePrefix", func(t *testing.T) {
		st, base := open(t), ns(t)
		const n = 1005 // more than one page / one DeleteObjects call
		for i := 0; i < n; i++ {
			if err := st.Put(ctx, fmt.Sprintf("%s/m/%05d", base, i), []byte{byte(i)}); err != nil {
				t.Fatalf("Put %d: %v", i, err)
			}
		}
		if err := st.DeletePrefix(ctx, base+"/m/"); err != nil {
			t.Fatalf("DeletePrefix: %v", err)
		}
		for _, i := range []int{0, 999, 1000, n - 1} {
			if _, err := st.Get(ctx, fmt.Sprintf("%s/m/%05d", base, i)); !errors.Is(err, payloads.ErrNotFound) {
				t.Errorf("key %d survived: %v", i, err)
			}
		}
	})
}
