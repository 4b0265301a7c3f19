"""What each of the dashboard's controls will do, said before it is done: the confirmation
page's title, its consequences in the numbers of that moment (how many fans are in line and
in the shop, the pace and cap before and after) and its button. "Close: the 4,210 fans still
in line are sent home", not "Close?"."""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.controls import Control, ControlAsked, fans
from events.models import Event, EventMode, EventState
from staff.consequences import FansNow


@dataclass(frozen=True)
class Confirmation:
    title: str  # "Close Spring tour?"
    consequences: tuple[str, ...]  # what will happen, with the numbers
    button: str  # "Yes, close"


def _in_shop_keep(now: FansNow, until: str) -> str:
    if not now.in_shop:
        return "Nobody is in the shop now."
    keep = "keeps their pass" if now.in_shop == 1 else "keep their passes"
    return f"The {fans(now.in_shop)} in the shop {keep}{until}."


def _pace(rate: int) -> str:
    return f"{rate:,} a minute" if rate else "as fast as the capacity allows"


def _cap(capacity: int) -> str:
    return f"at most {capacity:,} in the shop at once" if capacity else "no cap on the shop"


def _pause(event: Event, state: EventState, now: FansNow) -> tuple[str, ...]:
    if state in (EventState.SCHEDULED, EventState.PREQUEUE):
        return (
            "When the sale starts, nobody goes to the shop until you resume.",
            f"The {fans(now.in_line)} in the pre-queue keep their place; fans may still join.",
        )
    return (
        "Nobody new goes to the shop until you resume.",
        f"The {fans(now.in_line)} in line keep their place; fans may still join.",
        _in_shop_keep(now, ""),
    )


def _resume(event: Event, now: FansNow) -> tuple[str, ...]:
    return (
        f"Fans go to the shop again: {_pace(event.rate_per_minute)}, {_cap(event.capacity)} "
        f"({now.in_shop:,} there now).",
        f"The {fans(now.in_line)} in line move again.",
    )


def _close(now: FansNow) -> tuple[str, ...]:
    return (
        f"Close: the {fans(now.in_line)} still in line are sent home, and nobody new may join.",
        _in_shop_keep(now, " until their session ends"),
        "Closing is final: the on-sale cannot be opened again from here.",
    )


def _sold_out(text: str, now: FansNow) -> tuple[str, ...]:
    said = (
        f"Every waiting and pre-queue page says “Sold out” at once, with: “{text}”"
        if text
        else ("Every waiting and pre-queue page says “Sold out” at once.")
    )
    return (
        said,
        f"The {fans(now.in_line)} still in line are sent home, and nobody new may join.",
        _in_shop_keep(now, " until their session ends"),
        "Sold out is final: the on-sale closes and cannot be opened again from here.",
    )


def _admit(event: Event, count: int, now: FansNow) -> tuple[str, ...]:
    lines = [f"Let up to {fans(count)} in now, past the pace; {now.in_line:,} wait in line."]
    if event.capacity:
        room = max(0, event.capacity - now.in_shop)
        lines.append(
            f"The shop has room for {room:,} more under its capacity of {event.capacity:,} "
            f"({now.in_shop:,} inside), so at most {min(count, room, now.in_line):,} go in."
        )
    else:
        lines.append(f"No cap on the shop: at most {min(count, now.in_line):,} go in.")
    return tuple(lines)


def _capacity(event: Event, capacity: int, now: FansNow) -> tuple[str, ...]:
    if not capacity:
        if not event.rate_per_minute:
            return (
                "No cap, and no pace limit either: nothing holds fans back.",
                f"The {fans(now.in_line)} in line go to the shop as fast as the room "
                "lets them through.",
                "To stop letting fans in, pause the on-sale instead.",
            )
        return (
            f"No cap: fans will be let in at the pace only ({_pace(event.rate_per_minute)}), "
            "however many are in the shop.",
            "To stop letting fans in, pause the on-sale instead.",
        )
    lines = [
        f"At most {capacity:,} fans in the shop at once "
        f"(now {event.capacity:,}; {now.in_shop:,} inside)."
        if event.capacity
        else f"At most {capacity:,} fans in the shop at once (now no cap; {now.in_shop:,} inside)."
    ]
    if now.in_shop >= capacity:
        lines.append(
            f"The {fans(now.in_shop)} inside keep their passes; nobody new goes in until "
            f"fewer than {capacity:,} are inside."
        )
    return tuple(lines)


