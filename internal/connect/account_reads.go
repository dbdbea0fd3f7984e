package connect

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/receipt"
)

// The access receipts of token reads and proxied calls are the sampled
// audit trail's token.read and proxy.call rows (package audit: the first of
// a period per user, client, connection — and for a proxied call its
// method, template and status — within about a second, the count of the
// others when the period ends), not rows of their own: the token read,
// connectd's hottest path, and the proxied call each record a use once, in
// the sampler (issue 36; a second record cost the token read a third of its
// throughput, and the proxied call the memory that made it slow under the
// bench's memory limit, docs/performance.md).

// sampledUses are the user's newest token reads and proxied calls, at most
// limit, as receipts.
func (s *Server) sampledUses(ctx context.Context, u identity.User, limit int) ([]receipt.Receipt, error) {
	uses, err := audit.Uses(ctx, s.pool, u.Issuer, u.Subject, limit)
	if err != nil {
		return nil, err
	}
	out := make([]receipt.Receipt, 0, len(uses))
	for _, r := range uses {
		if r.Connection == "" {
			continue // recorded before connections were told apart
		}
		rc := receipt.Receipt{Org: r.Org, Provider: r.Provider, ConnectionID: r.Connection, ClientID: r.ClientID,
			Kind: receipt.KindToken, Count: r.Count, First: r.At, Last: r.At}
		if r.Kind == "proxy.call" {
			if r.Method == "" {
				continue // recorded before proxied calls were receipts: those are in the receipts' own rows
			}
			rc.Kind, rc.Method, rc.Template, rc.Status = receipt.KindProxy, r.Method, r.Template, r.Status
		}
		out = append(out, rc)
	}
	return out, nil
}

// newestFirst sorts receipts by their last use, newest first, and keeps at
// most n; truncated reports that some were left out.
func newestFirst(rs []receipt.Receipt, n int) ([]receipt.Receipt, bool) {
	slices.SortStableFunc(rs, func(a, b receipt.Receipt) int { return cmp.Compare(b.Last.UnixNano(), a.Last.UnixNano()) })
	if len(rs) > n {
		return rs[:n], true
	}
	return rs, false
}

// withReads adds the user's token reads and proxied calls to recent (per connection, each
// list newest first, at most n) and to lastUses, and the proxied calls and
// token reads of recent to lastUses.
func (s *Server) withReads(ctx context.Context, u identity.User, recent map[string][]receipt.Receipt,
	lastUses map[receipt.Pair]time.Time, n int) (map[string][]receipt.Receipt, map[receipt.Pair]time.Time, error) {
	reads, err := s.sampledUses(ctx, u, 1000)
	if err != nil {
		return nil, nil, err
	}
	if recent == nil {
		recent = map[string][]receipt.Receipt{}
	}
	if lastUses == nil {
		lastUses = map[receipt.Pair]time.Time{}
	}
	for _, r := range reads {
		recent[r.ConnectionID] = append(recent[r.ConnectionID], r)
		p := receipt.Pair{ConnectionID: r.ConnectionID, ClientID: r.ClientID}
		if r.Last.After(lastUses[p]) {
			lastUses[p] = r.Last
		}
	}
	for id, rs := range recent {
		// The lines shown count for "Last used" too: a line written
		// between the two reads of the page is never shown beside "Not
		// yet".
		for _, r := range rs {
			p := receipt.Pair{ConnectionID: r.ConnectionID, ClientID: r.ClientID}
			if (r.Kind == receipt.KindProxy || r.Kind == receipt.KindToken) && r.Last.After(lastUses[p]) {
				lastUses[p] = r.Last
			}
		}
		recent[id], _ = newestFirst(rs, n)
	}
	return recent, lastUses, nil
}
