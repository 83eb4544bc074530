package netdiag

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"
)

// The fallback for kernels whose inet_diag / tcp_diag / udp_diag (or
// unix_diag) are modules that are not loaded and cannot be: the netns's
// /proc/net/{tcp,tcp6,udp,udp6,unix}, read from a thread inside the netns
// (/proc/thread-self/net shows the netns of the reading thread, so no other
// process has to stay alive for it).

// procNetFile is the /proc/net file listing family and proto.
func procNetFile(family, proto uint8) string {
	name := protoName(proto)
	if family == unix.AF_INET6 {
		name += "6"
	}
	return "/proc/thread-self/net/" + name
}

// ParseProcNetInet parses /proc/net/{tcp,tcp6,udp,udp6} (family and proto
// say which) into Sockets, as sock_diag would report them: v4-mapped
// addresses unmapped, TIME_WAIT with Inode 0. The header line is skipped.
func ParseProcNetInet(r io.Reader, family, proto uint8, socks []Socket) ([]Socket, error) {
	err := eachProcNetInet(r, family, proto, func(s *Socket) { socks = append(socks, *s) })
	return socks, err
}

// eachProcNetInet is ParseProcNetInet handing each socket on as it is
// read.
func eachProcNetInet(r io.Reader, family, proto uint8, each func(*Socket)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<16)
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue
		}
		s, err := parseProcNetLine(sc.Bytes(), family, proto)
		if err != nil {
			return err
		}
		each(&s)
	}
	return sc.Err()
}

// parseProcNetLine parses one line such as
//
//	0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31737 1 ...
//
// fields: sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
func parseProcNetLine(line []byte, family, proto uint8) (Socket, error) {
	f := bytes.Fields(line)
	if len(f) < 10 {
		return Socket{}, fmt.Errorf("short /proc/net line %q", line)
	}
	s := Socket{Family: family, Proto: proto}
	var err error
	if s.Local, err = parseHexAddrPort(f[1], family); err != nil {
		return Socket{}, fmt.Errorf("local address in %q: %w", line, err)
	}
	if s.Remote, err = parseHexAddrPort(f[2], family); err != nil {
		return Socket{}, fmt.Errorf("remote address in %q: %w", line, err)
	}
	st, err := strconv.ParseUint(string(f[3]), 16, 8)
	if err != nil {
		return Socket{}, fmt.Errorf("state in %q: %w", line, err)
	}
	s.State = uint8(st)
	uid, err := strconv.ParseUint(string(f[7]), 10, 32)
	if err != nil {
		return Socket{}, fmt.Errorf("uid in %q: %w", line, err)
	}
	ino, err := strconv.ParseUint(string(f[9]), 10, 64)
	if err != nil {
		return Socket{}, fmt.Errorf("inode in %q: %w", line, err)
	}
	s.UID, s.Inode = uint32(uid), ino
	return s, nil
}

// parseHexAddrPort parses "0100007F:1F90" (v4) or 32 hex digits and a port
// (v6). The kernel prints each 32-bit word of the address as a host-order
// number, the port as a number.
func parseHexAddrPort(b []byte, family uint8) (netip.AddrPort, error) {
	i := bytes.IndexByte(b, ':')
	if i < 0 {
		return netip.AddrPort{}, fmt.Errorf("no port in %q", b)
	}
	port, err := strconv.ParseUint(string(b[i+1:]), 16, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	want := 4
	if family == unix.AF_INET6 {
		want = 16
	}
	var raw [16]byte
	if hex.DecodedLen(i) != want {
		return netip.AddrPort{}, fmt.Errorf("address %q is not %d bytes", b[:i], want)
	}
	if _, err := hex.Decode(raw[:want], b[:i]); err != nil {
		return netip.AddrPort{}, err
	}
	for w := 0; w < want; w += 4 { // each word: printed big-endian, stored host-order
		binary.NativeEndian.PutUint32(raw[w:], binary.BigEndian.Uint32(raw[w:]))
	}
	var a netip.Addr
	if want == 4 {
		a = netip.AddrFrom4([4]byte(raw[:4]))
	} else {
		a = netip.AddrFrom16(raw).Unmap()
	}
	return netip.AddrPortFrom(a, uint16(port)), nil
}

// ParseProcNetUnix parses /proc/net/unix:
//
//	Num       RefCount Protocol Flags    Type St Inode Path
//	0000000000000000: 00000002 00000000 00010000 0001 01 31844 /run/x.sock
//
// Flags 00010000 (__SO_ACCEPTCON) is a listener. The path is what was bound
// (relative paths stay relative); abstract names start with '@' and show
// their NULs as '@'. There is no file inode: Vfs is left unset.
func ParseProcNetUnix(r io.Reader, socks []UnixSocket) ([]UnixSocket, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<16)
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue
		}
		line := sc.Bytes()
		f := bytes.Fields(line)
		if len(f) < 7 {
			return socks, fmt.Errorf("short /proc/net/unix line %q", line)
		}
		flags, err1 := strconv.ParseUint(string(f[3]), 16, 32)
		typ, err2 := strconv.ParseUint(string(f[4]), 16, 8)
		st, err3 := strconv.ParseUint(string(f[5]), 16, 8)
		ino, err4 := strconv.ParseUint(string(f[6]), 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			return socks, fmt.Errorf("bad /proc/net/unix line %q", line)
		}
		s := UnixSocket{Type: uint8(typ), Inode: ino}
		switch {
		case flags&(1<<16) != 0:
			s.State = StateListen
		case st == 3: // SS_CONNECTED
			s.State = StateEstablished
		default:
			s.State = StateClose
		}
		s.Name = string(afterFields(line, 7)) // the rest of the line: a path may hold spaces

		socks = append(socks, s)
	}
	return socks, sc.Err()
}

// afterFields returns line after its first n space-separated fields and the
// blanks after them.
func afterFields(line []byte, n int) []byte {
	for range n {
		line = bytes.TrimLeft(line, " \t")
		i := bytes.IndexAny(line, " \t")
		if i < 0 {
			return nil
		}
		line = line[i:]
	}
	return bytes.TrimLeft(line, " \t")
}
