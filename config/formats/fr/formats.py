# CLDR (and so the browser's Intl.NumberFormat) groups French thousands with a narrow no-break
# space; Django's own French formats use a no-break space.
THOUSAND_SEPARATOR = "\u202f"
