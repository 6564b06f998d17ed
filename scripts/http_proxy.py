"""A small HTTP proxy on 127.0.0.1 for remote-store tests and benchmarks: it forwards each
request to an upstream server, after an optional per-request action taken from a plan:

* ``"pass"``: forward as is;
* ``"delay:S"``: wait S seconds, then forward;
* ``"500"`` / ``"503"``: answer that status without forwarding;
* ``"drop"``: close the connection without an answer;
* ``"lose"``: forward, then close the connection without passing the answer on (the request
  took effect; the client cannot know);
* ``"short"``: forward, then send only half of the body and close;
* ``"flip"``: forward, with one byte in the middle of the body inverted: a transfer that damages
  data. It waits for the next GET of a chunk file (``<digits>.zr``); other requests pass.

``Proxy.plan`` is consumed one action per request (but see ``"flip"``); ``Proxy.delay`` is added to every request.
An entry may name the requests it waits for: ``"PUT 503"`` (the next PUT) or ``"PUT meta.zr drop"``
(the next PUT of an object named meta.zr); requests that do not match pass meanwhile.
``Proxy.requests`` counts the requests seen and ``Proxy.peak`` the most in flight at once
(``Proxy.reset_counts()`` zeroes both).
"""

import http.client
import http.server
import socketserver
import sys
import threading
import time


class Proxy:
    def __init__(self, upstream, delay=0.0):
        self.upstream = upstream.removeprefix("http://")
        self.delay = delay
        self.plan = []
        self._lock = threading.Lock()
        self._local = threading.local()
        self.requests = self.peak = self._inflight = 0
        self.log = False
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self):
                with proxy._lock:
                    proxy.requests += 1
                    proxy._inflight += 1
                    proxy.peak = max(proxy.peak, proxy._inflight)
                try:
                    self._answer()
                finally:
                    with proxy._lock:
                        proxy._inflight -= 1

            def _answer(self):
                action = proxy._next(self.command, self.path)
                if proxy.log:
                    print(f"{time.monotonic():.3f} {self.command} {self.path} {self.headers.get('Range', '')}", file=sys.stderr, flush=True)
                if action == "drop":
                    self.close_connection = True
                    self.connection.close()
                    return
                if action in ("500", "503"):
                    # The request's body is read (and dropped): the connection stays usable.
                    self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                    self.send_response(int(action))
                    self.send_header("Content-Length", "8")
                    self.end_headers()
                    self.wfile.write(b"injected")
                    return
                time.sleep(proxy.delay + (float(action.split(":")[1]) if action.startswith("delay:") else 0))
                n = int(self.headers.get("Content-Length", 0) or 0)
                body_in = self.rfile.read(n) if n else None
                resp, body = proxy._upstream(self.command, self.path, body_in, dict(self.headers.items()))
                if action == "lose":
                    self.close_connection = True
                    self.connection.close()
                    return
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding", "server", "date"):
                        self.send_header(k, v)
                self.end_headers()
                if self.command == "HEAD":
                    return
                if action == "flip" and body:
                    middle = len(body) // 2
                    body = body[:middle] + bytes([body[middle] ^ 0xFF]) + body[middle + 1 :]
                if action == "short" and len(body) > 1:
                    self.wfile.write(body[: len(body) // 2])
                    self.close_connection = True
                    self.connection.close()
                    return
                self.wfile.write(body)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            # Clients open many connections at once (a batch's ranges are one round): the
            # default backlog of 5 would drop SYNs, each costing a 1 s retransmit.
            request_queue_size = 1024

            def handle_error(self, request, client_address):
                # A client that hangs up mid-request (a dropped or timed-out read) is routine
                # here; anything else is still reported.
                if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
                    super().handle_error(request, client_address)

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def _upstream(self, method, path, body, headers):
        """Sends one request upstream on this thread's kept-alive connection (a new one after
        any failure): (response, body)."""
        for attempt in (0, 1):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = http.client.HTTPConnection(self.upstream, timeout=60)
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                return resp, resp.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise

    def reset_counts(self):
        with self._lock:
            self.requests = self.peak = 0

    def _next(self, method="GET", path=""):
        name = path.split("?")[0].rsplit("/", 1)[-1]
        chunk = method == "GET" and name.endswith(".zr") and name[:-3].isdigit()
        with self._lock:
            if not self.plan:
                return "pass"
            *want, action = self.plan[0].split()
            if (action == "flip" and not chunk) or want[:1] not in ([], [method]) or want[1:] not in ([], [name]):
                return "pass"
            self.plan.pop(0)
            return action

    def close(self):
        self._server.shutdown()


if __name__ == "__main__":
    # python scripts/http_proxy.py UPSTREAM [DELAY_SECONDS]: prints the proxy's URL, serves
    # until stdin closes (so a parent process that dies takes the proxy with it).
    p = Proxy(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
    p.log = bool(__import__("os").environ.get("LOADERX_PROXY_LOG"))
    print(p.url, flush=True)
    sys.stdin.read()
    p.close()
