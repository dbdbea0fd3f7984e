package jsontext

import "testing"

func TestLoneSurrogate(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]bool{
		`"alice"`:              false,
		`"alice\udc00"`:        true,
		`"alice\uDC00"`:        true,
		`"\ud800"`:             true,
		`"\ud800x"`:            true,
		`"\ud800\u0041"`:       true,
		`"\ud83d\ude00"`:       false, // a pair: 😀
		`"\\udc00"`:            false, // an escaped backslash, then text
		`"\\\udc00"`:           true,
		`"\u00e9"`:             false,
		`{"a":"\udfff","b":1}`: true,
	} {
		if got := LoneSurrogate([]byte(raw)); got != want {
			t.Errorf("LoneSurrogate(%s) = %t, want %t", raw, got, want)
		}
	}
}
