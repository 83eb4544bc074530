package diagnose

import (
	"sort"

	"github.com/eaddr/eaddr/diagnose/portmodel"
)

// tallyPorts is check's port budget from the tally of a netns, by the
// same model as a failure's diagnosis: for the destinations with the most
// sockets, how many ports a connect() toward each could not have; the
// ports held for every destination (bound sockets, listeners, their
// orphans); the ports in use; the listeners in the range. The
// destinations are sorted by the ports taken and cut to o.Top.
func tallyPorts(r *NetNSReport, t *portmodel.Tally, source string, o AuditOptions) {
	idle := t.Idle()
	r.HeldForAll, r.Unsure = idle.HeldForAll, idle.Unsure
	r.Source = source
	r.InUse = t.InUse()
	r.DestinationsCut = t.Cut()
	ls, _ := t.Listeners()
	r.Listeners = nil
	for _, l := range ls {
		r.Listeners = append(r.Listeners, l.String())
	}
	sort.Strings(r.Listeners)
	r.Destinations = nil
	for _, dst := range t.Busiest(max(o.Top, 1) * 2) {
		res, _ := t.Connect(dst)
		// only the ports the model is sure of: an unsure one is counted apart
		n := res.FourTuple + res.HeldForAll
		r.Destinations = append(r.Destinations, Destination{Remote: dst.String(), Ports: n, Percent: percent(n, res.Tried),
			Toward: res.FourTuple, HeldForAll: res.HeldForAll, Unsure: res.Unsure, Exhausted: res.Exhausted, Tried: res.Tried})
	}
	sort.Slice(r.Destinations, func(i, j int) bool {
		if r.Destinations[i].Ports != r.Destinations[j].Ports {
			return r.Destinations[i].Ports > r.Destinations[j].Ports
		}
		return r.Destinations[i].Remote < r.Destinations[j].Remote
	})
	if len(r.Destinations) > o.Top {
		r.Destinations = r.Destinations[:o.Top]
	}
}
