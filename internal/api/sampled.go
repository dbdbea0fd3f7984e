package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/receipt"
	"github.com/connectd/connectd/internal/web"
)

// Frequent events — a client reading a user's token, a refused /v1 call — are
// audited by sampling, so the hot path never writes: the first occurrence of
// a key in a period queues a row, later ones are only counted in memory, and
// the periodic sweep queues the count of every key whose period has passed.
// Each row's detail says how many occurrences it stands for ("count") and the
// period ("per"). The bound is per replica: with n replicas, a key yields at
// most n rows per period.
//
// Queued rows are written off the request path, by Run's writer (every
// second), by the sweep, and at shutdown, a batch per statement on a deadline
// of their own, never a request's: a busy database slows the trail down, it
// neither slows the request nor loses the row. A write that fails gives its
// rows back to be written by the next round; a row that finds the queue full
// leaves its count in the sampler, which the sweep queues again. Only what
// the last write at shutdown cannot write is lost, and it is counted
// (Config.OnAuditLost) and logged.
const (
	readPeriod    = audit.ReadPeriod // token.read: at most one row per (user, client, connection) per hour
	refusalPeriod = time.Minute      // security.invalid_*: at most one row per (client, reason) per minute
	// At most this many refusal keys are tracked; occurrences beyond are
	// counted in one anonymous row per period instead of being dropped.
	// Token reads are always counted by name (sampler.named): past
	// maxReadKeys a key's period ends early to make room (evictOne). A tenth as many rows may wait to be written.
	maxReadKeys    = 100_000
	maxRefusalKeys = 10_000

	sampleWriteEvery   = time.Second      // Run's writer, while writes succeed
	sampleWriteBackoff = 30 * time.Second // the longest wait after failed rounds: a struggling database is not pressed
	sampleWriteTimeout = 5 * time.Second  // one batch
	sampleBatch        = 250              // rows per statement (its encoded form stays with the pool connection until its next query)
)

// sampleKey identifies what is counted together; it is also the audit row it
// stands for (see event), so an entry keeps nothing twice.
type sampleKey struct {
	kind, issuer, subject, client, provider, reason string
	target                                          string // the connection read or used (token.read, proxy.call)
	// proxy.call: the call (its method, the pattern of the request rule it
	// matched or the path's template, receipt.Template) and the status
	// answered: one key, and one line in the user's receipts, per call and
	// status.
	method, template string
	status           int
}

// event is the audit row of k, without its count: the client is the actor
// when there is one (token reads, refused user tokens), else "anonymous".
func (k sampleKey) event() audit.Event {
	actor := "anonymous"
	if k.client != "" {
		actor = "client:" + k.client
	}
	return audit.Event{Kind: k.kind, Actor: actor, Issuer: k.issuer, Subject: k.subject, ClientID: k.client,
		Provider: k.provider, Target: k.target}
}

// sampleEntry is held by value in the sampler's map: about 150 bytes a key
// with the map's own overhead, on top of strings the caches already hold.
type sampleEntry struct {
	ip      string    // of the latest occurrence
	last    time.Time // when the key's current period began (its row was queued)
	pending int64     // occurrences since then, not yet in a row
}

// sampledRow is an audit row a sampler has queued: n occurrences of key (of
// key.kind only, when untracked).
type sampledRow struct {
	key       sampleKey
	n         int64
	untracked bool
	requestID string
	ip        string
}

// sampler counts events per key and queues their rows; safe for concurrent
// use.
type sampler struct {
	period   time.Duration
	max      int
	maxQueue int
	// named samplers never count a key anonymously: past max they make
	// room (evictOne) instead. The token-read trail must name every (user, client,
	// connection) at least once per period — a cut-off's exposure is read
	// from it — and its keys are authenticated (a client key and a valid
	// user token of a user who approved that client), so their number
	// follows real approvals, not what an anonymous caller sends.
	named bool

	mu        sync.Mutex
	entries   map[sampleKey]sampleEntry
	untracked map[string]int64 // per kind: occurrences not tracked because entries was full
	queue     []sampledRow     // rows to write, oldest first; at most maxQueue
}

func newSampler(period time.Duration, max int, named bool) *sampler {
	return &sampler{period: period, max: max, maxQueue: max / 10, named: named, entries: map[sampleKey]sampleEntry{},
		untracked: map[string]int64{}}
}

