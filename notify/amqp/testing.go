package amqp

import (
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The broker tests use (this package's and others' that speak AMQP), and how to require it.
const (
	TestEnv         = "CLIMATE_TEST_AMQP"          // default amqp://guest:guest@127.0.0.1:5672/
	TestRequiredEnv = "CLIMATE_TEST_AMQP_REQUIRED" // 1: fail instead of skipping without a broker
	testDefaultURL  = "amqp://guest:guest@127.0.0.1:5672/"
)

// TestURL returns the test broker's URL and its host:port, skipping the test when it is
// unreachable (failing when CLIMATE_TEST_AMQP_REQUIRED=1).
func TestURL(t testing.TB) (url, addr string) {
	t.Helper()
	u := os.Getenv(TestEnv)
	if u == "" {
		u = testDefaultURL
	}
	uri, err := amqp091.ParseURI(u)
	if err != nil {
		t.Fatalf("%s is not an AMQP URL", TestEnv)
	}
	addr = net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port))
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		if os.Getenv(TestRequiredEnv) == "1" {
			t.Fatalf("RabbitMQ is not reachable at %s (%v), and %s=1 requires it", addr, err, TestRequiredEnv)
		}
		t.Skipf("RabbitMQ tests need a broker at %s (%v); set %s to use another", addr, err, TestEnv)
	}
	c.Close()
	return u, addr
}
