"""Pass-signing private keys sealed at rest (queueing/passes/sealing.py).

The field is renamed in Python only (its column stays ``private_pem``: no DDL), then every key
stored as plain PEM is sealed under the first WR_PASS_KEY_ENCRYPTION_KEY; backwards, opened
again into PEM. The Fernet calls are written out here rather than imported, so that this
migration means the same whatever the sealing module becomes.
"""

from cryptography.fernet import Fernet, MultiFernet
from cryptography.hazmat.primitives import serialization
from django.conf import settings
from django.db import migrations, models


def _fernet() -> MultiFernet:
    return MultiFernet([Fernet(key) for key in settings.WR_PASS_KEY_ENCRYPTION_KEYS])


def seal(apps, schema_editor) -> None:
    PassKey = apps.get_model("queueing", "PassKey")
    fernet = _fernet()
    for key in PassKey.objects.filter(private_key_sealed__startswith="-----BEGIN"):
        private = serialization.load_pem_private_key(key.private_key_sealed.encode(), None)
        raw = private.private_bytes(
            serialization.Encoding.DER,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        key.private_key_sealed = fernet.encrypt(raw).decode()
        key.save(update_fields=["private_key_sealed"])


def unseal(apps, schema_editor) -> None:
    PassKey = apps.get_model("queueing", "PassKey")
    fernet = _fernet()
    for key in PassKey.objects.exclude(private_key_sealed__startswith="-----BEGIN"):
        raw = fernet.decrypt(key.private_key_sealed.encode())
        private = serialization.load_der_private_key(raw, None)
        key.private_key_sealed = private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        key.save(update_fields=["private_key_sealed"])


class Migration(migrations.Migration):
    dependencies = [("queueing", "0013_audit_sold_out")]

    operations = [
        migrations.AlterField(
            model_name="passkey",
            name="private_pem",
            field=models.TextField(db_column="private_pem"),
        ),
        migrations.RenameField(
            model_name="passkey", old_name="private_pem", new_name="private_key_sealed"
        ),
        migrations.RunPython(seal, unseal, elidable=False),
    ]
