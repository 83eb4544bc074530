package nodeport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// iptables-legacy keeps its rules in x_tables, read with getsockopt
// IPT_SO_GET_ENTRIES as a blob of struct ipt_entry. This package does not
// decode that blob. It only says whether the legacy nat table of the netns
// holds anything beyond its built-in chains, so that a diagnosis that finds
// no NodePort rule elsewhere knows where it did not look.
const (
	iptSoGetInfo     = 64 // IPT_SO_GET_INFO = IP6T_SO_GET_INFO = IPT_BASE_CTL
	sizeofIptGetinfo = 84 // struct ipt_getinfo: name[32], valid_hooks, hook_entry[5], underflow[5], num_entries, size
	// natBuiltinEntries is an empty nat table: one policy entry for each of
	// PREROUTING, INPUT, OUTPUT, POSTROUTING, and the closing ERROR entry.
	natBuiltinEntries = 5
)

// readLegacy checks the legacy nat tables of IPv4 and IPv6. The names file
// is read first: asking for a table that is not registered would make the
// kernel load and register it in this netns (nat hooks and all).
func readLegacy() Source {
	src := Source{Name: SourceLegacy}
	var errs []error
	for _, f := range []struct {
		names string
		level int
		proto int
	}{
		{"ip_tables_names", unix.SOL_IP, unix.AF_INET},
		{"ip6_tables_names", unix.SOL_IPV6, unix.AF_INET6},
	} {
		ok, err := hasTable("/proc/thread-self/net/"+f.names, iptNatTable)
		if err != nil || !ok {
			continue // no x_tables (module not loaded) or no nat table: nothing there
		}
		n, err := legacyEntries(f.proto, f.level)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s nat: %w", f.names[:len(f.names)-len("_tables_names")], err))
		case n > natBuiltinEntries:
			errs = append(errs, fmt.Errorf("%s nat table has %d entries (%d are the built-in chains): x_tables rules are not decoded, a NodePort rule there would not be found",
				f.names[:len(f.names)-len("_tables_names")], n, natBuiltinEntries))
		}
	}
	src.Err = errors.Join(errs...)
	return src
}

// hasTable says whether the names file lists table.
func hasTable(path, table string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if s.Text() == table {
			return true, nil
		}
	}
	return false, s.Err()
}

// legacyEntries asks x_tables for the number of entries of table nat
// (getsockopt IPT_SO_GET_INFO on a raw socket of the calling thread's netns).
func legacyEntries(family, level int) (uint32, error) {
	fd, err := unix.Socket(family, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return 0, fmt.Errorf("socket(SOCK_RAW): %w", err)
	}
	defer unix.Close(fd)
	var info [sizeofIptGetinfo]byte
	copy(info[:], iptNatTable)
	l := uint32(len(info))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), iptSoGetInfo,
		uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, fmt.Errorf("getsockopt(IPT_SO_GET_INFO): %w", e)
	}
	return binary.NativeEndian.Uint32(info[76:]), nil
}
