"""Typed records that cost nothing to define: the engine's internal records, loaded by every
`import cyloop`.

A dataclass compiles its methods from generated source as its module loads, a few tenths of a
millisecond a class, which dozens of records made a large part of the import. These records are
plain classes with their own ``__init__``; what a dataclass would generate besides, equality,
``repr``, pickling and ``replace``, they share from `Record`, which reads their fields from
``_fields``.

The public IR (`cyloop.ir`) and `Settings` stay dataclasses, so that ``dataclasses.replace`` and
``asdict`` work on them, declared with the methods a dataclass generates turned off and written
instead: their own ``__init__``, and `dataclass_repr` and `dataclass_eq`, what a dataclass's
``__repr__`` and ``__eq__`` do.
"""

from __future__ import annotations

import reprlib

__all__ = ["FrozenRecord", "Record", "dataclass_eq", "dataclass_repr", "set_field"]


@reprlib.recursive_repr()
def dataclass_repr(self) -> str:
    """A dataclass's ``__repr__``: its class and each field's."""
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__dataclass_fields__)
    return f"{type(self).__qualname__}({shown})"


def dataclass_eq(self, other):
    """A dataclass's ``__eq__``: the same object, or one of the same class with each field equal
    (compared in order until one is not)."""
    if self is other:
        return True
    if other.__class__ is not self.__class__:
        return NotImplemented
    same = True
    for name in self.__dataclass_fields__:
        same = getattr(self, name) == getattr(other, name)
        if not same:
            break
    return same


class Record:
    """A record of the fields its class names in ``_fields``, in the order its ``__init__``
    takes them: equal to a record of the same class whose fields are equal, unhashable (it may
    change), shown and pickled field by field, as a dataclass with ``eq`` is."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    __hash__ = None

    def _values(self) -> tuple:
        return tuple([getattr(self, name) for name in self._fields])

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__qualname__}({fields})"

    def __reduce__(self):
        return type(self), self._values()

    def replace(self, **changes):
        """A copy with `changes` to its fields (`dataclasses.replace`)."""
        for name in changes:
            if name not in self._fields:
                raise TypeError(f"{type(self).__qualname__} has no field {name!r}")
        return type(self)(*[changes[name] if name in changes else getattr(self, name)
                            for name in self._fields])


set_field = object.__setattr__  # how a FrozenRecord's __init__ sets its fields


class FrozenRecord(Record):
    """A `Record` whose fields are set once, by its ``__init__`` (with `set_field`): hashable by
    its fields, as a frozen dataclass is, and assigning to one raises `AttributeError`."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field {name!r} of a {type(self).__qualname__}")

    def __delattr__(self, name):
        raise AttributeError(f"cannot delete field {name!r} of a {type(self).__qualname__}")
