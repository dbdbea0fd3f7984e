package connect

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/web"
)

// Frequent events — a client reading a user's token, a refused /v1 call — are
// audited by sampling, so the hot path never writes per request: the first
// occurrence of a key in a period is written at once, later ones are only
// counted in memory, and the periodic sweep writes the count of every key whose
// period has passed. Each row's detail says how many occurrences it stands for
// ("count") and the period ("per"). The bound is per replica: with n replicas,
// a key yields at most n rows per period.
const (
	readPeriod    = time.Hour   // token.read: at most one row per (user, client, provider) per hour
	refusalPeriod = time.Minute // security.invalid_*: at most one row per (client, reason) per minute
	// At most this many keys are tracked; occurrences beyond are counted in
	// one anonymous row per period instead of being dropped.
	maxReadKeys    = 100_000
	maxRefusalKeys = 10_000
)

// sampleKey identifies what is counted together; it is also the audit row it
// stands for (see event), so an entry keeps nothing twice.
type sampleKey struct {
	kind, issuer, subject, client, provider, reason string
}

// event is the audit row of k, without its count: the client is the actor
// when there is one (token reads, refused user tokens), else "anonymous".
func (k sampleKey) event() audit.Event {
	actor := "anonymous"
	if k.client != "" {
		actor = "client:" + k.client
	}
	return audit.Event{Kind: k.kind, Actor: actor, Issuer: k.issuer, Subject: k.subject, ClientID: k.client,
		Provider: k.provider}
}

// sampleEntry is held by value in the sampler's map: about 150 bytes a key
// with the map's own overhead, on top of strings the caches already hold.
type sampleEntry struct {
	ip      string    // of the latest occurrence
	last    time.Time // when a row for this key was last written
	pending int64     // occurrences since then
}

// sampledRow is an audit row the sampler wants written.
type sampledRow struct {
	ev        audit.Event
	requestID string
	ip        string
}

// sampler counts events per key; safe for concurrent use.
type sampler struct {
	period time.Duration
	max    int

	mu        sync.Mutex
	entries   map[sampleKey]sampleEntry
	untracked map[string]int64 // per kind: occurrences not tracked because entries was full
}

func newSampler(period time.Duration, max int) *sampler {
	return &sampler{period: period, max: max, entries: map[sampleKey]sampleEntry{}, untracked: map[string]int64{}}
}

func (sm *sampler) row(k sampleKey, n int64) audit.Event {
	ev := k.event()
	ev.Detail = map[string]any{"count": n, "per": sm.period.String()}
	if k.reason != "" {
		ev.Detail["reason"] = k.reason
	}
	return ev
}

// hit counts one occurrence of k and returns the row to write now, if this is
// the key's first occurrence in a period. Counting allocates nothing.
func (sm *sampler) hit(now time.Time, k sampleKey, ip, requestID string) (sampledRow, bool) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	e, ok := sm.entries[k]
	if !ok {
		if len(sm.entries) >= sm.max {
			sm.untracked[k.kind]++
			return sampledRow{}, false
		}
	} else if now.Sub(e.last) < sm.period {
		e.pending++
		e.ip = ip
		sm.entries[k] = e
		return sampledRow{}, false
	}
	n := e.pending + 1
	sm.entries[k] = sampleEntry{ip: ip, last: now}
	return sampledRow{ev: sm.row(k, n), requestID: requestID, ip: ip}, true
}

// due returns the rows for keys whose period has passed with occurrences
// still uncounted (with all, every key's), and forgets keys that stayed
// quiet for a whole period, so memory follows the active keys only.
func (sm *sampler) due(now time.Time, all bool) []sampledRow {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	var out []sampledRow
	for k, e := range sm.entries {
		passed := now.Sub(e.last) >= sm.period
		switch {
		case e.pending > 0 && (passed || all):
			out = append(out, sampledRow{ev: sm.row(k, e.pending), ip: e.ip})
			sm.entries[k] = sampleEntry{ip: e.ip, last: now}
		case e.pending == 0 && passed:
			delete(sm.entries, k)
		}
	}
	for kind, n := range sm.untracked {
		ev := sm.row(sampleKey{kind: kind}, n)
		ev.Actor = "connectd"
		ev.Detail["untracked"] = true
		out = append(out, sampledRow{ev: ev})
		delete(sm.untracked, kind)
	}
	return out
}

// sample counts k and writes its row when one is due. A failed write is
// logged: the request it describes has been answered already.
func (s *Server) sample(r *http.Request, sm *sampler, k sampleKey) {
	if row, ok := sm.hit(s.now(), k, clientIP(r), web.RequestID(r.Context())); ok {
		s.writeSampled(r.Context(), row)
	}
}

func (s *Server) writeSampled(ctx context.Context, row sampledRow) {
	if err := s.writeAudit(ctx, row.ev, row.requestID, row.ip); err != nil {
		s.logger.ErrorContext(ctx, "audit event not written", slog.String("kind", row.ev.Kind), slog.Any("error", err))
	}
}

// flushSamples writes the counts that are due (with all, every count: at
// shutdown).
func (s *Server) flushSamples(ctx context.Context, all bool) {
	now := s.now()
	for _, sm := range []*sampler{s.reads, s.refusals} {
		for _, row := range sm.due(now, all) {
			s.writeSampled(ctx, row)
		}
	}
}

// sampleRead records that the calling client was handed the user's token.
func (s *Server) sampleRead(r *http.Request, c *caller, provider string) {
	s.sample(r, s.reads, sampleKey{kind: "token.read", issuer: c.user.Issuer, subject: c.user.Subject,
		client: c.client.ID, provider: provider})
}

// sampleRefusal records a /v1 call refused for a bad client key or user
// token; client is the authenticated client when only the user token failed.
func (s *Server) sampleRefusal(r *http.Request, client mcpauth.Client, err error) {
	var we *web.Error
	if !errors.As(err, &we) || we.Status != http.StatusUnauthorized {
		return // 503 jwks_unavailable and the like are outages, not refusals
	}
	k := sampleKey{kind: "security.invalid_user_token", client: client.ID, reason: we.Code}
	if we.Code == "invalid_client" {
		k.kind = "security.invalid_client_key"
	}
	s.sample(r, s.refusals, k)
}
