package session

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/securecookie"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/cache"
)

// Cookie names. The __Host- prefix makes browsers refuse them unless Secure,
// Path=/ and without Domain, so no sibling subdomain can plant or overwrite
// them.
const (
	CookieName        = "__Host-connectd_session"
	BindingCookieName = "__Host-connectd_binding"
)

// CSRFField is the name of the hidden form field that carries the CSRF token.
const CSRFField = "csrf_token"

// BindingMaxAge is the lifetime of the state-binding cookie; redirects that
// take longer than this (and the 10-minute state lifetime) fail.
const BindingMaxAge = 10 * time.Minute

// touchEvery is how stale LastSeen may get before the cookie is re-issued.
const touchEvery = time.Minute

var (
	// ErrNoSession means there is no valid session: no cookie, a tampered or
	// foreign one, one signed by a retired key, one past its lifetime or
	// idle timeout, or one that was ended on the server (signed out, ended by
	// an admin).
	ErrNoSession = errors.New("session: not signed in")
	// ErrCSRF means a form's CSRF token is missing or not this session's.
	ErrCSRF = errors.New("session: CSRF token mismatch")
	// ErrNoBinding means the browser has no valid state-binding cookie.
	ErrNoBinding = errors.New("session: no state-binding cookie")
)

// Key is one signing+encryption key pair.
type Key struct {
	Hash  []byte `json:"-"` // 32 bytes, HMAC-SHA256
	Block []byte `json:"-"` // 32 bytes, AES-256
}

// NewKey returns a random key.
func NewKey() Key {
	return Key{Hash: securecookie.GenerateRandomKey(32), Block: securecookie.GenerateRandomKey(32)}
}

// ParseKey decodes the configuration form of a key: 64 bytes in base64
// (standard or URL alphabet, padded or not), the HMAC key then the AES key.
func ParseKey(s string) (Key, error) {
	s = strings.TrimRight(strings.TrimSpace(s), "=")
	var b []byte
	var err error
	if strings.ContainsAny(s, "-_") {
		b, err = base64.RawURLEncoding.DecodeString(s)
	} else {
		b, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil || len(b) != 64 {
		return Key{}, errors.New("a session key must be 64 random bytes in base64")
	}
	return Key{Hash: b[:32], Block: b[32:]}, nil
}

// String hides the key, so a Key printed or logged by mistake leaks nothing.
func (k Key) String() string { return "session.Key(redacted)" }

// Encode returns the key in the form ParseKey reads (a secret).
func (k Key) Encode() string {
	return base64.StdEncoding.EncodeToString(append(append([]byte{}, k.Hash...), k.Block...))
}

// Config configures a Store.
type Config struct {
	// Pool is the database of browser_sessions (required): a cookie signs in
	// only while its session's row is live (see live.go).
	Pool *pgxpool.Pool
	// CacheTTL is how long "this session is live" may be answered from
	// memory (0: always ask the database); the cache is trusted only while
	// the notification listener feeds CacheSubscriber. CacheSize caps the
	// cached sessions (default 50,000).
	CacheTTL  time.Duration
	CacheSize int
	// Keys signs with Keys[0] and still reads the others (newest first).
	Keys []Key
	// MaxAge bounds a session's life from login, however active (default 12h).
	MaxAge time.Duration
	// IdleTimeout ends a session not used for this long (default 1h).
	IdleTimeout time.Duration
	Now         func() time.Time
	// Name is the session cookie's name (default CookieName) and BindingName
	// the state-binding cookie's (default BindingCookieName); both must start
	// with "__Host-". A Store with other names keeps a separate session (the
	// admin pages use one). The name is part of each cookie's MAC, so a cookie
	// issued under one name never opens under another.
	Name        string
	BindingName string
}

// Session is a signed-in browser.
type Session struct {
	ID       string    // 256 random bits, new at every login
	Issuer   string    // issuer URL the user logged in at
	Subject  string    // sub at that issuer
	IssuedAt time.Time // login time
	LastSeen time.Time // last use, to the minute
}

// Store reads and writes the cookies.
type Store struct {
	name     string
	bindName string
	session  []securecookie.Codec
	binding  []securecookie.Codec
	csrfKeys [][]byte
	maxAge   time.Duration
	idle     time.Duration
	now      func() time.Time
	pool     *pgxpool.Pool
	live     *cache.Map[cache.Digest, bool] // nil: disabled; see live.go
}

// New returns a Store. It fails when no key or no Pool is given or a key has
// the wrong size.
func New(cfg Config) (*Store, error) {
	if len(cfg.Keys) == 0 {
		return nil, errors.New("session: at least one key is required")
	}
	if cfg.Pool == nil {
		return nil, errors.New("session: Pool is required (sessions end on the server)")
	}
	s := &Store{name: cfg.Name, bindName: cfg.BindingName, maxAge: cfg.MaxAge, idle: cfg.IdleTimeout, now: cfg.Now,
		pool: cfg.Pool}
	if s.name == "" {
		s.name = CookieName
	}
	if s.bindName == "" {
		s.bindName = BindingCookieName
	}
	if !strings.HasPrefix(s.name, "__Host-") || !strings.HasPrefix(s.bindName, "__Host-") || s.name == s.bindName {
		return nil, errors.New("session: cookie names must start with __Host- and differ")
	}
	if s.maxAge <= 0 {
		s.maxAge = 12 * time.Hour
	}
	if s.idle <= 0 {
		s.idle = time.Hour
	}
	if s.now == nil {
		s.now = time.Now
	}
	var pairs [][]byte
	for i, k := range cfg.Keys {
		if len(k.Hash) != 32 || len(k.Block) != 32 {
			return nil, fmt.Errorf("session: key %d must be 32+32 bytes", i+1)
		}
		pairs = append(pairs, k.Hash, k.Block)
		// The CSRF key is derived so it is not the cookie MAC key itself.
		m := hmac.New(sha256.New, k.Hash)
		m.Write([]byte("connectd csrf v1"))
		s.csrfKeys = append(s.csrfKeys, m.Sum(nil))
	}
	s.session = codecs(pairs, s.maxAge)
	s.binding = codecs(pairs, BindingMaxAge)
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 50_000
	}
	s.live = cache.New[cache.Digest, bool](cfg.CacheTTL, cfg.CacheSize, s.now)
	return s, nil
}

