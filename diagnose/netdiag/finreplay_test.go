package netdiag

import (
	"encoding/binary"
	"errors"
	"net"
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
	"golang.org/x/sys/unix"
)

// finReplay records the frames a netns's loopback sends and sends the FINs
// of one port again. Loopback can deliver a segment late (each CPU has its
// own backlog): a server's segment that arrives after the server's socket is
// gone reaches the client's TIME_WAIT, which answers with an ACK; the
// listener answers that with a reset. Replaying the server's FIN makes that
// happen every run instead of once in a few hundred.
type finReplay struct {
	fd   int // the capture: a packet socket on lo
	raw  int // the sender: a raw IPv4 socket, so a segment is routed as the kernel's own
	port uint16
}

// captureFINs opens a packet socket on ns's loopback; it records from now on.
func captureFINs(t testing.TB, ns *netns.NS, port uint16) *finReplay {
	t.Helper()
	r := &finReplay{fd: -1, raw: -1, port: port}
	t.Cleanup(func() {
		for _, fd := range []int{r.fd, r.raw} {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	})
	err := ns.Do(func() error {
		lo, err := net.InterfaceByName("lo")
		if err != nil {
			return err
		}
		if r.raw, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW); err != nil {
			return err
		}
		r.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IP)))
		if err != nil {
			return err
		}
		return unix.Bind(r.fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: lo.Index})
	})
	if err != nil {
		t.Fatalf("packet socket on the loopback of %s: %v", ns, err)
	}
	return r
}

// replay sends again, in the order sent, each TCP segment with FIN that
// left port since the capture began, and returns how many. (A kernel that
// shows a loopback frame to packet sockets both leaving and arriving has
// each sent twice: one more late FIN, as harmless as the first.)
func (r *finReplay) replay(t testing.TB) int {
	t.Helper()
	var fins [][]byte
	buf := make([]byte, 65536)
	for {
		n, _, err := unix.Recvfrom(r.fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil {
			t.Fatalf("read the capture: %v", err)
		}
		if seg := tcpSegment(buf[:n]); seg != nil && binary.BigEndian.Uint16(seg[0:2]) == r.port && seg[13]&0x01 != 0 {
			fins = append(fins, append([]byte(nil), buf[:n]...))
		}
	}
	for _, f := range fins {
		fillTCPChecksum(f)
		// sent in at lo with a packet socket, 127.0.0.1 would be a martian
		// source (route_localnet 0): a raw socket's segment is routed out
		ip := f[14:]
		to := &unix.SockaddrInet4{Addr: [4]byte(ip[16:20])}
		if err := unix.Sendto(r.raw, ip, 0, to); err != nil {
			t.Fatalf("send a FIN again: %v", err)
		}
	}
	return len(fins)
}

// tcpSegment is the TCP header and payload of an Ethernet frame carrying
// IPv4 TCP, or nil.
func tcpSegment(frame []byte) []byte {
	if len(frame) < 14+20 || binary.BigEndian.Uint16(frame[12:14]) != unix.ETH_P_IP {
		return nil
	}
	ip := frame[14:]
	ihl := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	if ip[0]>>4 != 4 || ip[9] != unix.IPPROTO_TCP || ihl < 20 || total > len(ip) || total < ihl+20 {
		return nil
	}
	return ip[ihl:total]
}

// fillTCPChecksum writes the TCP checksum of frame's segment: on loopback
// the kernel leaves it to the device (CHECKSUM_PARTIAL), so a segment read
// from a packet socket holds only the pseudo-header's sum, and one sent in
// from a packet socket is checked.
func fillTCPChecksum(frame []byte) {
	ip := frame[14:]
	seg := tcpSegment(frame)
	seg[16], seg[17] = 0, 0
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(ip[12:20]) // source and destination
	sum += unix.IPPROTO_TCP + uint32(len(seg))
	add(seg)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(seg[16:], ^uint16(sum))
}

// htons is v in network byte order, as a packet socket's protocol wants it.
func htons(v uint16) uint16 {
	return binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, v))
}
