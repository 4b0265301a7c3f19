"""The named rehearsals: an on-sale's settings, how its fans arrive and behave, how the shop
behind it checks them out, and what staff do while it runs. Plain data."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class TierPlan:
    name: str
    priority: int = 100
    share: int = 0
    code: str = ""  # the access code fans of this tier join with ("" = the default tier)
    fraction: float = 1.0  # of the fans who arrive after the start


@dataclass(frozen=True)
class StaffAction:
    at: float  # seconds after the line starts
    kind: str  # "pause", "resume", "set" (capacity/rate via the staff API), "checkout_factor"
    capacity: int | None = None
    rate_per_minute: int | None = None
    factor: float = 1.0  # for "checkout_factor": checkouts drawn from then on take this × longer

    @property
    def cuts_pace(self) -> bool:
        """Staff slowing the line down: fans' estimates are expected to go up then."""
        return self.kind == "pause" or (
            self.kind == "set" and (self.capacity is not None or self.rate_per_minute is not None)
        )


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    fans: int  # who arrive after the start, Poisson at ``arrivals_per_second``
    arrivals_per_second: float
    checkout_mean_seconds: float  # exponential
    capacity: int = 5
    rate_per_minute: int = 0
    session_seconds: int = 120
    heartbeat_seconds: int = 30
    prequeue_fans: int = 0  # joined before the start, shuffled at it
    abandon_share: float = 0.05  # leave the line (DELETE) after a while
    tiers: tuple[TierPlan, ...] = (TierPlan("General"),)
    actions: tuple[StaffAction, ...] = ()
    seed: int = 17
    time_limit_seconds: float = 600.0

    @property
    def staff_cut_pace(self) -> bool:
        return any(action.cuts_pace for action in self.actions)

    def scaled(self, fraction: float) -> Scenario:
        """The same sale with fewer fans (a shorter run), for tests and quick checks."""
        return replace(
            self,
            fans=max(10, int(self.fans * fraction)),
            prequeue_fans=int(self.prequeue_fans * fraction),
            actions=tuple(replace(a, at=a.at * fraction) for a in self.actions),
        )


STEADY = Scenario(
    name="steady",
    title="Steady: a shop with room for 5, 2 s checkouts, 4 fans a second",
    fans=160,
    arrivals_per_second=4.0,
    checkout_mean_seconds=2.0,
)

SURGE = Scenario(
    name="surge",
    title="Surge: 2,000 fans in a shuffled pre-queue, then 5 a second",
    fans=200,
    arrivals_per_second=5.0,
    checkout_mean_seconds=2.0,
    capacity=40,
    prequeue_fans=2000,
    time_limit_seconds=900.0,
)

SLOWDOWN = Scenario(
    name="slowdown",
    title="Slowdown: checkouts take twice as long from 20 s on",
    fans=200,
    arrivals_per_second=4.0,
    checkout_mean_seconds=1.5,
    actions=(StaffAction(at=20.0, kind="checkout_factor", factor=2.0),),
)

PAUSE = Scenario(
    name="pause",
    title="Pause: staff pause the line for 10 s at 20 s",
    fans=160,
    arrivals_per_second=4.0,
    checkout_mean_seconds=2.0,
    actions=(StaffAction(at=20.0, kind="pause"), StaffAction(at=30.0, kind="resume")),
)

CHANGES = Scenario(
    name="changes",
    title="Changes: a paced sale whose rate is cut, then its capacity raised",
    fans=200,
    arrivals_per_second=4.0,
    checkout_mean_seconds=1.0,
    capacity=20,
    rate_per_minute=180,
    actions=(
        StaffAction(at=15.0, kind="set", rate_per_minute=120),
        StaffAction(at=35.0, kind="set", capacity=40, rate_per_minute=240),
    ),
)

TIERS = Scenario(
    name="tiers",
    title="Tiers: a fan club (strict priority, 20%) ahead of everyone else",
    fans=200,
    arrivals_per_second=4.0,
    checkout_mean_seconds=2.0,
    capacity=6,
    tiers=(
        TierPlan("Fan club", priority=10, code="FANCLUB-2026", fraction=0.2),
        TierPlan("General", priority=100, fraction=0.8),
    ),
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s for s in (STEADY, SURGE, SLOWDOWN, PAUSE, CHANGES, TIERS)
}
