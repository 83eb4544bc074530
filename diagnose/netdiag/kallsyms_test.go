package netdiag

import (
	"os"
	"path/filepath"
	"testing"
)

func TestKallsyms(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kallsyms")
	os.WriteFile(p, []byte("ffffffff81000000 T _stext\nffffffff81000100 t nf_hook_slow\nffffffff81000200 d some_data\nffffffff81000300 T nft_do_chain\t[nf_tables]\n"), 0o644)
	k := &Kallsyms{Path: p}
	for addr, want := range map[uint64]string{0xffffffff81000150: "nf_hook_slow", 0xffffffff81000250: "nf_hook_slow", 0xffffffff81000300: "nft_do_chain", 0xffffffff81000400: "nft_do_chain", 0x10: "", 0: ""} {
		if got := k.Func(addr); got != want {
			t.Errorf("Func(%#x) = %q, want %q", addr, got, want)
		}
	}
	hidden := filepath.Join(t.TempDir(), "hidden")
	os.WriteFile(hidden, []byte("0000000000000000 T _stext\n0000000000000000 t nf_hook_slow\n"), 0o644)
	if got := (&Kallsyms{Path: hidden}).Func(0xffffffff81000150); got != "" {
		t.Errorf("with addresses hidden: %q", got)
	}
}
