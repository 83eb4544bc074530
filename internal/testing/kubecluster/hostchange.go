package kubecluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// SetSysctl sets a sysctl of the host (name as under /proc/sys, e.g.
// net/ipv4/ip_local_port_range) for a test's story. Its value before is
// written to the state file first, so Teardown puts it back also when the
// test fails or is killed; restore puts it back at once (a story that
// narrows the node's port range gives it back before the next one runs).
func (c *Cluster) SetSysctl(name, value string) (restore func() error, err error) {
	path := filepath.Join("/proc/sys", name)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	before := strings.TrimSpace(string(b))
	if err := c.state.change(func() {
		if _, ok := c.state.Sysctls[name]; !ok {
			c.state.Sysctls[name] = before
		}
	}); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return nil, fmt.Errorf("setting %s to %s: %w", name, value, err)
	}
	return func() error { return restoreSysctls(map[string]string{name: before}) }, nil
}

// AddNftTable makes an nftables table of a test's own ("inet NAME", with its
// chains and rules in body, nft -f syntax without the table line), recorded
// in the state file before it is made, so that Teardown deletes it also when
// the test fails or is killed; remove deletes it at once. The table must not
// exist yet: a table of someone else is never taken over, nor deleted.
func (c *Cluster) AddNftTable(family, name, body string) (remove func() error, err error) {
	table := family + " " + name
	if slices.Contains(nftTables(), table) {
		return nil, fmt.Errorf("nftables table %s exists already", table)
	}
	if err := c.state.change(func() { c.state.OwnNftTables = append(c.state.OwnNftTables, table) }); err != nil {
		return nil, err
	}
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader("table " + table + " {\n" + body + "\n}\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		deleteNftTable(table)
		return nil, fmt.Errorf("nft -f: %v: %s", err, out)
	}
	return func() error { return deleteNftTable(table) }, nil
}

// deleteNftTable deletes a table if it exists.
func deleteNftTable(table string) error {
	if !slices.Contains(nftTables(), table) {
		return nil
	}
	family, name, _ := strings.Cut(table, " ")
	if out, err := exec.Command("nft", "delete", "table", family, name).CombinedOutput(); err != nil {
		return fmt.Errorf("nft delete table %s: %v: %s", table, err, out)
	}
	return nil
}

// deleteOwnNftTables deletes the tables tests made with AddNftTable.
func (s *State) deleteOwnNftTables() error {
	var problems []error
	for _, t := range s.OwnNftTables {
		problems = append(problems, deleteNftTable(t))
	}
	return errors.Join(problems...)
}
