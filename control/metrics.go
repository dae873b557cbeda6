package control

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/impair"
)

// collector exports the run in progress as Prometheus metrics, read from
// its counters at each scrape: nothing is added to the packet path. Names
// and units follow Prometheus's conventions (base units: seconds, bytes).
type collector struct {
	s *Server

	packets, bytes, drops, queue, rate, delay, loss, late *prometheus.Desc
	flowBytes, flowPackets, cwnd, srtt, elapsed           *prometheus.Desc
}

func newCollector(s *Server) *collector {
	link := []string{"direction"}
	return &collector{s: s,
		packets: prometheus.NewDesc("netjam_link_packets_total", "Packets that entered (in) or left (out) a direction of the path.", []string{"direction", "way"}, nil),
		bytes:   prometheus.NewDesc("netjam_link_bytes_total", "Bytes that entered (in) or left (out) a direction of the path.", []string{"direction", "way"}, nil),
		drops:   prometheus.NewDesc("netjam_link_drops_total", "Packets a direction dropped, by reason.", []string{"direction", "reason"}, nil),
		queue:   prometheus.NewDesc("netjam_link_queue_delay_seconds", "Median time packets spent in a direction's bottleneck queue so far.", link, nil),
		rate:    prometheus.NewDesc("netjam_link_configured_rate_bytes_per_second", "A direction's configured rate, in bytes per second (0: unlimited; a trace's mean).", link, nil),
		delay:   prometheus.NewDesc("netjam_link_configured_delay_seconds", "A direction's configured delay.", link, nil),
		loss:    prometheus.NewDesc("netjam_link_configured_loss_ratio", "A direction's configured loss (the loss model's long-run mean).", link, nil),
		late:    prometheus.NewDesc("netjam_link_lateness_seconds", "99th percentile of how late the real-time scheduler delivered a direction's packets.", link, nil),

		flowBytes:   prometheus.NewDesc("netjam_flow_received_bytes_total", "Payload bytes a flow's receiver got.", []string{"flow", "type"}, nil),
		flowPackets: prometheus.NewDesc("netjam_flow_received_packets_total", "Datagrams a UDP flow's receiver got.", []string{"flow"}, nil),
		cwnd:        prometheus.NewDesc("netjam_flow_cwnd_segments", "A TCP flow's congestion window.", []string{"flow"}, nil),
		srtt:        prometheus.NewDesc("netjam_flow_srtt_seconds", "A TCP flow's smoothed RTT.", []string{"flow"}, nil),
		elapsed:     prometheus.NewDesc("netjam_run_elapsed_seconds", "Time since the run's flows started.", nil, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.packets, c.bytes, c.drops, c.queue, c.rate, c.delay, c.loss, c.late, c.flowBytes, c.flowPackets, c.cwnd, c.srtt, c.elapsed} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.Lock()
	lv := c.s.live
	c.s.mu.Unlock()
	if lv == nil {
		return
	}
	st, err := lv.Status()
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.elapsed, prometheus.GaugeValue, st.ElapsedS)
	for _, l := range st.Links {
		collectLink(c, ch, l)
	}
	for _, f := range st.Flows {
		ch <- prometheus.MustNewConstMetric(c.flowBytes, prometheus.CounterValue, float64(f.BytesReceived), f.Name, f.Type)
		if f.Type == "udp" {
			ch <- prometheus.MustNewConstMetric(c.flowPackets, prometheus.CounterValue, float64(f.Packets), f.Name)
		}
		if f.CwndSegments > 0 {
			ch <- prometheus.MustNewConstMetric(c.cwnd, prometheus.GaugeValue, float64(f.CwndSegments), f.Name)
			ch <- prometheus.MustNewConstMetric(c.srtt, prometheus.GaugeValue, f.SRTTMs/1e3, f.Name)
		}
	}
}

func collectLink(c *collector, ch chan<- prometheus.Metric, l emulator.LinkSummary) {
	d := l.Name
	ch <- prometheus.MustNewConstMetric(c.packets, prometheus.CounterValue, float64(l.PacketsIn), d, "in")
	ch <- prometheus.MustNewConstMetric(c.packets, prometheus.CounterValue, float64(l.PacketsOut), d, "out")
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(l.BytesIn), d, "in")
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(l.BytesOut), d, "out")
	for _, r := range impair.DropReasonNames() {
		ch <- prometheus.MustNewConstMetric(c.drops, prometheus.CounterValue, float64(l.Drops[r]), d, r)
	}
	ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, l.QueueDelayMs.P50/1e3, d)
	ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, float64(l.Configured.RateBps)/8, d)
	ch <- prometheus.MustNewConstMetric(c.delay, prometheus.GaugeValue, l.Configured.DelayMs/1e3, d)
	ch <- prometheus.MustNewConstMetric(c.loss, prometheus.GaugeValue, l.Configured.LossRatio, d)
	ch <- prometheus.MustNewConstMetric(c.late, prometheus.GaugeValue, l.LatenessMs.P99/1e3, d)
}
