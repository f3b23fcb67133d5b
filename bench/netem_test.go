package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/postgres"
)

// echoServer answers every connection with what it reads, until its end.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// The forwarder carries bytes both ways, holds each direction for its delay, passes the
// end of a direction on, and cuts its connections when closed.
func TestForwarderDelaysBothWays(t *testing.T) {
	target := echoServer(t)
	for _, delay := range []time.Duration{0, 20 * time.Millisecond} {
		f, err := startForwarder("127.0.0.1:0", target, delay)
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", f.addr())
		if err != nil {
			t.Fatal(err)
		}
		msg := bytes.Repeat([]byte("climate "), 20000) // several chunks
		t0 := time.Now()
		go func() {
			_, _ = c.Write(msg)
			_ = c.(*net.TCPConn).CloseWrite() // the echo server sees the end, and ends too
		}()
		got, err := io.ReadAll(c) // to the end passed back
		rtt := time.Since(t0)
		if err != nil || !bytes.Equal(got, msg) {
			t.Errorf("delay %s: read %d bytes, %v; want the %d sent back", delay, len(got), err, len(msg))
		}
		if rtt < 2*delay {
			t.Errorf("delay %s: the echo came back after %s, sooner than a round trip", delay, rtt)
		}
		c.Close()

		held, err := net.Dial("tcp", f.addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := held.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(held, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		f.close()
		if n, err := held.Read(make([]byte, 1)); err == nil {
			t.Errorf("delay %s: read %d bytes after close, want the connection cut", delay, n)
		}
		held.Close()
	}
}

// needNetns skips unless this process may make network namespaces (root with ip(8)).
func needNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip(8)")
	}
}

// testLink names a network of this test process's own, apart from a benchmark's and
// another test run's: namespace climate-bench-tPID-N, veth cbtPIDN, subnet 10.(214+N).X.
func testLink(n int) linkNames {
	pid := os.Getpid() % 100000
	return linkNames{netns: fmt.Sprintf("climate-bench-t%d-%d", pid, n), veth: fmt.Sprintf("cbt%d%d", pid, n),
		subnet: fmt.Sprintf("10.%d.%d", 214+n, pid%256)}
}

