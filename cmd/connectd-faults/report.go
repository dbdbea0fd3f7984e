package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
)

// row is one line of the fault table.
type row struct {
	Fault      string
	What       string // which requests the counts are of
	Sent       int
	Classes    map[string]int
	Other      string // what the "other" answers were
	MaxMs      float64
	Lost       string // credentials lost, "x of n"; "—" where the fault touches none
	RetryAfter string // how many of the 503s carried Retry-After
	Notes      string
}

// report is one whole run of the study.
type report struct {
	Date, Machine, Elapsed string
	Rows                   []row
	Problems               []string
}

var columns = []string{"fault", "what", "requests", "2xx", "409 reauth", "500", "503 database_unavailable",
	"503 provider_unavailable", "other", "max latency", "credentials lost", "Retry-After on 503s"}

func (r *report) cells(x row) []string {
	n := func(c string) string { return strconv.Itoa(x.Classes[c]) }
	other := strconv.Itoa(x.Classes[classOther] + x.Classes[classNoAnswer])
	if x.Other != "" {
		other += " (" + x.Other + ")"
	}
	return []string{x.Fault, x.What, strconv.Itoa(x.Sent), n(class2xx), n(class409), n(class500), n(class503DB),
		n(class503Prov), other, latency(x.MaxMs), x.Lost, x.RetryAfter}
}

func latency(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%.1f s", ms/1000)
	}
	return fmt.Sprintf("%.0f ms", ms)
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "\nconnectd faults — %s\n%s; whole run %s\n\n", r.Date, r.Machine, r.Elapsed)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	for _, x := range r.Rows {
		fmt.Fprintln(tw, strings.Join(r.cells(x), "\t"))
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, x := range r.Rows {
		fmt.Fprintf(w, "%s, %s: %s\n", x.Fault, x.What, x.Notes)
	}
	if len(r.Problems) > 0 {
		fmt.Fprintln(w, "\nremaining problems:")
		for _, p := range r.Problems {
			fmt.Fprintln(w, "- "+p)
		}
	}
}

// markdown is the generated section of docs/faults.md.
func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s — %s; whole run %s.\n\n", r.Date, r.Machine, r.Elapsed)
	b.WriteString("| " + strings.Join(columns, " | ") + " |\n|")
	b.WriteString(strings.Repeat(" --- |", len(columns)) + "\n")
	for _, x := range r.Rows {
		cells := r.cells(x)
		for i := range cells {
			cells[i] = strings.ReplaceAll(cells[i], "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	b.WriteString("\nPer row, as measured:\n\n")
	for _, x := range r.Rows {
		fmt.Fprintf(&b, "- %s, %s: %s\n", x.Fault, x.What, strings.ReplaceAll(x.Notes, "|", `\|`))
	}
	b.WriteString("\nRemaining problems the run saw (500s, unclassified answers, no answer, answers over 10 s " +
		"to a database fault, internal_error or panic lines in a replica's log): ")
	if len(r.Problems) == 0 {
		b.WriteString("none.\n")
	} else {
		b.WriteString("\n\n")
		for _, p := range r.Problems {
			b.WriteString("- " + p + "\n")
		}
	}
	return b.String()
}

// The generated section of docs/faults.md lies between these lines; the
// rest of the document is written by hand.
const (
	beginMarker = "<!-- connectd-faults: begin -->"
	endMarker   = "<!-- connectd-faults: end -->"
)

func (r *report) write(path string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	doc := string(old)
	i, j := strings.Index(doc, beginMarker), strings.Index(doc, endMarker)
	if i < 0 || j < i {
		doc = "# Faults\n\n" + beginMarker + "\n" + endMarker + "\n"
		i, j = strings.Index(doc, beginMarker), strings.Index(doc, endMarker)
	}
	doc = doc[:i+len(beginMarker)] + "\n" + r.markdown() + doc[j:]
	return os.WriteFile(path, []byte(doc), 0o644)
}

func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				model = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	return fmt.Sprintf("%d cores (%s), %s %s/%s, load generator, Postgres and both replicas on the same cores",
		runtime.NumCPU(), model, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
