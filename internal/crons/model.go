package crons

import (
	"encoding/json"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// Cron is the wire form of a cron (upstream's Cron schema, with the fields
// its server also returns: timezone, on_run_completed).
type Cron struct {
	CronID         string          `json:"cron_id"`
	AssistantID    string          `json:"assistant_id"`
	ThreadID       *string         `json:"thread_id"`
	OnRunCompleted *string         `json:"on_run_completed"`
	EndTime        *string         `json:"end_time"`
	Schedule       string          `json:"schedule"`
	Timezone       *string         `json:"timezone"`
	CreatedAt      string          `json:"created_at"`
	UpdatedAt      string          `json:"updated_at"`
	UserID         *string         `json:"user_id"`
	Payload        json.RawMessage `json:"payload"`
	NextRunDate    *string         `json:"next_run_date"`
	Metadata       json.RawMessage `json:"metadata"`
	Enabled        bool            `json:"enabled"`
}

// selectable are the fields a search may select (upstream's CronSelectField).
var selectable = []string{"cron_id", "assistant_id", "thread_id", "on_run_completed", "end_time", "schedule",
	"timezone", "created_at", "updated_at", "user_id", "payload", "next_run_date", "metadata", "enabled"}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := formatTime(t)
	return &s
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func rawOr(b []byte, def string) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage(def)
	}
	return json.RawMessage(b)
}

func view(c store.Cron) Cron {
	return Cron{
		CronID: c.ID, AssistantID: c.AssistantID, ThreadID: optString(c.ThreadID),
		OnRunCompleted: optString(c.OnRunCompleted), EndTime: optTime(c.EndTime), Schedule: c.Schedule,
		Timezone: optString(c.Timezone), CreatedAt: formatTime(c.CreatedAt), UpdatedAt: formatTime(c.UpdatedAt),
		UserID: optString(c.UserID), Payload: rawOr(c.Payload, "{}"), NextRunDate: optTime(c.NextRunDate),
		Metadata: rawOr(c.Metadata, "{}"), Enabled: c.Enabled,
	}
}

// RunFields are the fields of a cron request that make up the run each
// firing creates (the payload). Unknown fields are ignored, as upstream.
type RunFields struct {
	AssistantID       *string         `json:"assistant_id"`
	Input             json.RawMessage `json:"input"`
	Metadata          json.RawMessage `json:"metadata"`
	Config            json.RawMessage `json:"config"`
	Context           json.RawMessage `json:"context"`
	Webhook           *string         `json:"webhook"`
	InterruptBefore   json.RawMessage `json:"interrupt_before"`
	InterruptAfter    json.RawMessage `json:"interrupt_after"`
	MultitaskStrategy *string         `json:"multitask_strategy"`
	IfNotExists       *string         `json:"if_not_exists"`
	StreamMode        json.RawMessage `json:"stream_mode"`
	StreamSubgraphs   *bool           `json:"stream_subgraphs"`
	StreamResumable   *bool           `json:"stream_resumable"`
	Durability        *string         `json:"durability"`
	CheckpointDuring  *bool           `json:"checkpoint_during"`
}

// CreateRequest is the body of POST /runs/crons and
// POST /threads/{thread_id}/runs/crons.
type CreateRequest struct {
	RunFields
	Schedule       *string `json:"schedule"`
	Timezone       *string `json:"timezone"`
	EndTime        *string `json:"end_time"`
	OnRunCompleted *string `json:"on_run_completed"`
	Enabled        *bool   `json:"enabled"`
}

// UpdateRequest is the body of PATCH /runs/crons/{cron_id}. EndTime is
// raw so an explicit null (clear it) differs from an absent field (keep it).
type UpdateRequest struct {
	RunFields
	Schedule       *string         `json:"schedule"`
	Timezone       *string         `json:"timezone"`
	EndTime        json.RawMessage `json:"end_time"`
	OnRunCompleted *string         `json:"on_run_completed"`
	Enabled        *bool           `json:"enabled"`
}

// SearchRequest is the body of POST /runs/crons/search; CountRequest uses
// its filter fields.
type SearchRequest struct {
	AssistantID *string         `json:"assistant_id"`
	ThreadID    *string         `json:"thread_id"`
	Enabled     *bool           `json:"enabled"`
	Metadata    json.RawMessage `json:"metadata"`
	Limit       *int            `json:"limit"`
	Offset      *int            `json:"offset"`
	SortBy      *string         `json:"sort_by"`
	SortOrder   *string         `json:"sort_order"`
	Select      []string        `json:"select"`
}

// CountRequest is the body of POST /runs/crons/count.
type CountRequest struct {
	AssistantID *string         `json:"assistant_id"`
	ThreadID    *string         `json:"thread_id"`
	Metadata    json.RawMessage `json:"metadata"`
}

// Page is a page of search results: the crons (whole, or the selected
// fields) and the offset of the next page (-1: none).
type Page struct {
	Crons      []any
	NextOffset int
}
