"""Helpers shared by tests/test_kubernetes_integration.py and tests/test_kubernetes_cli.py
(split from test_kubernetes.py)."""

from __future__ import annotations

from tests.conftest import SAMPLES

K8S = SAMPLES / "kubernetes"
PODS, NODES = K8S / "pods.json", K8S / "nodes.json"
