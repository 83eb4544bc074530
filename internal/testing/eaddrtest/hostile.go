package eaddrtest

import (
	"strings"
)

// LineFor returns the raw stdout line of an event (matched by time and tid).
func (p *TraceProc) LineFor(ev JSONEvent) string {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	for _, l := range p.Lines {
		if strings.Contains(l, `"time":"`+ev.Time+`"`) {
			return l
		}
	}
	return ""
}
