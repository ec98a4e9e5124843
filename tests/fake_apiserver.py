"""A read-only stand-in for kube-apiserver, enough for a real `kubectl` to run `api-resources` and `get -A -o yaml`
against a recorded dump (tests/test_kubectl_real.py): legacy discovery (/api, /apis, /api/v1, /apis/GROUP/VERSION)
and cluster-wide lists, as JSON. Aggregated discovery is not offered: client-go falls back to the legacy endpoints
when the answer's Content-Type is plain application/json. Served kinds are those of `SERVED`, whatever the dump
holds; a list's items carry no apiVersion/kind, as the API server's do not.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

# (group, version, plural, Kind, namespaced)
SERVED = [
    ("", "v1", "nodes", "Node", False), ("", "v1", "pods", "Pod", True),
    ("", "v1", "namespaces", "Namespace", False),
    ("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
    ("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True),
    ("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True),
    ("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
    ("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
]


def _objects(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(path.read_text()):
        if isinstance(doc, dict) and doc.get("kind") == "List":
            out.extend(doc.get("items") or [])
        elif isinstance(doc, dict):
            out.append(doc)
    return out


class FakeAPIServer:
    """Serves `dump` on 127.0.0.1 (a free port) in a thread; `requests` records each path asked."""

    def __init__(self, dump: Path, forbidden: tuple[str, ...] = ()) -> None:
        self.objects = _objects(dump)
        self.forbidden = forbidden  # plurals whose list is refused (403), as RBAC refuses it
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = urlsplit(self.path).path.rstrip("/")
                server.requests.append(path)
                status, body = server.answer(path)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeAPIServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "users": [{"name": "fake", "user": {}}]}))
        return path

    def answer(self, path: str) -> tuple[int, dict[str, Any]]:
        groups = sorted({(g, v) for g, v, *_ in SERVED if g})
        if path == "/version":
            return 200, {"major": "1", "minor": "35", "gitVersion": "v1.35.0"}
        if path == "/api":
            return 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if path == "/apis":
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                 "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v}} for g, v in groups]}
        parts = path.strip("/").split("/")
        group, version, rest = ("", parts[1], parts[2:]) if parts[0] == "api" and len(parts) > 1 else \
            (parts[1], parts[2], parts[3:]) if parts[0] == "apis" and len(parts) > 2 else ("?", "?", [])
        kinds = [s for s in SERVED if s[0] == group and s[1] == version]
        gv = f"{group}/{version}" if group else version
        if kinds and not rest:
            return 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": [
                {"name": plural, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind,
                 "verbs": ["get", "list", "watch"]} for _, _, plural, kind, namespaced in kinds]}
        for _, _, plural, kind, _ in kinds:
            if rest == [plural] and plural in self.forbidden:
                return 403, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                             "code": 403, "details": {"kind": plural},
                             "message": f'{plural} is forbidden: User "auditor" cannot list resource "{plural}" in '
                                        'API group "" at the cluster scope'}
            if rest == [plural]:
                items = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in self.objects
                         if o.get("kind") == kind and o.get("apiVersion") == gv]
                return 200, {"kind": f"{kind}List", "apiVersion": gv, "metadata": {"resourceVersion": "1"},
                             "items": items}
        return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
                     "message": f"the server could not find the requested resource ({path})"}
