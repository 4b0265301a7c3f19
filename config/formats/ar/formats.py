# The room writes Arabic pages with Latin digits (README "Languages": Django never writes
# Arabic-Indic digits, so the page's script asks Intl.NumberFormat for "ar-u-nu-latn" to match).
# With Latin digits CLDR separates thousands with a comma and decimals with a dot; Django's own
# Arabic formats have them the other way round. Django has no date formats for Arabic: these
# read day, month name, year.
THOUSAND_SEPARATOR = ","
DECIMAL_SEPARATOR = "."
DATE_FORMAT = "j F Y"
DATETIME_FORMAT = "j F Y، H:i"
TIME_FORMAT = "H:i"
SHORT_DATE_FORMAT = "d/m/Y"
SHORT_DATETIME_FORMAT = "d/m/Y H:i"
NUMBER_GROUPING = 3
