package providers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/secrets"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Provider is the public view of a registration: everything but the secret.
type Provider struct {
	ID                      string  `json:"id"`
	OrganizationID          string  `json:"organization_id"`
	ProviderID              string  `json:"provider_id"`
	Name                    string  `json:"name"`
	ClientID                string  `json:"client_id"`
	AuthURL                 string  `json:"auth_url"`
	TokenURL                string  `json:"token_url"`
	RevocationURL           *string `json:"revocation_url"`
	UsesPKCE                bool    `json:"uses_pkce"`
	CodeChallengeMethod     string  `json:"code_challenge_method"`
	ProviderType            *string `json:"provider_type"`
	TokenEndpointAuthMethod string  `json:"token_endpoint_auth_method"`
	MCPServerURL            *string `json:"mcp_server_url"`
	IsDynamicClient         bool    `json:"is_dynamic_client"`
	CreatedAt               string  `json:"created_at"`
	UpdatedAt               string  `json:"updated_at"`
}

// CreateInput is a registration request. Pointers tell "absent" from "empty".
type CreateInput struct {
	ProviderID              *string `json:"provider_id"`
	Name                    *string `json:"name"`
	ClientID                *string `json:"client_id"`
	ClientSecret            *string `json:"client_secret"`
	AuthURL                 *string `json:"auth_url"`
	TokenURL                *string `json:"token_url"`
	RevocationURL           *string `json:"revocation_url"`
	UsesPKCE                *bool   `json:"uses_pkce"`
	CodeChallengeMethod     *string `json:"code_challenge_method"`
	ProviderType            *string `json:"provider_type"`
	TokenEndpointAuthMethod *string `json:"token_endpoint_auth_method"`
}

// UpdateInput is a partial update with the fields of a registration: nil
// (absent or null) leaves a field as it is.
type UpdateInput CreateInput

// Service runs the registry's use cases.
type Service struct {
	Store   store.Providers
	Secrets secrets.Store
	// AllowHTTPLoopback accepts http:// auth and token URLs on loopback hosts
	// (development). https is always accepted.
	AllowHTTPLoopback bool
	Now               func() time.Time // time.Now when nil
	// BeforeDelete, when set, runs before a registration is deleted and
	// can stop it: agent auth deletes the provider's tokens there
	// (agentauth.Service.DeleteProviderTokens), so no token outlives its
	// provider. Rotating the client secret (Update) keeps them.
	BeforeDelete func(ctx context.Context, orgID, providerID string) error
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC().Truncate(time.Microsecond)
	}
	return time.Now().UTC().Truncate(time.Microsecond)
}

// Create registers a provider. The client secret is stored first and the
// record second, so a failure leaves no record pointing at nothing; a record
// write that fails removes the secret again.
func (s *Service) Create(ctx context.Context, orgID string, in CreateInput) (Provider, error) {
	rec, err := s.newRecord(orgID, in)
	if err != nil {
		return Provider{}, err
	}
	if in.ClientSecret != nil {
		ref, err := s.Secrets.Create(ctx, secretHint(orgID, rec.ProviderID), []byte(*in.ClientSecret))
		if err != nil {
			return Provider{}, fmt.Errorf("store client secret: %w", err)
		}
		rec.ClientSecretRef = ref
	}
	if err := s.Store.CreateProvider(ctx, rec); err != nil {
		s.forgetSecret(ctx, rec.ClientSecretRef)
		if errors.Is(err, store.ErrConflict) {
			return Provider{}, fail.Conflict("provider_id: a provider %q already exists in this organization", rec.ProviderID)
		}
		return Provider{}, err
	}
	return view(rec), nil
}

// Get returns one provider.
func (s *Service) Get(ctx context.Context, orgID, providerID string) (Provider, error) {
	rec, err := s.load(ctx, orgID, providerID)
	if err != nil {
		return Provider{}, err
	}
	return view(rec), nil
}

// List returns the organization's providers, oldest first.
func (s *Service) List(ctx context.Context, orgID string) ([]Provider, error) {
	recs, err := s.Store.ListProviders(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Provider, 0, len(recs))
	for _, r := range recs {
		out = append(out, view(r))
	}
	return out, nil
}

// Update applies a partial update. A new client_secret is stored under a new
// reference, the record switched to it, and only then the old one deleted.
func (s *Service) Update(ctx context.Context, orgID, providerID string, in UpdateInput) (Provider, error) {
	rec, err := s.load(ctx, orgID, providerID)
	if err != nil {
		return Provider{}, err
	}
	next, err := applyUpdate(rec, in, s.AllowHTTPLoopback)
	if err != nil {
		return Provider{}, err
	}
	if in.ClientSecret == nil && next == rec {
		return view(rec), nil // nothing changes, not even updated_at
	}
	next.UpdatedAt = s.now()
	if in.ClientSecret != nil {
		ref, err := s.Secrets.Create(ctx, secretHint(orgID, rec.ProviderID), []byte(*in.ClientSecret))
		if err != nil {
			return Provider{}, fmt.Errorf("store client secret: %w", err)
		}
		next.ClientSecretRef = ref
	}
	if err := s.Store.UpdateProvider(ctx, next); err != nil {
		if next.ClientSecretRef != rec.ClientSecretRef {
			s.forgetSecret(ctx, next.ClientSecretRef)
		}
		return Provider{}, s.notFound(err, providerID)
	}
	if next.ClientSecretRef != rec.ClientSecretRef {
		s.forgetSecret(ctx, rec.ClientSecretRef)
	}
	return view(next), nil
}

