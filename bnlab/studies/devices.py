"""Running independent pieces of a study (surface blocks, AIS grid points) on every
local JAX device at once.

A *batch* stacks independent inputs along a leading axis; ``sharded`` splits that axis
evenly over a one-dimensional device mesh (``jax.shard_map``) and each device runs its
share one item after another (``lax.map``), so every item is computed by the same
per-device computation whatever the number of devices (XLA compiles each device
count's program on its own, so values may differ in the last bits). On a
CPU, ``XLA_FLAGS=--xla_force_host_platform_device_count=K`` makes K devices that run
their shares on K cores at the same time; on a GPU machine the devices are the GPUs.
"""
from __future__ import annotations

from typing import Callable

import jax
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from .._runtime import exported
from .._runtime.compiled import CompiledCache

__all__ = ["local_devices", "sharded", "pad_to", "AXIS"]

AXIS = "batch"
_SHARDED = CompiledCache(maxsize=16)


def local_devices(devices=None) -> tuple:
    """The devices to use: all of this process's (None), the first k (an int), or the
    given sequence of ``jax.Device``."""
    available = jax.local_devices()
    if devices is None:
        return tuple(available)
    if isinstance(devices, (int, np.integer)):
        if not 1 <= devices <= len(available):
            raise ValueError(f"devices must be between 1 and the {len(available)} local "
                             f"device(s) of this process, got {devices}")
        return tuple(available[:int(devices)])
    devices = tuple(devices)
    if not devices or not all(isinstance(d, jax.Device) for d in devices):
        raise ValueError("devices must be None, a count, or a non-empty sequence of jax devices")
    return devices


def sharded(fn: Callable, devices: tuple, n_batched: int, key, mapped: bool = True,
            export: bool = False) -> Callable:
    """jit of ``fn`` mapped over the leading axis of its first ``n_batched`` arguments,
    that axis split over ``devices`` (its length must be a multiple of their number);
    the remaining arguments (pytrees) are replicated. Outputs keep the leading axis.
    With ``mapped=False`` ``fn`` takes the batch itself (its leading axis): each device
    calls it once on its share (``studies.surfaces.batched``'s vmapped programs). Compiled once
    per (``key``, devices, mapped). With ``export``, ``key`` describes the program
    completely (its ``repr`` is reproducible) and calls go through its stored
    ``jax.export`` (``bnlab._runtime.exported``), so a new process neither traces nor
    lowers it."""
    def build():
        mesh = Mesh(np.array(devices), (AXIS,))

        def per_device(*args):
            batched, rest = args[:n_batched], args[n_batched:]
            if not mapped:
                return fn(*batched, *rest)
            return jax.lax.map(lambda xs: fn(*xs, *rest), batched)

        def call(*args):
            specs = (PartitionSpec(AXIS),) * n_batched + (PartitionSpec(),) * (len(args) - n_batched)
            return jax.shard_map(per_device, mesh=mesh, in_specs=specs,
                                 out_specs=PartitionSpec(AXIS), check_vma=False)(*args)

        return jax.jit(call)

    jitted = _SHARDED.get((key, tuple(devices), n_batched, mapped), build)
    if not export:
        return jitted
    program = ("sharded", key, n_batched, mapped)
    return lambda *args: exported.call(jitted, program, args, devices)


def pad_to(items: list, multiple: int) -> list:
    """``items`` extended to a multiple of ``multiple`` by repeating its last entry (the
    repeats are computed and thrown away: every device gets the same share)."""
    extra = -len(items) % multiple
    return list(items) + [items[-1]] * extra
