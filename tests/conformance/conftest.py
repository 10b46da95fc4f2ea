"""Starts the gke-emulator binary for the conformance suite.

The binary comes from $GKQ_EMULATOR_BIN (scripts/conformance-venv builds it and sets this), or
else from target/debug/gke-emulator in this checkout.
"""
import json
import os
import pathlib
import re
import subprocess
import urllib.request

import pytest
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import container_v1

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _binary():
    b = os.environ.get("GKQ_EMULATOR_BIN") or str(ROOT / "target" / "debug" / "gke-emulator")
    if not os.path.exists(b):
        pytest.exit(f"gke-emulator binary not found at {b}: run scripts/conformance-venv, or "
                    "`cargo build --bin gke-emulator` and set GKQ_EMULATOR_BIN", returncode=2)
    return b


class Emulator:
    """A running emulator process and helpers for its admin routes."""

    def __init__(self, url):
        self.url = url.rstrip("/")

    def admin(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"{}")

    def raw(self, method, path, body=None, query=""):
        """A GKE API call without the client library: (status, parsed JSON body)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.url}{path}{query}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def requests(self):
        return self.admin("GET", "/emulator/requests")["requests"]

    def add_fault(self, rule):
        return self.admin("POST", "/emulator/faults", rule)

    def clear_faults(self):
        self.admin("DELETE", "/emulator/faults")


@pytest.fixture(scope="session")
def emulator(tmp_path_factory):
    state = tmp_path_factory.mktemp("gke-state")
    proc = subprocess.Popen(
        [_binary(), "--port", "0", "--phase-ms", "100", "--state-dir", str(state)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.search(r"http://\S+", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"emulator did not start: {line!r} {proc.stderr.read()}")
    yield Emulator(m.group(0))
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="session")
def client(emulator):
    return container_v1.ClusterManagerClient(
        credentials=AnonymousCredentials(),
        transport="rest",
        client_options=ClientOptions(api_endpoint=emulator.url),
    )
