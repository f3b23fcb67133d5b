package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// climate serve --amqp-url publishes every lease change to RabbitMQ in oslo.messaging's
// envelope, on the exchange and routing key it is given. (notify/amqp's tests check the
// envelope field by field and with oslo.messaging's own listener.)
func TestServePublishesNotificationsToAMQP(t *testing.T) {
	url := os.Getenv("CLIMATE_TEST_AMQP")
	if url == "" {
		if os.Getenv("CLIMATE_TEST_AMQP_REQUIRED") == "1" {
			t.Fatal("CLIMATE_TEST_AMQP is not set, and CLIMATE_TEST_AMQP_REQUIRED=1 requires it")
		}
		t.Skip("set CLIMATE_TEST_AMQP=amqp://guest:guest@127.0.0.1:5672/ to run against RabbitMQ")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	exchange, topic := "climate_test_"+hex.EncodeToString(b[:]), "climate_test_"+hex.EncodeToString(b[:])+"_topic"
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	// The topology oslo.messaging declares (non-durable), declared first so no message is
	// published before the queue exists; deleted at the end.
	if err := ch.ExchangeDeclare(exchange, "topic", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare(topic+".info", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, topic+".info", exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = ch.QueueDelete(q.Name, false, false, false)
		_ = ch.ExchangeDelete(exchange, false, false)
	}()
	msgs, err := ch.Consume(q.Name, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}

	o := serveOptions{}
	o.notify.amqp.URL, o.notify.amqp.Exchange, o.notify.amqp.Topic, o.notify.amqp.PublisherID = url, exchange, topic, "blazar.lease"
	s := startServer(t, o)
	post(t, s.url+"/v1/os-hosts", `{"name": "amqp-h1"}`, 201)
	start := time.Now().UTC().Add(time.Hour).Format("2006-01-02 15:04")
	end := time.Now().UTC().Add(2 * time.Hour).Format("2006-01-02 15:04")
	created := post(t, s.url+"/v1/leases", `{"name": "amqp", "start_date": "`+start+`", "end_date": "`+end+`",
		"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]}`, 201)
	id := created["lease"].(map[string]any)["id"]

	select {
	case m := <-msgs:
		var env struct {
			Version string `json:"oslo.version"`
			Message string `json:"oslo.message"`
		}
		var inner struct {
			EventType   string         `json:"event_type"`
			PublisherID string         `json:"publisher_id"`
			Priority    string         `json:"priority"`
			Payload     map[string]any `json:"payload"`
		}
		if err := json.Unmarshal(m.Body, &env); err != nil || env.Version != "2.0" {
			t.Fatalf("envelope %s: %v", m.Body, err)
		}
		if err := json.Unmarshal([]byte(env.Message), &inner); err != nil {
			t.Fatal(err)
		}
		if inner.EventType != "lease.create" || inner.PublisherID != "blazar.lease" || inner.Priority != "INFO" || inner.Payload["lease_id"] != id {
			t.Errorf("message %+v, want lease.create of lease %v", inner, id)
		}
	case <-time.After(30 * time.Second): // a failure bound, not part of a passing run
		t.Fatal("no notification on the queue within 30 s")
	}
}
