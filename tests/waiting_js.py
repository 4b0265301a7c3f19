"""Running the waiting page's script in Node, for tests that pin its pure rules to the
server's (queueing/static/queueing/waiting.js hands them over when it sees ``module``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

NODE = Path("/usr/bin/node")  # a system package here: without it the tests fail, never skip
SCRIPT = Path(__file__).resolve().parent.parent / "queueing" / "static" / "queueing" / "waiting.js"

# Loads the script in a fresh context without a DOM, then runs the caller's body with
# ``rules`` (the script's exports) and ``input`` (read from stdin); its value goes to stdout.
_HARNESS = r"""
const fs = require("fs");
const vm = require("vm");
const [scriptPath] = process.argv.slice(1);
const sandbox = { module: { exports: {} } };
vm.runInNewContext(fs.readFileSync(scriptPath, "utf8"), sandbox, { filename: scriptPath });
const rules = sandbox.module.exports;
const input = JSON.parse(fs.readFileSync(0, "utf8"));
const answer = (function () { BODY })();
process.stdout.write(JSON.stringify(answer));
"""


def run_waiting_js(body: str, payload: Any) -> Any:
    """The value of ``body`` (a JavaScript function body) run against the script's rules."""
    if not NODE.exists():
        pytest.fail(f"{NODE} is missing: it is a system package here, install nodejs")
    result = subprocess.run(
        [str(NODE), "-e", _HARNESS.replace("BODY", body), str(SCRIPT)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
