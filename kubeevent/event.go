package kubeevent

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/eaddr/eaddr/internal/termtext"
)

// Controller is the Events' reportingController.
const Controller = "eaddr.io/eaddr"

// Reasons, one per kind of failure.
const (
	ReasonExhausted    = "EphemeralPortsExhausted" // connect() EADDRNOTAVAIL, the range used up toward the destination
	ReasonAddrNotAvail = "AddressNotAvailable"     // EADDRNOTAVAIL otherwise (an address not in the netns)
	ReasonAddrInUse    = "AddressInUse"            // EADDRINUSE
	ReasonConnect      = "ConnectFailed"           // any other failed connect(): refused, timed out, unreachable
	ReasonBind         = "BindFailed"              // any other failed bind()
	// ReasonNearlyExhausted is no failure: the port sampler found a pod's
	// netns holding --warn percent or more of the ports a connect() toward
	// one destination tries, before any connect() failed.
	ReasonNearlyExhausted = "EphemeralPortsNearlyExhausted"
	// ReasonNodeSNATNearlyExhausted is no failure either: the port sampler
	// found the node's SNAT holding --warn percent or more of the ports
	// MASQUERADE gives toward one destination, and this pod's address
	// holding the most of them. Past all of them, new connections toward it
	// time out (issue 37).
	ReasonNodeSNATNearlyExhausted = "NodeSNATPortsNearlyExhausted"
	// ReasonNodePortSource is on the pod a host process connected to from
	// a source port in the NodePort range (a kubelet probe): the reply to
	// it can be taken by a NodePort rule.
	ReasonNodePortSource = "SourcePortInNodePortRange"
	// ReasonOtherDestinations counts a pod's failures toward destinations
	// past its share of Events (Options.PodKeys): a pod failing toward
	// thousands of addresses gets this one more Event, not thousands.
	ReasonOtherDestinations = "FailedTowardOtherDestinations"
)

// noteMax is the API server's limit on an Event's note.
const noteMax = 1024

// microTime is the MicroTime format of eventTime and lastObservedTime.
const microTime = "2006-01-02T15:04:05.000000Z07:00"

type objectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	UID        string `json:"uid"`
}

type series struct {
	Count            int32  `json:"count"`
	LastObservedTime string `json:"lastObservedTime"`
}

// event is an events.k8s.io/v1 Event, the fields eaddr sets.
type event struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	EventTime           string    `json:"eventTime"`
	Series              *series   `json:"series,omitempty"`
	ReportingController string    `json:"reportingController"`
	ReportingInstance   string    `json:"reportingInstance"`
	Action              string    `json:"action"`
	Reason              string    `json:"reason"`
	Regarding           objectRef `json:"regarding"`
	Note                string    `json:"note"`
	Type                string    `json:"type"`
}

func eventsPath(namespace string) string {
	return "/apis/events.k8s.io/v1/namespaces/" + url.PathEscape(namespace) + "/events"
}

// create posts a new Warning Event on the pod of f with note (cleaned and
// cut here: cleanNote); its name is the pod's and the time, as the kubelet
// names its own.
func (c *Client) create(ctx context.Context, f *Failure, note, instance string, at time.Time) (string, error) {
	e := newEvent(f, instance, at)
	e.Note = cleanNote(note, noteMax)
	b, err := json.Marshal(&e)
	if err != nil {
		return "", err
	}
	var got struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := c.do(ctx, "POST", eventsPath(f.Namespace), "application/json", b, &got); err != nil {
		return "", err
	}
	return got.Metadata.Name, nil
}

// newEvent is the Event of f but its note.
func newEvent(f *Failure, instance string, at time.Time) event {
	var e event
	e.APIVersion, e.Kind = "events.k8s.io/v1", "Event"
	e.Metadata.Namespace = f.Namespace
	e.Metadata.Name = f.PodName + "." + strconv.FormatInt(at.UnixNano(), 16)
	e.EventTime = at.UTC().Format(microTime)
	e.ReportingController, e.ReportingInstance = Controller, instance
	e.Action, e.Reason, e.Type = f.Action, f.Reason, "Warning"
	e.Regarding = objectRef{APIVersion: "v1", Kind: "Pod", Name: f.PodName, Namespace: f.Namespace, UID: f.PodUID}
	return e
}

// update sets the Event's series: count failures, the last at last.
func (c *Client) update(ctx context.Context, namespace, name string, count int32, last time.Time) error {
	b, err := json.Marshal(map[string]*series{"series": {Count: count, LastObservedTime: last.UTC().Format(microTime)}})
	if err != nil {
		return err
	}
	return c.do(ctx, "PATCH", eventsPath(namespace)+"/"+url.PathEscape(name), "application/merge-patch+json", b, nil)
}

// note is the Event's message, one line: the verdict and the fix, or what
// failed and what that errno means.
func (f *Failure) note() string {
	if f.Verdict != "" {
		if f.Fix != "" {
			return f.Verdict + ". Fix: " + f.Fix
		}
		return f.Verdict
	}
	s := f.Syscall + "() failed with " + f.Errno
	if f.Dest.IsValid() {
		s += " (" + f.Dest.String() + ")"
	}
	if f.Meaning != "" {
		s += ": " + f.Meaning
	}
	return s
}

// cleanNote makes a note the API server takes and a terminal shows as
// text: every character termtext escapes (control bytes, C1, bidi and
// other format characters, bytes that are not UTF-8, a backslash) escaped
// as it escapes them, then cut to at most n bytes as the API server counts
// them, ending in "..." when cut, an escape never cut in two. The API
// server's limit is on the Go string it decoded from the JSON
// (k8s.io/kubernetes pkg/apis/core/validation/events.go,
// legacyValidateEvent: len(event.Message) > NoteLengthLimit, 1024), in
// which each byte that is not UTF-8 has become U+FFFD, three bytes: what is
// cut must be valid UTF-8 first, which the escaping makes it. A note is
// read on a terminal (kubectl describe, kubectl get events), so termtext's
// form is the one it needs.
func cleanNote(s string, n int) string {
	b := termtext.Append(make([]byte, 0, min(len(s), n)+16), s)
	if len(b) <= n {
		return string(b)
	}
	b = b[:0]
	for i := 0; i < len(s); {
		_, size := utf8.DecodeRuneInString(s[i:])
		next := termtext.Append(b, s[i:i+size]) // one character, or one byte that is not UTF-8
		if len(next) > n-len(cutMark) {
			break
		}
		b, i = next, i+size
	}
	return string(b) + cutMark
}

// cutMark ends a note that cleanNote cut.
const cutMark = "..."
