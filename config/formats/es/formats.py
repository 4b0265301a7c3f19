# CLDR (and so the browser's Intl.NumberFormat) groups Spanish thousands with a dot; Django's own
# Spanish formats use a no-break space.
THOUSAND_SEPARATOR = "."
