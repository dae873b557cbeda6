package capture

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tshark runs tshark -r path printing fields, one line per packet with
// the fields separated by "|". Without tshark the test is skipped, unless
// NETJAM_REQUIRE_TSHARK=1 (CI), where it fails.
func tshark(t *testing.T, path string, fields ...string) [][]string {
	t.Helper()
	bin, err := exec.LookPath("tshark")
	if err != nil {
		msg := "tshark not found (apt-get install tshark) to read the captures back"
		if os.Getenv("NETJAM_REQUIRE_TSHARK") == "1" {
			t.Fatal(msg + "; NETJAM_REQUIRE_TSHARK=1 requires it")
		}
		t.Skip(msg)
	}
	args := []string{"-n", "-r", path, "-T", "fields", "-E", "separator=|"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark -r %s: %v\n%s", path, err, stderr.String())
	}
	// tshark warns on stderr when run as root; anything else is a
	// complaint about the file.
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if line != "" && !strings.Contains(line, "root") && !strings.Contains(line, "dangerous") {
			t.Errorf("tshark -r %s: %s", path, line)
		}
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			rows = append(rows, strings.Split(line, "|"))
		}
	}
	return rows
}

// epochString formats t as tshark's frame.time_epoch, to digits digits.
func epochString(t time.Time, digits int) string {
	frac := fmt.Sprintf("%09d", t.Nanosecond())[:digits]
	return fmt.Sprintf("%d.%s", t.Unix(), frac)
}

func TestTsharkReadsPacketsTimesAndLengths(t *testing.T) {
	for _, micro := range []bool{false, true} {
		t.Run(fmt.Sprintf("microseconds=%v", micro), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.pcap")
			const snaplen = 120
			w, err := Open(path, Options{Snaplen: snaplen, Microseconds: micro})
			if err != nil {
				t.Fatal(err)
			}
			type sent struct {
				at       time.Time
				len      int
				src, dst string
			}
			var want []sent
			for i := range 40 {
				at := epoch.Add(time.Duration(i)*1234567*time.Nanosecond + time.Duration(i%7))
				var p []byte
				var s sent
				if i%3 == 0 {
					p = ipv6UDP(bytes.Repeat([]byte{byte(i)}, 10*i))
					s = sent{at, len(p), "fd00::1", "fd00::101"}
				} else {
					p = ipv4UDP(uint16(i), bytes.Repeat([]byte{byte(i)}, 10*i))
					s = sent{at, len(p), "10.0.0.1", "10.0.0.101"}
				}
				if err := w.WritePacket(at, p); err != nil {
					t.Fatal(err)
				}
				want = append(want, s)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			rows := tshark(t, path, "frame.number", "frame.time_epoch", "frame.len", "frame.cap_len", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "udp.dstport")
			if len(rows) != len(want) {
				t.Fatalf("tshark read %d packets, want %d", len(rows), len(want))
			}
			digits := 9
			if micro {
				digits = 6
			}
			var truncated int
			for i, r := range rows {
				w := want[i]
				capLen := min(w.len, snaplen)
				if capLen < w.len {
					truncated++
				}
				src, dst := r[4], r[5]
				if strings.Contains(w.src, ":") {
					src, dst = r[6], r[7]
				}
				got := fmt.Sprintf("%s %s %s %s %s %s", r[0], strings.TrimRight(r[1], "0"), r[2], r[3], src, dst)
				exp := fmt.Sprintf("%d %s %d %d %s %s", i+1, strings.TrimRight(epochString(w.at, digits), "0"), w.len, capLen, w.src, w.dst)
				if got != exp {
					t.Errorf("packet %d: tshark says %q, want %q", i+1, got, exp)
				}
				if capLen == w.len && r[8] != "9" {
					t.Errorf("packet %d: UDP port %q, want 9 (the packet is not decoded)", i+1, r[8])
				}
			}
			if st := w.Stats(); st.Packets != 40 || st.Truncated != uint64(truncated) || truncated == 0 {
				t.Errorf("stats %+v, %d truncated", st, truncated)
			}
		})
	}
}

func TestTsharkReadsRotatedFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "down.pcap")
	w, err := Open(path, Options{MaxFileBytes: 2000, MaxFiles: 4})
	if err != nil {
		t.Fatal(err)
	}
	var notWritten int
	for i := range 100 {
		if err := w.WritePacket(epoch.Add(time.Duration(i)*time.Millisecond), ipv4UDP(uint16(i), make([]byte, 100+i))); err != nil {
			notWritten++
		}
	}
	w.Close()
	st := w.Stats()
	if st.Files != 4 || !st.Full || st.NotWritten != uint64(notWritten) || st.Packets+st.NotWritten != 100 {
		t.Fatalf("stats %+v", st)
	}
	next := 0
	for i := range 4 {
		name := FileName(path, i)
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 2000 {
			t.Errorf("%s: %d bytes, over the limit", name, fi.Size())
		}
		rows := tshark(t, name, "frame.time_epoch", "ip.id")
		if len(rows) == 0 {
			t.Fatalf("%s: no packets", name)
		}
		for _, r := range rows {
			wantT := epochString(epoch.Add(time.Duration(next)*time.Millisecond), 9)
			if r[0] != wantT || r[1] != fmt.Sprintf("0x%04x", next) {
				t.Fatalf("%s: packet %v, want time %s and id %d", name, r, wantT, next)
			}
			next++
		}
	}
	if uint64(next) != st.Packets {
		t.Errorf("tshark read %d packets in all, stats say %d", next, st.Packets)
	}
	if _, err := os.Stat(FileName(path, 4)); err == nil {
		t.Error("a fifth file was written")
	}
}
