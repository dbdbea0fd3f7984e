package api

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRequestStateSealedUnderItsPurpose: a request_state is sealed with the
// key derived for request_states (DESIGN invariant 13), not with the
// configured key the credentials' purpose key also derives from; one sealed
// by an older release under the configured key still resolves.
func TestRequestStateSealedUnderItsPurpose(t *testing.T) {
	keys := fuzzKeyring(t)
	s := &Server{keys: keys, now: time.Now, requestStateTTL: time.Hour}
	rs, err := s.sealRequestState(fuzzElicitation)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(rs, requestStatePrefix))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Open(ct, requestStateAAD); err == nil {
		t.Fatal("a request_state opens under the configured key: it was not sealed under its purpose key")
	}
	if _, err := keys.Purpose("connectd/vault/credential/v1").Open(ct, requestStateAAD); err == nil {
		t.Fatal("a request_state opens under the credentials' purpose key")
	}
	if _, err := s.openRequestState(rs); err != nil {
		t.Fatalf("own request_state: %v", err)
	}
	// Sealed by a release before purpose keys: still resolves.
	legacy, err := keys.Seal([]byte(`{"jti":"x","cid":"client-1","iss":"https://issuer.example","sub":"alice","eid":"`+
		fuzzElicitation.ID+`","exp":`+strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)+`}`), requestStateAAD)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.openRequestState(requestStatePrefix + base64.RawURLEncoding.EncodeToString(legacy)); err != nil {
		t.Fatalf("legacy request_state: %v", err)
	}
}
