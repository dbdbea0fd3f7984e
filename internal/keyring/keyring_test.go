package keyring_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/connectd/connectd/internal/keyring"
)

func keyLine(t testing.TB, version uint32) string {
	t.Helper()
	l, err := keyring.GenerateKey(version)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustParse(t testing.TB, spec string) *keyring.Keyring {
	t.Helper()
	k, err := keyring.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	t.Parallel()
	k := mustParse(t, keyLine(t, 7))
	aad := keyring.Binding("test", "row-1", "github")
	ct, err := k.Seal([]byte("hello"), aad)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := keyring.KeyVersion(ct); err != nil || v != 7 {
		t.Fatalf("key version %d %v", v, err)
	}
	if bytes.Contains(ct, []byte("hello")) {
		t.Fatal("plaintext visible in ciphertext")
	}
	pt, err := k.Open(ct, aad)
	if err != nil || string(pt) != "hello" {
		t.Fatalf("open: %q %v", pt, err)
	}
	ct2, _ := k.Seal([]byte("hello"), aad)
	if bytes.Equal(ct, ct2) {
		t.Fatal("two seals of the same plaintext are identical: nonce reuse")
	}
}

func TestOpenRefusals(t *testing.T) {
	t.Parallel()
	line := keyLine(t, 1)
	k := mustParse(t, line)
	aad := keyring.Binding("connectd/vault/connection-credential/v1", "cn_1", "https://idp", "alice", "github")
	ct, err := k.Seal([]byte(`{"access_token":"gho_secret"}`), aad)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		c := bytes.Clone(ct)
		c[i] ^= 0x01
		return c
	}
	otherSameVersion := mustParse(t, keyLine(t, 1))
	tests := []struct {
		name string
		keys *keyring.Keyring
		ct   []byte
		aad  []byte
	}{
		{"format byte", k, flip(0), aad},
		{"key version", k, flip(4), aad},
		{"nonce", k, flip(8), aad},
		{"ciphertext body", k, flip(20), aad},
		{"tag", k, flip(len(ct) - 1), aad},
		{"truncated", k, ct[:len(ct)-1], aad},
		{"header only", k, ct[:17], aad},
		{"empty", k, nil, aad},
		{"wrong key (same version, other bytes)", otherSameVersion, ct, aad},
		{"unknown key version", mustParse(t, keyLine(t, 2)), ct, aad},
		{"other row", k, ct, keyring.Binding("connectd/vault/connection-credential/v1", "cn_2", "https://idp", "alice", "github")},
		{"other user", k, ct, keyring.Binding("connectd/vault/connection-credential/v1", "cn_1", "https://idp", "mallory", "github")},
		{"other provider", k, ct, keyring.Binding("connectd/vault/connection-credential/v1", "cn_1", "https://idp", "alice", "gitlab")},
		{"other purpose", k, ct, keyring.Binding("something-else", "cn_1", "https://idp", "alice", "github")},
		{"shifted boundaries", k, ct, keyring.Binding("connectd/vault/connection-credential/v1", "cn_1https://idp", "", "alice", "github")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pt, err := tt.keys.Open(tt.ct, tt.aad)
			if !errors.Is(err, keyring.ErrDecrypt) || pt != nil {
				t.Fatalf("got %q, %v; want ErrDecrypt", pt, err)
			}
			if strings.Contains(err.Error(), "gho_secret") {
				t.Fatal("error text holds plaintext")
			}
		})
	}
}