func codecs(pairs [][]byte, maxAge time.Duration) []securecookie.Codec {
	cs := securecookie.CodecsFromPairs(pairs...)
	for _, c := range cs {
		// securecookie checks its own timestamp too: a second bound on age.
		c.(*securecookie.SecureCookie).MaxAge(int(maxAge / time.Second)).SetSerializer(securecookie.JSONEncoder{})
	}
	return cs
}

// value is what the session cookie holds (encrypted).
type value struct {
	ID       string `json:"i"`
	Issuer   string `json:"s"`
	Subject  string `json:"u"`
	IssuedAt int64  `json:"t"`
	LastSeen int64  `json:"l"`
}

// Start signs the browser in as (issuer, subject) with a brand-new session id,
// whatever session cookie it had before: a session id planted before login is
// never carried over (no fixation). The session that cookie carried is not
// ended here: a sign-in ends it first (EndCarried), so that no copy of the old
// cookie goes on working. The session is recorded (its id hashed) before the
// cookie is written, so no replica ever sees a cookie whose session it
// cannot find.
func (s *Store) Start(ctx context.Context, w http.ResponseWriter, issuer, subject string) (Session, error) {
	now := s.now()
	sess := Session{ID: randomID(), Issuer: issuer, Subject: subject, IssuedAt: now, LastSeen: now}
	if err := s.record(ctx, sess); err != nil {
		return Session{}, err
	}
	if err := s.write(w, sess, now); err != nil {
		return Session{}, err
	}
	return sess, nil
}

// Get returns the browser's session, or ErrNoSession. It enforces the
// absolute lifetime, the idle timeout and that the session has not ended on
// the server, but writes nothing. Any other error means the database could
// not be asked.
func (s *Store) Get(r *http.Request) (Session, error) {
	c, err := r.Cookie(s.name)
	if err != nil {
		return Session{}, ErrNoSession
	}
	var v value
	if err := securecookie.DecodeMulti(s.name, c.Value, &v, s.session...); err != nil {
		return Session{}, ErrNoSession
	}
	sess := Session{ID: v.ID, Issuer: v.Issuer, Subject: v.Subject,
		IssuedAt: time.Unix(v.IssuedAt, 0), LastSeen: time.Unix(v.LastSeen, 0)}
	now := s.now()
	if sess.ID == "" || sess.Issuer == "" || sess.Subject == "" ||
		!now.Before(sess.IssuedAt.Add(s.maxAge)) || !now.Before(sess.LastSeen.Add(s.idle)) {
		return Session{}, ErrNoSession
	}
	live, err := s.isLive(r.Context(), sess.ID)
	if err != nil {
		return Session{}, err
	}
	if !live {
		return Session{}, ErrNoSession
	}
	return sess, nil
}

