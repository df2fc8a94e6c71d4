"""A tiny OpenAI-compatible HTTP server for the preflight tests, on 127.0.0.1 only.

``/v1/models`` lists one model (id and root chosen by the test) and
``/v1/chat/completions`` answers one token. An optional API key is required as
``Authorization: Bearer <key>``. Every request is recorded for the assertions.

    server = start_openai_server(model_id="Kimi-K2.6", root="/models/Kimi-K2.6")
    ... server.url ...
    server.stop()
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ADDRESS = "127.0.0.1"  # never anything outside loopback


@dataclass
class Recorded:
    method: str
    path: str
    body: Any
    authorized: bool


@dataclass
class OpenAIServer:
    model_id: str
    root: str | None
    api_key: str | None = None
    requests: list[Recorded] = field(default_factory=list)
    _httpd: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{ADDRESS}:{self.port}"

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None


def _handler(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet test output
            pass

        def _authorized(self) -> bool:
            return server.api_key is None or self.headers.get("Authorization") == f"Bearer {server.api_key}"

        def _send(self, status: int, payload: Any) -> None:
            body = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _record(self, body: Any) -> bool:
            ok = self._authorized()
            server.requests.append(Recorded(self.command, self.path, body, ok))
            if not ok:
                self._send(401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
            return ok

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if not self._record(None):
                return
            if self.path.rstrip("/") != "/v1/models":
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            model = {"id": server.model_id, "object": "model", "owned_by": "tests", "root": server.root}
            self._send(200, {"object": "list", "data": [model]})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                body = None
            if not self._record(body):
                return
            if self.path.rstrip("/") != "/v1/chat/completions" or not isinstance(body, dict):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            if body.get("model") not in (None, server.model_id):
                self._send(404, {"error": {"message": f"model {body.get('model')!r} does not exist"}})
                return
            self._send(200, {
                "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": server.model_id,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"},
                             "finish_reason": "length"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
            })

    return Handler


def start_openai_server(model_id: str, root: str | None, *, api_key: str | None = None) -> OpenAIServer:
    """Start serving on an ephemeral port of 127.0.0.1 in a daemon thread."""
    server = OpenAIServer(model_id=model_id, root=root, api_key=api_key)
    httpd = ThreadingHTTPServer((ADDRESS, 0), _handler(server))
    httpd.daemon_threads = True
    server._httpd = httpd
    server._thread = threading.Thread(target=httpd.serve_forever, name="openai-test-server", daemon=True)
    server._thread.start()
    return server
