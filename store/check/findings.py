"""The result type of the store cross-check (`store.check.run`) and the bounded list that collects it."""

from __future__ import annotations

from dataclasses import asdict, dataclass

SEVERITIES = ("error", "warning", "info")
COMPONENTS = ("commitlog", "consumequeue", "index", "checkpoint", "config", "files", "timer")


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the check found. `path` is the file (None for the store as a whole), `position` a
    byte position inside that file (None when the finding is about the whole file)."""

    severity: str
    component: str
    path: str | None
    position: int | None
    message: str

    def __post_init__(self):
        assert self.severity in SEVERITIES, self.severity
        assert self.component in COMPONENTS, self.component

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        where = self.path or "-"
        if self.position is not None:
            where += f"@{self.position}"
        return f"{self.severity:7} {self.component:12} {where}: {self.message}"


class Sink:
    """Collects findings up to `max_findings`; past that it only counts what it dropped."""

    def __init__(self, max_findings: int):
        assert max_findings > 0
        self.max_findings = max_findings
        self.findings: list[Finding] = []
        self.dropped = 0
        self._group_counts: dict = {}
        self._group_meta: dict = {}

    @property
    def full(self) -> bool:
        return len(self.findings) >= self.max_findings

    def add(self, severity: str, component: str, path: str | None, position: int | None,
            message: str) -> None:
        if self.full:
            self.dropped += 1
            return
        self.findings.append(Finding(severity, component, path, position, message))

    def add_limited(self, group, severity: str, component: str, path: str | None,
                    position: int | None, message: str, *, keep: int = 3) -> None:
        """Like add(), but only the first `keep` findings of one `group` (say, one queue and one
        kind of damage) are kept; `summarize()` reports how many more there were."""
        count = self._group_counts.get(group, 0) + 1
        self._group_counts[group] = count
        if count <= keep:
            self.add(severity, component, path, position, message)
        else:
            self._group_meta[group] = (severity, component, path)

    def summarize(self) -> None:
        """One finding per group that add_limited() cut, saying how many it left out."""
        for group, (severity, component, path) in self._group_meta.items():
            extra = self._group_counts[group] - 3
            self.add(severity, component, path, None, f"... and {extra} more like the above ({group})")
        self._group_meta.clear()
        self._group_counts.clear()

    def result(self) -> list[Finding]:
        findings = list(self.findings)
        if self.dropped or self.full:
            findings.append(Finding(
                "info", "files", None, None,
                f"max_findings={self.max_findings} reached: the check stopped early"
                + (f" and dropped {self.dropped} more findings" if self.dropped else "")))
        return findings
