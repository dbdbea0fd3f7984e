package receipt

import (
	"context"
	"time"
)

// FlushDue is Run's periodic flush: only what is due.
func (w *Writer) FlushDue(ctx context.Context) error { return w.flush(ctx, false) }

// Held is how many rows the Writer keeps in memory: waiting, and written
// lately (whose repeats wait).
func (w *Writer) Held() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.entries)
}

// SetNow replaces the Writer's clock.
func (w *Writer) SetNow(now func() time.Time) { w.now = now }
