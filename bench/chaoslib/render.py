"""The battery's report as a table, for bench/chaos.py and bench/failover.py."""

from __future__ import annotations

from bench.chaoslib.classify import Report


def render(report: Report, command: str, seed: int, elapsed: float, log: list[str]) -> str:
    late = report.lateness_ms
    rows = [
        ("acknowledged timers", report.acknowledged),
        ("in doubt (a batch given up on)", report.in_doubt),
        ("handler starts", report.starts),
        ("acknowledged and started", report.ran),
        ("done / expired", f"{report.done} / {report.expired}"),
        ("  expired, by the skew of the node", _counts(report.expired_by_skew)),
        ("LOST", report.lost),
        ("  of which expired while their window was open", report.expired_early),
        ("EARLY (keys)", report.early),
        ("  earliest, ms before due_at", f"{report.earliest_ms:.3f}"),
        ("  by the skew of the node", _counts(report.early_by_skew)),
        ("UNEXPECTED", report.unexpected),
        ("OVERWRITTEN attempts", report.overwritten),
        ("STALE STARTS (began after recorded lost)", report.stale_starts),
        ("attempts whose instants are out of order", report.out_of_order),
        ("WORKER EXITS (ended by themselves)", report.worker_exits),
        ("reclaimed (a claim lost in a crash, run again)", report.reclaimed),
        ("duplicated (started twice or more)", report.duplicated),
        ("  by cause", _counts(report.duplicate_causes)),
        ("unfinished after the drain", report.unfinished),
        ("delivery pause (longest gap between starts), s", f"{report.pause_ms / 1000:.2f}"),
        ("lateness p50 / p95 / p99 / max, ms", " / ".join(f"{late.get(k, 0):.1f}" for k in
                                                          ("p50", "p95", "p99", "max"))),
        ("faults injected", _counts(report.faults)),
        ("worker processes (nodes)", len(report.nodes)),
    ]  # fmt: skip
    width = max(len(name) for name, _ in rows)
    lines = [f"$ {command}  (seed {seed}, {elapsed:.0f} s)", ""]
    lines += [f"{name:<{width}}  {value}" for name, value in rows]
    for category, found in report.examples.items():
        lines.append(f"\n{category}, for example:")
        lines += [f"  {text}" for text in found]
    lines.append("")
    lines.append("VERDICT: " + ("ok" if report.ok else "FAILED: " + ", ".join(report.problems())))
    lines += [line for line in log if line and not line.startswith("---")]
    return "\n".join(lines)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(counts.items())) or "-"
