package deployments

import (
	"context"
	"fmt"
	"slices"

	"github.com/stepgraph/stepgraph/internal/fail"
)

// secretInputValue is one request secret after its value was read.
type secretInputValue struct {
	name   string
	value  string // a new value to store ("" when remove or keep)
	remove bool   // null on update: drop the secret
	keep   bool   // the mask on update: keep the stored value
}

// secretValues checks the names and reads the values of a request's secrets.
func secretValues(c *fail.Checks, list []SecretInput, updating bool) []secretInputValue {
	checkSecretNames(c, list)
	out := make([]secretInputValue, 0, len(list))
	for i, s := range list {
		v, remove, keep := secretValue(c, i, s, updating)
		out = append(out, secretInputValue{name: s.Name, value: v, remove: remove, keep: keep})
	}
	return out
}

// storeSecrets writes every new value to the secrets store and returns
// name → reference. On failure nothing stays behind.
func (s *Service) storeSecrets(ctx context.Context, deploymentID string, values []secretInputValue) (map[string]string, error) {
	created := map[string]string{}
	for _, v := range values {
		if v.remove || v.keep {
			continue
		}
		ref, err := s.Secrets.Create(ctx, "deployments/"+deploymentID, []byte(v.value))
		if err != nil {
			s.forgetSecrets(ctx, created)
			return nil, fmt.Errorf("store secret %s: %w", v.name, err)
		}
		created[v.name] = ref
	}
	return created, nil
}

// forgetSecrets removes values no record points at. A failure leaves an
// orphan value nobody references, which is harmless, so it is not reported.
func (s *Service) forgetSecrets(ctx context.Context, created map[string]string) {
	for _, ref := range created {
		_ = s.Secrets.Delete(context.WithoutCancel(ctx), ref)
	}
}

// mergeSecrets applies an update's secrets to the current list: a new value
// replaces or adds, the mask keeps, null removes, and secrets the request
// does not name carry over.
func mergeSecrets(c *fail.Checks, cur []storedSecret, inputs []SecretInput, values []secretInputValue, created map[string]string) []storedSecret {
	out := slices.Clone(cur)
	index := func(name string) int {
		return slices.IndexFunc(out, func(s storedSecret) bool { return s.Name == name })
	}
	for i, v := range values {
		at := index(v.name)
		switch {
		case v.remove:
			if at >= 0 {
				out = slices.Delete(out, at, at+1)
			}
		case v.keep:
			c.Add(at < 0, fmt.Sprintf("secrets[%d].value", i), "%q keeps a stored value, but there is no secret %s", SecretMask, inputs[i].Name)
		case at >= 0:
			out[at].Ref = created[v.name]
		default:
			out = append(out, storedSecret{Name: v.name, Ref: created[v.name]})
		}
	}
	return out
}