// netem.sh up twice gives one working link, down twice removes it.
func TestNetemScriptUpAndDownAreIdempotent(t *testing.T) {
	needNetns(t)
	testLink := testLink(0)
	ctx := context.Background()
	t.Cleanup(func() { _, _ = runNetem(ctx, testLink, "down") })
	var outs []string
	for range 2 {
		out, err := runNetem(ctx, testLink, "up", "500us")
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, strings.TrimSpace(out))
	}
	if outs[0] != outs[1] || (outs[0] != "netem" && outs[0] != "no-netem") {
		t.Errorf("up printed %q, then %q; want netem or no-netem, twice the same", outs[0], outs[1])
	}
	if out, err := exec.Command("ip", "-n", testLink.netns, "-o", "addr", "show", testLink.veth+"1").CombinedOutput(); err != nil ||
		strings.Count(string(out), " inet ") != 1 || !strings.Contains(string(out), testLink.subnet+".2/30") {
		t.Errorf("the namespace's end after two ups: %v\n%s", err, out)
	}

	// From inside the namespace, this side's address is reachable.
	ln, err := net.Listen("tcp", testLink.subnet+".1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- string(b)
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	send := exec.Command("ip", "netns", "exec", testLink.netns, "bash", "-c", "echo -n hello >/dev/tcp/"+testLink.subnet+".1/"+port)
	if out, err := send.CombinedOutput(); err != nil {
		t.Fatalf("connect from the namespace: %v\n%s", err, out)
	}
	if s := <-got; s != "hello" {
		t.Errorf("received %q from the namespace, want hello", s)
	}

	for range 2 {
		if _, err := runNetem(ctx, testLink, "down"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat("/run/netns/" + testLink.netns); err == nil {
		t.Error("the namespace is still there after down")
	}
	if err := exec.Command("ip", "link", "show", testLink.veth+"0").Run(); err == nil {
		t.Error("the veth pair is still there after down")
	}
}

// bench api --database-delay: servers in the namespace, on PostgreSQL through the
// forwarder, with one replica then two; the namespace is gone afterwards.
func TestBenchAPIWithDatabaseDelay(t *testing.T) {
	needNetns(t)
	dsn := postgres.TestDSN(t)
	bin := climateBinaryForTest(t)
	link := testLink(1)
	rep := runAPIForTest(t, APIOptions{Hosts: 30, Leases: 100, Requests: 8, Clients: []int{1, 2}, Replicas: []int{1, 2},
		Database: dsn, DatabaseDelay: time.Millisecond, Exe: bin, link: link})
	if len(rep.Runs) != 4 {
		t.Fatalf("%d runs, want 4: %+v", len(rep.Runs), rep.Runs)
	}
	for i, r := range rep.Runs {
		if want := []int{1, 1, 2, 2}[i]; r.Replicas != want || r.Created+r.NoCapacity != 8 {
			t.Errorf("run %d: %+v; want %d replicas and 8 answers", i, r, want)
		}
		if c := r.CPUPerRequestMS; c == nil || c.Servers == nil || c.Database == nil {
			t.Errorf("run %d: CPU per request %+v, want the servers' and the database's", i, c)
		}
		// A creation writes its rows to the WAL: a lease's are a few KiB.
		if w := r.WALPerRequestKiB; w == nil || *w < 1 {
			t.Errorf("run %d: WAL per request %v KiB, want at least 1", i, w)
		}
		// A creation needs at least one round trip to the database.
		if r.MedianMS < 1 {
			t.Errorf("run %d: median %v ms, below the 1 ms round trip", i, r.MedianMS)
		}
		// And its writer waits for them: a transaction takes at least two, shared by at
		// most the two clients' creations.
		if r.WriterMSPerRequest == nil || *r.WriterMSPerRequest < 1 || r.WritersBusy == nil || *r.WritersBusy <= 0 {
			t.Errorf("run %d: writers' time %s ms a request, %s busy; want at least the 1 ms round trip", i, orNone(r.WriterMSPerRequest), orNone(r.WritersBusy))
		}
	}
	if rep.DatabaseDelayMS != 1 || !strings.Contains(rep.DatabaseLink, link.netns) || rep.Replicas != 2 || len(rep.ReplicaPeakRSSMiB) != 2 {
		t.Errorf("report: %+v", rep)
	}
	if s := rep.Scaling; s == nil || s.Clients == nil || s.Replicas == nil || s.Clients.Of != 2 || s.Replicas.Of != 2 || s.Replicas.At != 2 {
		t.Errorf("scaling %+v", rep.Scaling)
	}
	// Every creation is a write of three round trips (postgres/doc.go), fewer when it
	// shares a transaction (group commit); the servers' own writes (delivery cursors)
	// take two or three.
	created := 0
	for _, r := range rep.Runs {
		created += r.Created
	}
	if rep.Writes < created || rep.WriteTransactions < 1 || rep.WriteTransactions > rep.Writes || rep.WriteRoundTrips < 2 || rep.WriteRoundTrips > 3 {
		t.Errorf("%d writes in %d transactions, of %.2f round trips each, want at least the %d creations, of 2 to 3", rep.Writes, rep.WriteTransactions, rep.WriteRoundTrips, created)
	}
	if _, err := os.Stat("/run/netns/" + link.netns); err == nil {
		t.Error("the namespace is still there after the run")
	}
	// The book's tables were vacuumed and analyzed (after the load and each run).
	st, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n, err := st.NotAnalyzed(context.Background()); err != nil || n != 0 {
		t.Errorf("after the runs %d of the schema's tables were never analyzed, %v; want none", n, err)
	}
}

// --database-delay's link is set up before the book is loaded, so what it refuses (here a
// database off loopback, which its forwarder cannot reach; without root, the namespace)
// is refused before any store is opened. 0.0.0.0 is not a loopback address, and the
// store opener fails the test rather than connect to it.
func TestBenchAPIDelayRefusedBeforeTheLoad(t *testing.T) {
	opened := false
	o := &APIOptions{Hosts: 30, Leases: 100, Requests: 1, Clients: []int{1}, Replicas: []int{1}, Kind: "plain", Type: "host",
		Addresses: 1000, Database: "postgres://postgres@0.0.0.0:5432/test", DatabaseDelay: time.Millisecond, Exe: "climate", link: testLink(2),
		Open: func(context.Context, string, string) (climate.Store, string, error) {
			opened = true
			return nil, "", errors.New("the book's store was opened")
		}}
	var stderr bytes.Buffer
	_, err := runAPI(context.Background(), o, &stderr)
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("error %v, want --database refused as off loopback", err)
	}
	if opened || strings.Contains(stderr.String(), "generating the book") {
		t.Errorf("the book was loaded before the link was refused (opened %v):\n%s", opened, stderr.String())
	}
}
