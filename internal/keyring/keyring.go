// Package keyring owns connectd's encryption keys: the versioned keys an
// operator configures (CONNECTD_VAULT_KEYS), one primary that seals, the
// per-purpose keys derived from them (DESIGN invariant 13), and the sealed
// format (AES-256-GCM with the header and the caller's binding
// authenticated). The vault store, connect's sealed PKCE verifiers and
// request states, and webhook secrets each seal under their own Purpose of the
// one configured keyring; none of them owns the keys.
package keyring

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ErrDecrypt means a ciphertext did not open: it was tampered with, sealed
// under a key the keyring does not hold (or holds with different bytes), or
// moved to another row or purpose than the one it was sealed for. The error
// text never says more than which key version was involved.
var ErrDecrypt = errors.New("keyring: cannot decrypt")

// ErrKeyring reports an invalid key specification. Its text names the entry at
// fault, never key material.
var ErrKeyring = errors.New("keyring: invalid keyring")

const (
	// KeySize is the length of a key: AES-256.
	KeySize = 32
	// MaxKeyVersion is the largest key version (it is stored in a Postgres integer).
	MaxKeyVersion = 1<<31 - 1
	// HeaderSize is the length of a ciphertext's header: format, key version, nonce.
	HeaderSize = 1 + 4 + 12
	// PurposeFormat is the first byte of everything a Purpose keyring seals
	// (what a rewrap looks for: anything else was sealed the old way).
	PurposeFormat = formatPurpose

	// formatRaw marks a ciphertext sealed directly under a configured key:
	// everything connectd sealed before per-purpose keys, and what the
	// configured keyring itself (not a Purpose of it) still seals.
	formatRaw byte = 1
	// formatPurpose marks a ciphertext sealed under a key derived for one
	// purpose (Keyring.Purpose).
	formatPurpose byte = 2
	nonceSize          = 12
	headerSize         = HeaderSize
	tagSize            = 16
)

// Keyring holds the versioned keys that open ciphertexts and the one primary
// key that seals new ones. The keyring made from configuration (New,
// Parse) holds the configured keys; Purpose derives from it a keyring
// for one purpose, with a key per version, and that is what seals anything
// (DESIGN invariant 13). It is safe for concurrent use and never exposes key
// bytes; formatting a Keyring prints only its versions (and purpose).
type Keyring struct {
	primary uint32
	aeads   map[uint32]cipher.AEAD
	keys    map[uint32][]byte // the key bytes, for Purpose; never printed
	label   string            // "" for the configured keys
	format  byte              // what Seal writes and Open opens with aeads
	// legacy opens formatRaw ciphertexts in a purpose keyring: the
	// configured keys' ciphers, so that what was sealed before per-purpose
	// keys (stored credentials, in-flight verifiers and request_states)
	// still opens until rewrap or expiry replaces it. Nil for the
	// configured keys themselves.
	legacy map[uint32]cipher.AEAD

	purposes sync.Map // label → *Keyring, derived once
}

// New builds a keyring from raw 32-byte keys by version; primary must be
// one of them. The caller's key slices are zeroed once the ciphers are built
// (the keyring keeps its own copy, to derive purpose keys from).
func New(keys map[uint32][]byte, primary uint32) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrKeyring)
	}
	for v, raw := range keys {
		if v == 0 || v > MaxKeyVersion {
			return nil, fmt.Errorf("%w: key version %d is out of range 1-%d", ErrKeyring, v, MaxKeyVersion)
		}
		if len(raw) != KeySize {
			return nil, fmt.Errorf("%w: key version %d is %d bytes, want %d", ErrKeyring, v, len(raw), KeySize)
		}
	}
	if _, ok := keys[primary]; !ok {
		return nil, fmt.Errorf("%w: primary key version %d is not among the keys", ErrKeyring, primary)
	}
	k, err := newKeyring(keys, primary, "", formatRaw, nil)
	if err != nil {
		return nil, err
	}
	for _, raw := range keys {
		clear(raw)
	}
	return k, nil
}

// newKeyring builds the ciphers of keys (checked by the caller), keeping a
// copy of each key.
func newKeyring(keys map[uint32][]byte, primary uint32, label string, format byte, legacy map[uint32]cipher.AEAD) (*Keyring, error) {
	k := &Keyring{primary: primary, aeads: make(map[uint32]cipher.AEAD, len(keys)),
		keys: make(map[uint32][]byte, len(keys)), label: label, format: format, legacy: legacy}
	for v, raw := range keys {
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: key version %d: %v", ErrKeyring, v, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("%w: key version %d: %v", ErrKeyring, v, err)
		}
		k.aeads[v] = aead
		k.keys[v] = slices.Clone(raw)
	}
	return k, nil
}

