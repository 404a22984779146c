package pyapp

import (
	"context"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/calltoken"
)

// Paths of the stage API's routes that serve a run call's graph
// (docs/runtime-protocol.md, "The bridge on AWS").
const (
	RuntimeStorePath  = "/runtime/store"
	RuntimeTokenPath  = "/runtime/auth/token"
	RuntimeEventsPath = "/runtime/events"
)

// StageLinks hands out a run call's links to the stage's API, for a
// runtime that cannot reach the platform's loopback (a Lambda function):
// each call gets a signed token (calltoken) bound to its organization,
// run, assistant and user, which expires a little past the call's budget.
// The token travels in the call's request only.
type StageLinks struct {
	// BaseURL is the stage's API as the runtime reaches it
	// (https://…/prod).
	BaseURL string
	Signer  *calltoken.Signer
	// Budget is a call's (the seconds of DefaultLambdaYield when 0).
	Budget time.Duration
	// Store and Auth say which of the routes the stage serves; Events
	// whether calls post their events as they run (read by a LambdaClient
	// with a Mailbox).
	Store, Auth, Events bool
}

// Grant implements Granter. Nothing is held for the call: the release does
// nothing, the token expires by itself.
func (s *StageLinks) Grant(ctx context.Context, scope CallScope) (CallLinks, func(), error) {
	budget := s.Budget
	if budget <= 0 {
		budget = time.Duration(DefaultLambdaYield.Seconds * float64(time.Second))
	}
	token, claims, err := s.Signer.Issue(ctx, calltoken.Claims{OrgID: scope.OrgID, RunID: scope.RunID,
		AssistantID: scope.AssistantID, UserID: scope.UserID}, budget)
	if err != nil {
		return CallLinks{}, nil, err
	}
	base := strings.TrimSuffix(s.BaseURL, "/")
	var links CallLinks
	if s.Store {
		links.Store = &Link{URL: base + RuntimeStorePath, Token: token}
	}
	if s.Auth {
		links.Auth = &Link{URL: base + RuntimeTokenPath, Token: token}
	}
	if s.Events {
		links.Events = &Link{URL: base + RuntimeEventsPath, Token: token}
		links.Mailbox = Mailbox{OrgID: claims.OrgID, Key: MailboxKey(claims.ID)}
	}
	return links, func() {}, nil
}

// ScopeOf is the scope a verified token binds its call to.
func ScopeOf(c calltoken.Claims) CallScope {
	return CallScope{OrgID: c.OrgID, RunID: c.RunID, AssistantID: c.AssistantID, UserID: c.UserID}
}
