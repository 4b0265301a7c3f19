"""The dashboards and alerts that ship with the room (deploy/grafana/, deploy/prometheus/):
Prometheus's own promtool checks the rules and runs their unit tests, every alert has its
runbook paragraph in docs/operations.md, and a running room (web processes, a worker, the
scheduler) exports every metric a rule or a panel names, the room's figures identically in
every web process."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from config.celery import app as celery_app
from tests.processes import ROOT, celery_queue, running_stack, wait_until

PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
GRAFANA_DIR = ROOT / "deploy" / "grafana"
DASHBOARDS = ("room-overview.json", "on-sale.json")
WATCH_SECTION = "## On-sale night: what to watch"

needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool is not installed: scripts/ensure_prometheus.sh installs Debian's prometheus",
)


def _alert_rules() -> list[dict]:
    groups = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def _dashboard_exprs() -> list[str]:
    exprs = []
    for name in DASHBOARDS:
        dashboard = json.loads((GRAFANA_DIR / name).read_text())
        exprs += [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
        exprs += [
            variable["definition"]
            for variable in dashboard["templating"]["list"]
            if variable["type"] == "query"
        ]
    return exprs


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: its identifiers that are neither inside a
    label matcher or a string, nor a function, keyword or label name. The room's and its
    libraries' names carry their prefixes (waitingroom_, django_), which is how they are told
    from label names in ``by (...)`` and from functions."""
    bare = _STRINGS.sub('""', expr)
    bare = re.sub(r"\{[^}]*\}", "", bare)
    bare = re.sub(r"\[[^\]]*\]", "", bare)
    return {
        name for name in _IDENTIFIER.findall(bare) if name.startswith(("waitingroom_", "django_"))
    }


def referenced_metric_names() -> set[str]:
    names: set[str] = set()
    for rule in _alert_rules():
        names |= metric_names(rule["expr"])
    for expr in _dashboard_exprs():
        names |= metric_names(expr)
    return names


def test_metric_names_are_read_out_of_promql() -> None:
    expr = (
        'sum by (status, reason) (rate(waitingroom_refusals_total{reason!="page",x=~"a{b}"}[5m]))'
        " / clamp_min(sum(rate(waitingroom_join_seconds_count[5m])), 1) > 0.2"
        " and label_values(waitingroom_waiting, event)"
    )
    assert metric_names(expr) == {
        "waitingroom_refusals_total",
        "waitingroom_join_seconds_count",
        "waitingroom_waiting",
    }


