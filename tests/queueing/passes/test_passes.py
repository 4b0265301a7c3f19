import base64
import hashlib
import hmac
import json
from datetime import timedelta
from types import SimpleNamespace

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.test import Client
from django.utils import timezone
from jwt.algorithms import OKPAlgorithm

from queueing.beat import event_tick
from queueing.line import followups
from queueing.models import AuditRecord, PassKey
from queueing.passes.sealing import private_key_open
from queueing.passes.signing import pass_key_rotate
from tests.helpers import entry_of, fans_join, poll, shop_completes, statuses

pytestmark = pytest.mark.django_db


@pytest.fixture
def admitted(make_event):
    event = make_event(capacity=2, rate_per_minute=0)
    tickets = fans_join(event.slug, 3)
    event_tick(event_id=event.id, now=timezone.now())
    return event, tickets, poll(tickets[0])["pass"]


def verify(token, **extra):
    return (
        Client()
        .post("/api/v1/passes/verify", {"pass": token, **extra}, content_type="application/json")
        .json()
    )


def test_the_pass_verifies_offline_with_pyjwt_against_the_jwks(admitted, settings) -> None:
    event, tickets, token = admitted
    jwks = Client().get("/.well-known/jwks.json").json()
    header = jwt.get_unverified_header(token)
    (jwk,) = [k for k in jwks["keys"] if k["kid"] == header["kid"]]
    claims = jwt.decode(
        token,
        OKPAlgorithm.from_jwk(jwk),
        algorithms=["EdDSA"],
        audience=event.slug,
        issuer=settings.WR_PUBLIC_URL,
    )
    assert claims["sub"] == str(entry_of(tickets[0]).public_id)
    assert claims["tier"] == "General"
    assert {"jti", "iat", "nbf", "exp"} <= set(claims)
    assert claims["exp"] - claims["iat"] == event.session_seconds
    # Another event's shop refuses it offline.
    with pytest.raises(jwt.InvalidAudienceError):
        jwt.decode(token, OKPAlgorithm.from_jwk(jwk), algorithms=["EdDSA"], audience="other")


def test_verify_accepts_a_live_pass(admitted) -> None:
    event, tickets, token = admitted
    body = verify(token)
    assert body["valid"] is True
    assert body["event"] == event.slug
    assert body["ticket_id"] == str(entry_of(tickets[0]).public_id)
    assert body["expires_at"]


def test_forged_passes_are_rejected(admitted) -> None:
    _event, _tickets, token = admitted
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    claims = jwt.decode(token, options={"verify_signature": False})
    header = jwt.get_unverified_header(token)
    forged = jwt.encode(
        claims, Ed25519PrivateKey.generate(), algorithm="EdDSA", headers={"kid": header["kid"]}
    )
    assert verify(forged) == {"valid": False, "reason": "bad_signature"}
    unknown_kid = jwt.encode(
        claims, Ed25519PrivateKey.generate(), algorithm="EdDSA", headers={"kid": "nope"}
    )
    assert verify(unknown_kid)["reason"] == "bad_signature"
    hs256 = jwt.encode(
        claims, "secret-guess-" * 4, algorithm="HS256", headers={"kid": header["kid"]}
    )
    assert verify(hs256)["valid"] is False
    head, body, sig = token.split(".")
    tampered = f"{head}.{body[:-2]}AA.{sig}"
    assert verify(tampered)["valid"] is False
    for garbage in ["", "abc", "a.b.c", "x" * 5000]:
        assert verify(garbage)["valid"] is False


def test_expired_completed_and_other_event_passes_are_rejected(admitted, make_event) -> None:
    event, tickets, token = admitted
    assert verify(token, event="some-other-event") == {"valid": False, "reason": "wrong_event"}
    second = poll(tickets[1])["pass"]
    assert shop_completes(token, event.integration_key).status_code == 204
    assert verify(token) == {"valid": False, "reason": "completed"}
    # Expired: the session ran out.
    event_tick(event_id=event.id, now=timezone.now() + timedelta(seconds=event.session_seconds + 5))
    assert verify(second)["valid"] is False
    assert verify(second)["reason"] == "expired"


