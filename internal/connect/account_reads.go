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

// The access receipts of token reads are the sampled audit trail's
// token.read rows (package audit: the first read of a period per user,
// client and connection within about a second, the count of the others when
// the period ends), not rows of their own: the token read, connectd's
// hottest path, records each read once, in the sampler (issue 36; a second
// record cost it a third of its throughput, docs/performance.md).

// tokenReads are the user's newest token reads, at most limit, as receipts.
func (s *Server) tokenReads(ctx context.Context, u identity.User, limit int) ([]receipt.Receipt, error) {
	reads, err := audit.Reads(ctx, s.pool, u.Issuer, u.Subject, limit)
	if err != nil {
		return nil, err
	}
	out := make([]receipt.Receipt, 0, len(reads))
	for _, r := range reads {
		if r.Connection == "" {
			continue // recorded before connections were told apart
		}
		out = append(out, receipt.Receipt{Org: r.Org, Provider: r.Provider, ConnectionID: r.Connection,
			ClientID: r.ClientID, Kind: receipt.KindToken, Count: r.Count, First: r.At, Last: r.At})
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

// withReads adds the user's token reads to recent (per connection, each
// list newest first, at most n) and to lastUses, and the proxied calls and
// token reads of recent to lastUses.
func (s *Server) withReads(ctx context.Context, u identity.User, recent map[string][]receipt.Receipt,
	lastUses map[receipt.Pair]time.Time, n int) (map[string][]receipt.Receipt, map[receipt.Pair]time.Time, error) {
	reads, err := s.tokenReads(ctx, u, 1000)
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
