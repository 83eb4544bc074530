package pipeline

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// busiestDestination is the destination label of the one in-use series
// per netns that --metrics-no-destination leaves: a value that reads
// right in the alerts' texts ("toward the busiest destination"), which a
// missing label would turn into "for every destination".
const busiestDestination = "the busiest destination"

// busiestCollector exports eaddr_ephemeral_ports_in_use without the
// destinations (--metrics-no-destination), so that a scraper does not
// learn where every pod connects: per netns, the largest of its series
// toward a destination, labelled busiestDestination. The series of a
// bind() diagnosis (destination empty: ports held at all) names no
// destination and stays as it is. The series behind it are kept as
// without the flag: the same --ports-top, the same cap.
type busiestCollector struct {
	vec  *prometheus.GaugeVec // eaddr_ephemeral_ports_in_use by destination, not registered
	desc *prometheus.Desc
}

func (b busiestCollector) Describe(ch chan<- *prometheus.Desc) { ch <- b.desc }

func (b busiestCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ netns, namespace, pod, destination string }
	busiest := map[key]float64{}
	ms := make(chan prometheus.Metric)
	go func() {
		b.vec.Collect(ms)
		close(ms)
	}()
	for m := range ms {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		var k key
		for _, l := range d.GetLabel() {
			switch l.GetName() {
			case "netns":
				k.netns = l.GetValue()
			case "namespace":
				k.namespace = l.GetValue()
			case "pod":
				k.pod = l.GetValue()
			case "destination":
				k.destination = l.GetValue()
			}
		}
		if k.destination != "" {
			k.destination = busiestDestination
		}
		if v, ok := busiest[k]; !ok || d.GetGauge().GetValue() > v {
			busiest[k] = d.GetGauge().GetValue()
		}
	}
	for k, v := range busiest {
		ch <- prometheus.MustNewConstMetric(b.desc, prometheus.GaugeValue, v, k.netns, k.namespace, k.pod, k.destination)
	}
}
