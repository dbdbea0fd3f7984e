package api

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestSamplerLosesNoCount: whatever the writes do — fail, the queue
// overflow, keys come and go — every occurrence is in exactly one row
// written or still held, and each key's first occurrence in a period is
// queued at once while the queue has room.
func TestSamplerLosesNoCount(t *testing.T) {
	sm := newSampler(time.Minute, 50, false) // 5 rows may be queued
	now := time.Unix(1_700_000_000, 0)
	k := func(i int) sampleKey { return sampleKey{kind: "token.read", subject: fmt.Sprint(i)} }

	sm.hit(now, k(0), "ip", "req-0")
	sm.hit(now, k(0), "ip", "req-1")
	rows := sm.take(10)
	if len(rows) != 1 || rows[0].n != 1 || rows[0].requestID != "req-0" {
		t.Fatalf("first occurrence: %+v, want its row queued at once", rows)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	hits, written := int64(2), rows[0].n
	for round := range 2000 {
		rows := sm.take(1 + rng.IntN(4))
		// While the write is under way: more occurrences (of more keys than
		// are tracked), now and then a sweep.
		for range rng.IntN(20) {
			sm.hit(now, k(rng.IntN(80)), "ip", "req")
			hits++
		}
		if round%7 == 0 {
			now = now.Add(20 * time.Second)
			sm.sweep(now)
		}
		if rng.IntN(3) == 0 { // the write failed
			sm.giveBack(rows)
			continue
		}
		for _, r := range rows {
			written += r.n
		}
	}
	if len(sm.queue) > sm.maxQueue {
		t.Fatalf("%d rows queued, at most %d", len(sm.queue), sm.maxQueue)
	}
	held := int64(0)
	for _, r := range sm.drain() {
		held += r.n
	}
	if written+held != hits {
		t.Fatalf("%d occurrences, %d written, %d still held: %d lost", hits, written, held, hits-written-held)
	}
}

// TestReadSamplerNamesEveryKey: the token-read sampler names every (user,
// client, connection) it is shown at least once per period, however many
// keys it tracks and however full its queue — a cut-off's exposure is read
// from these rows, so an anonymous count would hide a user whose credential a
// compromised client received. (A refusal sampler counts keys past its cap
// anonymously; the read sampler must not.)
func TestReadSamplerNamesEveryKey(t *testing.T) {
	for _, tc := range []struct {
		name     string
		max      int // keys tracked before the cap; a tenth may queue
		keys     int
		takeEach int // rows written between reads (0: the writer is stuck)
	}{
		{"under the cap", 100, 50, 5},
		{"past the cap", 20, 500, 5},
		{"past the cap, the writer stuck", 20, 500, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sm := newSampler(readPeriod, tc.max, true)
			now := time.Unix(1_700_000_000, 0)
			k := func(i int) sampleKey {
				return sampleKey{kind: "token.read", subject: fmt.Sprint("u", i%7), client: "cli_a",
					provider: "fake", target: fmt.Sprint("cn_", i)}
			}
			named := map[sampleKey]int64{}
			write := func(rows []sampledRow) {
				for _, r := range rows {
					if r.untracked {
						t.Fatalf("an anonymous token.read row (%d reads)", r.n)
					}
					named[r.key] += r.n
				}
			}
			for i := range tc.keys {
				sm.hit(now, k(i), "ip", "req")
				sm.hit(now, k(i), "ip", "req") // a cached second read
				write(sm.take(tc.takeEach))
				// Memory stays bounded while the writer keeps up: keys past
				// the cap make room instead of growing the map.
				if tc.takeEach > 0 && len(sm.entries) > tc.max {
					t.Fatalf("%d keys tracked after %d, max %d", len(sm.entries), i+1, tc.max)
				}
			}
			// The period ends: the sweep queues what waited, the writer
			// catches up.
			now = now.Add(readPeriod)
			for range 3 * tc.keys {
				sm.sweep(now)
				rows := sm.take(sampleBatch)
				if len(rows) == 0 {
					break
				}
				write(rows)
			}
			write(sm.drain())
			for i := range tc.keys {
				if named[k(i)] != 2 {
					t.Fatalf("key %d: %d reads on record by name, want 2", i, named[k(i)])
				}
			}
		})
	}
}
