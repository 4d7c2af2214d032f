"""One run's record, and the raw key=value lines they are saved as."""

from __future__ import annotations

from dataclasses import dataclass


def parse_result(line: str) -> dict[str, str]:
    """The fields of a client's `RESULT key=value ...` line."""
    return dict(word.split("=", 1) for word in line.split()[1:] if "=" in word)


def find_result(text: str) -> dict[str, str] | None:
    """The fields of the first RESULT line in a client's output, or None."""
    for line in text.splitlines():
        if line.startswith("RESULT "):
            return parse_result(line)
    return None


@dataclass
class RunRecord:
    """One measured run: the RESULT line's fields and the script's own (cpu, srv_..., ...), in
    the order of the raw line; or, for a failed run, why it failed."""

    row: str
    run: int
    name: str
    fields: dict[str, str] | None = None
    error: str = ""  # a failed run: the first line of why

    @property
    def failed(self) -> bool:
        return self.fields is None

    def number(self, key: str, default: float = 0.0) -> float:
        assert self.fields is not None
        value = self.fields.get(key)
        return float(value) if value not in (None, "") else default

    def raw_line(self, *, with_row: bool = True) -> str:
        """`[row=ROW ]run=N name=CLIENT key=value ...`, or `... failed=1`; the small row's lines
        have no row= (as they always had)."""
        head = (f"row={self.row} " if with_row else "") + f"run={self.run} name={self.name}"
        if self.fields is None:
            return f"{head} failed=1"
        return head + "".join(f" {key}={value}" for key, value in self.fields.items())