// Purpose returns the keyring for one purpose: for every version of k, the
// key HKDF-SHA256 derives from k's key of that version with label as the
// info (no salt), under the same versions and primary. So rotating the
// configured keys rotates every purpose, and each purpose spends the nonce
// budget of its own keys: no two purposes ever seal under the same key.
// Labels name the owner and purpose and carry a version, e.g.
// "connectd/vault/credential/v1"; a label must never be reused for something
// else. The keyring for a label is derived once and then shared. Its
// ciphertexts (format 2) open only under the same label; ciphertexts sealed
// directly under the configured keys (format 1, what connectd wrote before
// per-purpose keys) still open, for the upgrade, and are what rewrap moves.
// Purpose panics on an empty label, a programming error.
func (k *Keyring) Purpose(label string) *Keyring {
	if label == "" {
		panic("keyring: Keyring.Purpose needs a label")
	}
	if p, ok := k.purposes.Load(label); ok {
		return p.(*Keyring)
	}
	name := label
	if k.label != "" {
		name = k.label + "\x00" + label // a purpose of a purpose: distinct from both
	}
	derived := make(map[uint32][]byte, len(k.keys))
	defer func() {
		for _, d := range derived {
			clear(d)
		}
	}()
	for v, raw := range k.keys {
		d, err := hkdf.Key(sha256.New, raw, nil, name, KeySize)
		if err != nil { // only for lengths HKDF-SHA256 cannot make; KeySize is not one
			panic("keyring: derive purpose key: " + err.Error())
		}
		derived[v] = d
	}
	legacy := k.legacy
	if k.format == formatRaw {
		legacy = k.aeads
	}
	p, err := newKeyring(derived, k.primary, name, formatPurpose, legacy)
	if err != nil { // the derived keys are valid AES-256 keys
		panic("keyring: purpose keyring: " + err.Error())
	}
	got, _ := k.purposes.LoadOrStore(label, p)
	return got.(*Keyring)
}

// Parse reads a key specification: entries "VERSION:BASE64KEY"
// separated by commas or newlines, where exactly one entry is marked primary
// with a leading "*" ("*2:..."). A single unmarked entry is the primary. Blank
// entries and lines starting with "#" are ignored, so a key file may carry
// comments. Errors name the entry (1-based) and never echo key material.
func Parse(spec string) (*Keyring, error) {
	keys := map[uint32][]byte{}
	defer func() {
		for _, raw := range keys {
			clear(raw)
		}
	}()
	var primary uint32
	marked := 0
	n := 0
	for _, line := range strings.Split(spec, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for _, entry := range strings.Split(line, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			n++
			isPrimary := strings.HasPrefix(entry, "*")
			entry = strings.TrimSpace(strings.TrimPrefix(entry, "*"))
			vs, b64, ok := strings.Cut(entry, ":")
			if !ok {
				return nil, fmt.Errorf("%w: entry %d: want VERSION:BASE64KEY", ErrKeyring, n)
			}
			v64, err := strconv.ParseUint(strings.TrimSpace(vs), 10, 32)
			if err != nil || v64 == 0 || v64 > MaxKeyVersion {
				return nil, fmt.Errorf("%w: entry %d: version must be an integer from 1 to %d", ErrKeyring, n, MaxKeyVersion)
			}
			v := uint32(v64)
			if _, dup := keys[v]; dup {
				return nil, fmt.Errorf("%w: entry %d: key version %d appears twice", ErrKeyring, n, v)
			}
			raw, err := decodeKey(strings.TrimSpace(b64))
			if err != nil {
				return nil, fmt.Errorf("%w: entry %d (version %d): key must be %d bytes, base64-encoded (connectd vault gen-key makes one)",
					ErrKeyring, n, v, KeySize)
			}
			keys[v] = raw
			if isPrimary {
				marked++
				primary = v
			}
		}
	}
	switch {
	case n == 0:
		return nil, fmt.Errorf("%w: no keys", ErrKeyring)
	case marked > 1:
		return nil, fmt.Errorf("%w: %d keys are marked primary with \"*\", want exactly one", ErrKeyring, marked)
	case marked == 0 && n > 1:
		return nil, fmt.Errorf("%w: %d keys and none marked primary: mark the one that seals new data with a leading \"*\"", ErrKeyring, n)
	case marked == 0:
		for v := range keys {
			primary = v
		}
	}
	return New(keys, primary)
}

