"""Compiled programs kept as serialised ``jax.export`` modules, so that a new process
skips Python tracing and lowering as well as XLA's compilation.

The persistent compilation cache (``xla_cache``) keeps XLA's binaries, but finds one
only from the lowered module, so every new process still traces and lowers each
program first: for a surface's block solver that is seconds, more than loading the
binary and often more than running it. ``call`` exports a program once
(``jax.export.export``: the StableHLO module, its argument and result trees), stores
the serialised bytes in bnlab's disk cache (``disk_cache``, kind ``exported``), and
compiles ``jax.jit(exported.call)`` for the call's device: a one-node trace and a
lowering that inlines the stored module, whose binary the persistent cache supplies
where it has one. That compiled program's executable is stored too (``executables``),
and a later process loads it without tracing or lowering anything. The module is the
one ``jax.jit`` would lower, so the results are the same bits.

The key (``program_digest``) holds everything the module depends on: the caller's key
(its ``repr``, refused where it shows an object's address: only values that describe
the program, e.g. ``Engine``'s structure key, may name it), the arguments' tree,
shapes, dtypes and weak types, the platform and device count, JAX's and jaxlib's
versions, the configuration that changes lowering (x64, matmul precision, PRNG), and a
SHA-256 of bnlab's own source files (the program is bnlab's code, baked in). Entries
follow the disk cache's trust model: a directory that another user owns or that group or
others can write is neither read nor written, and an entry that fails its checksum or
does not deserialise is recomputed (``CacheWarning``). Trees may hold bnlab's
NamedTuples and pytree classes (an engine's state, a Markov prior): they are registered
with ``jax.export``'s serialisation by module and name (a class's static data as JSON),
stored with the module, and a new process imports them from bnlab's modules only. Only
programs on one device are exported (a multi-device module must be called with its
shardings), and only calls outside a trace;
the rest, and any program whose trees ``jax.export`` cannot serialise, run as plain
``jax.jit``.
``BNLAB_EXPORT_CACHE=0`` (or the persistent compilation cache being off) turns it off.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
import threading
import warnings
from pathlib import Path

import jax
import numpy as np

from . import disk_cache, executables
from .compiled import CompiledCache

__all__ = ["call", "enabled", "program_digest", "source_digest", "KIND", "MAX_ENTRIES"]

KIND = "exported"
#: stored modules kept (the least recently written beyond it are removed): a key holds
#: bnlab's source digest, so each edit of the code leaves the old entries unused
MAX_ENTRIES = 256
#: configuration options that change how JAX lowers a program
_CONFIG = ("jax_enable_x64", "jax_default_matmul_precision", "jax_default_prng_impl",
           "jax_threefry_partitionable", "jax_use_shardy_partitioner")
_OFF = {"0", "false", "no", "off"}

#: the wrappers in use: as many as bnlab's caches hold programs — the engines' (48, a run,
#: predict and log_predictive each), ``studies.devices``'s sharded programs (16: the
#: scan and vmap solvers, AIS's chunks), G-KL's bounds on a grid (8) and its inferences'
#: (16, four programs each) — so that a long-lived process (the lab) does not reload the
#: programs it switches between
_PROGRAMS = CompiledCache(maxsize=232)


def enabled() -> bool:
    """Programs are exported unless ``BNLAB_EXPORT_CACHE`` is 0/false/no/off or JAX's
    persistent compilation cache is off (without it a new process compiles anyway)."""
    if os.environ.get("BNLAB_EXPORT_CACHE", "1").strip().lower() in _OFF:
        return False
    return bool(jax.config.jax_compilation_cache_dir)


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """SHA-256 over every ``.py`` file of the bnlab package (path and bytes)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _stable(key) -> str | None:
    """``repr(key)``, or None where it shows an object's address (not reproducible in
    another process, nor a description of the program)."""
    text = repr(key)
    return None if " at 0x" in text else text


