"""Framing and strict value encoding shared by the supervisor, the judge and the program process.

Values crossing from the program's process to the judge are encoded as tagged JSON that admits only *exact* builtin
types (``type(v) is int``, never a subclass): a program cannot smuggle an object whose ``__eq__`` always says True,
and the judge compares plain values it decoded itself. JSON decoding of hostile bytes cannot run code.
"""

import json
import math
import os
import struct

FRAME_HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 32 * 1024 * 1024
MAX_DEPTH = 200


class UncheckableValue(Exception):
    """A value that is not made of exact builtin types (or is too deep or too large) and so cannot be judged."""


def read_exact(fd, size):
    """Read exactly ``size`` bytes from ``fd``; None on end of file. Never reads past ``size``."""
    chunks = []
    while size > 0:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(fd):
    """Read one length-prefixed frame; None on end of file or an oversized frame."""
    header = read_exact(fd, FRAME_HEADER.size)
    if header is None:
        return None
    (size,) = FRAME_HEADER.unpack(header)
    if size > MAX_FRAME_BYTES:
        return None
    return read_exact(fd, size) if size else b""


def write_frame(fd, data):
    """Write one length-prefixed frame."""
    payload = FRAME_HEADER.pack(len(data)) + data
    view = memoryview(payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def encode_value(value, depth=0):
    """Tagged-JSON form of a value made only of exact builtin types; raises :class:`UncheckableValue` otherwise."""
    if depth > MAX_DEPTH:
        raise UncheckableValue("value nested too deeply")
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is str:
        return value
    if kind is float:
        return value if math.isfinite(value) else {"F": repr(value)}
    if kind is list:
        return [encode_value(item, depth + 1) for item in value]
    if kind is tuple:
        return {"t": [encode_value(item, depth + 1) for item in value]}
    if kind is dict:
        return {"d": [[encode_value(k, depth + 1), encode_value(v, depth + 1)] for k, v in value.items()]}
    if kind is set or kind is frozenset:
        return {"s" if kind is set else "f": [encode_value(item, depth + 1) for item in value]}
    if kind is bytes:
        return {"b": value.hex()}
    if kind is complex:
        return {"c": [encode_value(value.real), encode_value(value.imag)]}
    raise UncheckableValue(f"a value of type {kind.__name__[:80]} (only builtin values can be checked)")


def decode_value(data, depth=0):
    """Inverse of :func:`encode_value` on decoded JSON; raises :class:`UncheckableValue` on anything malformed."""
    if depth > MAX_DEPTH:
        raise UncheckableValue("value nested too deeply")
    kind = type(data)
    if data is None or kind in (bool, int, str, float):
        return data
    if kind is list:
        return [decode_value(item, depth + 1) for item in data]
    if kind is dict and len(data) == 1:
        ((tag, body),) = data.items()
        try:
            if tag == "F":
                return float(body) if body in ("inf", "-inf", "nan") else _bad(body)
            if tag == "b":
                return bytes.fromhex(body)
            items = [decode_value(item, depth + 1) for item in body]
            if tag == "t":
                return tuple(items)
            if tag == "d":
                return {key: value for key, value in items}
            if tag == "s":
                return set(items)
            if tag == "f":
                return frozenset(items)
            if tag == "c":
                return complex(*items)
        except (TypeError, ValueError) as exc:
            raise UncheckableValue(f"malformed value: {str(exc)[:200]}") from None
    raise UncheckableValue("malformed value")


def _bad(body):
    raise UncheckableValue(f"malformed float {str(body)[:40]!r}")


def dumps(obj):
    """Compact JSON bytes."""
    return json.dumps(obj, separators=(",", ":")).encode()


def loads(data):
    """Parse JSON bytes."""
    return json.loads(data.decode("utf-8", "replace"))