// Delete removes the provider and then its stored secret.
func (s *Service) Delete(ctx context.Context, orgID, providerID string) error {
	rec, err := s.load(ctx, orgID, providerID)
	if err != nil {
		return err
	}
	if s.BeforeDelete != nil {
		if err := s.BeforeDelete(ctx, orgID, providerID); err != nil {
			return err
		}
	}
	if err := s.Store.DeleteProvider(ctx, orgID, providerID); err != nil {
		return s.notFound(err, providerID)
	}
	if rec.ClientSecretRef != "" {
		if err := s.Secrets.Delete(ctx, rec.ClientSecretRef); err != nil {
			return fmt.Errorf("delete client secret of provider %q: %w", providerID, err)
		}
	}
	return nil
}

// ClientSecret returns the stored client secret ("" when none) for the token
// exchange. It is the only way the value leaves the secrets store.
func (s *Service) ClientSecret(ctx context.Context, orgID, providerID string) (string, error) {
	rec, err := s.load(ctx, orgID, providerID)
	if err != nil || rec.ClientSecretRef == "" {
		return "", err
	}
	v, err := s.Secrets.Get(ctx, rec.ClientSecretRef)
	if err != nil {
		return "", fmt.Errorf("read client secret of provider %q: %w", providerID, err)
	}
	return string(v), nil
}

func (s *Service) load(ctx context.Context, orgID, providerID string) (store.Provider, error) {
	rec, err := s.Store.Provider(ctx, orgID, providerID)
	return rec, s.notFound(err, providerID)
}

func (s *Service) notFound(err error, providerID string) error {
	if errors.Is(err, store.ErrNotFound) {
		return fail.NotFound("provider %q not found", providerID)
	}
	return err
}

// forgetSecret removes a secret nobody points at; failure leaves an orphan
// value that no record references, which is harmless, so it is not reported.
func (s *Service) forgetSecret(ctx context.Context, ref string) {
	if ref != "" {
		_ = s.Secrets.Delete(context.WithoutCancel(ctx), ref)
	}
}

func secretHint(orgID, providerID string) string {
	return "providers/" + orgID + "/" + providerID
}

func (s *Service) newRecord(orgID string, in CreateInput) (store.Provider, error) {
	now := s.now()
	rec := store.Provider{
		ID:                      uuid.NewString(),
		OrgID:                   orgID,
		ProviderID:              deref(in.ProviderID),
		Name:                    deref(in.Name),
		ClientID:                deref(in.ClientID),
		AuthURL:                 deref(in.AuthURL),
		TokenURL:                deref(in.TokenURL),
		RevocationURL:           deref(in.RevocationURL),
		UsesPKCE:                in.UsesPKCE != nil && *in.UsesPKCE,
		CodeChallengeMethod:     orDefault(in.CodeChallengeMethod, "S256"),
		ProviderType:            deref(in.ProviderType),
		TokenEndpointAuthMethod: orDefault(in.TokenEndpointAuthMethod, "client_secret_post"),
		CreatedAt:               now,
		UpdatedAt:               now,
	}
	var c fail.Checks
	c.Add(in.ProviderID == nil, "provider_id", "is required")
	c.Add(in.Name == nil, "name", "is required")
	c.Add(in.ClientID == nil, "client_id", "is required")
	c.Add(in.AuthURL == nil, "auth_url", "is required")
	c.Add(in.TokenURL == nil, "token_url", "is required")
	if in.ProviderID != nil {
		c.AddErr(checkProviderID(rec.ProviderID))
	}
	checkRecord(&c, rec, in.ClientSecret, false, s.AllowHTTPLoopback)
	return rec, c.Err()
}

func applyUpdate(rec store.Provider, in UpdateInput, allowLoopback bool) (store.Provider, error) {
	var c fail.Checks
	c.Add(in.ProviderID != nil && *in.ProviderID != rec.ProviderID, "provider_id", "cannot be changed")
	set(&rec.Name, in.Name)
	set(&rec.ClientID, in.ClientID)
	set(&rec.AuthURL, in.AuthURL)
	set(&rec.TokenURL, in.TokenURL)
	set(&rec.RevocationURL, in.RevocationURL) // "" removes it
	set(&rec.CodeChallengeMethod, in.CodeChallengeMethod)
	set(&rec.ProviderType, in.ProviderType)
	set(&rec.TokenEndpointAuthMethod, in.TokenEndpointAuthMethod)
	if in.UsesPKCE != nil {
		rec.UsesPKCE = *in.UsesPKCE
	}
	keeps := in.ClientSecret == nil && rec.ClientSecretRef != ""
	checkRecord(&c, rec, in.ClientSecret, keeps, allowLoopback)
	return rec, c.Err()
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func orDefault(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

func set(dst *string, v *string) {
	if v != nil {
		*dst = *v
	}
}

func view(r store.Provider) Provider {
	var ptype *string
	if r.ProviderType != "" {
		t := r.ProviderType
		ptype = &t
	}
	var revocation *string
	if r.RevocationURL != "" {
		u := r.RevocationURL
		revocation = &u
	}
	return Provider{
		ID:                      r.ID,
		RevocationURL:           revocation,
		OrganizationID:          r.OrgID,
		ProviderID:              r.ProviderID,
		Name:                    r.Name,
		ClientID:                r.ClientID,
		AuthURL:                 r.AuthURL,
		TokenURL:                r.TokenURL,
		UsesPKCE:                r.UsesPKCE,
		CodeChallengeMethod:     r.CodeChallengeMethod,
		ProviderType:            ptype,
		TokenEndpointAuthMethod: r.TokenEndpointAuthMethod,
		CreatedAt:               r.CreatedAt.UTC().Format(time.RFC3339Nano),
		UpdatedAt:               r.UpdatedAt.UTC().Format(time.RFC3339Nano),
	}
}
