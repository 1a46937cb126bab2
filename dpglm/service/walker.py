"""A generic state walker: an object graph to JSON plus named arrays, and back (docs/service.md, "Checkpoints").

No pickle. Each value becomes JSON, or a tagged JSON node:

- ``ndarray`` (numeric or bool dtypes only) → a named array, saved in an ``.npz`` read
  back with ``allow_pickle=False``;
- ``numpy.random.Generator`` → its bit generator's name, ``state`` and seed sequence;
- ``Fraction``, ``Decimal``, numpy scalars, tuples, dicts with non-str keys, sets, enums, classes,
  module-level functions and bound methods → tagged nodes; a closure defined in our code
  → its qualified name (its code is found in the outer function's) and its cells;
  a dict keyed by ``id()`` of its values (a mechanism's grants) → its values, rekeyed;
  a ``WeakValueDictionary`` (a cache for messages) → restored empty;
- a registered GLM family → its name;
- the ledger → ``{"__ledger__"}`` and an account → its path: they are not written; the
  ledger given at restore (opened on the same journal) takes their place. Only the
  policy's ledger is: another ledger or an account of one is refused (a restore would
  put the policy's ledger in its place);
- any other object whose class lives in ``dpglm``, ``mechanisms`` or ``accounting`` → its
  class and attributes (``__dict__`` and ``__slots__``), rebuilt without ``__init__``.

Shared references stay shared (one generator used by two mechanisms is one generator after
a restore), cycles are kept. Anything else (a lambda, a closure, a lock, a file, an object of
another package) is refused with a :class:`StateError` naming its attribute path, so a new
policy is either saved whole or not at all.
"""

from __future__ import annotations

import enum
import importlib
import types
import weakref
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = ["StateError", "decode", "encode"]

_OWN = ("dpglm.", "mechanisms.", "accounting.")
_FUNCTION_MODULES = _OWN + ("numpy", "scipy", "math", "builtins")


class StateError(TypeError):
    """The walker met state it does not understand (the message names the attribute path)."""


def _qualname(obj: Any) -> str:
    return f"{obj.__module__}:{obj.__qualname__}"


def _resolve(name: str) -> Any:
    module, _, qual = name.partition(":")
    if not module.startswith(_FUNCTION_MODULES):
        raise StateError(f"checkpoint names {name!r}, outside dpglm, mechanisms, accounting, numpy, scipy, math")
    value: Any = importlib.import_module(module)
    for part in qual.split("."):
        value = getattr(value, part)
    return value


def _closure(name: str, cells: list[Any], defaults: Any) -> types.FunctionType:
    """The nested function ``module:outer.<locals>.inner`` with ``cells``: its code found in the outer's constants."""
    module, _, qual = name.partition(":")
    outer = _resolve(f"{module}:{qual.split('.<locals>.')[0]}")
    stack = [getattr(outer, "__code__", None)]
    while stack:
        code = stack.pop()
        if code is None:
            continue
        if code.co_qualname == qual:
            glob = importlib.import_module(module).__dict__
            return types.FunctionType(code, glob, code.co_name, defaults,
                                      tuple(types.CellType(c) for c in cells))
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    raise StateError(f"checkpoint names the nested function {name!r}, which this version does not define")


def _attributes(obj: Any) -> dict[str, Any]:
    out = dict(vars(obj)) if hasattr(obj, "__dict__") else {}
    for klass in type(obj).__mro__:
        for slot in getattr(klass, "__slots__", ()):
            if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                out[slot] = getattr(obj, slot)
    return out