#: digests already computed in this process, by ``_signature``: a program called per
#: iteration (the lab's step) would otherwise spell out every argument's type per call
#: (``jax.typeof``'s text: a quarter of a millisecond for an engine's state)
_DIGESTS: dict = {}
_MAX_DIGESTS = 4096


def _leaf_signature(leaf):
    """What of an argument the program depends on, cheaply: a JAX array's abstract
    value (shape, dtype, weak type; hashable); any other leaf's as text."""
    if isinstance(leaf, jax.Array):
        return leaf.aval
    return str(jax.typeof(leaf))


def program_digest(key, args, devices) -> str | None:
    """The disk key of the program ``key`` called with ``args`` on ``devices``; None
    where ``key`` does not describe the program (``_stable``)."""
    stable = _stable(key)
    if stable is None:
        return None
    leaves, tree = jax.tree_util.tree_flatten(args)
    device = (devices[0].platform, getattr(devices[0], "device_kind", ""), str(len(devices)))
    config = tuple(f"{name}={getattr(jax.config, name, None)}" for name in _CONFIG)
    code = source_digest()
    signature = (stable, tree, tuple(map(_leaf_signature, leaves)), device, config, code)
    try:
        return _DIGESTS[signature]
    except KeyError:
        pass
    except TypeError:                     # a node's static data is not hashable
        signature = None
    avals = [str(jax.typeof(leaf)) for leaf in leaves]        # "~float64[]": weak type
    versions = [jax.__version__, jax.lib.__version__]
    digest = disk_cache.make_key(stable, str(tree), avals, list(device), versions,
                                 list(config), code)
    if signature is not None:
        if len(_DIGESTS) >= _MAX_DIGESTS:
            _DIGESTS.clear()
        _DIGESTS[signature] = digest
    return digest


def call(jitted, key, args, devices=None):
    """``jitted(*args)`` on ``devices`` (default: those of the first argument that is a
    JAX array, else the default device), through its stored export where there is one
    (else exported now and stored); plain ``jitted(*args)`` where exporting is off, the
    program spans several devices, ``key`` does not describe it, or it is called inside
    a trace (under ``vmap``, ``grad`` or another ``jit``, where it is part of a larger
    program)."""
    leaves = jax.tree_util.tree_leaves(args)
    if not enabled() or any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        return jitted(*args)
    if devices is None:
        placed = [leaf for leaf in leaves if isinstance(leaf, jax.Array)]
        devices = tuple(placed[0].devices()) if placed else tuple(jax.devices()[:1])
    if len(devices) != 1:
        return jitted(*args)
    digest = program_digest(key, args, devices)
    if digest is None:
        return jitted(*args)
    device = devices[0]
    program = _PROGRAMS.get((digest, device.id),
                            lambda: _program(digest, jitted, args, device))
    return program(*args)


def _program(digest, jitted, args, device):
    """The program compiled for ``device``: its stored executable, deserialised; else
    its stored export (exported and stored first if there is none, or it is damaged)
    lowered and compiled — XLA's binary from the persistent cache where it is there,
    else compiled and its executable stored; ``jitted`` itself if it cannot be
    exported."""
    exported = _load(digest)
    if exported is None:
        exported = _export(digest, jitted, args, device.platform)
        if exported is None:
            return jitted  # (an error of the program itself is raised again by that call)
    else:
        compiled = executables.load(digest, device, args, exported.out_tree)
        if compiled is not None:
            return compiled

    def exported_program(*a):
        return exported.call(*a)
    placed = jax.tree_util.tree_map(lambda leaf: _on_device(leaf, device), args)
    hits = executables.cache_hits()
    compiled = jax.jit(exported_program).lower(*placed).compile()
    if executables.cache_hits() == hits:        # compiled here, not loaded from the cache
        executables.store(digest, device, compiled, MAX_ENTRIES)
    return compiled


