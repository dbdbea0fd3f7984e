package web

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
