package scenario

import (
	"reflect"
	"testing"
)

func TestExpect(t *testing.T) {
	p := mustParse(t, `flows:
  - {name: bulk, type: tcp, size: 1MB}
  - {name: video, type: udp, count: 10, interval: 10ms}
expect:
  - flows.video.delay_ms.p95 < 150ms
  - flows.bulk.throughput>4Mbps
  - flows.bulk.retransmissions <= 50
  - links.uplink.drops.queue == 0
  - flows.video.loss_ratio != 2.5%
  - flows.bulk.bytes_received >= 5MB
  - fairness >= 0.9
`)
	want := []Expectation{
		{Text: "flows.video.delay_ms.p95 < 150ms", Path: []string{"flows", "video", "delay_ms", "p95"}, Op: "<", Value: 0.15, Dim: DimTime},
		{Text: "flows.bulk.throughput>4Mbps", Path: []string{"flows", "bulk", "throughput"}, Op: ">", Value: 4e6, Dim: DimRate},
		{Text: "flows.bulk.retransmissions <= 50", Path: []string{"flows", "bulk", "retransmissions"}, Op: "<=", Value: 50, Dim: DimNumber},
		{Text: "links.uplink.drops.queue == 0", Path: []string{"links", "uplink", "drops", "queue"}, Op: "==", Value: 0, Dim: DimNumber},
		{Text: "flows.video.loss_ratio != 2.5%", Path: []string{"flows", "video", "loss_ratio"}, Op: "!=", Value: 0.025, Dim: DimRatio},
		{Text: "flows.bulk.bytes_received >= 5MB", Path: []string{"flows", "bulk", "bytes_received"}, Op: ">=", Value: 5e6, Dim: DimSize},
		{Text: "fairness >= 0.9", Path: []string{"fairness"}, Op: ">=", Value: 0.9, Dim: DimNumber},
	}
	if got := p.Expect; !reflect.DeepEqual(got, want) {
		t.Errorf("Expect:\n%+v\nwant\n%+v", got, want)
	}
	for _, c := range []struct {
		op   string
		got  float64
		want bool
	}{{"<", 1, true}, {"<", 2, false}, {"<=", 2, true}, {">", 2, false}, {">=", 2, true}, {"==", 2, true}, {"!=", 2, false}, {"!=", 3, true}} {
		if h := (Expectation{Op: c.op, Value: 2}).Holds(c.got); h != c.want {
			t.Errorf("%v %s 2: %v, want %v", c.got, c.op, h, c.want)
		}
	}
}

func TestExpectErrors(t *testing.T) {
	src := `flows: [{name: bulk, type: tcp, size: 1MB}]
expect:
  - flows.bulk.throughput => 4Mbps
  - flow.bulk.throughput > 4Mbps
  - flows.bulkk.throughput > 4Mbps
  - links.up.drops.queue == 0
  - flows.bulk.throughput > 4 Mbit per second
  - flows..throughput > 1
  - flows > 1
  - {a: 1}
  - flows.bulk.throughput > NaN
  - flows.bulk.throughput < -Inf
`
	want := `x.yaml:3: expect[0]: "flows.bulk.throughput => 4Mbps" is not an expectation (expected FIGURE OP VALUE with OP one of <= >= == != < >, as flows.bulk.throughput > 4Mbps)
x.yaml:4: expect[1]: "flow.bulk.throughput > 4Mbps": "flow" is not a figure of a run (figures: duration_s, flows, links, fairness, wifi, captures, tun, hosts); did you mean "flows"?
x.yaml:5: expect[2]: "flows.bulkk.throughput > 4Mbps": no flow named "bulkk" (names: bulk); did you mean "bulk"?
x.yaml:6: expect[3]: "links.up.drops.queue == 0": no link named "up" (names: uplink, downlink)
x.yaml:7: expect[4]: "flows.bulk.throughput > 4 Mbit per secon...": "4 Mbit per second" is not a value (a number, or one with a unit: 150ms, 4Mbps, 5MB, 1%)
x.yaml:8: expect[5]: "flows..throughput > 1": empty key in the figure's path "flows..throughput"
x.yaml:9: expect[6]: "flows > 1": name the flows item (as flows.bulk...)
x.yaml:10: expect[7]: expected text, got a mapping
x.yaml:11: expect[8]: "flows.bulk.throughput > NaN": "NaN" is not a value to compare with: give a finite number
x.yaml:12: expect[9]: "flows.bulk.throughput < -Inf": "-Inf" is not a value to compare with: give a finite number`
	if _, err := parse(src); err == nil || err.Error() != want {
		t.Errorf("Parse error:\n%v\nwant:\n%s", err, want)
	}
}