@needs_promtool
def test_promtool_finds_the_rules_and_the_example_configuration_valid() -> None:
    for command in (
        ["promtool", "check", "rules", "alerts.yml"],
        # The example names a token file that exists only where it is deployed.
        ["promtool", "check", "config", "--syntax-only", "prometheus.yml"],
    ):
        checked = subprocess.run(
            command, cwd=PROMETHEUS_DIR, capture_output=True, text=True, timeout=60
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr


@needs_promtool
def test_every_alert_fires_as_its_unit_tests_say() -> None:
    tested = subprocess.run(
        ["promtool", "test", "rules", "alerts_test.yml"],
        cwd=PROMETHEUS_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    tests = yaml.safe_load((PROMETHEUS_DIR / "alerts_test.yml").read_text())["tests"]
    with_firing_case = {
        case["alertname"]
        for test in tests
        for case in test["alert_rule_test"]
        if case.get("exp_alerts")
    }
    assert {rule["alert"] for rule in _alert_rules()} <= with_firing_case


def _github_anchor(heading: str) -> str:
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def test_every_alert_has_a_runbook_paragraph_on_on_sale_night() -> None:
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert WATCH_SECTION in operations
    section = operations.split(WATCH_SECTION, 1)[1].split("\n## ", 1)[0]
    anchors = {
        _github_anchor(line.lstrip("#")) for line in section.splitlines() if line.startswith("### ")
    }
    for rule in _alert_rules():
        url = rule["annotations"]["runbook_url"]
        path, _, anchor = url.partition("#")
        assert path == "docs/operations.md" and anchor in anchors, (rule["alert"], url)
        assert f"`{rule['alert']}`" in section


def test_the_dashboards_take_their_prometheus_and_on_sale_as_variables() -> None:
    for name in DASHBOARDS:
        dashboard = json.loads((GRAFANA_DIR / name).read_text())
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource"
        assert variables["datasource"]["query"] == "prometheus"
        for panel in dashboard["panels"]:
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert panel["targets"], panel["title"]
    on_sale = json.loads((GRAFANA_DIR / "on-sale.json").read_text())
    event = {v["name"]: v for v in on_sale["templating"]["list"]}["event"]
    assert event["type"] == "query"
    assert all(
        'event="$event"' in target["expr"]
        for panel in on_sale["panels"]
        for target in panel["targets"]
        if "event" in target["expr"] or "waitingroom_waiting" in target["expr"]
    )


# ---------------------------------------------------------------- a running room


def _get(url: str, **headers: str) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _join(base_url: str, slug: str) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{base_url}/api/v1/events/{slug}/join",
        data=b"{}",
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def exported_names(text: str) -> set[str]:
    """The sample names of a scrape in Prometheus's text format."""
    return {
        re.split(r"[{ ]", line, maxsplit=1)[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


_ROOM_SERIES = re.compile(
    r"^waitingroom_(waiting|active|admissions_total|expirations_total)\{.*$", re.M
)


def _room_series(text: str) -> list[str]:
    return sorted(match.group(0) for match in _ROOM_SERIES.finditer(text))


def _same_room_figures(web_a: str, web_b: str) -> tuple[str, str] | None:
    """Both processes' scrapes, if they said the same of every on-sale (a fan let in
    between the two scrapes would make them differ for a moment)."""
    a, b = _get(f"{web_a}/metrics")[1], _get(f"{web_b}/metrics")[1]
    return (a, b) if _room_series(a) == _room_series(b) else None


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_running_room_exports_every_metric_its_rules_and_dashboards_use(
    make_event, tmp_path: Path
) -> None:
    event = make_event(slug="night", capacity=0, rate_per_minute=600, heartbeat_seconds=600)
    # A third join from this address in a minute is refused: the room's 429.
    with running_stack(WR_JOIN_LIMIT_PER_IP="2") as stack:
        urls = []
        for name, workers in (("web-a", 2), ("web-b", 1)):
            # Each web "container" with its own directory, as docker-compose gives each.
            shared = tmp_path / name
            shared.mkdir()
            stack.env["PROMETHEUS_MULTIPROC_DIR"] = str(shared)
            urls.append(stack.web(workers=workers, name=name))
        # A tick that waited past its expiry before any worker took it: dropped, and counted.
        celery_app.send_task(
            "queueing.tasks.event_tick", args=[event.pk, ""], expires=0.2, queue=celery_queue()
        )
        time.sleep(0.5)
        stack.worker(concurrency=2)
        stack.beat()
        web_a, web_b = urls
        joined = [_join(web_a, event.slug) for _ in range(3)]
        assert [status for status, _ in joined] == [201, 201, 429]
        assert joined[2][1]["error"] == "rate_limited"
        ticket = joined[0][1]["ticket"]
        _get(f"{web_b}/api/v1/tickets/{ticket}")
        _get(f"{web_a}/gate/{event.slug}/check")
        wait_until(
            lambda: (
                f'waitingroom_admissions_total{{event="{event.slug}"}} 2.0'
                in _get(f"{web_a}/metrics")[1]
            ),
            timeout=30,
            what="both fans let in on the room's tick",
        )
        # The room's figures are read from the shared store: every web process says the same.
        scrapes = wait_until(
            lambda: _same_room_figures(web_a, web_b),
            timeout=10,
            what="the two web processes to report the same per on-sale figures",
        )
        assert len(_room_series(scrapes[0])) == 4
        assert 'waitingroom_refusals_total{reason="rate_limited",status="429"} 1.0' in scrapes[0]
        assert "waitingroom_ticks_dispatched_total" in scrapes[0]
        dropped = re.search(r"^waitingroom_ticks_dropped_total (\S+)$", scrapes[0], re.M)
        assert dropped and float(dropped[1]) >= 1
        missing = (
            referenced_metric_names() - exported_names(scrapes[0]) - exported_names(scrapes[1])
        )
        assert not missing, f"named by a rule or a panel, not exported: {sorted(missing)}"
        # And both export the room's figures themselves (not only their own).
        for text in scrapes:
            for name in (
                "waitingroom_room_tick_age_seconds",
                "waitingroom_ticks_dispatched_total",
                "waitingroom_celery_queue_depth",
                "waitingroom_audit_chain_failures",
            ):
                assert name in exported_names(text), name
