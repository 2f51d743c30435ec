"""The one error type of the codec: a usage error (a ``ValueError``) that knows where in the text it happened."""
from __future__ import annotations

from gencoord_env.errors import UsageError


class DSLSyntaxError(UsageError):
    """Text that is not a Short DSL record (or not a GenCoord-JSON record).

    Carries ``msg`` (what was wrong and what was expected there), the text ``doc``, the 0-based
    ``offset`` and the 1-based ``line`` and ``column`` of that offset. An agent's bad output is data,
    so callers turn this into ``FailureCode.PARSE_FAILURE`` rather than letting it propagate.

    >>> str(DSLSyntaxError("expected '('", "SELF x", 6))
    "expected '(' (at line 1, column 7, offset 6)"
    """

    def __init__(self, msg: str, doc: str, offset: int) -> None:
        line = doc.count("\n", 0, offset) + 1
        column = offset - doc.rfind("\n", 0, offset)
        super().__init__(f"{msg} (at line {line}, column {column}, offset {offset})")
        self.msg = msg
        self.doc = doc
        self.offset = offset
        self.line = line
        self.column = column

    def __reduce__(self) -> tuple[type[DSLSyntaxError], tuple[str, str, int]]:
        # The default pickling passes only str(self) back to __init__; keep the three real arguments.
        return (type(self), (self.msg, self.doc, self.offset))
