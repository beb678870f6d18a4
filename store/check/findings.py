"""The result type of the store cross-check (`store.check.run`) and the bounded list that collects it.

Every finding names the file and byte position, its severity, what RocketMQ does about it when the
broker restarts (`on_restart`, from `DefaultMessageStore.recover`, `CommitLog.recoverNormally` /
`recoverAbnormally`, `ConsumeQueue.recover`, `IndexService.load`, `MappedFileQueue.load`, tag
rocketmq-all-4.9.7) and the `rmqstore` command that repairs it (`repair`; None when no command can
repair it without losing data). The call site may give both; otherwise `ADVICE` gives the component's
usual answer. `{store}` in a repair command is replaced by the checked store's root.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timezone

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
    on_restart: str = ""
    repair: str | None = None

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


def utc_text(ms: int) -> str:
    """The one form times take in human output (findings, `rmqstore` tables): UTC with
    milliseconds and the zone, `2026-11-22 07:59:04.939 UTC`. 0 and negatives stay numbers."""
    if ms is None or ms <= 0:
        return str(ms)
    try:
        moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d} UTC"


# (component, severity) -> (what RocketMQ does on restart, the repair command or None).
_RECOVER = "rmqstore recover --store {store}"
ADVICE = {
    ("commitlog", "error"): (
        "recovery (CommitLog.recoverNormally / recoverAbnormally, checkCRCOnRecover) stops at the "
        "first invalid record and truncates the log there: every later record is dropped", None),
    ("commitlog", "warning"): (
        "recovery cuts the log at the end of the last complete record (a torn write)", _RECOVER),
    ("consumequeue", "error"): (
        "ConsumeQueue.recover keeps units up to the first invalid one and truncateDirtyLogicFiles "
        "cuts units past the log end; a unit pointing at the wrong record stays and pulls fail on it",
        _RECOVER),
    ("consumequeue", "warning"): (
        "the reput service dispatches the records the queue lacks again (from the checkpoint)",
        _RECOVER),
    ("index", "error"): (
        "IndexService.load keeps the file as it is: queries by key miss or skip entries; nothing "
        "rebuilds it", "rmqstore recover --rebuild-index --store {store}"),
    ("index", "warning"): (
        "IndexService.load keeps the file as it is: queries by key miss these entries",
        "rmqstore recover --rebuild-index --store {store}"),
    ("checkpoint", "error"): (
        "abnormal recovery starts from the segment holding the checkpoint's min timestamp "
        "(StoreCheckpoint.getMinTimestamp); a bad value makes it start too late or at the first "
        "segment", _RECOVER),
    ("checkpoint", "warning"): (
        "abnormal recovery starts from the segment holding the checkpoint's min timestamp", None),
    ("config", "error"): (
        "ConfigManager.load tries the .bak file, then starts with an empty table", None),
    ("config", "warning"): ("ConfigManager.load falls back to the .bak file", None),
    ("config", "info"): ("the broker ignores unknown keys (MixAll.properties2Object)", None),
    ("timer", "error"): (
        "TimerMessageStore.recover (5.x) replays the timer log from the timercheck position and "
        "revises the wheel from it; a damaged unit or slot delays or drops that delivery", None),
    ("timer", "warning"): (
        "TimerMessageStore.recover (5.x) replays the timer log from the timercheck position and "
        "revises the wheel from it", None),
    ("files", "error"): ("the broker cannot start on this directory", None),
    ("files", "warning"): ("the broker ignores files whose names it does not parse", None),
}
INFO_ON_RESTART = "nothing: informational, RocketMQ does not act on it"
NO_REPAIR = "none safe: copy the store aside first and inspect it with rmqstore dump"


class Sink:
    """Collects findings up to `max_findings`; past that it only counts what it dropped."""

    def __init__(self, max_findings: int, store_root: str | None = None):
        assert max_findings > 0
        self.max_findings = max_findings
        self.store_root = store_root
        self.findings: list[Finding] = []
        self.dropped = 0
        self._group_counts: dict = {}
        self._group_meta: dict = {}

    @property
    def full(self) -> bool:
        return len(self.findings) >= self.max_findings

    def add(self, severity: str, component: str, path: str | None, position: int | None,
            message: str, *, on_restart: str | None = None, repair: str | None = "") -> None:
        """`on_restart` / `repair` default to `ADVICE`; pass `repair=None` for "no command"."""
        if self.full:
            self.dropped += 1
            return
        usual_restart, usual_repair = ADVICE.get(
            (component, severity), (INFO_ON_RESTART if severity == "info" else "", None))
        if repair == "":
            repair = usual_repair
        if repair is not None and self.store_root is not None:
            repair = repair.replace("{store}", self.store_root)
        self.findings.append(Finding(severity, component, path, position, message,
                                     on_restart if on_restart is not None else usual_restart,
                                     repair))

    def add_limited(self, group, severity: str, component: str, path: str | None,
                    position: int | None, message: str, *, keep: int = 3, **advice) -> None:
        """Like add(), but only the first `keep` findings of one `group` (say, one queue and one
        kind of damage) are kept; `summarize()` reports how many more there were."""
        count = self._group_counts.get(group, 0) + 1
        self._group_counts[group] = count
        if count <= keep:
            self.add(severity, component, path, position, message, **advice)
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