class _Encoder:
    def __init__(self, ledger: Any) -> None:
        self.ledger = ledger
        self.arrays: dict[str, np.ndarray] = {}
        self.paths: dict[str, str] = {}  # where each saved array was met (for messages)
        self.memo: dict[int, int] = {}
        self.keep: list[Any] = []  # ids stay valid while walking

    def ref(self, obj: Any) -> dict[str, Any] | None:
        n = self.memo.get(id(obj))
        return None if n is None else {"__ref__": n}

    def register(self, obj: Any) -> int:
        n = len(self.memo)
        self.memo[id(obj)] = n
        self.keep.append(obj)
        return n

    def encode(self, value: Any, where: str) -> Any:  # noqa: C901 - one branch per kind, in order
        from accounting.account import Account
        from accounting.ledger import Ledger

        if value is None or isinstance(value, (bool, str)):
            return value
        if type(value) in (int, float):
            return value
        if isinstance(value, np.generic):
            if value.dtype.kind not in "biuf":
                raise StateError(f"{where}: numpy scalar of dtype {value.dtype} is not saved")
            return {"__npscalar__": value.dtype.str, "value": value.item()}
        if isinstance(value, Fraction):
            return {"__fraction__": str(value)}
        if isinstance(value, Decimal):
            return {"__decimal__": str(value)}
        if isinstance(value, enum.Enum):
            return {"__enum__": _qualname(type(value)), "name": value.name}
        if isinstance(value, type):
            return {"__type__": _qualname(value)}
        seen = self.ref(value)
        if seen is not None:
            return seen
        if isinstance(value, (Ledger, Account)) and (value if isinstance(value, Ledger) else value._ledger) \
                is not self.ledger:
            raise StateError(f"{where}: a ledger other than the policy's (one ledger per checkpoint; a restore "
                             "would grant its budget again)")
        if isinstance(value, Ledger):
            return {"__ledger__": True}
        from dpglm.glm import GLMFamily, get_family

        if isinstance(value, GLMFamily):  # a public constant: by its registry name, if it is the registered one
            if get_family(value.name) is not value:
                raise StateError(f"{where}: a GLMFamily not in the registry ({value.name!r}) is not saved")
            return {"__family__": value.name}
        if isinstance(value, Account):
            return {"__account__": value.path}
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "biuf":
                raise StateError(f"{where}: array of dtype {value.dtype} is not saved (numbers only, no pickle)")
            n = self.register(value)
            self.arrays[f"a{n}"] = value
            self.paths[f"a{n}"] = where
            return {"__array__": f"a{n}", "ro": not value.flags.writeable, "id": n}
        if isinstance(value, np.random.Generator):
            n = self.register(value)
            bits = value.bit_generator
            seed = _seed_json(bits.seed_seq)
            return {"__generator__": type(bits).__name__, "state": bits.state, "seed": seed, "id": n}
        if isinstance(value, np.random.SeedSequence):
            return {"__seedseq__": _seed_json(value)}
        return self.composite(value, where)

    def composite(self, value: Any, where: str) -> Any:
        """Containers, functions and our objects (:meth:`encode` did scalars, arrays and generators)."""
        if isinstance(value, (list, set, frozenset)) or (isinstance(value, tuple) and not hasattr(value, "_fields")):
            tag = {list: "__list__", tuple: "__tuple__", set: "__set__", frozenset: "__frozenset__"}.get(type(value))
            if tag is None:
                raise StateError(f"{where}: a {type(value).__name__} is not saved")
            n = self.register(value)
            return {tag: [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)], "id": n}
        if isinstance(value, weakref.WeakValueDictionary):  # a weak cache (e.g. spent receipts, for messages)
            return {"__weakcache__": True}
        if type(value) is dict and value and all(type(k) is int and k == _keyed_id(v) for k, v in value.items()):
            n = self.register(value)  # keyed by id(): the ids are new after a restore, rebuilt from the values
            return {"__idmap__": [self.encode(v, f"{where}[id]") for v in value.values()], "id": n}
        if type(value) is dict:
            n = self.register(value)
            if all(isinstance(k, str) for k in value):
                return {"__dict__": {k: self.encode(v, f"{where}[{k!r}]") for k, v in value.items()}, "id": n}
            return {"__items__": [[self.encode(k, f"{where}.key"), self.encode(v, f"{where}[{k!r}]")]
                                  for k, v in value.items()], "id": n}
        if isinstance(value, types.MethodType):
            return {"__method__": value.__func__.__name__, "self": self.encode(value.__self__, f"{where}.__self__")}
        if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, np.ufunc)):
            name = getattr(value, "__qualname__", getattr(value, "__name__", ""))
            module = getattr(value, "__module__", None) or ("numpy" if isinstance(value, np.ufunc) else "")
            if isinstance(value, types.FunctionType) and "<locals>" in name and "<lambda>" not in name \
                    and module.startswith(_OWN):  # a closure of ours: its code by name, its cells by value
                cells = [self.encode(c.cell_contents, f"{where}.<cell {c_name}>")
                         for c, c_name in zip(value.__closure__ or (), value.__code__.co_freevars, strict=True)]
                return {"__closure__": f"{module}:{name}", "cells": cells,
                        "defaults": self.encode(value.__defaults__, f"{where}.__defaults__")}
            if "<" in name or not module.startswith(_FUNCTION_MODULES):
                raise StateError(f"{where}: {value!r} is a lambda, a closure or a foreign function; not saved")
            return {"__function__": f"{module}:{name}"}
        module = type(value).__module__
        if not module.startswith(_OWN):
            raise StateError(f"{where}: an object of {module}.{type(value).__qualname__} is not saved "
                             "(only dpglm, mechanisms and accounting objects, numbers, arrays and generators)")
        n = self.register(value)
        attrs = {k: self.encode(v, f"{where}.{k}") for k, v in _attributes(value).items()}
        fields = list(value) if isinstance(value, tuple) else None
        node: dict[str, Any] = {"__object__": _qualname(type(value)), "attrs": attrs, "id": n}
        if fields is not None:
            node["items"] = [self.encode(v, f"{where}[{i}]") for i, v in enumerate(fields)]
        return node


