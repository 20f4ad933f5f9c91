"""A TLS listener named as plaintext is refused before any Kafka client connects: Java's client
would read its alert as a 336 MiB frame. The probe reads a few bytes, within a bounded time,
and sends no credentials. Listeners are made by the test (tests/tls_support.py)."""

from __future__ import annotations

import struct
import time

import pytest

from tidegate.inputs.kafka.client import KafkaLogError, KafkaTopic
from tidegate.inputs.kafka.listener import (
    KAFKA,
    NO_ANSWER,
    NOT_KAFKA,
    TLS,
    api_versions_request,
    check_plaintext_listeners,
    classify,
    probe,
)
from tls_support import alert_listener, http_listener, silent_listener, tls_listener

SECRET = "s3cr3t-Pa55"
TLS_SAYS = "this listener speaks TLS: the operator's connection must set security.protocol SSL or SASL_SSL"


def refusal(topic: KafkaTopic, env: dict | None = None) -> str:
    with pytest.raises(KafkaLogError) as refused:
        check_plaintext_listeners([topic], env or {})
    message = str(refused.value)
    assert len(message.encode()) < 2048, message
    return message


@pytest.mark.parametrize(
    "answer, closed, kind",
    [
        (struct.pack(">ii", 300, 0x7467), False, KAFKA),  # a broker: a small frame answering our correlation id
        (struct.pack(">ii", 300, 1), False, NOT_KAFKA),  # a frame, but not the answer to our request
        (bytes.fromhex("1503030002025a"), True, TLS),  # a TLS alert: read as a frame of 352,518,912 bytes
        (bytes.fromhex("16030300"), False, TLS),  # a TLS handshake record
        (b"\x15", True, TLS),  # one byte of an alert, then closed
        (b"HTTP/1.1", True, NOT_KAFKA),  # 1.2 GB as a frame size
        (struct.pack(">i", -1), True, NOT_KAFKA),  # a negative size
        (struct.pack(">i", 64 << 20) + b"\0\0tg", False, NOT_KAFKA),  # 64 MiB: no ApiVersions answer is that big
        (b"\0\0", True, NOT_KAFKA),  # two bytes and gone
        (b"", True, NO_ANSWER),  # closed without a word: the ClientHello step decides
        (b"", False, NO_ANSWER),  # silent or refused: the client reports it when it connects
    ],
)
def test_what_the_first_bytes_of_an_answer_say_the_listener_is(answer, closed, kind):
    assert classify(answer, closed) == kind


def test_the_probe_is_an_api_versions_request_and_nothing_else():
    request = api_versions_request()
    size, api, version = struct.unpack(">ihh", request[:8])
    assert (size, api, version) == (len(request) - 4, 18, 0) and request.endswith(b"tidegate-probe")


def test_a_real_tls_listener_named_as_plaintext_is_refused_with_what_the_operator_must_set(tmp_path):
    with tls_listener(tmp_path) as tls:
        assert probe("127.0.0.1", tls.port) == TLS
        message = refusal(KafkaTopic(tls.address, "readings"))
    assert TLS_SAYS in message and tls.address in message and "'readings'" in message
    assert "SSL or SASL_SSL" in message and "kafka_connections" in message


def test_a_java_style_tls_alert_is_recognised_from_its_first_bytes():
    with alert_listener() as java:
        assert probe("127.0.0.1", java.port) == TLS
        assert TLS_SAYS in refusal(KafkaTopic(java.address, "readings"))


def test_the_probe_sends_no_credentials_even_for_a_sasl_plaintext_connection():
    with alert_listener() as java:
        env = {"TIDEGATE_KAFKA_BOOTSTRAP": java.address, "TIDEGATE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
               "TIDEGATE_KAFKA_SASL_USERNAME": "payer", "TIDEGATE_KAFKA_SASL_PASSWORD": SECRET}  # fmt: skip
        message = refusal(KafkaTopic(java.address, "readings"), env)
    assert "connection 'default'" in message and SECRET not in message and "payer" not in message
    assert java.received == [api_versions_request()]  # one request, no user, no password


def test_a_listener_that_answers_nothing_is_left_to_the_client_within_the_probes_timeout():
    with silent_listener() as silent:
        began = time.monotonic()
        assert probe("127.0.0.1", silent.port, timeout_s=0.5) == NO_ANSWER
        check_plaintext_listeners([KafkaTopic(silent.address, "readings")], {}, timeout_s=0.5)
        assert time.monotonic() - began < 2.5  # two probes of 0.5 s, with room for a slow machine
    assert len(silent.received) == 2


def test_a_closed_port_is_left_to_the_client_which_names_a_broker_that_is_down():
    with silent_listener() as gone:
        port = gone.port
    began = time.monotonic()
    assert probe("127.0.0.1", port, timeout_s=1.0) == NO_ANSWER
    assert time.monotonic() - began < 1.5


def test_a_listener_that_does_not_speak_kafka_is_refused_saying_so():
    with http_listener() as web:
        assert probe("127.0.0.1", web.port) == NOT_KAFKA
        message = refusal(KafkaTopic(web.address, "readings"))
    assert "does not speak Kafka" in message and web.address in message


def test_a_connection_that_expects_tls_is_not_probed(tmp_path):
    with alert_listener() as tls:
        env = {"TIDEGATE_KAFKA_BOOTSTRAP": tls.address, "TIDEGATE_KAFKA_SECURITY_PROTOCOL": "SSL"}
        check_plaintext_listeners([KafkaTopic(tls.address, "readings")], env)
        assert tls.connections == 0


def test_a_real_broker_answers_as_kafka_on_its_plaintext_and_sasl_listeners(kafka_broker):
    assert probe("127.0.0.1", kafka_broker.port) == KAFKA
    assert probe("127.0.0.1", kafka_broker.sasl_port) == KAFKA  # ApiVersions comes before authentication
    check_plaintext_listeners([KafkaTopic(kafka_broker.bootstrap, "readings")], {})
