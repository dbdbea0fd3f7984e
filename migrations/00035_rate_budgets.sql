-- +goose Up
-- The proxy's rate budgets (issue 35, internal/ratebudget): the calls each
-- replica claimed of a provider limit's current window, and the holds a
-- provider's own answer opened (Retry-After, X-RateLimit-Remaining: 0, a
-- RateLimit header of the IETF draft), shared by every replica. Keys name a
-- provider, a provider app and a connection (or none, for an app's limit):
-- ids, never a credential. Small rows, one per (connection, limit).
CREATE TABLE rate_budget_windows (
    key          text PRIMARY KEY,
    window_start timestamptz NOT NULL,
    used         bigint NOT NULL
);
CREATE TABLE rate_budget_holds (
    key   text PRIMARY KEY,
    until timestamptz NOT NULL
);
CREATE INDEX rate_budget_holds_until ON rate_budget_holds (until);
CREATE INDEX rate_budget_windows_start ON rate_budget_windows (window_start);

-- +goose Down
DROP TABLE rate_budget_holds;
DROP TABLE rate_budget_windows;
