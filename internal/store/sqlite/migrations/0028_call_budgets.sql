-- 0031: numbered apart from other branches' 0027.. (parallel work).
-- What each runtime call of a LangGraph app spent (store.CallBudgets), by
-- the call token's id, and the requests counted (a retry counts once);
-- calls past expires_at are deleted as others start.
CREATE TABLE call_budgets (
    id TEXT PRIMARY KEY,
    requests INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX call_budgets_expires ON call_budgets (expires_at);
CREATE TABLE call_budget_requests (
    call_id TEXT NOT NULL REFERENCES call_budgets (id) ON DELETE CASCADE,
    request TEXT NOT NULL,
    PRIMARY KEY (call_id, request)
) WITHOUT ROWID;
