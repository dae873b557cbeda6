package control

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/summary"
)

// collector exports the run in progress as Prometheus metrics, read from
// its counters at each scrape: nothing is added to the packet path. Names
// and units follow Prometheus's conventions (base units: seconds, bytes).
type collector struct {
	s *Server

	packets, bytes, drops, queueLen, sojourn, rate, delay, jitter, loss, late *prometheus.Desc
	deliveryDrops, held                                                       *prometheus.Desc

	flowBytes, flowPackets, flowSent, flowLost, flowDelay, flowJitter *prometheus.Desc
	retrans, timeouts, cwnd, srtt, elapsed                            *prometheus.Desc

	airtime, collisions, attempts, retries, utilization *prometheus.Desc

	tunKernelDrops, tunShed, tunMalformed, tunRelay, tunRelayDropped *prometheus.Desc
	peerSegments, peerRetrans, peerTimeouts, peerDrops               *prometheus.Desc
	nodeDrops, partitionDrops, routerPackets                         *prometheus.Desc

	eventsPublished, eventClientsDropped *prometheus.Desc
	connsClosed, overloaded              *prometheus.Desc

	all []*prometheus.Desc // every one above: what the collector may export
}

func newCollector(s *Server) *collector {
	link := []string{"direction"}
	flow := []string{"flow"}
	station := []string{"station"}
	var all []*prometheus.Desc
	d := func(name, help string, labels []string, _ prometheus.Labels) *prometheus.Desc {
		x := prometheus.NewDesc(name, help, labels, nil)
		all = append(all, x)
		return x
	}
	c := &collector{s: s,
		packets:  d("netjam_link_packets_total", "Packets that entered (in) or left (out) a direction of the path.", []string{"direction", "way"}, nil),
		bytes:    d("netjam_link_bytes_total", "Bytes that entered (in) or left (out) a direction of the path.", []string{"direction", "way"}, nil),
		drops:    d("netjam_link_drops_total", "Packets a direction dropped, by reason.", []string{"direction", "reason"}, nil),
		queueLen: d("netjam_link_queue_packets", "Packets in a direction's bottleneck queue now.", link, nil),
		sojourn:  d("netjam_link_queue_sojourn_seconds", "Time packets spent in a direction's bottleneck queue.", link, nil),
		rate:     d("netjam_link_configured_rate_bytes_per_second", "A direction's configured rate, in bytes per second (0: unlimited; a trace's mean).", link, nil),
		delay:    d("netjam_link_configured_delay_seconds", "A direction's configured delay.", link, nil),
		jitter:   d("netjam_link_configured_jitter_seconds", "A direction's configured delay jitter.", link, nil),
		loss:     d("netjam_link_configured_loss_ratio", "A direction's configured loss (the loss model's long-run mean).", link, nil),
		late:     d("netjam_link_lateness_seconds", "99th percentile of how late the real-time scheduler delivered a direction's packets.", link, nil),
		deliveryDrops: d("netjam_link_delivery_drops_total",
			"Packets that left a direction but were dropped at the receiver's inbox, full for 100 ms: netjam's own overload, not the path's.", link, nil),
		held: d("netjam_link_held_total",
			"Times netjam held traffic back rather than drop it: a TCP sender at a direction's full input (at=input), or a direction waiting for a receiver that fell behind (at=receiver).",
			[]string{"direction", "at"}, nil),

		flowBytes:   d("netjam_flow_received_bytes_total", "Payload bytes a flow's receiver got.", []string{"flow", "type"}, nil),
		flowPackets: d("netjam_flow_received_packets_total", "Datagrams a UDP flow's receiver got.", flow, nil),
		flowSent:    d("netjam_flow_sent_packets_total", "Datagrams a UDP flow sent.", flow, nil),
		flowLost:    d("netjam_flow_lost_packets_total", "Datagrams of a UDP flow that did not arrive (those still on their way are not counted).", flow, nil),
		flowDelay:   d("netjam_flow_delay_seconds", "One-way delay of a UDP flow's datagrams.", flow, nil),
		flowJitter:  d("netjam_flow_jitter_seconds", "A UDP flow's interarrival jitter (RFC 3550).", flow, nil),
		retrans:     d("netjam_flow_retransmissions_total", "Segments a TCP flow's sender retransmitted.", flow, nil),
		timeouts:    d("netjam_flow_timeouts_total", "Retransmission timeouts of a TCP flow's sender.", flow, nil),
		cwnd:        d("netjam_flow_cwnd_segments", "A TCP flow's congestion window.", flow, nil),
		srtt:        d("netjam_flow_srtt_seconds", "A TCP flow's smoothed RTT.", flow, nil),
		elapsed:     d("netjam_run_elapsed_seconds", "Time since the run's flows started.", nil, nil),

		airtime:     d("netjam_wifi_airtime_seconds_total", "Time a Wi-Fi station (or the AP) held the medium.", station, nil),
		collisions:  d("netjam_wifi_collisions_total", "Collisions of a Wi-Fi station's (or the AP's) frame exchanges.", station, nil),
		attempts:    d("netjam_wifi_attempts_total", "Frame exchanges a Wi-Fi station (or the AP) started.", station, nil),
		retries:     d("netjam_wifi_retries_total", "MPDU retransmissions of a Wi-Fi station (or the AP).", station, nil),
		utilization: d("netjam_wifi_medium_utilization_ratio", "Share of the time the Wi-Fi medium was busy so far.", nil, nil),

		tunKernelDrops:  d("netjam_tun_kernel_drops_total", "Packets the kernel dropped at the TUN device's queue before netjam read them (netjam's read loop fell behind).", nil, nil),
		tunShed:         d("netjam_tun_shed_total", "Packets netjam read from the TUN device and dropped at once because the path's input was full.", nil, nil),
		tunMalformed:    d("netjam_tun_malformed_total", "Packets read from the TUN device that were not IPv4 or IPv6.", nil, nil),
		tunRelay:        d("netjam_tun_relay_total", "TCP connections and UDP sessions (served: UDP datagrams) the TUN relay handled, by outcome.", []string{"proto", "outcome"}, nil),
		tunRelayDropped: d("netjam_tun_relay_udp_dropped_total", "UDP datagrams the TUN relay lost, by reason.", []string{"reason"}, nil),
		peerSegments:    d("netjam_tun_peer_tcp_segments_sent_total", "Segments the TUN peer's TCP sent toward the kernel, all its connections.", nil, nil),
		peerRetrans:     d("netjam_tun_peer_tcp_retransmissions_total", "Segments the TUN peer's TCP retransmitted across the path (in iperf3 -R, the sender across the path).", nil, nil),
		peerTimeouts:    d("netjam_tun_peer_tcp_timeouts_total", "Retransmission timeouts of the TUN peer's TCP.", nil, nil),
		nodeDrops:       d("netjam_tun_node_drops_total", "Packets lost at a node's TUN device, by reason: kernel (the node's kernel dropped them at the device's queue before netjam read them), shed (netjam dropped them at once, the downlink's input full) or malformed (not IPv4 or IPv6).", []string{"node", "reason"}, nil),
		partitionDrops:  d("netjam_tun_partition_drops_total", "Packets dropped between the groups of the timeline's partitions among nodes.", nil, nil),
		routerPackets:   d("netjam_tun_router_packets_total", "What a router in front of a link did with nodes, by outcome: ttl_expired and too_big (dropped), fragmented, icmp_sent and icmp_limited (errors sent, and held back by the rate limit).", []string{"router", "outcome"}, nil),
		peerDrops:       d("netjam_tun_peer_drops_total", "Packets the TUN peer dropped on arrival, by reason: checksum (a TCP or UDP checksum that did not hold: a corrupt stage's work) or malformed.", []string{"reason"}, nil),

		eventsPublished:     d("netjam_control_events_total", "Events published on the control endpoint's event stream.", nil, nil),
		eventClientsDropped: d("netjam_control_event_clients_dropped_total", "Clients of the event stream dropped for falling behind.", nil, nil),
		connsClosed: d("netjam_control_connections_closed_total",
			"Connections the control endpoint (and --metrics) closed to make room for others: pending ones past their limits, idle ones for a request with the token.", nil, nil),
		overloaded: d("netjam_control_overloaded_total", "Requests the control endpoint (and --metrics) answered 429 because every connection it serves at once was busy.", nil, nil),
	}
	c.all = all
	return c
}

