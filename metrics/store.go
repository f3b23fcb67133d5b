package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"climate"
)

// LeaseCounter is a Tx that counts leases by status in the database (both stores' do),
// so a scrape loads no lease.
type LeaseCounter interface {
	CountLeases(ctx context.Context) (map[climate.LeaseStatus]int, error)
}

// WriteCounter is a Store that counts the writes (Updates) it committed and the
// transactions they took: with group commit (both stores), several share one.
type WriteCounter interface {
	Writes() (writes, transactions int64)
}

// WriterBusyCounter is a Store that tells how long its writers have spent running write
// transactions, summed over writers (both stores' do).
type WriterBusyCounter interface {
	WriterBusy() time.Duration
}

// RoundTripCounter is a Store that counts its write transactions' round trips to the
// database (PostgreSQL's does; SQLite's has none).
type RoundTripCounter interface {
	WriteRoundTrips() int64
}

// StoreCollector reports what the store holds now: leases by status, reservable hosts and
// hosts allocated now. It reads the store at scrape time, at most once per MinInterval
// (later scrapes get the last figures) and within Timeout, so scraping cannot load the
// database.
type StoreCollector struct {
	Store climate.Store
	Clock climate.Clock
	// MinInterval is the least time between two reads (default 10 s); Timeout bounds one
	// read (default 2 s).
	MinInterval, Timeout time.Duration

	mu   sync.Mutex
	at   time.Time
	last storeFigures
}

type storeFigures struct {
	leases                map[climate.LeaseStatus]int
	reservable, allocated int
}

var (
	leasesDesc = prometheus.NewDesc("climate_leases",
		"Leases by status, read from the store at scrape time (at most every 10 s).", []string{"status"}, nil)
	reservableDesc = prometheus.NewDesc("climate_hosts_reservable",
		"Hosts that are reservable.", nil, nil)
	allocatedDesc = prometheus.NewDesc("climate_hosts_allocated",
		"Hosts allocated now to a lease (whole, or some of their instance slots).", nil, nil)
	storeUpDesc = prometheus.NewDesc("climate_store_scrape_ok",
		"1 when the store's figures were read for this scrape (or recently), 0 when reading them failed.", nil, nil)
	writesDesc = prometheus.NewDesc("climate_store_writes_total",
		"Writes (store updates) this process committed.", nil, nil)
	transactionsDesc = prometheus.NewDesc("climate_store_write_transactions_total",
		"Database transactions those writes took (group commit runs several writes in one).", nil, nil)
	writerBusyDesc = prometheus.NewDesc("climate_store_writer_busy_seconds_total",
		"Seconds the store's writers spent running write transactions, summed over writers. SQLite has one: "+
			"near 1 second a second, writes wait for it.", nil, nil)
	roundTripsDesc = prometheus.NewDesc("climate_store_write_round_trips_total",
		"Round trips to the database those write transactions took, BEGIN and COMMIT included.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *StoreCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- leasesDesc
	ch <- reservableDesc
	ch <- allocatedDesc
	ch <- storeUpDesc
	if _, ok := c.Store.(WriteCounter); ok {
		ch <- writesDesc
		ch <- transactionsDesc
	}
	if _, ok := c.Store.(WriterBusyCounter); ok {
		ch <- writerBusyDesc
	}
	if _, ok := c.Store.(RoundTripCounter); ok {
		ch <- roundTripsDesc
	}
}

// Collect implements prometheus.Collector.
func (c *StoreCollector) Collect(ch chan<- prometheus.Metric) {
	// Counted in memory: no read, no cache.
	if wc, ok := c.Store.(WriteCounter); ok {
		writes, txs := wc.Writes()
		ch <- prometheus.MustNewConstMetric(writesDesc, prometheus.CounterValue, float64(writes))
		ch <- prometheus.MustNewConstMetric(transactionsDesc, prometheus.CounterValue, float64(txs))
	}
	if bc, ok := c.Store.(WriterBusyCounter); ok {
		ch <- prometheus.MustNewConstMetric(writerBusyDesc, prometheus.CounterValue, bc.WriterBusy().Seconds())
	}
	if rc, ok := c.Store.(RoundTripCounter); ok {
		ch <- prometheus.MustNewConstMetric(roundTripsDesc, prometheus.CounterValue, float64(rc.WriteRoundTrips()))
	}
	f, err := c.figures()
	if err != nil {
		ch <- prometheus.MustNewConstMetric(storeUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(storeUpDesc, prometheus.GaugeValue, 1)
	for _, s := range climate.LeaseStatuses { // every status, zeros too: series do not vanish
		ch <- prometheus.MustNewConstMetric(leasesDesc, prometheus.GaugeValue, float64(f.leases[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(reservableDesc, prometheus.GaugeValue, float64(f.reservable))
	ch <- prometheus.MustNewConstMetric(allocatedDesc, prometheus.GaugeValue, float64(f.allocated))
}

func (c *StoreCollector) figures() (storeFigures, error) {
	c.mu.Lock() // concurrent scrapes wait for one read
	defer c.mu.Unlock()
	now := c.Clock.Now()
	every := c.MinInterval
	if every <= 0 {
		every = 10 * time.Second
	}
	if !c.at.IsZero() && now.Sub(c.at) < every {
		return c.last, nil
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var f storeFigures
	err := c.Store.View(ctx, func(tx climate.Tx) error {
		var err error
		if lc, ok := tx.(LeaseCounter); ok {
			if f.leases, err = lc.CountLeases(ctx); err != nil {
				return err
			}
		}
		hosts, err := tx.ListHosts(ctx)
		if err != nil {
			return err
		}
		isHost := make(map[string]bool, len(hosts))
		for _, h := range hosts {
			isHost[h.ID] = true
			if h.Reservable {
				f.reservable++
			}
		}
		// Allocations overlapping this instant; floating IPs' share the table.
		allocs, err := tx.ListAllocations(ctx, climate.AllocationFilter{From: now, To: now.Add(time.Microsecond)})
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, a := range allocs {
			if isHost[a.ResourceID] && !seen[a.ResourceID] {
				seen[a.ResourceID] = true
				f.allocated++
			}
		}
		return nil
	})
	if err != nil {
		return storeFigures{}, err
	}
	c.at, c.last = now, f
	return f, nil
}
