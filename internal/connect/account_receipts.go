package connect

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/receipt"
	"github.com/connectd/connectd/web/templates"
)

// The access receipts on the account page (package receipt): each
// connection's newest uses — proxied calls, token reads, approvals — with
// a Remove access form on every line of a client that still has access,
// and the download of all of them (GET /account/receipts). Both read the
// signed-in session's own (issuer, subject) only: nothing in the request
// names whose receipts they are.

// receiptsShown is how many receipts each connection shows on the page
// (the download has them all).
const receiptsShown = 20

// receiptsPath is the download of the signed-in user's receipts.
const receiptsPath = accountPath + "/receipts"

// clientNames looks up each client's name once per page.
type clientNames struct {
	s     *Server
	names map[string]string
}

// of is client id's name, its id when it is gone.
func (n clientNames) of(ctx context.Context, id string) string {
	if name, ok := n.names[id]; ok {
		return name
	}
	name := id
	if cl, err := n.s.clients.Get(ctx, id); err == nil && cl.Name != "" {
		name = cl.Name
	}
	n.names[id] = name
	return name
}

// receiptLine is rc as the page shows it; canRemove: the client still has
// the user's approval of the connection.
func receiptLine(ctx context.Context, rc receipt.Receipt, names clientNames, canRemove bool) templates.AccountReceipt {
	return templates.AccountReceipt{Kind: string(rc.Kind), ClientID: rc.ClientID, ClientName: names.of(ctx, rc.ClientID),
		Method: rc.Method, Template: rc.Template, Status: rc.Status, Count: rc.Count, When: whenIn(ctx, rc.Last),
		CanRemove: canRemove}
}

// receiptDoc is one receipt in the download.
type receiptDoc struct {
	Kind         string    `json:"kind"`
	Org          string    `json:"org"`
	Provider     string    `json:"provider"`
	ConnectionID string    `json:"connection_id"`
	ClientID     string    `json:"client_id"`
	ClientName   string    `json:"client_name"`
	Method       string    `json:"method,omitempty"`
	Template     string    `json:"template,omitempty"`
	Status       int       `json:"status,omitempty"`
	Count        int64     `json:"count"`
	FirstAt      time.Time `json:"first_at"`
	LastAt       time.Time `json:"last_at"`
	// CredentialLeft: a token read, the raw credential was handed to the
	// client.
	CredentialLeft bool `json:"credential_left_connectd"`
}

// receiptsDownload is the download's document.
type receiptsDownload struct {
	Issuer      string       `json:"issuer"`
	Subject     string       `json:"subject"`
	GeneratedAt time.Time    `json:"generated_at"`
	Receipts    []receiptDoc `json:"receipts"`
	// Truncated: there were more than receipt.MaxDownload; these are the
	// newest.
	Truncated bool `json:"truncated"`
}

// downloadReceipts handles GET /account/receipts: the signed-in user's
// receipts as a JSON attachment, newest first. It takes no parameter:
// whose they are is the session's. Without a session the browser goes to
// the account page, which signs in.
func (s *Server) downloadReceipts(w http.ResponseWriter, r *http.Request) error {
	noStore(w)
	sess, err := s.sessions.Load(w, r)
	if err != nil {
		http.Redirect(w, r, accountPath, http.StatusSeeOther)
		return nil
	}
	u := identity.User{Issuer: sess.Issuer, Subject: sess.Subject}
	rs, truncated, err := receipt.All(r.Context(), s.pool, u, receipt.MaxDownload)
	if err != nil {
		return err
	}
	reads, err := s.sampledUses(r.Context(), u, receipt.MaxDownload)
	if err != nil {
		return err
	}
	var cut bool
	rs, cut = newestFirst(append(rs, reads...), receipt.MaxDownload)
	truncated = truncated || cut
	names := clientNames{s: s, names: map[string]string{}}
	doc := receiptsDownload{Issuer: u.Issuer, Subject: u.Subject, GeneratedAt: s.now().UTC(), Truncated: truncated,
		Receipts: make([]receiptDoc, 0, len(rs))}
	for _, rc := range rs {
		doc.Receipts = append(doc.Receipts, receiptDoc{Kind: string(rc.Kind), Org: rc.Org, Provider: rc.Provider,
			ConnectionID: rc.ConnectionID, ClientID: rc.ClientID, ClientName: names.of(r.Context(), rc.ClientID),
			Method: rc.Method, Template: rc.Template, Status: rc.Status, Count: rc.Count, FirstAt: rc.First.UTC(),
			LastAt: rc.Last.UTC(), CredentialLeft: rc.Kind == receipt.KindToken})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", `attachment; filename="connectd-receipts.json"`)
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(doc) // the status is sent: a broken connection is the client's
	return nil
}
