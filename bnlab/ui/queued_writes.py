"""Messages Panel queued for a page while its socket was busy are always sent.

When a held change ends (Panel's ``unlocked``) while a page's socket is writing, or
while earlier messages wait, Panel builds the message at once, queues it in
``panel.io.document._WRITE_MSGS`` under a flag (``_WRITE_BLOCK``) and starts a task,
``_dispatch_msgs``, that sends the queue. That task awaits its writes, and a message
queued meanwhile starts a second task; if the first one resumed before the second had
started, it cleared the flag, and the second, finding no flag, returned without sending:
the message stayed queued until some later change flushed it. On an idle page nothing
did. In the lab that was a tab whose content never came (the Tabs patch, built as the
Live page's plots were still being written), about once in a hundred tab openings under
load, the server having logged the tab and the page showing no error.

``install`` replaces ``_dispatch_msgs`` with one that, finding messages queued and the
flag cleared, sets the flag again and sends them. Panel looks the function up by name
each time it starts the task, so the replacement takes effect for every session."""
from __future__ import annotations

from panel.io import document

_panel_dispatch_msgs = document._dispatch_msgs


async def _dispatch_msgs(doc):
    """Panel's ``_dispatch_msgs``; messages queued for ``doc`` after an earlier task
    cleared the flag are sent too (every queued message has a task started after it)."""
    if doc not in document._WRITE_BLOCK and document._WRITE_MSGS.get(doc):
        document._WRITE_BLOCK[doc] = True
    await _panel_dispatch_msgs(doc)


def install():
    """Use ``_dispatch_msgs`` above for every queued write (idempotent)."""
    document._dispatch_msgs = _dispatch_msgs
