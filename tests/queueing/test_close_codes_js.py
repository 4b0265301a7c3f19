"""The waiting page's script does what docs/api.md says for each WebSocket close code.

queueing/static/queueing/waiting.js hands its pure ``afterClose`` rule over under Node; it is
run here on every code the server sends (queueing/web/consumers.py) and a few it does not.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from queueing.web import consumers

NODE = Path("/usr/bin/node")  # a system package here: without it the test fails, never skips
SCRIPT = Path(__file__).resolve().parents[2] / "queueing" / "static" / "queueing" / "waiting.js"

HARNESS = r"""
const fs = require("fs");
const vm = require("vm");
const [scriptPath] = process.argv.slice(1);
const sandbox = { module: { exports: {} } };
vm.runInNewContext(fs.readFileSync(scriptPath, "utf8"), sandbox, { filename: scriptPath });
const codes = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(codes.map((c) => sandbox.module.exports.afterClose(c))));
"""


def after_close(codes: list[int]) -> dict[int, dict]:
    done = subprocess.run(
        [str(NODE), "-e", HARNESS, str(SCRIPT)],
        input=json.dumps(codes),
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return dict(zip(codes, json.loads(done.stdout), strict=True))


def test_each_close_code_gets_the_documented_reaction() -> None:
    got = after_close(
        [
            consumers.CLOSE_BAD_TICKET,
            consumers.CLOSE_TICKET_GONE,
            consumers.CLOSE_REPLACED,
            consumers.CLOSE_TOO_MANY,
            consumers.CLOSE_TRY_AGAIN,
            consumers.CLOSE_TOO_BIG,
            1006,  # the network dropped
            1001,  # the server went away (a deploy)
        ]
    )
    assert got[4401] == got[4404] == {"action": "reload"}
    # Another page of this ticket took over: say so and stop, no reconnect and no polling
    # (reconnecting would take the socket back, and the two pages would take turns).
    assert got[4409] == {"action": "stop"}
    # Too many sockets from this address: poll, and try a socket again only much later.
    assert got[4429]["action"] == "poll"
    assert got[4429]["reconnectAfter"][0] >= 60
    for code in (1013, 1009, 1006, 1001):
        assert got[code] == {"action": "retry", "reconnectAfter": [5, 10]}