// Describe describes nothing: the metrics depend on the run attached (its
// flows, its Wi-Fi stations), so the collector is an unchecked one.
func (c *collector) Describe(chan<- *prometheus.Desc) {}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.eventsPublished, prometheus.CounterValue, float64(c.s.hub.published.Load()))
	ch <- prometheus.MustNewConstMetric(c.eventClientsDropped, prometheus.CounterValue, float64(c.s.hub.dropped.Load()))
	c.s.mu.Lock()
	lv := c.s.live
	var closed, overloaded uint64
	for _, g := range c.s.gates {
		closed += g.evicted.Load()
		overloaded += g.refused.Load()
	}
	c.s.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(c.connsClosed, prometheus.CounterValue, float64(closed))
	ch <- prometheus.MustNewConstMetric(c.overloaded, prometheus.CounterValue, float64(overloaded))
	if lv == nil {
		return
	}
	st, err := lv.Status()
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.elapsed, prometheus.GaugeValue, st.ElapsedS)
	for _, l := range st.Links {
		c.collectLink(ch, l)
	}
	for i, f := range lv.Flows() {
		c.collectFlow(ch, f, st.Flows[i])
	}
	if t := lv.TUN(); t != nil {
		c.collectTUN(ch, t)
	}
	if w := lv.WiFi(); w != nil {
		ch <- prometheus.MustNewConstMetric(c.utilization, prometheus.GaugeValue, w.Utilization)
		for i, s := range append(w.Stations, w.AP) {
			name := s.Name
			if i == len(w.Stations) {
				name = "ap"
			}
			ch <- prometheus.MustNewConstMetric(c.airtime, prometheus.CounterValue, s.Airtime.Seconds(), name)
			ch <- prometheus.MustNewConstMetric(c.collisions, prometheus.CounterValue, float64(s.Collisions), name)
			ch <- prometheus.MustNewConstMetric(c.attempts, prometheus.CounterValue, float64(s.Attempts), name)
			ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(s.Retries), name)
		}
	}
}

