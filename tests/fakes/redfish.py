"""A local Redfish BMC for tests: both schemas, basic auth, slow answers, HTTPS.

As ../shared/SENSORS.md section 6 and the DMTF schemas describe: ``/redfish/v1/Chassis``
lists members; a chassis (``ChassisType`` RackMount, Blade, Enclosure ...) links its
``Power`` resource (``PowerControl[].PowerConsumedWatts``, the deprecated schema) or its
``PowerSubsystem`` and ``EnvironmentMetrics`` (``PowerWatts.Reading``,
``EnergykWh.Reading``). A wrong or missing ``Authorization`` is HTTP 401. ``delay_s``
holds every answer back (a slow BMC). ``https=True`` serves TLS with a self-signed
certificate made by ``openssl`` (``ca_file`` is it)."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client that gave up on a slow answer (the timeout tests): not an error


class FakeRedfish:
    def __init__(self, tmp: Path, *, schema: str = "power", watts: float = 250.0,
                 user: str = "admin", password: str = "s3cret", https: bool = False,
                 enclosure: bool = False):
        self.schema, self.watts, self.user, self.password = schema, watts, user, password
        self.delay_s = 0.0
        self.requests: list[str] = []
        self.enclosure = enclosure
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                fake.requests.append(self.path)
                time.sleep(fake.delay_s)
                want = "Basic " + base64.b64encode(f"{fake.user}:{fake.password}".encode()).decode()
                if self.headers.get("Authorization") != want:
                    self.send_response(401)
                    self.end_headers()
                    return
                body = fake.resource(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                if body is not None:
                    self.wfile.write(json.dumps(body).encode())

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.ca_file = ""
        scheme = "http"
        if https:
            cert, key = tmp / "bmc.pem", tmp / "bmc.key"
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                            str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                            "-addext", "subjectAltName=IP:127.0.0.1"], check=True,
                           capture_output=True, timeout=60)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
            self.ca_file, scheme = str(cert), "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def resource(self, path: str):
        c = "/redfish/v1/Chassis"
        members = [{"@odata.id": f"{c}/1U"}] + ([{"@odata.id": f"{c}/Enclosure"}]
                                                if self.enclosure else [])
        node = {"@odata.id": f"{c}/1U", "Id": "1U", "ChassisType": "RackMount"}
        if self.schema == "power":
            node["Power"] = {"@odata.id": f"{c}/1U/Power"}
        else:
            node["PowerSubsystem"] = {"@odata.id": f"{c}/1U/PowerSubsystem"}
            node["EnvironmentMetrics"] = {"@odata.id": f"{c}/1U/EnvironmentMetrics"}
        tree = {
            c: {"Members": members, "Members@odata.count": len(members)},
            f"{c}/1U": node,
            f"{c}/1U/Power": {"PowerControl": [{"Name": "System Power Control",
                                                "PowerConsumedWatts": self.watts}]},
            f"{c}/1U/PowerSubsystem": {"PowerSupplies": {"@odata.id": f"{c}/1U/PowerSubsystem/PowerSupplies"}},
            f"{c}/1U/EnvironmentMetrics": {"PowerWatts": {"Reading": self.watts},
                                           "EnergykWh": {"Reading": 1234.567}},
            f"{c}/Enclosure": {"ChassisType": "Enclosure",
                               "Power": {"@odata.id": f"{c}/Enclosure/Power"}},
            f"{c}/Enclosure/Power": {"PowerControl": [{"PowerConsumedWatts": 4000}]},
        }
        return tree.get(path.rstrip("/"))

    def install(self, monkeypatch, *, password: str | None = None) -> "FakeRedfish":
        monkeypatch.setenv("TUIMETER_REDFISH_URL", self.url)
        monkeypatch.setenv("TUIMETER_REDFISH_USER", self.user)
        monkeypatch.setenv("TUIMETER_REDFISH_PASSWORD", self.password if password is None
                           else password)
        monkeypatch.setenv("TUIMETER_REDFISH_INTERVAL", "2")
        monkeypatch.setenv("TUIMETER_REDFISH_TIMEOUT", "1")
        if self.ca_file:
            monkeypatch.setenv("TUIMETER_REDFISH_CA_FILE", self.ca_file)
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