def _rate(event: Event, rate: int, now: FansNow) -> tuple[str, ...]:
    if not rate:
        if not event.capacity:
            return (
                "No pace limit, and no cap either: nothing holds fans back.",
                f"The {fans(now.in_line)} in line go to the shop as fast as the room "
                "lets them through.",
                "To stop letting fans in, pause the on-sale instead.",
            )
        return (
            f"No pace limit: fans will be let in as fast as the capacity allows "
            f"({_cap(event.capacity)}; {now.in_shop:,} inside).",
        )
    was = f"{event.rate_per_minute:,}" if event.rate_per_minute else "no pace limit"
    return (
        f"Up to {rate:,} fans a minute go to the shop (now {was}), "
        f"while there is room under the cap ({_cap(event.capacity)}).",
    )


_MODE_EFFECTS = {
    EventMode.QUEUE: "Everyone waits their turn: the line is let in at the pace, within the "
    "capacity.",
    EventMode.SAFETY_NET: "Newcomers go straight to the shop while nobody is in line and the "
    "shop has room; otherwise they queue.",
    EventMode.PASSTHROUGH: "Everyone goes straight to the shop, past the capacity and the "
    "pace: the {in_line} in line within a few seconds, every newcomer at once.",
    EventMode.MAINTENANCE: "Nobody goes to the shop and nobody may join; the {in_line} in line "
    "keep their place.",
}


def _mode(event: Event, mode: EventMode, now: FansNow) -> tuple[str, ...]:
    return (
        f"From {event.get_mode_display().lower()} to {mode.label.lower()}.",
        _MODE_EFFECTS[mode].format(in_line=fans(now.in_line)),
    )


def _message(text: str, now: FansNow) -> tuple[str, ...]:
    if not text:
        return (f"The message leaves every waiting page at once ({fans(now.in_line)} in line).",)
    return (
        f"Every waiting page shows this at once ({fans(now.in_line)} in line):",
        f"“{text}”",
    )


# The confirmation's question and its button, by control.
_ASKED = {
    Control.PAUSE: ("Pause {name}?", "Yes, pause"),
    Control.RESUME: ("Resume {name}?", "Yes, resume"),
    Control.CLOSE: ("Close {name}?", "Yes, close"),
    Control.SOLD_OUT: ("Mark {name} sold out?", "Yes, mark sold out"),
    Control.ADMIT: ("Let fans in now to {name}?", "Yes, let them in"),
    Control.CAPACITY: ("Change the capacity of {name}?", "Yes, set the capacity"),
    Control.RATE: ("Change the pace of {name}?", "Yes, set the pace"),
    Control.MODE: ("Change the mode of {name}?", "Yes, change the mode"),
    Control.MESSAGE: ("Show this message to the line of {name}?", "Yes, show the message"),
}
_CLEAR_MESSAGE = ("Clear the message to the line of {name}?", "Yes, clear the message")


def confirmation(
    event: Event, state: EventState, asked: ControlAsked, now: FansNow
) -> Confirmation:
    """What the control will do, in the numbers of this moment."""
    control = asked.control
    question, button = (
        _CLEAR_MESSAGE if control == Control.MESSAGE and not asked.message else _ASKED[control]
    )
    if control == Control.PAUSE:
        consequences = _pause(event, state, now)
    elif control == Control.RESUME:
        consequences = _resume(event, now)
    elif control == Control.CLOSE:
        consequences = _close(now)
    elif control == Control.SOLD_OUT:
        consequences = _sold_out(asked.message, now)
    elif control == Control.ADMIT:
        consequences = _admit(event, asked.number, now)
    elif control == Control.CAPACITY:
        consequences = _capacity(event, asked.number, now)
    elif control == Control.RATE:
        consequences = _rate(event, asked.number, now)
    elif control == Control.MODE and asked.mode is not None:
        consequences = _mode(event, asked.mode, now)
    else:
        consequences = _message(asked.message, now)
    return Confirmation(
        title=question.format(name=event.name),
        consequences=consequences,
        button=button,
    )