// collectTUN collects TUN mode's counters: the device's and netjam's own
// drops at the entrance, the relay's outcomes and the peer's TCP.
func (c *collector) collectTUN(ch chan<- prometheus.Metric, t *summary.TUNSummary) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(c.tunKernelDrops, t.KernelDrops)
	counter(c.tunShed, t.Shed)
	counter(c.tunMalformed, t.Malformed)
	for _, p := range [...]struct {
		proto string
		r     hostcfg.RelayCounters
	}{{"tcp", t.Relay.TCP}, {"udp", t.Relay.UDP}} {
		proto, r := p.proto, p.r
		counter(c.tunRelay, r.Relayed, proto, "relayed")
		counter(c.tunRelay, r.Served, proto, "served")
		counter(c.tunRelay, r.Refused, proto, "refused")
		counter(c.tunRelay, r.NoService, proto, "no_service")
		counter(c.tunRelay, r.Limited, proto, "limited")
		counter(c.tunRelay, r.DialErrors, proto, "dial_error")
		counter(c.tunRelay, r.Resets, proto, "reset")
		counter(c.tunRelay, r.Errors, proto, "error")
	}
	for reason, n := range t.Relay.UDP.DroppedBy {
		counter(c.tunRelayDropped, n, reason)
	}
	counter(c.peerSegments, t.PeerTCP.SegmentsSent)
	counter(c.peerRetrans, t.PeerTCP.Retransmits)
	counter(c.peerTimeouts, t.PeerTCP.Timeouts)
	counter(c.peerDrops, t.PeerChecksumErrors, "checksum")
	counter(c.peerDrops, t.PeerMalformed, "malformed")
	c.collectNodes(ch, t)
}

