package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/secrets"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Rotation bounds: how long a rotated-away secret keeps signing by default,
// and at most (long enough for any receiver's deploy, short enough that a
// leaked secret does not live on for months).
const (
	DefaultOverlap = 24 * time.Hour
	MaxOverlap     = 30 * 24 * time.Hour
)

// secretName names generation 1 of the signing secret among an
// organization's secrets; generation n > 1 is secretName + "." + n.
//
// Each rotation records a new generation rather than replacing a
// reference: the store's organization secrets are set-once, which makes a
// rotation a compare-and-set (two racing rotations cannot both win) and
// lets every process find the newest secret with one read of the next
// generation's name.
const secretName = "webhook_signing"

func generationName(g int) string {
	if g == 1 {
		return secretName
	}
	return secretName + "." + strconv.Itoa(g)
}

// generation is what the secrets store keeps for one generation.
type generation struct {
	Secret string `json:"secret"` // whsec_<base64>
	// PreviousUntil ends the signing of the generations before this one:
	// the rotation's time plus its overlap (zero for the first secret).
	PreviousUntil time.Time `json:"previous_until,omitzero"`
}

func parseGeneration(raw []byte) (generation, error) {
	// Secrets made before rotation existed are the bare whsec_ string.
	if strings.HasPrefix(string(raw), SecretPrefix) {
		return generation{Secret: string(raw)}, nil
	}
	var g generation
	if err := json.Unmarshal(raw, &g); err != nil || !strings.HasPrefix(g.Secret, SecretPrefix) {
		return generation{}, errors.New("the stored webhook signing secret is not readable")
	}
	return g, nil
}

// OrgKeys keeps the signing secrets of each organization: made on first
// use, rotated on demand (Rotate), their values in the secrets store and
// their references in the store. It caches what it read, per process, and
// still notices a rotation made by another process (the CLI next to a
// running server) on the next delivery: each call costs one store read,
// of the next generation's name, and no secrets-store read unless a
// rotation happened.
type OrgKeys struct {
	Store   store.Organizations
	Secrets secrets.Store
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time

	orgs sync.Map // org id → *ring
}

// ring is what a process knows of one organization's secrets.
type ring struct {
	mu     sync.Mutex
	newest int                // the newest generation found (0: not looked yet)
	values map[int]generation // generations read
	// signing are the generations that sign, newest first, with the end of
	// their signing (zero for the newest).
	signing []signer
	// pruned: this process deleted (or found deleted) the values of the
	// generations up to this one.
	pruned int
}

type signer struct {
	gen    int
	secret string
	until  time.Time
}

func (k *OrgKeys) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

func (k *OrgKeys) ring(orgID string) *ring {
	r, _ := k.orgs.LoadOrStore(orgID, &ring{values: map[int]generation{}})
	return r.(*ring)
}

// SigningSecrets implements SigningKeys: the current secret first (made on
// first use), then the rotated-away ones still in their overlap. A secret
// stops signing when its overlap ends, whatever this process cached; its
// value is then deleted from the secrets store.
func (k *OrgKeys) SigningSecrets(ctx context.Context, orgID string) ([]string, error) {
	r := k.ring(orgID)
	r.mu.Lock()
	defer r.mu.Unlock()
	return k.refreshed(ctx, orgID, r)
}

// refresh brings r up to the newest generation, creating the first one.
func (k *OrgKeys) refresh(ctx context.Context, orgID string, r *ring) error {
	newest, err := k.newestGeneration(ctx, orgID, r.newest)
	if err != nil {
		return err
	}
	if newest == 0 {
		if err := k.createFirst(ctx, orgID); err != nil {
			return err
		}
		newest = 1
	}
	if newest == r.newest {
		return nil
	}
	now := k.now()
	var signing []signer
	var until time.Time // the end of the signing of generation g; zero: current
	for g := newest; g >= 1; g-- {
		v, err := k.load(ctx, orgID, r, g)
		if err != nil {
			if g < newest && (errors.Is(err, secrets.ErrNotFound) || errors.Is(err, store.ErrNotFound)) {
				break // its overlap ended and a process already deleted it
			}
			return err
		}
		signing = append(signing, signer{gen: g, secret: v.Secret, until: until})
		next := v.PreviousUntil
		if !until.IsZero() && until.Before(next) {
			next = until // a later rotation's shorter overlap ends the older ones too
		}
		if next.IsZero() || !now.Before(next) {
			break
		}
		until = next
	}
	r.newest, r.signing = newest, signing
	return nil
}

