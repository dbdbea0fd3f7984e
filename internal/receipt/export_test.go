package receipt

import "context"

// FlushDue is Run's periodic flush: only what is due.
func (w *Writer) FlushDue(ctx context.Context) error { return w.flush(ctx, false) }
