"""One on-sale's live controls on the dashboard: which apply in its state, checking what
a form asks for, and carrying it out through staff/services.py, audited like every change.

A control is asked for by a POST (``action``, with ``value``, ``no_limit``, ``message`` or
``clear`` as it needs): ``control_asked`` checks it, ``confirmation``
(dashboard/confirmations.py) says what it will do, and ``control_carry_out`` does it. A
control that does not apply in the on-sale's state is refused, not quietly done: a closed
on-sale has nothing left to steer."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from django.core.exceptions import ValidationError
from django.http import QueryDict

from events.models import MESSAGE_MAX_LENGTH, Event, EventControl, EventMode, EventState
from queueing.rules.errors import QueueError
from staff import services
from staff.sell_out import event_sell_out

ADMIT_MAX = services.ADMIT_NOW_MAX
# As the staff API's capacity and rate_per_minute.
SETTING_MAX = 10_000_000


class Control(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    CLOSE = "close"
    ADMIT = "admit"
    CAPACITY = "capacity"
    RATE = "rate"
    MODE = "mode"
    MESSAGE = "message"
    SOLD_OUT = "sold_out"


class ControlRefused(Exception):
    """A control that cannot be done as asked; the text says why, for staff to read."""


@dataclass(frozen=True)
class ControlAsked:
    control: Control
    number: int = 0  # admit: how many; capacity, rate: the new value (0 = no limit)
    mode: EventMode | None = None
    message: str = ""

    def fields(self) -> dict[str, str]:
        """The form fields that ask for it again, for the confirmation page to send back."""
        if self.control in (Control.CAPACITY, Control.RATE) and self.number == 0:
            return {"action": self.control, "no_limit": "1"}
        if self.control in (Control.ADMIT, Control.CAPACITY, Control.RATE):
            return {"action": self.control, "value": str(self.number)}
        if self.control == Control.MODE and self.mode is not None:
            return {"action": self.control, "value": self.mode.value}
        if self.control in (Control.MESSAGE, Control.SOLD_OUT):
            return {"action": self.control, "message": self.message}
        return {"action": self.control}


def fans(n: int) -> str:
    return f"{n:,} fan" if n == 1 else f"{n:,} fans"


def controls_that_apply(event: Event, state: EventState) -> frozenset[Control]:
    """What staff may do now. Closed (by staff or past its end): nothing. Otherwise pause or
    resume, whichever undoes nothing; "admit now" once the line moves (started, open or
    paused) and not in maintenance, where the run lets nobody in."""
    if state == EventState.CLOSED:
        return frozenset()
    shown = {
        Control.CLOSE,
        Control.SOLD_OUT,
        Control.CAPACITY,
        Control.RATE,
        Control.MODE,
        Control.MESSAGE,
    }
    shown.add(Control.RESUME if event.control == EventControl.PAUSED else Control.PAUSE)
    if (
        state in (EventState.OPEN, EventState.PAUSED)
        and event.started_at is not None
        and event.mode != EventMode.MAINTENANCE
    ):
        shown.add(Control.ADMIT)
    return frozenset(shown)


def why_it_does_not_apply(event: Event, state: EventState, control: Control) -> str:
    if state == EventState.CLOSED:
        return f"{event.name} is closed: there is nothing left to steer."
    if control == Control.PAUSE:
        return f"{event.name} is already paused: resume it instead."
    if control == Control.RESUME:
        return f"{event.name} is not paused: there is nothing to resume."
    if event.mode == EventMode.MAINTENANCE:
        return f"{event.name} is in maintenance: nobody can be let in until you change the mode."
    return f"{event.name} has not started: nobody can be let in before the sale starts."


def _whole_number(text: str, *, least: int, most: int, what: str) -> int:
    try:
        number = int(text.strip())
    except ValueError:
        number = least - 1
    if not least <= number <= most:
        raise ControlRefused(f"Give {what} as a whole number from {least:,} to {most:,}.")
    return number


def _limit(post: QueryDict, control: Control) -> int:
    """A capacity or a rate: a number from 1, or "no limit" said in so many words. A bare 0
    is refused: it reads as "let nobody in" and would mean the opposite."""
    if post.get("no_limit"):
        return 0
    if control == Control.CAPACITY:
        if post.get("value", "").strip() == "0":
            raise ControlRefused(
                "0 would not stop anyone: it means no cap, fans let in at the pace only. "
                "Tick “No cap (pace only)” if that is what you want; to stop letting fans "
                "in, pause the on-sale."
            )
        what = "the capacity (or tick “No cap”)"
    else:
        if post.get("value", "").strip() == "0":
            raise ControlRefused(
                "0 would not stop anyone: it means no pace limit, fans let in as fast as the "
                "capacity allows. Tick “No pace limit” if that is what you want; to stop "
                "letting fans in, pause the on-sale."
            )
        what = "the pace (or tick “No pace limit”)"
    return _whole_number(post.get("value", ""), least=1, most=SETTING_MAX, what=what)


def control_asked(post: QueryDict) -> ControlAsked:
    """The control a form asks for, its input checked; ``ControlRefused`` says what is wrong."""
    action = post.get("action", "")
    if action not in {control.value for control in Control}:
        raise ControlRefused("Unknown control.")
    control = Control(action)
    if control == Control.ADMIT:
        number = _whole_number(
            post.get("value", ""), least=1, most=ADMIT_MAX, what="the number of fans to let in"
        )
        return ControlAsked(control, number=number)
    if control in (Control.CAPACITY, Control.RATE):
        return ControlAsked(control, number=_limit(post, control))
    if control == Control.MODE:
        if post.get("value", "") not in EventMode.values:
            raise ControlRefused("Unknown mode.")
        return ControlAsked(control, mode=EventMode(post["value"]))
    if control in (Control.MESSAGE, Control.SOLD_OUT):
        text = "" if post.get("clear") else post.get("message", "").strip()
        if len(text) > MESSAGE_MAX_LENGTH:
            raise ControlRefused(
                f"The message is {len(text):,} characters long: at most "
                f"{MESSAGE_MAX_LENGTH} fit on the fans' pages. Nothing was changed."
            )
        return ControlAsked(control, message=text)
    return ControlAsked(control)


def control_carry_out(*, event: Event, asked: ControlAsked, actor: str, now: datetime) -> str:
    """Do it, through the services (audited); what was done, for staff to read."""
    control = asked.control
    if control in (Control.PAUSE, Control.RESUME, Control.CLOSE):
        services.EVENT_CONTROLS[control](event=event, actor=actor, now=now)
        done = {Control.PAUSE: "paused", Control.RESUME: "resumed", Control.CLOSE: "closed"}
        return f"{event.name}: {done[control]}."
    if control == Control.SOLD_OUT:
        try:
            event_sell_out(event=event, message=asked.message, actor=actor, now=now)
        except QueueError as refusal:
            raise ControlRefused(refusal.detail) from refusal
        return f"{event.name}: sold out; every waiting page says so."
    if control == Control.ADMIT:
        outcome = services.event_admit_now(event=event, count=asked.number, actor=actor, now=now)
        if outcome.skipped:
            return f"{event.name}: nobody let in ({outcome.skipped.replace('_', ' ')})."
        return f"{event.name}: {fans(len(outcome.admitted))} let in."
    changes: dict[str, object]
    if control == Control.MODE and asked.mode is not None:
        changes = {"mode": asked.mode}
        said = f"the mode is now {asked.mode.label.lower()}"
    elif control == Control.MESSAGE:
        changes = {"message": asked.message}
        said = "the line now reads your message" if asked.message else "message cleared"
    elif control == Control.CAPACITY:
        changes = {"capacity": asked.number}
        said = f"capacity {asked.number:,}" if asked.number else "no cap (pace only)"
    else:
        changes = {"rate_per_minute": asked.number}
        said = f"pace {asked.number:,} a minute" if asked.number else "no pace limit"
    try:
        services.event_update(event=event, actor=actor, now=now, changes=changes)
    except ValidationError as refusal:
        raise ControlRefused(" ".join(refusal.messages)) from refusal
    return f"{event.name}: {said}."
