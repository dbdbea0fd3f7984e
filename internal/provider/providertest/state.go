package providertest

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// The tokens a fake provider issued, as Save writes them: what lets the demo
// (cmd/connectd-demo) stop and start again without its users' Demo Files
// connections going stale. Codes and account-chooser requests are not kept:
// they last minutes.
type savedState struct {
	Grants  []savedGrant            `json:"grants"`
	Access  map[string]savedAccess  `json:"access"`
	Refresh map[string]savedRefresh `json:"refresh"`
}

type savedGrant struct {
	Client  string   `json:"client,omitempty"` // the client it was issued to ("": Options.ClientID), an app's id kept
	Scopes  []string `json:"scopes"`
	Revoked bool     `json:"revoked,omitempty"`
	Subject string   `json:"subject"`
	Label   string   `json:"label,omitempty"`
}

type savedAccess struct {
	Grant   int       `json:"grant"`
	Scopes  []string  `json:"scopes"`
	Expires time.Time `json:"expires"`
	Revoked bool      `json:"revoked,omitempty"`
}

type savedRefresh struct {
	Grant     int       `json:"grant"`
	Used      bool      `json:"used,omitempty"`
	Revoked   bool      `json:"revoked,omitempty"`
	Successor string    `json:"successor,omitempty"`
	RotatedAt time.Time `json:"rotated_at"`
}

// Save writes the access and refresh tokens the server has issued (and their
// grants) to w, as JSON; Load reads them into a fresh server.
func (s *Server) Save(w io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := savedState{Access: map[string]savedAccess{}, Refresh: map[string]savedRefresh{}}
	index := map[*grant]int{}
	grantIndex := func(g *grant) int {
		if i, ok := index[g]; ok {
			return i
		}
		index[g] = len(st.Grants)
		st.Grants = append(st.Grants, savedGrant{Client: g.client, Scopes: g.scopes, Revoked: g.revoked, Subject: g.subject, Label: g.label})
		return index[g]
	}
	for tok, a := range s.access {
		st.Access[tok] = savedAccess{Grant: grantIndex(a.grant), Scopes: a.scopes, Expires: a.expires, Revoked: a.revoked}
	}
	for tok, r := range s.refresh {
		st.Refresh[tok] = savedRefresh{Grant: grantIndex(r.grant), Used: r.used, Revoked: r.revoked, Successor: r.successor,
			RotatedAt: r.rotatedAt}
	}
	return json.NewEncoder(w).Encode(st)
}

// Load adds the tokens Save wrote to the server's.
func (s *Server) Load(r io.Reader) error {
	var st savedState
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return fmt.Errorf("providertest: load: %w", err)
	}
	grants := make([]*grant, len(st.Grants))
	for i, g := range st.Grants {
		grants[i] = &grant{client: g.Client, scopes: g.Scopes, revoked: g.Revoked, subject: g.Subject, label: g.Label}
	}
	get := func(i int) (*grant, error) {
		if i < 0 || i >= len(grants) {
			return nil, fmt.Errorf("providertest: load: grant %d out of range", i)
		}
		return grants[i], nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for tok, a := range st.Access {
		g, err := get(a.Grant)
		if err != nil {
			return err
		}
		s.access[tok] = &accessToken{grant: g, scopes: a.Scopes, expires: a.Expires, revoked: a.Revoked}
	}
	for tok, rt := range st.Refresh {
		g, err := get(rt.Grant)
		if err != nil {
			return err
		}
		s.refresh[tok] = &refreshToken{grant: g, used: rt.Used, revoked: rt.Revoked, successor: rt.Successor, rotatedAt: rt.RotatedAt}
	}
	return nil
}
