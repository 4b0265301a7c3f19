#!/usr/bin/env python3
"""Check a waiting room's draw without trusting the room.

    python3 verify_draw.py FILE        (FILE may be - for standard input)

FILE holds what the room publishes (docs/api.md, "The draw"), JSON documents one after the
other, as ``curl ... >> draw.json`` leaves them:

- the draw, ``GET /api/v1/events/{slug}/draw`` (once drawn: its seed, list root and count);
- optionally the on-sale, ``GET /api/v1/events/{slug}``, whose ``draw_seed_sha256`` is the
  commitment published from creation (then it must be the draw's too);
- every page of its list, ``GET /api/v1/events/{slug}/draw/registrations`` and each ``next``;
- any number of inclusion proofs, ``GET /api/v1/registrations/{id}/proof``.

It recomputes, by the rules stated in docs/api.md:

1. the draw's seed: its SHA-256 against the commitment published when the on-sale was created
   (``draw_seed_sha256``, in the draw's answer and the on-sale's);
2. the list commitment: leaves ``sha256("leaf:<tier>:<hash>")`` in ascending order of the
   hashes, a node ``sha256(left + right)`` of the hex digests as text, an odd node going up
   unchanged (64 zeros for an empty list), against the published root and count;
3. the draw: per tier, the hashes sorted by ``sha256(seed + ":" + hash)``; the first
   ``winners`` win, the next ``waitlist`` wait in that order; against each registration's
   published outcome and rank;
4. each proof: from its leaf up its siblings to the published root.

Exit status: 0 all of it holds; 1 something does not (named); 2 bad usage or an unreadable
file. Only Python's standard library is used: this file runs on its own, with Python 3.9+.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from typing import Any

EMPTY_ROOT = "0" * 64


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def leaf(tier: str, registration_hash: str) -> str:
    return sha256(f"leaf:{tier}:{registration_hash}")


def merkle_root(leaves: list[str]) -> str:
    if not leaves:
        return EMPTY_ROOT
    level = leaves
    while len(level) > 1:
        paired = [sha256(level[i] + level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def proof_root(start: str, steps: list[dict[str, str]]) -> str:
    node = start
    for step in steps:
        if step["side"] == "left":
            node = sha256(step["hash"] + node)
        else:
            node = sha256(node + step["hash"])
    return node


def documents(text: str) -> list[Any]:
    decoder = json.JSONDecoder()
    found, at = [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return found
        value, at = decoder.raw_decode(text, at)
        found.append(value)


class Failed(Exception):
    pass


def verify(docs: list[Any], out: Any) -> None:
    draws = [d for d in docs if isinstance(d, dict) and "draw_seed" in d]
    if len(draws) != 1:
        raise Failed("the file must hold the draw (GET .../draw) exactly once")
    drawn = draws[0]
    if drawn.get("state") != "drawn" or not drawn.get("draw_seed"):
        raise Failed("the draw has not taken place: no seed revealed yet")
    seed = drawn["draw_seed"]
    committed = {drawn["draw_seed_sha256"]} | {
        d["draw_seed_sha256"]
        for d in docs
        if isinstance(d, dict) and "draw_seed_sha256" in d and "draw_seed" not in d
    }
    if len(committed) != 1:
        raise Failed("the on-sale and the draw publish different draw_seed_sha256 commitments")
    if sha256(seed) != drawn["draw_seed_sha256"]:
        raise Failed("the revealed draw_seed does not hash to the draw_seed_sha256 committed")
    print(f"seed: sha256 is the commitment {drawn['draw_seed_sha256']}: holds", file=out)
    listed = [r for d in docs if isinstance(d, dict) and "results" in d for r in d["results"]]
    hashes = [r["hash"] for r in listed]
    if len(set(hashes)) != len(hashes):
        raise Failed("a hash is listed twice (a page given twice?)")
    if len(listed) != drawn["count"]:
        raise Failed(f"{len(listed)} registrations in the file, the draw says {drawn['count']}")
    ordered = sorted(listed, key=lambda r: r["hash"])
    root = merkle_root([leaf(r["tier"], r["hash"]) for r in ordered])
    if root != drawn["list_root"]:
        raise Failed(f"the list's Merkle root is {root}, the room published {drawn['list_root']}")
    print(f"list: {len(listed)} registrations, root {root}: holds", file=out)
    by_tier: dict[str, list[dict[str, Any]]] = {}
    for r in listed:
        by_tier.setdefault(r["tier"], []).append(r)
    winners, waitlist = drawn["winners"], drawn["waitlist"]
    for tier in sorted(by_tier):
        order = sorted(by_tier[tier], key=lambda r: sha256(f"{seed}:{r['hash']}"))
        for rank, r in enumerate(order, start=1):
            expected = "won" if rank <= winners else "waitlisted"
            if rank > winners + waitlist:
                expected = "lost"
            if (r["outcome"], r["rank"]) != (expected, rank):
                raise Failed(
                    f"tier {tier!r}: {r['hash']} is published {r['outcome']} at rank "
                    f"{r['rank']}, the draw makes it {expected} at rank {rank}"
                )
        won = [r["hash"] for r in order[:winners]]
        waiting = [r["hash"] for r in order[winners : winners + waitlist]]
        print(f"tier {tier!r}: {len(won)} winners, {len(waiting)} waitlisted: holds", file=out)
        for r in order[:winners]:
            print(f"  won {r['hash']}", file=out)
        for r in order[winners : winners + waitlist]:
            print(f"  waitlisted {r['hash']}", file=out)
    for proof in (d for d in docs if isinstance(d, dict) and "proof" in d):
        reached = proof_root(leaf(proof["tier"], proof["hash"]), proof["proof"])
        if reached != drawn["list_root"] or proof["list_root"] != drawn["list_root"]:
            raise Failed(f"the inclusion proof of {proof['hash']} does not reach the list root")
        print(f"proof of {proof['hash']} ({proof['outcome']}): holds", file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check a waiting room's draw.")
    parser.add_argument("file", help="the draw, its list pages and proofs; - for stdin")
    args = parser.parse_args(argv)
    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8") as handle:
                text = handle.read()
        docs = documents(text)
    except (OSError, ValueError) as exc:
        print(f"cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    try:
        verify(docs, sys.stdout)
    except Failed as exc:
        print(f"FAILED: {exc}")
        return 1
    except (KeyError, TypeError) as exc:
        print(f"cannot read {args.file}: a document lacks {exc}", file=sys.stderr)
        return 2
    print("the draw holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
