"""What JAX compiled, loaded from the persistent cache, and how long each stage took.

JAX reports each stage of making a program through ``jax.monitoring``: tracing to a
jaxpr, lowering to an MLIR module, and the backend step, which either loads the
executable from the persistent compilation cache (a ``cache_hits`` event just before
it) or runs XLA's compiler; bnlab reports loading a stored executable
(``executables``) as a load. ``CompileLog`` listens to those events while it is active,
so a test can say "this process compiled nothing" and a benchmark can say where the
seconds of a first run went, without parsing log text.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import jax

__all__ = ["CompileLog", "ProgramEvents", "CACHE_HIT_EVENT", "EXECUTABLE_LOAD_EVENT"]

_TRACE = "/jax/core/compile/jaxpr_trace_duration"
_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_BACKEND = "/jax/core/compile/backend_compile_duration"
_HIT = "/jax/compilation_cache/cache_hits"
#: bnlab's own event: a program's stored executable loaded (``executables``), with its
#: seconds; counted as a load from the persistent cache
EXECUTABLE_LOAD_EVENT = "/bnlab/executable_load_duration"
CACHE_HIT_EVENT = _HIT

_ACTIVE: list["CompileLog"] = []
_LOCK = threading.Lock()
_INSTALLED = False


@dataclass
class ProgramEvents:
    """One backend step: the program's name, its seconds, and whether it was loaded
    from the persistent cache (True) or compiled by XLA (False)."""
    name: str
    seconds: float
    loaded: bool


@dataclass
class CompileLog:
    """Collects the compile events of every thread while inside ``with CompileLog() as
    log``: ``log.compiled`` (names XLA compiled), ``log.loaded`` (names loaded from the
    cache), ``log.traced`` (names of the functions traced to jaxprs) and the seconds
    spent tracing, lowering, compiling and loading."""
    trace_seconds: float = 0.0
    lower_seconds: float = 0.0
    programs: list = field(default_factory=list)
    traced: list = field(default_factory=list)          # names of the functions traced
    _pending_hits: dict = field(default_factory=dict)   # thread id → hits not yet matched

    @property
    def compiled(self) -> list[str]:
        return [p.name for p in self.programs if not p.loaded]

    @property
    def loaded(self) -> list[str]:
        return [p.name for p in self.programs if p.loaded]

    @property
    def compile_seconds(self) -> float:
        return sum(p.seconds for p in self.programs if not p.loaded)

    @property
    def load_seconds(self) -> float:
        return sum(p.seconds for p in self.programs if p.loaded)

    def __enter__(self):
        _install()
        with _LOCK:
            _ACTIVE.append(self)
        return self

    def __exit__(self, *exc):
        with _LOCK:
            _ACTIVE.remove(self)

    def _on_event(self, event):
        if event == _HIT:             # reported in the thread whose backend step follows
            tid = threading.get_ident()
            self._pending_hits[tid] = self._pending_hits.get(tid, 0) + 1

    def _on_duration(self, event, seconds, name):
        if event == _TRACE:
            self.trace_seconds += seconds
            self.traced.append(str(name))
        elif event == _LOWER:
            self.lower_seconds += seconds
        elif event == EXECUTABLE_LOAD_EVENT:
            self.programs.append(ProgramEvents(str(name), seconds, True))
        elif event == _BACKEND:
            tid = threading.get_ident()
            loaded = self._pending_hits.get(tid, 0) > 0
            self._pending_hits[tid] = self._pending_hits.get(tid, 0) - loaded
            self.programs.append(ProgramEvents(str(name), seconds, loaded))


def _event(event, **_):
    with _LOCK:
        for log in _ACTIVE:
            log._on_event(event)


def _duration(event, seconds, fun_name="?", **_):
    with _LOCK:
        for log in _ACTIVE:
            log._on_duration(event, seconds, fun_name)


def _install():
    """Register the two listeners once per process (JAX keeps them for its lifetime)."""
    global _INSTALLED
    with _LOCK:
        if not _INSTALLED:
            jax.monitoring.register_event_listener(_event)
            jax.monitoring.register_event_duration_secs_listener(_duration)
            _INSTALLED = True
