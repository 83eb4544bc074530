package top

import (
	"fmt"
	"math"
	"time"
)

// Trend is the change of the ports toward a destination, in ports per
// minute, fitted by least squares to the samples; OK false with Why when
// there is no trend to tell.
type Trend struct {
	PerMin  float64
	Samples int
	OK      bool
	Why     string
}

// MinSamples is the fewest samples a trend is told from.
const MinSamples = 2

// fitTrend fits ports over ts (least squares): its slope in ports/min.
func fitTrend(ts []time.Time, ports []int) Trend {
	n := len(ts)
	if n < MinSamples {
		return Trend{Samples: n, Why: fmt.Sprintf("%d sample of this destination, a trend needs %d", n, MinSamples)}
	}
	var sx, sy float64
	for i := range ts {
		sx += ts[i].Sub(ts[0]).Minutes()
		sy += float64(ports[i])
	}
	mx, my := sx/float64(n), sy/float64(n)
	var sxy, sxx float64
	for i := range ts {
		dx := ts[i].Sub(ts[0]).Minutes() - mx
		sxy += dx * (float64(ports[i]) - my)
		sxx += dx * dx
	}
	if sxx == 0 {
		return Trend{Samples: n, Why: "the samples were taken at the same time"}
	}
	return Trend{PerMin: sxy / sxx, Samples: n, OK: true}
}

// ETA is how long until no port is left toward a destination.
type ETA struct {
	In  time.Duration
	OK  bool
	Why string
}

// eta: left ports at trend; only a rising trend gives a time.
func eta(left int, exhausted bool, tr Trend) ETA {
	switch {
	case exhausted:
		return ETA{OK: true}
	case left <= 0:
		return ETA{Why: "no port is surely free toward it, yet it is not exhausted: some ports' bind buckets could not be read"}
	case !tr.OK:
		return ETA{Why: "no trend: " + tr.Why}
	case tr.PerMin <= 0:
		return ETA{Why: "the trend does not rise"}
	}
	mins := float64(left) / tr.PerMin
	if mins*float64(time.Minute) > math.MaxInt64/2 {
		return ETA{Why: "beyond any horizon at this trend"}
	}
	return ETA{In: time.Duration(mins * float64(time.Minute)), OK: true}
}