// decodeKey accepts standard or URL-safe base64, padded or not.
func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err := enc.DecodeString(s); err == nil {
			if len(raw) == KeySize {
				return raw, nil
			}
			clear(raw)
		}
	}
	return nil, errors.New("not a key")
}

// GenerateKey returns a key line "VERSION:BASE64KEY" holding a new random key,
// ready for CONNECTD_VAULT_KEYS (prefix it with "*" to make it the primary).
func GenerateKey(version uint32) (string, error) {
	if version == 0 || version > MaxKeyVersion {
		return "", fmt.Errorf("%w: key version %d is out of range 1-%d", ErrKeyring, version, MaxKeyVersion)
	}
	raw := make([]byte, KeySize)
	defer clear(raw)
	if _, err := io.ReadFull(rand.Reader, raw); err != nil {
		return "", fmt.Errorf("keyring: generate key: %w", err)
	}
	return strconv.FormatUint(uint64(version), 10) + ":" + base64.StdEncoding.EncodeToString(raw), nil
}

// Primary is the version of the key that seals new ciphertexts.
func (k *Keyring) Primary() uint32 { return k.primary }

// Versions lists the key versions the keyring holds, ascending.
func (k *Keyring) Versions() []uint32 {
	vs := make([]uint32, 0, len(k.aeads))
	for v := range k.aeads {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs
}

// Has reports whether the keyring holds key version v.
func (k *Keyring) Has(v uint32) bool { _, ok := k.aeads[v]; return ok }

// String describes the keyring by versions (and purpose) only.
func (k *Keyring) String() string {
	var b strings.Builder
	b.WriteString("keyring.Keyring")
	if k.label != "" {
		b.WriteString("(" + strconv.Quote(k.label) + ")")
	}
	b.WriteString("{")
	for i, v := range k.Versions() {
		if i > 0 {
			b.WriteString(",")
		}
		if v == k.primary {
			b.WriteString("*")
		}
		b.WriteString(strconv.FormatUint(uint64(v), 10))
	}
	b.WriteString("}")
	return b.String()
}

// Format makes every fmt verb print String, so no verb reaches key material.
func (k *Keyring) Format(f fmt.State, _ rune) { io.WriteString(f, k.String()) }

// Seal encrypts plaintext under the primary key. aad is authenticated but not
// stored: Open must be given the same bytes. The result is
// format(1) | key version(4, big-endian) | nonce(12) | ciphertext | tag(16);
// the header is authenticated too. The format is 2 for a Purpose keyring and 1
// for the configured keys, which nothing new should be sealed with: seal with
// a Purpose.
func (k *Keyring) Seal(plaintext, aad []byte) ([]byte, error) {
	return k.sealWith(k.primary, plaintext, aad)
}

func (k *Keyring) sealWith(version uint32, plaintext, aad []byte) ([]byte, error) {
	aead := k.aeads[version]
	out := make([]byte, headerSize, headerSize+len(plaintext)+tagSize)
	out[0] = k.format
	binary.BigEndian.PutUint32(out[1:5], version)
	if _, err := io.ReadFull(rand.Reader, out[5:headerSize]); err != nil {
		return nil, fmt.Errorf("keyring: nonce: %w", err)
	}
	return aead.Seal(out, out[5:headerSize], plaintext, additional(out[:headerSize], aad)), nil
}

// Open decrypts a ciphertext made by Seal with the same aad. Any failure is
// ErrDecrypt. The caller owns the returned plaintext and should clear it when
// done.
func (k *Keyring) Open(ciphertext, aad []byte) ([]byte, error) {
	if _, err := KeyVersion(ciphertext); err != nil {
		return nil, err
	}
	return k.openWith(nil, ciphertext, additional(ciphertext[:headerSize], aad))
}

// OpenAppend is Open for a caller that builds the associated data itself,
// in its own (pooled) buffer: ad is what AppendAD made for this ciphertext,
// and the plaintext is appended to dst. A hot path opening many ciphertexts
// allocates nothing here.
func (k *Keyring) OpenAppend(dst, ciphertext, ad []byte) ([]byte, error) {
	return k.openWith(dst, ciphertext, ad)
}

// AppendAD appends to b the complete associated data under which ciphertext
// was sealed with Binding(purpose, values...) as its aad, for OpenAppend. A
// ciphertext shorter than a header gets no header; OpenAppend then reports
// it.
func AppendAD(b, ciphertext []byte, purpose string, values ...string) []byte {
	if len(ciphertext) >= HeaderSize {
		b = append(b, ciphertext[:HeaderSize]...)
	}
	return appendBinding(b, purpose, values...)
}

// openWith is Open given the complete associated data, ad =
// additional(header, aad), appending the plaintext to dst.
func (k *Keyring) openWith(dst, ciphertext, ad []byte) ([]byte, error) {
	v, err := KeyVersion(ciphertext)
	if err != nil {
		return nil, err
	}
	aeads := k.aeads
	switch f := ciphertext[0]; {
	case f == k.format:
	case f == formatRaw && k.legacy != nil:
		aeads = k.legacy
	case f == formatRaw:
		return nil, fmt.Errorf("%w: sealed under a configured key, not a purpose key", ErrDecrypt)
	default:
		return nil, fmt.Errorf("%w: sealed under a purpose key (open it with that purpose's keyring)", ErrDecrypt)
	}
	aead, ok := aeads[v]
	if !ok {
		return nil, fmt.Errorf("%w: key version %d is not in the keyring", ErrDecrypt, v)
	}
	if len(ciphertext) < headerSize+tagSize {
		return nil, fmt.Errorf("%w: ciphertext too short", ErrDecrypt)
	}
	pt, err := aead.Open(dst, ciphertext[5:headerSize], ciphertext[headerSize:], ad)
	if err != nil {
		return nil, fmt.Errorf("%w: authentication failed (key version %d)", ErrDecrypt, v)
	}
	return pt, nil
}

// KeyVersion reads the key version from a ciphertext's header.
func KeyVersion(ciphertext []byte) (uint32, error) {
	if len(ciphertext) < headerSize {
		return 0, fmt.Errorf("%w: ciphertext too short", ErrDecrypt)
	}
	if ciphertext[0] != formatRaw && ciphertext[0] != formatPurpose {
		return 0, fmt.Errorf("%w: unknown ciphertext format %d", ErrDecrypt, ciphertext[0])
	}
	return binary.BigEndian.Uint32(ciphertext[1:5]), nil
}

// additional is the GCM associated data: the header followed by the caller's
// binding, so neither the header nor the binding can be changed unnoticed.
func additional(header, aad []byte) []byte {
	b := make([]byte, 0, len(header)+len(aad))
	return append(append(b, header...), aad...)
}

// Binding builds associated data from a purpose and the values a ciphertext
// belongs to, each length-prefixed so that no two different lists encode alike
// ("ab","c" differs from "a","bc").
func Binding(purpose string, values ...string) []byte {
	n := 4 + len(purpose)
	for _, v := range values {
		n += 4 + len(v)
	}
	return appendBinding(make([]byte, 0, n), purpose, values...)
}

// appendBinding appends Binding(purpose, values...) to b.
func appendBinding(b []byte, purpose string, values ...string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(purpose)))
	b = append(b, purpose...)
	for _, v := range values {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}

