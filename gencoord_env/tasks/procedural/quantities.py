"""Linear quantities: an amount as ``k*q + c`` of the order quantity, and a fuel amount fixed late."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Lin:
    """A quantity ``k*q + c`` of the cluster's order quantity ``q`` (fractions while a template is drawn,
    whole numbers once it is scaled)."""

    k: Fraction | int = 0
    c: Fraction | int = 0

    def __add__(self, other: Lin) -> Lin:
        return Lin(self.k + other.k, self.c + other.c)

    def __sub__(self, other: Lin) -> Lin:
        return Lin(self.k - other.k, self.c - other.c)

    def scale(self, f: Fraction | int) -> Lin:
        return Lin(self.k * f, self.c * f)

    def at(self, q: int) -> Fraction | int:
        return self.k * q + self.c

    @property
    def zero(self) -> bool:
        return not self.k and not self.c

    def expr(self) -> str:
        """The template's quantity expression (``eval_quantity`` reads it back)."""
        if self.k.denominator != 1 or self.c.denominator != 1 or self.k < 0 or self.c < 0:
            raise AssertionError(f"quantity {self} is not a whole, non-negative A*q+B")
        k, c = int(self.k), int(self.c)
        if not k:
            return str(c)
        head = "q" if k == 1 else f"{k}*q"
        return head if not c else f"{head}+{c}"


def per_q(k: Fraction | int) -> Lin:
    return Lin(Fraction(k))


@dataclass
class Fuel:
    """A fuel quantity, fixed once the template's largest order quantity is known."""

    smelts: Fraction  # items to smelt per unit of q
    item: str
    constant: bool  # one count for every q (enough for the largest), else a multiple of q