func TestParseKeyring(t *testing.T) {
	t.Parallel()
	l1, l2 := keyLine(t, 1), keyLine(t, 2)
	_, b64, _ := strings.Cut(l2, ":")
	raw, _ := base64.StdEncoding.DecodeString(b64)
	urlSafe := "2:" + base64.RawURLEncoding.EncodeToString(raw)
	good := []struct {
		name    string
		spec    string
		primary uint32
	}{
		{"single unmarked", l1, 1},
		{"single marked", "*" + l1, 1},
		{"two, second primary", l1 + ",*" + l2, 2},
		{"file with comments", "# keys\n*" + l1 + "\n\n" + l2 + "\n", 1},
		{"spaces and url-safe base64", " " + l1 + " , * " + urlSafe + " ", 2},
	}
	for _, tt := range good {
		k, err := keyring.Parse(tt.spec)
		if err != nil || k.Primary() != tt.primary {
			t.Errorf("%s: %v, primary %v", tt.name, err, k)
		}
	}
	bad := []struct {
		name, spec, want string
	}{
		{"empty", " \n# nothing\n", "no keys"},
		{"two unmarked", l1 + "," + l2, "none marked primary"},
		{"two marked", "*" + l1 + ",*" + l2, "2 keys are marked primary"},
		{"no colon", strings.Replace(l1, ":", "", 1), "entry 1: want VERSION:BASE64KEY"},
		{"version zero", "0:" + b64, "entry 1: version"},
		{"version huge", "99999999999:" + b64, "entry 1: version"},
		{"not base64", l1 + ",*3:" + strings.Repeat("!", 44), "entry 2 (version 3): key must be 32 bytes"},
		{"short key", "1:" + base64.StdEncoding.EncodeToString(raw[:16]), "key must be 32 bytes"},
		{"duplicate version", l1 + ",*1:" + b64, "version 1 appears twice"},
	}
	for _, tt := range bad {
		_, err := keyring.Parse(tt.spec)
		if !errors.Is(err, keyring.ErrKeyring) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), b64[:12]) || strings.Contains(err.Error(), strings.Repeat("!", 10)) {
			t.Errorf("%s: error echoes key material: %v", tt.name, err)
		}
	}
}

func TestKeysDoNotFormat(t *testing.T) {
	t.Parallel()
	line := keyLine(t, 1)
	_, b64, _ := strings.Cut(line, ":")
	k := mustParse(t, line)
	p := k.Purpose("connectd/test/v1")
	out := fmt.Sprintf("%v %+v %#v %s %q %v %+v", k, k, k, k, k, p, p)
	if strings.Contains(out, b64[:12]) {
		t.Fatalf("key material was formatted: %s", out)
	}
	if !strings.Contains(out, "*1") {
		t.Fatalf("versions should show: %s", out)
	}
}

// TestResealAndTally: a value sealed under an older key is sealed again
// under the primary with the same binding (and no longer opens with the
// older key alone); one under a key the keyring lacks is refused, not
// resealed; Tally counts what is where and names missing versions once.
func TestResealAndTally(t *testing.T) {
	t.Parallel()
	one, two := keyLine(t, 1), keyLine(t, 2)
	old := mustParse(t, one)
	rotated := mustParse(t, one+"\n*"+two)
	aad := keyring.Binding("test", "row-1")
	ct, err := old.Seal([]byte("secret"), aad)
	if err != nil {
		t.Fatal(err)
	}
	re, err := rotated.Reseal(ct, aad)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := keyring.KeyVersion(re); v != 2 {
		t.Fatalf("resealed under key %d, want the primary 2", v)
	}
	if pt, err := rotated.Open(re, aad); err != nil || string(pt) != "secret" {
		t.Fatalf("resealed value: %q %v", pt, err)
	}
	if _, err := old.Open(re, aad); !errors.Is(err, keyring.ErrDecrypt) {
		t.Fatalf("key 1 alone opens the resealed value: %v", err)
	}
	if _, err := rotated.Reseal(ct, keyring.Binding("test", "row-2")); !errors.Is(err, keyring.ErrDecrypt) {
		t.Fatalf("resealed under another binding: %v", err)
	}
	onlyTwo := mustParse(t, two)
	if _, err := onlyTwo.Reseal(ct, aad); !errors.Is(err, keyring.ErrDecrypt) {
		t.Fatalf("a value under a key the keyring lacks: %v", err)
	}
	var missing []uint32
	total, primary, lacking := keyring.Tally([]keyring.VersionCount{
		onlyTwo.Counted(1, 3), onlyTwo.Counted(2, 5), onlyTwo.Counted(1, 0), onlyTwo.Counted(9, 1),
	}, &missing)
	if total != 9 || primary != 5 || lacking != 4 || fmt.Sprint(missing) != "[1 9]" {
		t.Fatalf("tally %d %d %d %v", total, primary, lacking, missing)
	}
}