// VersionCount is how many values of one kind (webhook secrets, provider
// app secrets) are sealed under one key version of a keyring, as
// `connectd vault status` reports them.
type VersionCount struct {
	KeyVersion uint32
	Count      int64
	Primary    bool // new values are sealed under it
	InKeyring  bool // false: these values cannot be opened with the configured keys
}

// Counted is n values sealed under version, as k sees it.
func (k *Keyring) Counted(version uint32, n int64) VersionCount {
	return VersionCount{KeyVersion: version, Count: n, Primary: version == k.primary, InKeyring: k.Has(version)}
}

// Tally sums counts: every value, those under the primary key, and those
// under a key the keyring lacks, whose versions it adds to missing (once).
func Tally(counts []VersionCount, missing *[]uint32) (total, primary, lacking int64) {
	for _, c := range counts {
		total += c.Count
		switch {
		case c.Primary:
			primary += c.Count
		case !c.InKeyring:
			lacking += c.Count
			if c.Count > 0 && !slices.Contains(*missing, c.KeyVersion) {
				*missing = append(*missing, c.KeyVersion)
			}
		}
	}
	return total, primary, lacking
}

// Reseal opens ct, sealed under any key of k with aad, and seals it again
// under k's primary key with the same aad (a rewrap). The plaintext is
// cleared before it returns.
func (k *Keyring) Reseal(ct, aad []byte) ([]byte, error) {
	plain, err := k.Open(ct, aad)
	if err != nil {
		return nil, err
	}
	defer clear(plain)
	return k.Seal(plain, aad)
}
