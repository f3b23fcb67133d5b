# Devstack's URL layout on port 80 (what blazar-tempest-plugin's gabbi tests hard-code):
# /reservation/... -> Climate, /compute/... -> nova-api.
import http.server, os, socketserver, urllib.request, urllib.error
ROUTES = {"/reservation/": "http://127.0.0.1:%s/" % os.environ.get("CLIMATE_PORT", "1234"),
          "/compute/": "http://127.0.0.1:8774/"}
class H(http.server.BaseHTTPRequestHandler):
    def _go(self):
        for prefix, base in ROUTES.items():
            if self.path.startswith(prefix):
                url = base + self.path[len(prefix):]
                break
        else:
            self.send_error(404); return
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        req = urllib.request.Request(url, data=body, method=self.command,
            headers={k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "connection")})
        try:
            resp = urllib.request.urlopen(req)
        except urllib.error.HTTPError as e:
            resp = e
        data = resp.read()
        self.send_response(resp.status if hasattr(resp, "status") else resp.code)
        for k, v in resp.headers.items():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _go
    def log_message(self, *a): pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
S(("127.0.0.1", 80), H).serve_forever()
