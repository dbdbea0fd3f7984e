package web

import "time"

// TableRow is what the closure test reads of a row of the error table.
type TableRow struct{ Code, OAuth string }

// TableRows is the error table's rows, top to bottom.
func TableRows() []TableRow {
	rows := make([]TableRow, len(codes))
	for i, c := range codes {
		rows[i] = TableRow{Code: c.code, OAuth: c.oauth}
	}
	return rows
}

// Spent is l.spent: whether key's budget is spent at now (counting the
// request when it is not).
func (l *Limiter) Spent(key string, now time.Time) bool { return l.spent(key, now) }
