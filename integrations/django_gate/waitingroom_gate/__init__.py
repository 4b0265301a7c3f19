"""A Django shop's gate to the virtual waiting room: lets in only fans with a valid pass.

Add ``waitingroom_gate.middleware.WaitingRoomGateMiddleware`` to ``MIDDLEWARE`` and configure
``WAITING_ROOM`` (README.md).
"""

from waitingroom_gate.gate_stats import stats
from waitingroom_gate.passes import PassRejected, WaitingRoomPass, pass_verify

__all__ = ["PassRejected", "WaitingRoomPass", "pass_verify", "stats"]
__version__ = "0.1.0"