// newestGeneration finds the newest recorded generation, knowing that
// generation known exists (0: nothing known). Generations are recorded in
// order without gaps (a rotation records n+1 only once it read n), so an
// exponential probe then a binary search find it in O(log n) reads — one
// read when nothing changed.
func (k *OrgKeys) newestGeneration(ctx context.Context, orgID string, known int) (int, error) {
	exists := func(g int) (bool, error) {
		_, err := k.Store.OrganizationSecretRef(ctx, orgID, generationName(g))
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	lo, hi := known, 0
	for step := 1; ; step *= 2 {
		ok, err := exists(lo + step)
		if err != nil {
			return 0, err
		}
		if !ok {
			hi = lo + step
			break
		}
		lo += step
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		ok, err := exists(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// load reads generation g, from r when it was read before.
func (k *OrgKeys) load(ctx context.Context, orgID string, r *ring, g int) (generation, error) {
	if v, ok := r.values[g]; ok {
		return v, nil
	}
	ref, err := k.Store.OrganizationSecretRef(ctx, orgID, generationName(g))
	if err != nil {
		return generation{}, err
	}
	raw, err := k.Secrets.Get(ctx, ref)
	if err != nil {
		return generation{}, err
	}
	v, err := parseGeneration(raw)
	if err != nil {
		return generation{}, fmt.Errorf("%s: %w", ref, err)
	}
	r.values[g] = v
	return v, nil
}

// prune deletes, best effort, the values of the generations below lowest
// (they sign no more), newest first, until one is found gone already: the
// older ones were pruned before. Each process does it once per change.
func (k *OrgKeys) prune(ctx context.Context, orgID string, r *ring, lowest int) {
	if lowest-1 <= r.pruned {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for g := lowest - 1; g > r.pruned; g-- {
		delete(r.values, g)
		ref, err := k.Store.OrganizationSecretRef(ctx, orgID, generationName(g))
		if err != nil {
			break
		}
		if _, err := k.Secrets.Get(ctx, ref); errors.Is(err, secrets.ErrNotFound) {
			break
		}
		if err := k.Secrets.Delete(ctx, ref); err != nil {
			return // tried again on the next change
		}
	}
	r.pruned = lowest - 1
}

// newSecret is a new signing secret: 32 random bytes (Standard Webhooks
// asks for 24 to 64) as whsec_<base64>. Secrets made before 2026-11 are
// whsec_<64 hex digits>: hex is base64 too, so they decode to 48 bytes and
// keep verifying.
func newSecret() (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(raw), nil
}

// record stores v and records it as generation g; store.ErrConflict when
// another process recorded g first (ours is then removed).
func (k *OrgKeys) record(ctx context.Context, orgID string, g int, v generation) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	ref, err := k.Secrets.Create(ctx, "orgs/"+orgID+"/webhook", raw)
	if err != nil {
		return err
	}
	if err := k.Store.SetOrganizationSecretRef(ctx, orgID, generationName(g), ref); err != nil {
		_ = k.Secrets.Delete(context.WithoutCancel(ctx), ref)
		return err
	}
	return nil
}

// createFirst makes generation 1; when another process made it first, that
// one is used.
func (k *OrgKeys) createFirst(ctx context.Context, orgID string) error {
	secret, err := newSecret()
	if err != nil {
		return err
	}
	if err := k.record(ctx, orgID, 1, generation{Secret: secret}); err != nil && !errors.Is(err, store.ErrConflict) {
		return err
	}
	return nil
}

// Rotate makes a new current secret and returns it with the time its
// predecessors stop signing: now plus overlap. Until then every delivery
// is signed with both (several signatures in webhook-signature), so
// receivers can switch secrets without losing a delivery; an overlap of 0
// drops the old secrets at once (a leaked secret). An organization without
// a secret gets its first one.
func (k *OrgKeys) Rotate(ctx context.Context, orgID string, overlap time.Duration) (string, time.Time, error) {
	if overlap < 0 || overlap > MaxOverlap {
		return "", time.Time{}, fail.Invalid("overlap", "must be between 0s and %s", MaxOverlap)
	}
	r := k.ring(orgID)
	r.mu.Lock()
	defer r.mu.Unlock()
	newest, err := k.newestGeneration(ctx, orgID, r.newest)
	if err != nil {
		return "", time.Time{}, err
	}
	secret, err := newSecret()
	if err != nil {
		return "", time.Time{}, err
	}
	v := generation{Secret: secret}
	if newest > 0 {
		v.PreviousUntil = k.now().UTC().Add(overlap)
	}
	err = k.record(ctx, orgID, newest+1, v)
	if errors.Is(err, store.ErrConflict) {
		return "", time.Time{}, fail.Conflict("the organization's webhook signing secret was rotated by another process at the same time; run the rotation again if another new secret is wanted")
	}
	if err != nil {
		return "", time.Time{}, err
	}
	if _, err := k.refreshed(ctx, orgID, r); err != nil {
		return "", time.Time{}, err
	}
	return secret, v.PreviousUntil, nil
}

// refreshed is refresh then the signing set, pruning what signs no more;
// the caller holds r's lock.
func (k *OrgKeys) refreshed(ctx context.Context, orgID string, r *ring) ([]string, error) {
	if err := k.refresh(ctx, orgID, r); err != nil {
		return nil, err
	}
	now := k.now()
	var out []string
	lowest := r.newest
	for _, s := range r.signing {
		if s.until.IsZero() || now.Before(s.until) {
			out = append(out, s.secret)
			lowest = s.gen
		}
	}
	k.prune(ctx, orgID, r, lowest)
	return out, nil
}
