package output

import (
	"encoding/json"
	"testing"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/tracer"
)

func TestParseSockaddrShortAndOdd(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want string // JSON of the address, "" for invalid
	}{
		{"empty", nil, ""},
		{"one byte", []byte{2}, ""},
		{"inet too short", []byte{2, 0, 0x1f, 0x90}, `{"family":"inet"}`},
		{"inet6 too short", []byte{10, 0, 0, 80, 0, 0, 0, 0, 1}, `{"family":"inet6"}`},
		{"v4-mapped v6", append([]byte{10, 0, 0, 80, 0, 0, 0, 0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 96, 0, 10, 0, 0, 0, 0), `{"ip":"10.96.0.10","port":80}`},
		{"netlink", []byte{16, 0, 0, 0, 1, 2}, `{"family":"netlink","raw":"00000102"}`},
		{"unknown family", []byte{99, 0, 0xab}, `{"family":"unknown:99","raw":"ab"}`},
		{"unix path with nul", []byte{1, 0, '/', 'a', 0, 'b'}, `{"family":"unix","path":"/a"}`},
		{"unix quote", []byte{1, 0, '"', 0xff, '\n'}, `{"family":"unix","path":"\"\ufffd\n"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Through the decoder: the bytes a connect() was given.
			raw := tracer.RawEvent{Syscall: tracer.SysConnect, Err: 99, Addrlen: uint16(len(tc.in)), AddrCopied: uint16(len(tc.in))}
			if len(tc.in) > 0 {
				raw.Flags = tracer.FlagAddr
			}
			for i, c := range tc.in {
				raw.Addr[i] = c
			}
			var ev decode.Event
			decode.NewDecoder(nil).Decode(&raw, &ev)
			a := ev.Remote
			if tc.want == "" {
				if a.Valid {
					t.Fatalf("got valid %+v", a)
				}
				return
			}
			got := string(appendAddr(nil, &a))
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("invalid JSON %s", got)
			}
		})
	}
}