def test_complete_needs_the_events_integration_key_and_is_idempotent(admitted) -> None:
    event, tickets, token = admitted
    assert shop_completes(token, "wrong").status_code == 401
    assert (
        Client()
        .post("/api/v1/passes/complete", {"pass": token}, content_type="application/json")
        .status_code
        == 401
    )
    assert shop_completes(token, event.integration_key, "abandoned").status_code == 204
    assert shop_completes(token, event.integration_key, "abandoned").status_code == 204
    assert statuses(tickets[:1]) == ["abandoned"]
    assert AuditRecord.objects.filter(action="abandoned").count() == 1
    assert shop_completes("garbage", event.integration_key).status_code == 400
    # The freed slot goes to the next fan.
    event_tick(event_id=event.id, now=timezone.now())
    assert statuses(tickets) == ["abandoned", "admitted", "admitted"]


def test_a_rotated_key_is_published_before_it_signs_and_the_old_one_stays(admitted) -> None:
    from queueing.passes.signing import jwks, pass_issue

    event, tickets, token = admitted
    old_kid = jwt.get_unverified_header(token)["kid"]
    now = timezone.now()
    new_key = pass_key_rotate(now=now, activate_in=timedelta(minutes=10))
    kids = {k["kid"] for k in Client().get("/.well-known/jwks.json").json()["keys"]}
    assert kids == {old_kid, new_key.kid}  # published before it signs anything
    entry = entry_of(tickets[1])

    def issued_at(moment):
        return pass_issue(
            event_slug=event.slug,
            ticket_id=entry.public_id,
            tier="General",
            admitted_at=entry.admitted_at,
            expires_at=entry.pass_expires_at,
            now=moment,
        )

    assert jwt.get_unverified_header(issued_at(now))["kid"] == old_kid
    later = now + timedelta(minutes=11)
    assert jwt.get_unverified_header(issued_at(later))["kid"] == new_key.kid
    # The old key stays in the JWKS while passes it signed may live, then goes.
    assert old_kid in {k["kid"] for k in jwks(now=later)["keys"]}
    assert old_kid not in {k["kid"] for k in jwks(now=later + timedelta(days=1, minutes=1))["keys"]}
    assert verify(token)["valid"] is True


def test_completion_stands_when_the_broker_is_down(admitted, monkeypatch) -> None:
    import kombu.exceptions

    event, tickets, token = admitted

    def broker_down(*args, **kwargs):
        raise kombu.exceptions.OperationalError("broker down")

    monkeypatch.setattr(followups, "current_app", SimpleNamespace(send_task=broker_down))
    from django.test import TestCase

    with TestCase.captureOnCommitCallbacks(execute=True):
        assert shop_completes(token, event.integration_key).status_code == 204
    assert statuses(tickets[:1]) == ["completed"]


# Forged passes built by hand, the attacks JWT libraries have fallen to: each carries the real
# pass's claims (so only its header or signature is wrong) and must be worthless.


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _hand_made(header: dict, claims: dict, sign) -> str:
    signing_input = (
        f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}".encode()
    )
    return f"{signing_input.decode()}.{_b64(sign(signing_input))}"


def _hmac_with(secret: bytes):
    return lambda signing_input: hmac.new(secret, signing_input, hashlib.sha256).digest()


def _unsigned(signing_input: bytes) -> bytes:
    return b""


ATTACKER = Ed25519PrivateKey.generate()
ATTACKER_JWK = {**json.loads(OKPAlgorithm.to_jwk(ATTACKER.public_key())), "kid": "attacker"}


