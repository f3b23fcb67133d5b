#!/usr/bin/env python3
"""A Climate webhook receiver: checks each delivery's signature and handles it once.

    WEBHOOK_SECRET=whsec_... python3 webhook-receiver.py [PORT]

Standard library only. It prints one line per notification; act on it there instead.
"""
import hashlib, hmac, http.server, json, os, sys, time

SECRET = os.environ["WEBHOOK_SECRET"].encode()
TOLERANCE = 300  # seconds: a delivery signed longer ago than this is a replay
seen = set()     # delivery ids handled (a real receiver keeps them in its database)


def verified(header, body):
    fields = [kv.strip().split("=", 1) for kv in header.split(",") if "=" in kv]
    ts = next((v for k, v in fields if k == "t"), "")
    if not ts.isdigit() or abs(time.time() - int(ts)) > TOLERANCE:
        return False
    mac = hmac.new(SECRET, ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(mac, v) for k, v in fields if k == "v1")


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        event = self.headers.get("Climate-Event", "")
        # The test delivery sent when the webhook is created: acknowledge it, even when
        # the secret (shown by that creation) is not known here yet.
        if event != "webhook.ping" and not verified(self.headers.get("Climate-Signature", ""), body):
            self.send_response(401)
            self.end_headers()
            return
        delivery = self.headers.get("Climate-Delivery", "")
        if event != "webhook.ping" and delivery not in seen:  # a retry repeats the id
            seen.add(delivery)
            n = json.loads(body)
            print(n["event_type"], n["lease_id"], n["payload"]["status"], flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):  # no access log
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 8080), Receiver)
print("listening on", server.server_address[1], flush=True)
server.serve_forever()
