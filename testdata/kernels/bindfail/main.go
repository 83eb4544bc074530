// Command bindfail is the bind-failure client of testdata/kernels/run.sh's guests: one bind()
// that fails, through the raw syscalls (no C library, so the same source builds for amd64 and
// arm64 with CGO_ENABLED=0). It sends nothing.
//
//	bindfail notavail   bind a TCP socket to 192.0.2.1:4242 (TEST-NET-1, on no interface): EADDRNOTAVAIL
//	bindfail inuse      listen on 127.0.0.1:4242, then bind a second socket there: EADDRINUSE
//
// Exits 0 when bind() failed with the expected errno, 1 otherwise.
package main

import (
	"fmt"
	"os"
	"syscall"
)

func main() {
	var addr [4]byte
	want := syscall.EADDRNOTAVAIL
	switch arg := append(os.Args[1:], "")[0]; arg {
	case "notavail":
		addr = [4]byte{192, 0, 2, 1}
	case "inuse":
		addr, want = [4]byte{127, 0, 0, 1}, syscall.EADDRINUSE
		l, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
		if err == nil {
			err = syscall.Bind(l, &syscall.SockaddrInet4{Port: 4242, Addr: addr})
		}
		if err == nil {
			err = syscall.Listen(l, 1)
		}
		if err != nil {
			fmt.Println("bindfail: the listener on 127.0.0.1:4242:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: bindfail notavail|inuse")
		os.Exit(2)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		fmt.Println("bindfail: socket:", err)
		os.Exit(1)
	}
	err = syscall.Bind(fd, &syscall.SockaddrInet4{Port: 4242, Addr: addr})
	fmt.Printf("bindfail: pid=%d fd=%d bind %d.%d.%d.%d:4242: %v (want %v)\n", os.Getpid(), fd,
		addr[0], addr[1], addr[2], addr[3], err, want)
	if err != want {
		os.Exit(1)
	}
}