// collectNodes collects the nodes' counters, when the run has nodes: each
// node's device's drops, the partition's and the routers'.
func (c *collector) collectNodes(ch chan<- prometheus.Metric, t *summary.TUNSummary) {
	if len(t.Nodes) == 0 {
		return
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, n := range t.Nodes {
		counter(c.nodeDrops, n.KernelDrops, n.Name, "kernel")
		counter(c.nodeDrops, n.Shed, n.Name, "shed")
		counter(c.nodeDrops, n.Malformed, n.Name, "malformed")
	}
	counter(c.partitionDrops, t.PartitionDrops)
	for _, r := range t.Routers {
		counter(c.routerPackets, r.Expired, r.Name, "ttl_expired")
		counter(c.routerPackets, r.TooBig, r.Name, "too_big")
		counter(c.routerPackets, r.Fragmented, r.Name, "fragmented")
		counter(c.routerPackets, r.ErrorsSent, r.Name, "icmp_sent")
		counter(c.routerPackets, r.ErrorsLimited, r.Name, "icmp_limited")
	}
}

// collectFlow collects f's metrics: its counters so far from f, the
// latest TCP info from now.
func (c *collector) collectFlow(ch chan<- prometheus.Metric, f flows.FlowSummary, now summary.LiveFlow) {
	ch <- prometheus.MustNewConstMetric(c.flowBytes, prometheus.CounterValue, float64(now.BytesReceived), f.Name, f.Type)
	switch {
	case f.TCPSummary != nil:
		t := f.TCPSummary
		ch <- prometheus.MustNewConstMetric(c.retrans, prometheus.CounterValue, float64(t.Retransmissions), f.Name)
		ch <- prometheus.MustNewConstMetric(c.timeouts, prometheus.CounterValue, float64(t.Timeouts), f.Name)
		if now.CwndSegments > 0 {
			ch <- prometheus.MustNewConstMetric(c.cwnd, prometheus.GaugeValue, float64(now.CwndSegments), f.Name)
			ch <- prometheus.MustNewConstMetric(c.srtt, prometheus.GaugeValue, now.SRTTMs/1e3, f.Name)
		}
	case f.UDPSummary != nil:
		u := f.UDPSummary
		received := u.PacketsReceived
		ch <- prometheus.MustNewConstMetric(c.flowPackets, prometheus.CounterValue, float64(received), f.Name)
		ch <- prometheus.MustNewConstMetric(c.flowSent, prometheus.CounterValue, float64(u.PacketsSent), f.Name)
		ch <- prometheus.MustNewConstMetric(c.flowLost, prometheus.CounterValue, float64(u.Lost), f.Name)
		ch <- prometheus.MustNewConstMetric(c.flowJitter, prometheus.GaugeValue, u.JitterMs/1e3, f.Name)
		ch <- prometheus.MustNewConstSummary(c.flowDelay, u.DelayMs.Count, u.DelayMs.Mean*float64(u.DelayMs.Count)/1e3,
			quantiles(u.DelayMs.P50, u.DelayMs.P95, u.DelayMs.P99, 1e-3), f.Name)
	}
}

// quantiles are a summary's 0.5, 0.95 and 0.99 quantiles, scaled.
func quantiles(p50, p95, p99, scale float64) map[float64]float64 {
	return map[float64]float64{0.5: p50 * scale, 0.95: p95 * scale, 0.99: p99 * scale}
}

func (c *collector) collectLink(ch chan<- prometheus.Metric, l summary.LinkSummary) {
	d := l.Name
	ch <- prometheus.MustNewConstMetric(c.packets, prometheus.CounterValue, float64(l.PacketsIn), d, "in")
	ch <- prometheus.MustNewConstMetric(c.packets, prometheus.CounterValue, float64(l.PacketsOut), d, "out")
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(l.BytesIn), d, "in")
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(l.BytesOut), d, "out")
	for _, r := range impair.DropReasonNames() {
		ch <- prometheus.MustNewConstMetric(c.drops, prometheus.CounterValue, float64(l.Drops[r]), d, r)
	}
	for _, st := range l.Stages {
		if st.Name == "queue" {
			ch <- prometheus.MustNewConstMetric(c.queueLen, prometheus.GaugeValue, float64(st.QueueLen), d)
		}
	}
	q := l.QueueDelayMs
	ch <- prometheus.MustNewConstSummary(c.sojourn, q.Count, q.Mean*float64(q.Count)/1e3, quantiles(q.P50, q.P95, q.P99, 1e-3), d)
	ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, float64(l.Configured.RateBps)/8, d)
	ch <- prometheus.MustNewConstMetric(c.delay, prometheus.GaugeValue, l.Configured.DelayMs/1e3, d)
	ch <- prometheus.MustNewConstMetric(c.jitter, prometheus.GaugeValue, l.Configured.JitterMs/1e3, d)
	ch <- prometheus.MustNewConstMetric(c.loss, prometheus.GaugeValue, l.Configured.LossRatio, d)
	ch <- prometheus.MustNewConstMetric(c.late, prometheus.GaugeValue, l.LatenessMs.P99/1e3, d)
	ch <- prometheus.MustNewConstMetric(c.deliveryDrops, prometheus.CounterValue, float64(l.DeliveryDrops), d)
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.CounterValue, float64(l.InputWaits), d, "input")
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.CounterValue, float64(l.DeliveryWaits), d, "receiver")
}
