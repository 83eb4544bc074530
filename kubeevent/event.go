package kubeevent

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"
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

// create posts a new Warning Event on the pod of f with note (cut here);
// its name is the pod's and the time, as the kubelet
// names its own.
func (c *Client) create(ctx context.Context, f *Failure, note, instance string, at time.Time) (string, error) {
	e := newEvent(f, instance, at)
	e.Note = truncate(note, noteMax)
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

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-3]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}
