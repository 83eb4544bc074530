package explain

import "strings"

// finish works out, from what identify found, everything an Explanation
// says in words: the client's line and how sure it is, why no client is
// named, the retries, the texts to grep for and, with wordings, how the
// others word it. It reuses x's buffers.
func (x *Explanation) finish(c *Catalog, wordings bool) {
	x.ClientMessage, x.HasClientMessage = x.appendClientMessage(x.msgBuf[:0])
	x.msgBuf = x.ClientMessage[:0]
	x.Confidence = ""
	if x.HasClientMessage {
		x.Confidence = x.confidence()
	} else {
		x.ClientMessage = nil
	}
	x.ClientUnknown = ""
	if x.Client == nil {
		x.ClientUnknown = x.clientUnknown()
	}
	x.Retries, x.RetryRule = x.retryNote()
	x.Grep = x.appendGrep(x.grep[:0])
	x.Full, x.OtherWordings = wordings, nil
	if wordings {
		x.OtherWordings = x.words.fill(c, &x.vars)
	}
}

// appendClientMessage appends the line the client printed; ok is false
// when eaddr does not know it.
func (x *Explanation) appendClientMessage(b []byte) ([]byte, bool) {
	m := x.msg
	if m == nil {
		return b, false
	}
	n := len(b)
	b, ok := render(b, m.Text, &x.vars)
	if !ok {
		return b[:n], false
	}
	return b, true
}

// confidence is how sure the client's line is (x.msg is set).
func (x *Explanation) confidence() string {
	m := x.msg
	if m.Confidence == confidenceExact && x.vars.IP.IsUnspecified() && strings.Contains(m.Text, "{listen_addr}") {
		return ConfidenceTemplate // the wildcard is shown as given: <host>
	}
	return m.Confidence
}

// retryNote returns what the client's retries mean for this failure, and
// the rule Attempts.Mark links them by. With no client or no retries: "",
// no window of its own, no bound, the same thread.
func (x *Explanation) retryNote() (note string, rule RetryRule) {
	if x.Client == nil {
		return "", rule
	}
	for i := range x.Client.Retries {
		r := &x.Client.Retries[i]
		if (r.errno != 0 && r.errno != x.vars.Errno) || (r.Syscall != "" && r.Syscall != "*" && r.Syscall != x.vars.Syscall.String()) {
			continue
		}
		if r.WindowMs > 0 {
			rule.WindowNs = uint64(r.WindowMs) * 1e6
		}
		rule.Max, rule.AnyThread = r.Max, r.AnyThread
		return r.Note, rule
	}
	return "", rule
}

// clientUnknown says why no client is named.
func (x *Explanation) clientUnknown() string {
	switch {
	case x.notAnalysed != "":
		return x.notAnalysed
	case x.Binary == nil:
		return "the program's binary could not be read, so what it printed is unknown: grep its logs for the errno text"
	}
	return "no catalogued wording for this program: each program words its failures its own way; grep its logs for the errno text"
}

// appendGrep appends to dst the errno texts to search logs for. The
// strings are the tables' own: nothing is allocated once dst has room
// (two).
func (x *Explanation) appendGrep(dst []string) []string {
	libcs := [...]Libc{x.vars.Libc, ""}
	if x.vars.Libc == LibcUnknown {
		libcs = [...]Libc{libcGlibc, libcMusl}
	}
	for _, libc := range libcs {
		if libc == LibcUnknown {
			continue
		}
		s, ok := strerror(libc, x.vars.Errno)
		if ok && (len(dst) == 0 || dst[len(dst)-1] != s) {
			dst = append(dst, s)
		}
	}
	return dst
}
