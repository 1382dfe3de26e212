"""A message Panel queued for a page while an earlier batch was being written is sent
(``bnlab.ui.queued_writes``). The first task, resuming after its write, cleared the
queue's flag before the second task, started for the new message, had run; the second
found no flag and returned, and the message stayed queued (a tab's content that never
came). Here that order is forced: the first write finishes, and the new message is
queued before the first task resumes."""
import asyncio
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

from bokeh.document import Document
from panel.io import document

import bnlab.ui  # noqa: F401  (installs the fix)


class _Socket:
    """A page's socket, its writes finished when the test says."""


class _Connection:
    """A page's connection: its socket, and a protocol whose message is the event."""
    _socket = _Socket()
    protocol = SimpleNamespace(create=lambda kind, events: events[0])


def _run(coroutine):      # on a thread of its own: Playwright may run a loop in this one
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, coroutine).result()


def test_a_message_queued_while_an_earlier_batch_was_written_is_sent():
    sent, writes = [], []

    def write(conn, events=None, msg=None):
        sent.append(msg)
        writes.append(asyncio.get_running_loop().create_future())
        return [writes[-1]]

    async def page():
        doc = Document()
        conn = _Connection()
        document.schedule_write_events(doc, [conn], ["live plots"])    # the first task …
        while not writes:
            await asyncio.sleep(0)                                      # … is writing
        writes[0].set_result(None)           # its write ends: it resumes next, and then …
        document.schedule_write_events(doc, [conn], ["tabs"])          # … the second task
        for _ in range(20):
            await asyncio.sleep(0)
            for write_done in writes:
                if not write_done.done():
                    write_done.set_result(None)
        return doc                           # kept alive while the tasks run

    document.extra_socket_handlers[_Socket] = write
    try:
        _run(page())
    finally:
        del document.extra_socket_handlers[_Socket]
    assert sent == ["live plots", "tabs"]