def _forgeries(token: str) -> dict[str, str]:
    claims = jwt.decode(token, options={"verify_signature": False})
    kid = jwt.get_unverified_header(token)["kid"]
    (published,) = [k for k in Client().get("/.well-known/jwks.json").json()["keys"]]
    public = OKPAlgorithm.from_jwk(published)
    raw_public = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    pem_public = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    attacker = ATTACKER.sign
    attacker_der = ATTACKER.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return {
        "alg none, real kid": _hand_made({"alg": "none", "kid": kid}, claims, _unsigned),
        "alg none, no kid": _hand_made({"alg": "none", "typ": "JWT"}, claims, _unsigned),
        "alg None": _hand_made({"alg": "None", "kid": kid}, claims, _unsigned),
        "alg none with the real signature": ".".join(
            [_b64(json.dumps({"alg": "none", "kid": kid}).encode()), *token.split(".")[1:]]
        ),
        "HS256, raw public key": _hand_made(
            {"alg": "HS256", "kid": kid}, claims, _hmac_with(raw_public)
        ),
        "HS256, the JWKS x": _hand_made(
            {"alg": "HS256", "kid": kid}, claims, _hmac_with(published["x"].encode())
        ),
        "HS256, the JWK JSON": _hand_made(
            {"alg": "HS256", "kid": kid}, claims, _hmac_with(json.dumps(published).encode())
        ),
        "HS256, the PEM public key": _hand_made(
            {"alg": "HS256", "kid": kid}, claims, _hmac_with(pem_public)
        ),
        "kid a path, HS256 empty secret": _hand_made(
            {"alg": "HS256", "kid": "../../../../../../dev/null"}, claims, _hmac_with(b"")
        ),
        "kid a path, attacker key": _hand_made(
            {"alg": "EdDSA", "kid": "/proc/self/environ"}, claims, attacker
        ),
        "kid SQL": _hand_made({"alg": "EdDSA", "kid": "' OR '1'='1"}, claims, attacker),
        "kid SQL union": _hand_made(
            {"alg": "HS256", "kid": "x' UNION SELECT 'secret' --"}, claims, _hmac_with(b"secret")
        ),
        "kid unknown": _hand_made({"alg": "EdDSA", "kid": "f" * 16}, claims, attacker),
        "kid a number": _hand_made({"alg": "EdDSA", "kid": 1}, claims, attacker),
        "kid a list": _hand_made({"alg": "EdDSA", "kid": [kid]}, claims, attacker),
        "kid an object": _hand_made({"alg": "EdDSA", "kid": {"$ne": None}}, claims, attacker),
        "kid null": _hand_made({"alg": "EdDSA", "kid": None}, claims, attacker),
        "jku to the attacker's keys": _hand_made(
            {"alg": "EdDSA", "kid": "attacker", "jku": "https://evil.example/jwks.json"},
            claims,
            attacker,
        ),
        "jku with the real kid": _hand_made(
            {"alg": "EdDSA", "kid": kid, "jku": "https://evil.example/jwks.json"}, claims, attacker
        ),
        "jwk embedded": _hand_made(
            {"alg": "EdDSA", "kid": "attacker", "jwk": ATTACKER_JWK}, claims, attacker
        ),
        "jwk embedded with the real kid": _hand_made(
            {"alg": "EdDSA", "kid": kid, "jwk": {**ATTACKER_JWK, "kid": kid}}, claims, attacker
        ),
        "jwk embedded, no kid": _hand_made({"alg": "EdDSA", "jwk": ATTACKER_JWK}, claims, attacker),
        "x5c with the attacker's key": _hand_made(
            {"alg": "EdDSA", "kid": kid, "x5c": [base64.b64encode(attacker_der).decode()]},
            claims,
            attacker,
        ),
        "x5u to the attacker": _hand_made(
            {"alg": "EdDSA", "kid": kid, "x5u": "https://evil.example/cert.pem"}, claims, attacker
        ),
    }


def test_forged_headers_are_worthless_to_verify_and_complete(admitted) -> None:
    event, tickets, token = admitted
    records = AuditRecord.objects.count()
    forgeries = _forgeries(token)
    for name, forged in forgeries.items():
        verdict = verify(forged)
        assert verdict in (
            {"valid": False, "reason": "bad_signature"},
            {"valid": False, "reason": "malformed"},
        ), name
        refused = shop_completes(forged, event.integration_key)
        assert refused.status_code == 400, name
        assert refused.json()["error"] == "bad_request", name
    # None of them touched the real session, which still verifies.
    assert statuses(tickets[:1]) == ["admitted"]
    assert AuditRecord.objects.count() == records
    assert verify(token)["valid"] is True
    # Sanity: the claims and the room's own key make a pass the room takes, so the refusals
    # above are down to the forged header or signature alone.
    claims = jwt.decode(token, options={"verify_signature": False})
    header = jwt.get_unverified_header(token)
    private = private_key_open(PassKey.objects.get(kid=header["kid"]).private_key_sealed)
    resigned = _hand_made({"alg": "EdDSA", "kid": header["kid"]}, claims, private.sign)
    assert verify(resigned)["valid"] is True
