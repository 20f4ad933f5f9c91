"""The local broker's storage is formatted with a cluster id its storage tool accepts."""

from __future__ import annotations

import base64
import uuid

from tidegate.inputs.kafka import broker


def test_a_cluster_id_never_starts_with_a_dash_which_the_storage_tool_reads_as_an_option(monkeypatch):
    dash = uuid.UUID(bytes=bytes([0xF8]) + bytes(15))  # URL-safe base64 "-AAA…": 1 random id in 64
    assert base64.urlsafe_b64encode(dash.bytes).decode().startswith("-")
    drawn = iter([dash, dash, uuid.UUID(int=42)])
    monkeypatch.setattr(broker.uuid, "uuid4", lambda: next(drawn))
    cluster_id = broker.new_cluster_id()
    assert cluster_id == base64.urlsafe_b64encode(uuid.UUID(int=42).bytes).decode().rstrip("=")
    assert len(cluster_id) == 22 and not cluster_id.startswith("-")
