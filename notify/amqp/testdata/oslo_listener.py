"""An oslo.messaging notification listener, as ceilometer runs one, for the Go tests.

Usage: oslo_listener.py TRANSPORT_URL EXCHANGE TOPIC COUNT

Listens on TOPIC (priority info) on EXCHANGE, prints "ready" once its queue is declared
and bound, then one JSON line per notification received (the endpoint's arguments), and
exits after COUNT of them, or when its standard input closes (the test ended).
"""

import json
import logging
import sys
import threading

from oslo_config import cfg
import oslo_messaging


def main():
    url, exchange, topic, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    conf = cfg.ConfigOpts()
    conf([], project="climate-test")
    transport = oslo_messaging.get_notification_transport(conf, url=url)

    done = threading.Event()
    lock = threading.Lock()
    received = [0]

    class Endpoint(object):
        def info(self, ctxt, publisher_id, event_type, payload, metadata):
            with lock:
                print(json.dumps({"ctxt": ctxt, "publisher_id": publisher_id,
                                  "event_type": event_type, "payload": payload,
                                  "metadata": metadata}), flush=True)
                received[0] += 1
                if received[0] >= count:
                    done.set()
            return oslo_messaging.NotificationResult.HANDLED

    target = oslo_messaging.Target(topic=topic, exchange=exchange)
    listener = oslo_messaging.get_notification_listener(
        transport, [target], [Endpoint()], executor="threading")
    # start() declares the exchange and the queue "<topic>.info" and binds them before it
    # returns: whatever is published from now on is kept for this listener.
    listener.start()
    print("ready", flush=True)

    def stdin_closed():
        sys.stdin.read()
        done.set()

    threading.Thread(target=stdin_closed, daemon=True).start()
    done.wait()
    listener.stop()
    listener.wait()
    transport.cleanup()


if __name__ == "__main__":
    main()
