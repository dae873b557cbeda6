package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
)

// collector exports every proxy's counters at each scrape, read from
// them then: nothing is added to the connections' path. toxiproxy's two
// byte counters keep their names and labels, so that its dashboards
// work; netjam's own are netjam_proxy_*.
type collector struct {
	s *Server

	received, sent                               *prometheus.Desc
	accepted, open, refused, resets, discarded   *prometheus.Desc
	paths, retrans, timeouts, linkPackets, drops *prometheus.Desc
	datagramsDropped, eventsDropped              *prometheus.Desc
}

func newCollector(s *Server) *collector {
	tp := []string{"direction", "proxy", "listener", "upstream"}
	px := []string{"proxy"}
	return &collector{s: s,
		received: prometheus.NewDesc("toxiproxy_proxy_received_bytes_total", "Bytes a proxy read from each direction's source (toxiproxy's metric).", tp, nil),
		sent:     prometheus.NewDesc("toxiproxy_proxy_sent_bytes_total", "Bytes a proxy wrote to each direction's destination (toxiproxy's metric).", tp, nil),
		accepted: prometheus.NewDesc("netjam_proxy_connections_total", "Connections (UDP: sessions) a proxy accepted.", px, nil),
		open:     prometheus.NewDesc("netjam_proxy_connections_open", "Connections (UDP: sessions) open through a proxy now.", px, nil),
		refused: prometheus.NewDesc("netjam_proxy_connections_refused_total",
			"Connections a proxy reset at once, by reason: past its bound on connections (limit), its upstream unreachable (upstream), no path for it (path).", []string{"proxy", "reason"}, nil),
		resets:    prometheus.NewDesc("netjam_proxy_toxic_resets_total", "Connections a reset_peer toxic reset.", px, nil),
		discarded: prometheus.NewDesc("netjam_proxy_discarded_bytes_total", "Bytes a toxic discarded (reset_peer, limit_data), by direction.", []string{"proxy", "direction"}, nil),
		paths:     prometheus.NewDesc("netjam_proxy_paths", "Emulated paths of a proxy running now (one per combination of toxics drawn).", px, nil),
		retrans:   prometheus.NewDesc("netjam_proxy_tcp_retransmits_total", "TCP segments the proxy's paths' hosts sent again (what the path's losses cost).", px, nil),
		timeouts:  prometheus.NewDesc("netjam_proxy_tcp_timeouts_total", "TCP retransmission timeouts of the proxy's paths' hosts.", px, nil),
		linkPackets: prometheus.NewDesc("netjam_proxy_link_packets_total",
			"Packets that left each direction of the proxy's running paths (uplink: upstream stream).", []string{"proxy", "direction"}, nil),
		drops: prometheus.NewDesc("netjam_proxy_link_drops_total", "Packets each direction of the proxy's running paths dropped, by reason.", []string{"proxy", "direction", "reason"}, nil),
		datagramsDropped: prometheus.NewDesc("netjam_proxy_datagrams_dropped_total",
			"Datagrams a UDP proxy dropped: past its bound on sessions, or unsendable.", px, nil),
		eventsDropped: prometheus.NewDesc("netjam_proxy_events_dropped_total", "Events a proxy's log dropped, oldest first, past its bound.", px, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.received, c.sent, c.accepted, c.open, c.refused, c.resets, c.discarded,
		c.paths, c.retrans, c.timeouts, c.linkPackets, c.drops, c.datagramsDropped, c.eventsDropped} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, p := range c.s.sorted() {
		st := p.Stats()
		p.mu.Lock()
		listen, up := p.listen, p.upstream
		p.mu.Unlock()
		for _, d := range []direction{upstream, downstream} {
			counter(c.received, st.Received[d], d.String(), p.name, listen, up)
			counter(c.sent, st.Sent[d], d.String(), p.name, listen, up)
			counter(c.discarded, st.Discarded[d], p.name, d.String())
		}
		counter(c.accepted, st.Accepted, p.name)
		gauge(c.open, float64(st.Open), p.name)
		counter(c.refused, st.Refused, p.name, "limit")
		counter(c.refused, st.UpstreamFailed, p.name, "upstream")
		counter(c.refused, st.PathFailed, p.name, "path")
		counter(c.resets, st.Resets, p.name)
		gauge(c.paths, float64(st.Paths), p.name)
		counter(c.retrans, st.Retransmits, p.name)
		counter(c.timeouts, st.Timeouts, p.name)
		counter(c.datagramsDropped, p.counts.datagramsDropped.Load(), p.name)
		counter(c.eventsDropped, p.counts.eventsDropped.Load(), p.name)
		packets := map[string]uint64{}
		drops := map[[2]string]uint64{}
		for _, links := range st.Links {
			for i, l := range links {
				dir := []string{"uplink", "downlink"}[i]
				packets[dir] += l.PacketsOut
				for r, n := range l.Drops {
					drops[[2]string{dir, r}] += n
				}
			}
		}
		for dir, n := range packets {
			counter(c.linkPackets, n, p.name, dir)
		}
		for k, n := range drops {
			counter(c.drops, n, p.name, k[0], k[1])
		}
	}
}