def _export(digest, jitted, args, platform):
    """``jitted``'s export for ``args``, stored, and read back as a later process will
    (a deserialised module's results can differ in weak types, which would change the
    keys of the programs they feed); None if it cannot be serialised."""
    try:
        exported = jax.export.export(jitted, platforms=(platform,))(*args)
        classes = _register(_node_classes(exported.in_tree)
                            | _node_classes(exported.out_tree))
        data = exported.serialize()
        exported = jax.export.deserialize(data)
    except Exception:  # noqa: BLE001 — e.g. a tree export cannot write: run it plain
        return None
    arrays = {"module": np.frombuffer(bytes(data), np.uint8),
              "classes": np.frombuffer(" ".join(classes).encode(), np.uint8)}
    disk_cache.store_newest(KIND, digest, arrays, MAX_ENTRIES)
    return exported


def _on_device(leaf, device):
    """The abstract value of ``leaf`` (shape, dtype, weak type) placed on ``device``."""
    aval = jax.typeof(leaf)
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type,
                                sharding=jax.sharding.SingleDeviceSharding(device))


def _is_namedtuple(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


def _node_classes(tree) -> set:
    """The classes of the treedef ``tree``'s nodes other than Python's containers."""
    found = set()
    data = tree.node_data()
    if data is not None and data[0] not in (dict, list, tuple, type(None)):
        found.add(data[0])
    for child in tree.children():
        found |= _node_classes(child)
    return found


def _tuples(value):
    """JSON's lists back to the tuples a node's static data held."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


_REGISTERED: dict = {}
_LOCK = threading.Lock()


def _register(classes) -> list[str]:
    """Register bnlab's pytree classes with ``jax.export``'s serialisation under
    "module:qualname" — NamedTuples as such, other nodes with their static data written
    as JSON (a class from elsewhere, or static data JSON cannot hold, is a ValueError or
    TypeError: the program is not serialised); returns their names, stored with the
    module so that a new process registers them first."""
    names = []
    for cls in classes:
        name = f"{cls.__module__}:{cls.__qualname__}"
        if not cls.__module__.startswith("bnlab."):
            raise ValueError(f"{name} is not one of bnlab's pytree classes")
        with _LOCK:
            if name not in _REGISTERED:
                if _is_namedtuple(cls):
                    jax.export.register_namedtuple_serialization(cls, serialized_name=name)
                else:
                    jax.export.register_pytree_node_serialization(
                        cls, serialized_name=name,
                        serialize_auxdata=lambda aux: json.dumps(aux).encode(),
                        deserialize_auxdata=lambda raw: _tuples(json.loads(raw)))
                _REGISTERED[name] = cls
        names.append(name)
    return sorted(names)


def _import_classes(names):
    """The pytree classes named "module:qualname", imported from bnlab's modules only."""
    classes = []
    for name in names:
        module, _, qualname = name.partition(":")
        if not module.startswith("bnlab.") or not qualname.isidentifier():
            raise ValueError(f"{name!r} is not one of bnlab's pytree classes")
        cls = getattr(importlib.import_module(module), qualname)
        if not (_is_namedtuple(cls) or hasattr(cls, "tree_unflatten")):
            raise ValueError(f"{name!r} is not a pytree class")
        classes.append(cls)
    return classes


def _load(digest):
    arrays = disk_cache.load(KIND, digest)
    if arrays is None:
        return None
    module = arrays.get("module")
    try:
        if module is None or module.dtype != np.uint8 or module.ndim != 1:
            raise ValueError("no serialised module")
        names = arrays.get("classes", np.zeros(0, np.uint8)).tobytes().decode()
        _register(_import_classes(names.split()))
        return jax.export.deserialize(bytearray(module.tobytes()))
    except Exception as exc:  # noqa: BLE001 — bytes from disk: any failure is a miss
        warnings.warn(f"bnlab cache: ignoring the exported program {digest[:16]}… "
                      f"({type(exc).__name__}: {exc}); exporting it again",
                      disk_cache.CacheWarning, stacklevel=4)
        return None
