package output

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// byteAtATime is the JSON string writer as it was before runs were
// appended at once: the reference the faster one must equal byte for byte.
func byteAtATime(s []byte) []byte {
	b := []byte{'"'}
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			b = appendASCII(b, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// The run-at-once writer writes what the byte-at-a-time one did, for every
// byte alone, every pair, every byte at each place of a long plain string,
// and random strings of mixed ASCII, controls,
// UTF-8 and broken UTF-8, as a string and as bytes.
func TestAppendStringSameAsByteAtATime(t *testing.T) {
	var inputs [][]byte
	for c := 0; c < 256; c++ {
		inputs = append(inputs, []byte{byte(c)}, []byte{'a', byte(c), 'b'})
		for d := 0; d < 256; d += 7 {
			inputs = append(inputs, []byte{byte(c), byte(d)})
		}
	}
	plain := []byte("The quick-brown_fox/0123~ {}")
	for c := 0; c < 256; c++ { // every byte at every place of the word-at-a-time scan's words
		for p := 0; p < 20; p++ {
			in := bytes.Clone(plain)
			in[p] = byte(c)
			inputs = append(inputs, in)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", " ", "\"", "\\", "\n", "\x00", "\x1f", "\x7f", "é", "€", "\xc3", "\xff", "𝄞", "/"}
	for range 5000 {
		var s []byte
		for range rng.IntN(40) {
			s = append(s, alphabet[rng.IntN(len(alphabet))]...)
		}
		inputs = append(inputs, s)
	}
	for _, in := range inputs {
		want := byteAtATime(in)
		if got := appendBytesString(nil, in); !bytes.Equal(got, want) {
			t.Fatalf("%q as bytes: %s, want %s", in, got, want)
		}
		if got := AppendString(nil, string(in)); !bytes.Equal(got, want) {
			t.Fatalf("%q as a string: %s, want %s", in, got, want)
		}
	}
}
