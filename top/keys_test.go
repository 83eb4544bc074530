package top

import "testing"

func TestKeys(t *testing.T) {
	for b, want := range map[byte]Key{'q': KeyQuit, 3: KeyQuit, 's': KeySortNext, '>': KeySortNext, '<': KeySortPrev, 'p': KeyPause, ' ': KeyPause, 'x': KeyNone} {
		if KeyOf(b) != want {
			t.Errorf("key %q is %v, want %v", b, KeyOf(b), want)
		}
	}
}