// event is the audit row of r, counted.
func (sm *sampler) event(r sampledRow) audit.Event {
	ev := r.key.event()
	if r.untracked {
		ev = audit.Event{Kind: r.key.kind, Actor: "connectd"}
	}
	ev.RequestID, ev.IP = r.requestID, r.ip
	ev.Detail = map[string]any{"count": r.n, "per": sm.period.String()}
	if r.key.reason != "" {
		ev.Detail["reason"] = r.key.reason
	}
	if r.key.method != "" {
		ev.Detail["method"], ev.Detail["template"], ev.Detail["status"] = r.key.method, r.key.template, r.key.status
	}
	if r.untracked {
		ev.Detail["untracked"] = true
	}
	return ev
}

// hit counts one occurrence of k and, if it is the key's first in a period,
// queues its row. Counting allocates nothing.
func (sm *sampler) hit(now time.Time, k sampleKey, ip, requestID string) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	e, ok := sm.entries[k]
	if !ok && len(sm.entries) >= sm.max {
		if !sm.named {
			sm.untracked[k.kind]++
			return
		}
		sm.evictOne()
	}
	e.pending++
	e.ip = ip
	if ok && now.Sub(e.last) < sm.period || len(sm.queue) >= sm.maxQueue {
		// Counted only; with the queue full, the period stays over and the
		// next sweep queues the count.
		sm.entries[k] = e
		return
	}
	sm.queue = append(sm.queue, sampledRow{key: k, n: e.pending, requestID: requestID, ip: ip})
	sm.entries[k] = sampleEntry{ip: ip, last: now}
}

// evictOne makes room in a full named sampler without losing a name: it
// forgets a key whose row is already queued or written (nothing pending),
// else ends one key's period early by queueing its count. Memory stays
// bounded; under that pressure a key may get more than one row a period.
// With the queue full too (the database down) nothing is forgotten and the
// map grows past max until the writer catches up.
func (sm *sampler) evictOne() {
	var (
		victim sampleKey
		found  bool
	)
	for k, e := range sm.entries {
		if e.pending == 0 {
			delete(sm.entries, k)
			return
		}
		if !found {
			victim, found = k, true
		}
	}
	if found && len(sm.queue) < sm.maxQueue {
		e := sm.entries[victim]
		sm.queue = append(sm.queue, sampledRow{key: victim, n: e.pending, ip: e.ip})
		delete(sm.entries, victim)
	}
}

// sweep queues the rows of keys whose period has passed with occurrences
// still uncounted, and of the occurrences not tracked, and forgets keys that
// stayed quiet for a whole period, so memory follows the active keys only.
// A count that finds the queue full stays for the next sweep.
func (sm *sampler) sweep(now time.Time) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	for k, e := range sm.entries {
		passed := now.Sub(e.last) >= sm.period
		switch {
		case e.pending > 0 && passed && len(sm.queue) < sm.maxQueue:
			sm.queue = append(sm.queue, sampledRow{key: k, n: e.pending, ip: e.ip})
			sm.entries[k] = sampleEntry{ip: e.ip, last: now}
		case e.pending == 0 && passed:
			delete(sm.entries, k)
		}
	}
	for kind, n := range sm.untracked {
		if len(sm.queue) >= sm.maxQueue {
			break
		}
		sm.queue = append(sm.queue, sampledRow{key: sampleKey{kind: kind}, n: n, untracked: true})
		delete(sm.untracked, kind)
	}
}

// take removes up to n queued rows, oldest first, and returns them.
func (sm *sampler) take(n int) []sampledRow {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	n = min(n, len(sm.queue))
	rows := make([]sampledRow, n)
	copy(rows, sm.queue)
	sm.queue = sm.queue[n:]
	if len(sm.queue) == 0 {
		sm.queue = nil // let the backing array go
	}
	return rows
}

