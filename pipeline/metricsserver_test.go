package pipeline

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// patience is how long a test waits for what must happen much sooner: a
// generous deadline, never a bound on how long it takes.
const patience = 30 * time.Second

// testServer serves a new metrics on 127.0.0.1 within lim until the test
// ends.
func testServer(t *testing.T, lim serverLimits) (*metrics, string) {
	t.Helper()
	m := newMetrics(100, 100, false)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := m.serve(ctx, "127.0.0.1:0", lim, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return m, addr
}

// dialFrom connects to addr from the loopback address from (127.0.0.N).
func dialFrom(from, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: patience}
	return d.Dial("tcp", addr)
}

// get sends one GET of path on c (HTTP/1.1: kept alive) and reads its
// answer whole.
func get(c net.Conn, path string) (*http.Response, string, error) {
	c.SetDeadline(time.Now().Add(patience))
	defer c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: eaddr\r\n\r\n", path); err != nil {
		return nil, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body), err
}

// closedByServer waits up to patience for the server to close c: nil when
// it did (EOF, or a reset), an error when c is still open or answered.
func closedByServer(c net.Conn) error {
	c.SetReadDeadline(time.Now().Add(patience))
	n, err := c.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case n > 0:
		return errors.New("the server sent bytes unasked")
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("still open after %v", patience)
	case err == nil:
		return errors.New("read nothing, no error")
	}
	return nil // io.EOF or ECONNRESET: the server closed it
}

// The metrics server closes connections that hold it without asking:
// 1,500 kept alive after one request each (the idle timeout), 1,500 that
// never send a byte (the header timeout); then every slot is free again
// and a fresh scraper gets /metrics. The issue measured 1,500 of 1,500
// still open 7 s later with only the header timeout set. Each case makes
// the other timeouts longer than patience, so that only its own can close
// the connections in time.
func TestMetricsServerClosesIdle(t *testing.T) {
	const n = 1500
	long := 2 * patience
	for _, tc := range []struct {
		name string
		ask  bool
		lim  serverLimits
	}{
		{"kept alive after one request", true, serverLimits{ReadHeader: long, Read: long, Write: long, Idle: 200 * time.Millisecond}},
		{"never asked", false, serverLimits{ReadHeader: 200 * time.Millisecond, Read: long, Write: long, Idle: long}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.lim.MaxConns, tc.lim.MaxConnsPerAddr = n, n
			m, addr := testServer(t, tc.lim)
			errs := make(chan error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := heldUntilClosed(addr, tc.ask); err != nil {
						errs <- fmt.Errorf("connection %d: %v", i, err)
					}
				}()
			}
			wg.Wait()
			close(errs)
			failed := 0
			for err := range errs {
				if failed++; failed <= 5 {
					t.Error(err)
				}
			}
			if failed > 0 {
				t.Fatalf("%d of %d connections not closed by the server", failed, n)
			}
			waitNoneOpen(t, m)
			scrape(t, addr, "eaddr_metrics_connections_refused_total 0")
		})
	}
}

// heldUntilClosed connects to addr, asks /healthz once if ask (kept
// alive), then sends nothing and waits for the server to close the
// connection.
func heldUntilClosed(addr string, ask bool) error {
	c, err := net.DialTimeout("tcp", addr, patience)
	if err != nil {
		return err
	}
	defer c.Close()
	if ask {
		if resp, _, err := get(c, "/healthz"); err != nil || resp.Close {
			return fmt.Errorf("GET /healthz: %v (closed: %v)", err, resp != nil && resp.Close)
		}
	}
	return closedByServer(c)
}

// waitNoneOpen waits for the server to have given back every slot.
func waitNoneOpen(t *testing.T, m *metrics) {
	t.Helper()
	for deadline := time.Now().Add(patience); m.conns.Load().open.Load() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still counted open", m.conns.Load().open.Load())
		}
	}
	l := m.conns.Load()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n != 0 || len(l.byAddr) != 0 {
		t.Fatalf("every connection closed, yet %d slots taken (%v)", l.n, l.byAddr)
	}
}

// scrape GETs /metrics on a new connection: 200, with want in it.
func scrape(t *testing.T, addr, want string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, patience)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, body, err := get(c, "/metrics")
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(body, "\n"+want+"\n") {
		t.Fatalf("a fresh scrape: %v %v; want 200 with %q in:\n%.2000s", resp, err, want, body)
	}
}

// Past the cap in all (4) or from one address (3), a connection is closed
// as soon as it is accepted and counted, never served beside the others;
// a flood past it changes nothing; once the holders go, a fresh scraper
// is served. The timeouts are long here: only the cap frees nothing.
func TestMetricsServerCap(t *testing.T) {
	lim := serverLimits{ReadHeader: time.Minute, Read: time.Minute, Write: time.Minute, Idle: time.Minute, MaxConns: 4, MaxConnsPerAddr: 3}
	m, addr := testServer(t, lim)
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	// One at a time, each asked and answered (or refused) before the next
	// dials: the order in which the server accepts them is this one.
	for i, tc := range []struct {
		from   string
		served bool
	}{
		{"127.0.0.1", true}, {"127.0.0.1", true}, {"127.0.0.1", true},
		{"127.0.0.1", false}, // a fourth from one address
		{"127.0.0.2", true},  // another address: the fourth slot
		{"127.0.0.3", false}, // the cap
	} {
		c, err := dialFrom(tc.from, addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		resp, _, err := get(c, "/healthz")
		var ne net.Error
		switch {
		case tc.served && err != nil:
			t.Fatalf("connection %d from %s: %v; want it served", i, tc.from, err)
		case !tc.served && err == nil:
			t.Fatalf("connection %d from %s: %s; want it closed unanswered", i, tc.from, resp.Status)
		case errors.As(err, &ne) && ne.Timeout():
			t.Fatalf("connection %d from %s: no answer and not closed: %v", i, tc.from, err)
		}
	}
	if o := m.conns.Load().open.Load(); o != 4 {
		t.Errorf("%d connections counted open, want the 4 served", o)
	}
	// A flood from elsewhere: each closed at once, none waiting.
	const flood = 200
	for i := range flood {
		c, err := dialFrom(fmt.Sprintf("127.0.1.%d", 1+i%250), addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := closedByServer(c); err != nil {
			t.Fatalf("flood connection %d: %v", i, err)
		}
		c.Close()
	}
	if r := m.conns.Load().refused.Load(); r != 2+flood {
		t.Errorf("%d connections counted refused, want %d", r, 2+flood)
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	waitNoneOpen(t, m)
	scrape(t, addr, fmt.Sprintf("eaddr_metrics_connections_refused_total %d", 2+flood))
}

// The server's defaults are the documented ones: docs/alerts.md names the
// timeouts and caps.
func TestServerLimitsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/alerts.md")
	if err != nil {
		t.Fatal(err)
	}
	d := defaultServerLimits
	for _, want := range []string{
		fmt.Sprintf("at most %d connections at once, %d from one address", d.MaxConns, d.MaxConnsPerAddr),
		fmt.Sprintf("%v for a request's header, %v for the whole request, %v to answer, %v idle between requests",
			d.ReadHeader, d.Read, d.Write, d.Idle),
	} {
		if !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), want) {
			t.Errorf("docs/alerts.md does not say %q", want)
		}
	}
}
