package vault

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/scope"
)

// Credential is the secret set stored for one connection: what the provider
// returned (or the API key the user typed, as AccessToken with TokenType
// "api_key"). It is sealed as a whole; formatting it with fmt or slog prints
// no secret.
type Credential struct {
	AccessToken  string
	RefreshToken string    // "" when the provider issued none
	TokenType    string    // usually "Bearer"
	Expiry       time.Time // zero when the provider did not say (the token is treated as not expiring)
	Scopes       []string  // granted scopes
	AccountID    string    // the provider's id for the account, when known
	AccountLabel string    // a human label (login, workspace name), when known
}

// AccountHash names a provider account without keeping its id in clear:
// the connections table keeps it beside the sealed credential, and every
// approval names the account it was given for by it (package consent), so
// the two compare without opening anything. The one rule for it.
func AccountHash(accountID string) []byte {
	h := sha256.Sum256([]byte("connectd/account/v1\x00" + accountID))
	return h[:]
}

// Prefixes of the account ids connectd makes up for a credential whose
// provider names no account: a typed API key (KeyAccount), an OAuth round
// trip the provider did not say whose it was (UnnamedAccount). Such an id is
// random, never derived from the credential, and never shown as if the
// provider had said it.
const (
	KeyAccount     = "key-"
	UnnamedAccount = "unnamed-"
)

// NewAccountID names an account connectd cannot read from the provider:
// prefix (KeyAccount, UnnamedAccount) and 128 random bits.
func NewAccountID(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// MadeUpAccount reports whether the account id is one NewAccountID made,
// not the provider's.
func MadeUpAccount(id string) bool {
	return strings.HasPrefix(id, KeyAccount) || strings.HasPrefix(id, UnnamedAccount)
}

// DisplayName is the one name of the credential's provider account that
// anyone is shown — the listing, the token read and exchange, the
// account_required choices, webhook events, a cut-off's exposure and notice,
// the pages — and the one the connections table keeps in clear
// (Connection.DisplayName): the provider's label for it (login, email,
// workspace), else the provider's own id for it (a provider that names
// accounts only by an ID token's sub), else "" when connectd made the id up
// (MadeUpAccount) or there is none.
func (c *Credential) DisplayName() string {
	switch {
	case c.AccountLabel != "":
		return c.AccountLabel
	case MadeUpAccount(c.AccountID):
		return ""
	}
	return c.AccountID
}

// missing lists the scopes in required that were not granted.
func (c *Credential) missing(required []string) []string {
	return scope.Missing(required, c.Scopes)
}

// String describes the credential without its secrets.
func (c Credential) String() string {
	var b strings.Builder
	b.WriteString("vault.Credential{AccessToken:")
	b.WriteString(redacted(c.AccessToken))
	b.WriteString(" RefreshToken:")
	b.WriteString(redacted(c.RefreshToken))
	fmt.Fprintf(&b, " TokenType:%s Expiry:%s Scopes:%v AccountID:%s AccountLabel:%s}",
		c.TokenType, c.Expiry.Format(time.RFC3339), c.Scopes, c.AccountID, c.AccountLabel)
	return b.String()
}

// Format makes every fmt verb (%v, %+v, %#v, %s, …) print String.
func (c Credential) Format(f fmt.State, _ rune) { io.WriteString(f, c.String()) }

// LogValue keeps secrets out of slog output.
func (c Credential) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("access_token", redacted(c.AccessToken)),
		slog.String("refresh_token", redacted(c.RefreshToken)),
		slog.String("token_type", c.TokenType),
		slog.Time("expiry", c.Expiry),
		slog.Any("scopes", c.Scopes),
	)
}

func redacted(s string) string {
	if s == "" {
		return "none"
	}
	return "[redacted]"
}

// Encoding of a credential before sealing. A hand-written length-prefixed
// format instead of encoding/json, so that every buffer holding plaintext is
// one this package allocated and clears (json's encoder pools its buffers).
const (
	credFormatV1 byte = 1
	maxField          = 1 << 20
	maxScopes         = 1024
)

var errCorrupt = errors.New("vault: corrupt credential encoding")

// encode returns the plaintext encoding of c; the caller clears it.
func (c *Credential) encode() []byte {
	n := 1 + 6*binary.MaxVarintLen64 + len(c.AccessToken) + len(c.RefreshToken) + len(c.TokenType) +
		len(c.AccountID) + len(c.AccountLabel) + binary.MaxVarintLen64
	for _, s := range c.Scopes {
		n += binary.MaxVarintLen64 + len(s)
	}
	b := make([]byte, 0, n)
	b = append(b, credFormatV1)
	b = appendString(b, c.AccessToken)
	b = appendString(b, c.RefreshToken)
	b = appendString(b, c.TokenType)
	var exp int64
	if !c.Expiry.IsZero() {
		exp = c.Expiry.UnixMicro()
	}
	b = binary.AppendVarint(b, exp)
	b = binary.AppendUvarint(b, uint64(len(c.Scopes)))
	for _, s := range c.Scopes {
		b = appendString(b, s)
	}
	b = appendString(b, c.AccountID)
	b = appendString(b, c.AccountLabel)
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decodeCredential parses an encoding made by encode.
func decodeCredential(b []byte) (*Credential, error) {
	if len(b) == 0 || b[0] != credFormatV1 {
		return nil, errCorrupt
	}
	d := decoder{b: b[1:]}
	c := &Credential{}
	c.AccessToken = d.string()
	c.RefreshToken = d.string()
	c.TokenType = d.string()
	if exp := d.varint(); exp != 0 {
		c.Expiry = time.UnixMicro(exp).UTC()
	}
	if n := d.uvarint(); n > maxScopes {
		d.err = errCorrupt
	} else if n > 0 {
		c.Scopes = make([]string, 0, n)
		for range n {
			c.Scopes = append(c.Scopes, d.string())
		}
	}
	c.AccountID = d.string()
	c.AccountLabel = d.string()
	if d.err != nil || len(d.b) != 0 {
		return nil, errCorrupt
	}
	return c, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > maxField || n > uint64(len(d.b)) {
		d.err = errCorrupt
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
