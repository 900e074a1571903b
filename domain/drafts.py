"""Frozen objects made cheaply: a *draft* class of a frozen slotted class's layout.

A frozen dataclass sets each field of a new or copied instance through
``object.__setattr__`` (several times the cost of a plain store). The folds and the
decoders instead make an instance of a draft class, which has the same bases and slots
but takes plain assignment. Once its fields are set, the instance becomes the frozen
class by ``__class__`` assignment, which CPython allows between classes of one layout.
The result is an instance like any other, and as frozen as any.
"""

from __future__ import annotations

from typing import Any

set_class = vars(object)["__class__"].__set__
"""``obj.__class__ = cls`` as a function (a draft becomes its frozen class)."""


def draft_of(cls: type) -> type | None:
    """The draft class of ``cls``, or ``None`` where Python refuses to turn one into a
    ``cls`` (another layout: a ``__dict__``, other slots; another metaclass).

    A frozen dataclass refuses assignment in ``__setattr__`` and ``__delattr__``; the
    draft puts both back, since CPython's fast attribute store needs the generic setter,
    and that setter takes both."""
    namespace: dict[str, Any] = {"__slots__": vars(cls).get("__slots__", ())}
    namespace |= {"__setattr__": object.__setattr__, "__delattr__": object.__delattr__}
    try:
        draft = type(f"{cls.__name__}Draft", cls.__bases__, namespace)
        set_class(object.__new__(draft), cls)
    except TypeError:
        return None
    return draft
