"""The few HTML snippets the lab wraps around text. The text is always escaped: error
messages quote user data (CSV column names and cells), and a browser must show them as
text, never run them."""
from __future__ import annotations

from html import escape


def error(message) -> str:
    """A warning line for an error message (``<span class="bn-error">``)."""
    return f'<span class="bn-error">⚠ {escape(str(message))}</span>'


def reason(message) -> str:
    """A note on why a control is disabled (``<span class="bn-reason">``)."""
    return f'<span class="bn-reason">{escape(str(message))}</span>'
