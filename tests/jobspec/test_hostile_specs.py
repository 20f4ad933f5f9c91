"""Hostile whole specs, deployed the way an operator deploys (the controller's ``deploy``: load,
places, brokers), are refused before anything is registered: with a message that says what
is wrong and what to do, under 4 KiB, within seconds (cases: hostile_specs.yaml)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from tidegate.errors import TidegateError
from tidegate.runtime.jobs.config import load_config
from tidegate.runtime.jobs.controller import Controller

CASES = yaml.safe_load((Path(__file__).parent / "hostile_specs.yaml").read_text())
HEAD = """name: hostile
version: 1
source: {event_log: var/event-log}
payload: {deviceId: string, eventTime: string, temperature: double}
timestamp_by: eventTime"""
COUNT = """window: {kind: tumbling, size: 1m}
group_by: [deviceId]
aggregates: {readings: count(*)}"""
MAX_MESSAGE_BYTES = 4096
WITHIN_S = 10.0  # a refusal is a parse and a few checks; this bounds a loader that runs away


@pytest.fixture(scope="module")
def platform(tmp_path_factory):
    """A platform in a fresh folder: its home var/ (the event-log folder), another team's log
    beside it, its control database, one Kafka connection and no other allowed host."""
    root = tmp_path_factory.mktemp("platform")
    (root / "var" / "event-log").mkdir(parents=True)
    (root / "other-team" / "event-log").mkdir(parents=True)
    env = {"TIDEGATE_HOME": str(root / "var"), "TIDEGATE_KAFKA_BOOTSTRAP": "kafka:9092",
           "TIDEGATE_REFERENCE_DIRS": str(root / "var" / "reference")}  # fmt: skip
    return root, Controller(load_config(env, cwd=root), actor="test")


def spec_text(case: dict) -> str:
    text = case["text"].replace("{HEAD}", HEAD).replace("{COUNT}", COUNT)
    made = case.get("generate", {})
    if "brackets" in made:
        text += f"description: {'[' * made['brackets']}{']' * made['brackets']}\n"
    if "aggregates" in made:
        text += "aggregates:\n" + "".join(f"  a{i}: sum(temperature)\n" for i in range(made["aggregates"]))
    if "long_filter" in made:
        text += "filter: " + " + ".join(["temperature"] * (made["long_filter"] // 14)) + " > 0\n"
    if "long_name" in made:
        text = f"name: {'n' * made['long_name']}\n" + text
    if "long_field" in made:
        text += f"surprise: {'v' * made['long_field']}\n"
    if "pad" in case:
        text += "#" * (case["pad"] - len(text.encode()) - 1) + "\n"
    return text


def deploy(platform, text: str, name: str) -> str:
    root, controller = platform
    path = root / "jobs" / f"{name}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)  # the spec's relative places are read from the platform's folder, as the CLI runs
        controller.deploy(path)
    return "deployed"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_a_hostile_spec_is_refused_at_deploy_with_a_short_message_and_nothing_registered(platform, case):
    started = time.monotonic()
    with pytest.raises(TidegateError) as refused:
        deploy(platform, spec_text(case), case["id"])
    took = time.monotonic() - started
    message = str(refused.value)
    assert all(s in message for s in case["says"]), message[:2000]
    assert len(message.encode()) < MAX_MESSAGE_BYTES and refused.value.fix
    assert took < WITHIN_S, f"{case['id']} took {took:.1f} s to refuse"
    assert "hostile" not in [job.name for job in platform[1].db.jobs()]


def test_the_valid_spec_the_cases_are_built_on_deploys(platform):
    """Each case differs from a spec that deploys: what is refused is what the case added."""
    assert deploy(platform, HEAD + "\n" + COUNT + "\n", "valid") == "deployed"


def test_the_corpus_holds_every_class_of_the_threat_model():
    ids = " ".join(c["id"] for c in CASES)
    for word in (
        "alias",
        "brackets",
        "larger",
        "substitution",
        "repeat",
        "format",
        "backtracking",
        "quantifier",
        "edit-distance",
        "hopping",
        "open",
        "session",
        "user",
        "event-log",
        "reference",
        "output-path",
        "metadata-service",
        "fetch",
        "superscript",
        "name-of",
    ):
        assert word in ids, f"no case of {word} in hostile_specs.yaml"