def _seed_json(seq: Any) -> dict[str, Any] | None:
    if not isinstance(seq, np.random.SeedSequence):
        return None
    return {"entropy": seq.entropy, "spawn_key": list(seq.spawn_key), "pool_size": seq.pool_size,
            "children": seq.n_children_spawned}


def _seed_from_json(seed: dict[str, Any] | None) -> np.random.SeedSequence | None:
    if seed is None:
        return None
    return np.random.SeedSequence(seed["entropy"], spawn_key=tuple(seed["spawn_key"]), pool_size=seed["pool_size"],
                                  n_children_spawned=seed["children"])


def _keyed_id(value: Any) -> int:
    """``id`` of ``value``, or of its first item for a list/tuple (a ``{id(receipt): [receipt, n]}`` map)."""
    if isinstance(value, (list, tuple)) and value:
        return id(value[0])
    return id(value)


def encode(root: Any, where: str = "policy", *, ledger: Any = None,
           reached: list[Any] | None = None) -> tuple[Any, dict[str, np.ndarray]]:
    """``root`` as a JSON-able tree and its arrays; :class:`StateError` on state it does not understand.

    ``ledger``: the one ledger the state may refer to (its accounts too); None: none.
    ``reached``: if given, extended with every object, array, generator and container the
    walk saved, once each (a checkpoint stops the policies and mechanisms among them).
    """
    encoder = _Encoder(ledger)
    tree = encoder.encode(root, where)
    _check_no_views(encoder.arrays, encoder.paths)
    if reached is not None:
        reached.extend(encoder.keep)
    return tree, encoder.arrays


def _check_no_views(arrays: dict[str, np.ndarray], paths: dict[str, str]) -> None:
    """Refuse two saved arrays over the same memory, one of them writeable (a view kept beside its base).

    Each array is saved on its own and comes back as its own copy, so a view would no
    longer see writes to its base after a restore (the state would silently split).
    Read-only views of read-only data (an env's arm set inside its block) split harmlessly.
    Spans are visited by their first byte; those still open are checked exactly.
    """
    from numpy.lib.array_utils import byte_bounds  # (first byte, one past the last) of any strides

    open_spans: list[tuple[int, str]] = []  # (end, name) of spans that may reach the next start
    for (start, end), name in sorted((byte_bounds(a), name) for name, a in arrays.items() if a.nbytes):
        open_spans = [(stop, other) for stop, other in open_spans if stop > start]
        for _, other in open_spans:
            writeable = arrays[name].flags.writeable or arrays[other].flags.writeable
            if writeable and np.shares_memory(arrays[name], arrays[other]):
                raise StateError(f"{paths[other]} and {paths[name]} share memory (one views the other); "
                                 "a restore would split them: keep one array and index it")
        open_spans.append((end, name))