// giveBack returns rows whose write failed to the front of the queue, for
// the next round. Those that no longer fit are counted back into their keys
// (a key gone meanwhile is tracked again, past max: they are few), for the
// sweep to queue once there is room.
func (sm *sampler) giveBack(rows []sampledRow) {
	if len(rows) == 0 {
		return
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.queue = append(rows[:len(rows):len(rows)], sm.queue...)
	if len(sm.queue) <= sm.maxQueue {
		return
	}
	for _, r := range sm.queue[sm.maxQueue:] {
		if r.untracked {
			sm.untracked[r.key.kind] += r.n
			continue
		}
		e := sm.entries[r.key]
		e.pending += r.n
		if e.ip == "" {
			e.ip = r.ip
		}
		sm.entries[r.key] = e
	}
	sm.queue = sm.queue[:sm.maxQueue]
}

// drain removes and returns everything the sampler holds as rows: the queue,
// every count whether or not its period is over, the untracked occurrences.
// For the last write at shutdown.
func (sm *sampler) drain() []sampledRow {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	rows := sm.queue
	for k, e := range sm.entries {
		if e.pending > 0 {
			rows = append(rows, sampledRow{key: k, n: e.pending, ip: e.ip})
		}
	}
	for kind, n := range sm.untracked {
		rows = append(rows, sampledRow{key: sampleKey{kind: kind}, n: n, untracked: true})
	}
	sm.queue, sm.entries, sm.untracked = nil, map[sampleKey]sampleEntry{}, map[string]int64{}
	return rows
}

// queued is how many rows wait to be written.
func (sm *sampler) queued() int {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return len(sm.queue)
}

// sample counts k for the request r. It never writes: see writeSampled.
func (s *Server) sample(r *http.Request, sm *sampler, k sampleKey) {
	sm.hit(s.now(), k, web.ClientAddr(r), web.RequestID(r.Context()))
}

// insertSampled writes a whole batch in one statement and one round trip:
// the ten columns of the rows as ten arrays, unnested into rows, so the
// statement (and its prepared form) is the same whatever the batch's size.
const insertSampled = audit.Insert + ` SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],
	$5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::jsonb[])`

// sampledBatch is one batch: the rows of each sampler, to give back to it
// if the write fails.
type sampledBatch struct {
	sm   *sampler
	rows []sampledRow
}

// insert writes batch in one statement, bounded by sampleWriteTimeout.
func (s *Server) insert(ctx context.Context, batch []sampledBatch) error {
	var text [9][]string // kind … ip, in audit.Insert's order
	var detail []map[string]any
	for _, b := range batch {
		for _, r := range b.rows {
			ev := b.sm.event(r)
			for i, v := range [9]string{ev.Kind, ev.Actor, ev.Issuer, ev.Subject, ev.ClientID, ev.Provider, ev.Target,
				ev.RequestID, ev.IP} {
				text[i] = append(text[i], v)
			}
			detail = append(detail, audit.Detail(ev.Detail))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, sampleWriteTimeout)
	defer cancel()
	if _, err := s.pool.Exec(ctx, insertSampled, text[0], text[1], text[2], text[3], text[4], text[5], text[6],
		text[7], text[8], detail); err != nil {
		return fmt.Errorf("connect: write %d sampled audit rows: %w", len(detail), err)
	}
	return nil
}

// next takes the next batch from the samplers: token reads first, refusals
// to fill it.
func (s *Server) next() ([]sampledBatch, int) {
	var batch []sampledBatch
	n := 0
	for _, sm := range []*sampler{s.reads, s.refusals} {
		if rows := sm.take(sampleBatch - n); len(rows) > 0 {
			batch = append(batch, sampledBatch{sm, rows})
			n += len(rows)
		}
	}
	return batch, n
}

// writeSampled writes the queued rows, a batch per statement, until none is
// left, ctx is done, or a write fails: then the batch goes back to the
// samplers for the next round, the failure is counted and logged once, and
// returned. ctx's end stops it between batches, never during one: a write
// cut short might have been committed all the same, and its rows, given
// back, would be written twice.
func (s *Server) writeSampled(ctx context.Context) error {
	wctx := context.WithoutCancel(ctx)
	for ctx.Err() == nil {
		batch, n := s.next()
		if n == 0 {
			return nil
		}
		if err := s.insert(wctx, batch); err != nil {
			for _, b := range batch {
				b.sm.giveBack(b.rows)
			}
			if s.onAuditWriteError != nil {
				s.onAuditWriteError()
			}
			s.logger.WarnContext(ctx, "sampled audit rows not written, will retry", slog.Int("rows", n),
				slog.Int("queued", s.reads.queued()+s.refusals.queued()), slog.Any("error", err))
			return err
		}
	}
	return nil
}

// runWriter writes the queued rows every second until ctx ends; after a
// failed round it waits twice as long as before, up to sampleWriteBackoff.
// What is left at the end is for writeAll.
func (s *Server) runWriter(ctx context.Context) {
	wait := sampleWriteEvery
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.writeSampled(ctx); err != nil {
			wait = min(2*wait, sampleWriteBackoff)
		} else {
			wait = sampleWriteEvery
		}
		t.Reset(wait)
	}
}

// flushSamples queues the counts whose period has passed and writes
// everything queued (the sweep's part).
func (s *Server) flushSamples(ctx context.Context) {
	now := s.now()
	s.reads.sweep(now)
	s.refusals.sweep(now)
	_ = s.writeSampled(ctx) // counted and logged; retried by the next round
}

// writeAll is the last write, at shutdown: everything the samplers hold,
// counts whose period is not over included. What cannot be written now never
// will be: it is counted as lost, by kind, and logged once. After a failed
// write the rest is not tried: the shutdown's time would go to more timeouts.
func (s *Server) writeAll(ctx context.Context) {
	var err error
	lost := map[string]int{}
	for _, sm := range []*sampler{s.reads, s.refusals} {
		rows := sm.drain()
		for len(rows) > 0 && err == nil {
			n := min(len(rows), sampleBatch)
			if err = s.insert(ctx, []sampledBatch{{sm, rows[:n]}}); err == nil {
				rows = rows[n:]
			}
		}
		for _, r := range rows {
			lost[r.key.kind]++
		}
	}
	if err == nil {
		return
	}
	total := 0
	for kind, n := range lost {
		total += n
		if s.onAuditLost != nil {
			s.onAuditLost(kind, n)
		}
	}
	s.logger.ErrorContext(ctx, "sampled audit rows lost", slog.Int("rows", total), slog.Any("kinds", lost),
		slog.Any("error", err))
}

// sampleRead records that the calling client was handed the user's token.
func (s *Server) sampleRead(r *http.Request, c *caller, provider, connID string) {
	s.sample(r, s.reads, sampleKey{kind: "token.read", issuer: c.user.Issuer, subject: c.user.Subject,
		client: c.client.ID, provider: provider, target: connID})
}

// sampleProxy records client c's proxied call of r to path (below the
// provider's API, proxy.Clean's form) with the user's connection connID at
// provider, sampled like a token read (the credential was used on the
// client's behalf): named by the pattern of the request rule it matched
// (rule, as proxyCall matched it: the zero Rule when the client has no
// rules for the provider), else by the path's template; with the status
// answered — the provider's, or the error table's when the provider gave
// none (forwarding failed with err). This row is the call's one record: the
// admin's audit trail and the user's access receipts (issue 36) both read
// it, so a proxied call is counted in memory once.
func (s *Server) sampleProxy(r *http.Request, c *caller, provider, connID, path string, rule clientauth.Rule,
	status int, err error) {
	tmpl := rule.Pattern
	if tmpl == "" {
		tmpl = receipt.Template("/" + path)
	}
	if status == 0 && err != nil {
		status = web.AsError(problem.About(provider, err)).Status
	}
	s.sample(r, s.reads, sampleKey{kind: "proxy.call", issuer: c.user.Issuer, subject: c.user.Subject,
		client: c.client.ID, provider: provider, target: connID, method: r.Method, template: tmpl, status: status})
}

// sampleDenied records an authenticated client's call that its
// registration forbids (kind: security.proxy_not_allowed, a call outside its
// request rules; security.token_release_refused, a token read by a
// proxy-only client): what a compromised client probing its bounds leaves
// behind, sampled per (client, user, provider) per minute like refusals.
func (s *Server) sampleDenied(r *http.Request, c *caller, kind, provider string) {
	s.sample(r, s.refusals, sampleKey{kind: kind, issuer: c.user.Issuer, subject: c.user.Subject, client: c.client.ID,
		provider: provider})
}

// sampleRefusal records a /v1 call refused for a bad client key or user
// token; client is the authenticated client when only the user token failed.
func (s *Server) sampleRefusal(r *http.Request, client clientauth.Client, err error) {
	we := web.AsError(err) // the answer the caller gets (the one error table)
	if we.Status != http.StatusUnauthorized {
		return // 503 jwks_unavailable and the like are outages, not refusals
	}
	k := sampleKey{kind: "security.invalid_user_token", client: client.ID, reason: we.Code}
	if we.ClientRefused() { // the client's credentials (key, assertion, DPoP proof), not the user's
		k.kind = "security.invalid_client_key"
	}
	s.sample(r, s.refusals, k)
}