// Load is Get for a request that uses the session: it also re-issues the
// cookie with a fresh LastSeen (and under the current key), at most once a
// minute, so the idle timeout counts from the last use.
func (s *Store) Load(w http.ResponseWriter, r *http.Request) (Session, error) {
	sess, err := s.Get(r)
	if err != nil {
		return Session{}, err
	}
	if now := s.now(); now.Sub(sess.LastSeen) >= touchEvery {
		sess.LastSeen = now
		if err := s.write(w, sess, now); err != nil {
			return Session{}, err
		}
	}
	return sess, nil
}

// Clear deletes the session cookie in this browser only; End also ends the
// session on the server, which is what signing out must do.
func (s *Store) Clear(w http.ResponseWriter) {
	http.SetCookie(w, cookie(s.name, "", -1))
}

func (s *Store) write(w http.ResponseWriter, sess Session, now time.Time) error {
	v := value{ID: sess.ID, Issuer: sess.Issuer, Subject: sess.Subject,
		IssuedAt: sess.IssuedAt.Unix(), LastSeen: sess.LastSeen.Unix()}
	enc, err := securecookie.EncodeMulti(s.name, v, s.session...)
	if err != nil {
		return fmt.Errorf("session: encode: %w", err)
	}
	// The cookie dies with the session's absolute lifetime.
	left := sess.IssuedAt.Add(s.maxAge).Sub(now)
	http.SetCookie(w, cookie(s.name, enc, max(int(left/time.Second), 1)))
	return nil
}

// CSRFToken returns the token forms of this session carry: an HMAC of the
// session id, so it changes with every login and is useless for any other
// session.
func (s *Store) CSRFToken(sess Session) string {
	return csrf(s.csrfKeys[0], sess.ID)
}

// CheckCSRF compares a submitted token with the session's in constant time
// (accepting tokens made under a key that is still in the keyring).
func (s *Store) CheckCSRF(sess Session, token string) error {
	if sess.ID == "" || token == "" {
		return ErrCSRF
	}
	ok := 0
	for _, k := range s.csrfKeys {
		ok |= subtle.ConstantTimeCompare([]byte(token), []byte(csrf(k, sess.ID)))
	}
	if ok != 1 {
		return ErrCSRF
	}
	return nil
}

func csrf(key []byte, id string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("csrf\x00" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// bindingValue is what the state-binding cookie holds (encrypted).
type bindingValue struct {
	Secret []byte `json:"b"`
}

// Binding returns the browser's state-binding secret (32 random bytes),
// creating it and setting its cookie if the browser has none, and renewing the
// cookie's lifetime. Flows started in several tabs share it; each flow's own
// state keeps them apart.
func (s *Store) Binding(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := s.ReadBinding(r)
	if err != nil {
		b = make([]byte, 32)
		_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms.
	}
	enc, err := securecookie.EncodeMulti(s.bindName, bindingValue{Secret: b}, s.binding...)
	if err != nil {
		return nil, fmt.Errorf("session: encode binding: %w", err)
	}
	http.SetCookie(w, cookie(s.bindName, enc, int(BindingMaxAge/time.Second)))
	return b, nil
}

// ReadBinding returns the browser's state-binding secret, or ErrNoBinding.
func (s *Store) ReadBinding(r *http.Request) ([]byte, error) {
	c, err := r.Cookie(s.bindName)
	if err != nil {
		return nil, ErrNoBinding
	}
	var v bindingValue
	if err := securecookie.DecodeMulti(s.bindName, c.Value, &v, s.binding...); err != nil || len(v.Secret) != 32 {
		return nil, ErrNoBinding
	}
	return v.Secret, nil
}

// cookie builds a cookie with the attributes every connectd cookie has.
// maxAge < 0 deletes it.
func cookie(name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     "/",
		MaxAge:   maxAge,
		Secure:   true,
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
	}
}

func randomID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
