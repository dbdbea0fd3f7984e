// Package receipt owns the access receipts (issue 36): what each end user
// sees on /account of who used their connections for what — every proxied
// call, every token read (a raw credential left connectd), every approval
// asked and given — and "Last used" per client and per connection. It owns
// its tables (receipts, receipt_last_uses; migration 00037) and every
// statement on them. Token reads and proxied calls are not written here:
// their receipts are the sampled audit trail's token.read and proxy.call
// rows (package audit, audit.Uses), the one record each makes; Writer
// records approvals asked and answered.
//
// Receipts are the user's: every read is by the (issuer, subject) of the
// signed-in user, in this package; no id alone (a connection's, a client's)
// reads anything, and nothing here is for an administrator.
//
// Writing never slows or fails the call it records: Writer.Record only
// counts the use in memory (aggregated: identical uses within a flush are
// one row with a count, first and last time), and Writer.Run writes what it
// holds every flush period, in one statement per batch on a deadline of its
// own. What does not fit (the buffer is full, the database has been down
// longer than the buffer holds) is dropped and counted (Config.OnDropped:
// connectd_receipts_dropped_total) and logged once per period, never waited
// for.
package receipt

import (
	"strings"
	"time"
	"unicode/utf8"
)

// Kind is what a receipt records.
type Kind string

// The kinds of receipts. connectd records only the approval kinds with
// Writer now; rows of KindProxy and KindToken in the tables (and their
// receipt_last_uses) are from before proxied calls and token reads became
// audit rows (audit.Uses), and are read, and swept, like the others.
const (
	// KindProxy: a call the client made through connectd's proxy with the
	// user's credential (the credential stayed in connectd).
	KindProxy Kind = "proxy"
	// KindToken: the client read the credential itself (token read or
	// token exchange): a raw credential left connectd.
	KindToken Kind = "token"
	// KindApprovalAsked: a proxied call needed the user's approval and the
	// client was handed an approval link.
	KindApprovalAsked Kind = "approval.asked"
	// KindApprovalGranted and KindApprovalDenied: the user's answer.
	KindApprovalGranted Kind = "approval.granted"
	KindApprovalDenied  Kind = "approval.denied"
)

// known reports whether k is one of the kinds above.
func (k Kind) known() bool {
	switch k {
	case KindProxy, KindToken, KindApprovalAsked, KindApprovalGranted, KindApprovalDenied:
		return true
	}
	return false
}

// uses reports whether k is a use of the credential: what "Last used"
// counts (an approval asked or answered is not one).
func (k Kind) uses() bool { return k == KindProxy || k == KindToken }

// Use is one use of a user's connection by a client, as the hot path hands
// it to Writer.Record. It never holds a secret: ids, a method, a path's
// template, a status.
type Use struct {
	Org, Issuer, Subject   string // the user
	Provider, ConnectionID string
	ClientID               string
	Kind                   Kind
	Method, Template       string // proxy/approval: method and the rule's pattern or path template; token: ""
	Status                 int    // proxy: the HTTP status answered; 0 otherwise
	At                     time.Time
}

// MaxTemplate bounds a template (a rule's pattern is at most 512 bytes
// with its method): longer ones are cut at a segment and end in "/…".
const MaxTemplate = 512

// maxSegment: a path segment longer than this is an id, not a name.
const maxSegment = 32

// Template is the template of a provider API path, what a receipt names
// when no request rule matched the call: the path without its query, each
// segment that holds a digit or is longer than 32 bytes replaced by "*"
// (ids, hashes, dates, escapes such as %2F), at most MaxTemplate bytes
// (longer ones cut at a segment, ending in "/…"). It always starts with
// "/". A path that needs no change is returned as it is (no allocation).
func Template(path string) string {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	if !needsTemplate(path) {
		return path
	}
	var b strings.Builder
	b.Grow(min(len(path), MaxTemplate))
	for seg := range strings.SplitSeq(path[1:], "/") {
		if idLike(seg) {
			seg = "*"
		}
		if b.Len()+1+len(seg) > MaxTemplate-len("/…") {
			b.WriteString("/…")
			break
		}
		b.WriteByte('/')
		b.WriteString(seg)
	}
	return b.String()
}

// needsTemplate reports whether Template changes path (with its leading
// "/" and no query).
func needsTemplate(path string) bool {
	if len(path) > MaxTemplate || !utf8.ValidString(path) {
		return true
	}
	start := 1
	for i := 1; i <= len(path); i++ {
		if i == len(path) || path[i] == '/' {
			if idLike(path[start:i]) {
				return true
			}
			start = i + 1
		}
	}
	return false
}

// idLike reports whether a segment names an instance rather than a kind:
// it holds a digit, is longer than maxSegment bytes, or is not valid text.
func idLike(seg string) bool {
	if len(seg) > maxSegment || !utf8.ValidString(seg) {
		return true
	}
	for i := 0; i < len(seg); i++ {
		if c := seg[i]; c >= '0' && c <= '9' || c < ' ' || c == 0x7f {
			return true
		}
	}
	return false
}