class _Decoder:
    def __init__(self, arrays: Any, ledger: Any) -> None:
        self.arrays, self.ledger = arrays, ledger
        self.memo: dict[int, Any] = {}

    def decode(self, node: Any) -> Any:  # noqa: C901 - the inverse of _Encoder.encode
        if not isinstance(node, dict):
            return node
        if "__ref__" in node:
            return self.memo[node["__ref__"]]
        if "__npscalar__" in node:
            return np.dtype(node["__npscalar__"]).type(node["value"])
        if "__fraction__" in node:
            return Fraction(node["__fraction__"])
        if "__decimal__" in node:
            return Decimal(node["__decimal__"])
        if "__enum__" in node:
            return _resolve(node["__enum__"])[node["name"]]
        if "__type__" in node:
            return _resolve(node["__type__"])
        if "__family__" in node:
            from dpglm.glm import get_family

            return get_family(node["__family__"])
        if "__ledger__" in node:
            return self.ledger
        if "__account__" in node:
            return self.ledger.account(node["__account__"])
        if "__array__" in node:
            array = np.array(self.arrays[node["__array__"]])
            array.flags.writeable = not node["ro"]
            self.memo[node["id"]] = array
            return array
        if "__generator__" in node:
            return self._generator(node)
        if "__seedseq__" in node:
            return _seed_from_json(node["__seedseq__"])
        for tag, kind in (("__list__", list), ("__set__", set), ("__frozenset__", frozenset), ("__tuple__", tuple)):
            if tag in node:
                if kind is list:
                    out: Any = []
                    self.memo[node["id"]] = out
                    out.extend(self.decode(v) for v in node[tag])
                    return out
                value = kind(self.decode(v) for v in node[tag])
                self.memo[node["id"]] = value
                return value
        if "__weakcache__" in node:
            return weakref.WeakValueDictionary()
        if "__idmap__" in node:
            m: dict[int, Any] = {}
            self.memo[node["id"]] = m
            for v in node["__idmap__"]:
                value = self.decode(v)
                m[_keyed_id(value)] = value
            return m
        if "__dict__" in node or "__items__" in node:
            d: dict[Any, Any] = {}
            self.memo[node["id"]] = d
            items = node["__dict__"].items() if "__dict__" in node else node["__items__"]
            for k, v in items:
                d[self.decode(k)] = self.decode(v)
            return d
        if "__method__" in node:
            return getattr(self.decode(node["self"]), node["__method__"])
        if "__function__" in node:
            return _resolve(node["__function__"])
        if "__closure__" in node:
            return _closure(node["__closure__"], [self.decode(c) for c in node["cells"]], self.decode(node["defaults"]))
        if "__object__" in node:
            return self._object(node)
        raise StateError(f"checkpoint holds a node this version does not know: {sorted(node)[:3]}")

    def _generator(self, node: dict[str, Any]) -> np.random.Generator:
        kind = getattr(np.random, node["__generator__"])
        bits = kind(_seed_from_json(node["seed"]))
        bits.state = node["state"]
        generator = np.random.Generator(bits)
        self.memo[node["id"]] = generator
        return generator

    def _object(self, node: dict[str, Any]) -> Any:
        cls: Any = _resolve(node["__object__"])
        if not isinstance(cls, type) or not cls.__module__.startswith(_OWN):
            raise StateError(f"checkpoint names {node['__object__']!r}, not a dpglm class")
        if "items" in node:  # a NamedTuple: its items are its state
            obj = cls(*[self.decode(v) for v in node["items"]])
            self.memo[node["id"]] = obj
            return obj
        obj = cls.__new__(cls)  # type: ignore[call-overload]
        self.memo[node["id"]] = obj
        for k, v in node["attrs"].items():
            object.__setattr__(obj, k, self.decode(v))
        return obj


def decode(tree: Any, arrays: Any, ledger: Any) -> Any:
    """Inverse of :func:`encode`; ``ledger`` takes the place of the ledger and its accounts."""
    return _Decoder(arrays, ledger).decode(tree)
