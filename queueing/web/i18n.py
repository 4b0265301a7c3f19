"""The fans' pages in their language: the catalog their script translates plurals with."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import translation
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_safe
from django.views.i18n import JavaScriptCatalog

# The "djangojs" domain of the room's own locale folder only (locale/<lang>/djangojs.po, the
# strings waiting.js passes to ngettext): "queueing" has no locale folder of its own, and naming
# a package keeps the catalog from harvesting every installed app's (the admin's) messages.
_catalog = JavaScriptCatalog.as_view(packages=["queueing"])

# Language in the path: the page names the catalog of the language it was rendered in, so page
# and script cannot disagree, and each language's catalog can be cached like a static file.
_LANGUAGES = frozenset(code for code, _name in settings.LANGUAGES)


@require_safe
def script_catalog(request: HttpRequest, lang: str) -> HttpResponse:
    """``django.ngettext`` and the language's own plural rule (its catalog's Plural-Forms), so
    the script says "about 5 minutes" as the server would for any number, in any language."""
    if lang not in _LANGUAGES:
        raise Http404("No such language")
    with translation.override(lang):
        response = _catalog(request)
    response["Content-Language"] = lang
    # Catalogs change only with a deployment; an hour's staleness at worst.
    patch_cache_control(response, public=True, max_age=3600)
    return response
