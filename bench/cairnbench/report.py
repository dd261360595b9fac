"""Markdown rendering of the results: medians with min and max, and speed
relative to GlusterFS replica 3 and to the local disk."""

import statistics

BASELINE_GLUSTER = ("glusterfs", "glusterfs-arbiter")
# A distributed-replicate system is compared with GlusterFS's of that shape.
BASELINE_GLUSTER_DR = ("glusterfs-dr",)
BASELINE_LOCAL = ("local",)


def cell(text):
    """Escape text for a markdown table cell."""
    return str(text).replace("|", "\\|")


def title(met):
    t = met["title"]
    if met["unit"] != "s" and met["unit"] not in t:
        t += f" ({met['unit']})"
    return cell(t)


def fmt_value(v, unit):
    if unit == "s":
        if v < 1:
            return f"{v:.3f}"
        if v < 100:
            return f"{v:.2f}"
        return f"{v:.1f}"
    if unit in ("IOPS", "MiB"):
        return f"{v:,.0f}"
    return f"{v:,.1f}"


def fmt_ratio(r):
    if r is None:
        return "-"
    if r >= 100:
        return f"×{r:,.0f}"
    if r >= 10:
        return f"×{r:.1f}"
    return f"×{r:.2f}"


def summarize(entry):
    """(median, min, max) of an ok entry with values, else None."""
    if not entry or entry["status"] != "ok" or not entry["values"]:
        return None
    v = entry["values"]
    return statistics.median(v), min(v), max(v)


def status_text(entry, system_status=None):
    if entry is None:
        return "-"
    st = entry["status"]
    if st == "timeout":
        reason = entry.get("reason") or ""
        # reason starts with "timeout (>Ns)"
        return reason.split(")")[0] + ")" if reason.startswith("timeout") \
            else "timeout"
    if st == "failed":
        return "FAILED"
    if st == "unavailable":
        return "unavailable"
    if st == "skipped":
        return "not run"
    return "-"


def speed(metric, value, base):
    """How many times faster than base (>1 = faster)."""
    if base is None or value is None or value <= 0 or base <= 0:
        return None
    if metric["kind"] == "memory":
        return None  # a size, not a speed
    return base / value if metric["kind"] == "time" else value / base


def baseline(data, metric_key, candidates):
    for s in candidates:
        e = data["results"].get(s, {}).get(metric_key)
        sm = summarize(e)
        if sm:
            return s, sm[0]
    return None, None


def render(data):
    systems = list(data["systems"])
    labels = {s: data["systems"][s]["label"] for s in systems}
    out = []
    m = data.get("machine") or {}
    if m:
        from cairnbench.machine import one_line
        out.append(f"Machine: {one_line(m)}  ")
    if m.get("loadavg_at_start"):
        out.append("Load average when the run started (1/5/15 min): "
                   + " / ".join(str(x) for x in m["loadavg_at_start"])
                   + "  ")
    if data.get("date"):
        out.append(f"Date: {data['date']}  ")
    if data.get("command"):
        out.append(f"Command: `{data['command']}`  ")
    if data.get("config"):
        c = data["config"]
        out.append(f"Runs per measurement: {c.get('runs')}; "
                   f"timeout per timed step: {c.get('timeout')} s")
    out.append("")
    out.append("Median of the runs; times in seconds and memory in MiB "
               "(lower is better), IOPS and MB/s higher is better.")
    out.append("")
    out.append("| workload | " + " | ".join(cell(labels[s]) for s in systems)
               + " |")
    out.append("|---|" + "---:|" * len(systems))
    for met in data["metrics"]:
        cells = []
        for s in systems:
            e = data["results"].get(s, {}).get(met["key"])
            sm = summarize(e)
            cells.append(fmt_value(sm[0], met["unit"]) if sm
                         else status_text(e))
        out.append(f"| {title(met)} | " + " | ".join(cells) + " |")
    out.append("")
    out.append("Details: median (min-max) over the runs, and speed relative "
               "to GlusterFS replica 3 (a 2 x 3 system: to GlusterFS 2 x 3) "
               "and to the local disk "
               "(×2 = twice as fast, ×0.5 = half as fast; for IOPS and MB/s "
               "the ratio of the rates).")
    out.append("")
    out.append("| workload | system | median | min | max | runs "
               "| vs GlusterFS | vs local |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|")
    notes = []
    for met in data["metrics"]:
        _, gbase_r3 = baseline(data, met["key"], BASELINE_GLUSTER)
        _, gbase_dr = baseline(data, met["key"], BASELINE_GLUSTER_DR)
        _, lbase = baseline(data, met["key"], BASELINE_LOCAL)
        for s in systems:
            gbase = gbase_dr if s.endswith("-dr") else gbase_r3
            e = data["results"].get(s, {}).get(met["key"])
            sm = summarize(e)
            if sm:
                med, lo, hi = sm
                row = [fmt_value(med, met["unit"]),
                       fmt_value(lo, met["unit"]),
                       fmt_value(hi, met["unit"]), str(len(e["values"])),
                       fmt_ratio(speed(met, med, gbase)),
                       fmt_ratio(speed(met, med, lbase))]
            else:
                row = [status_text(e), "", "", "", "", ""]
                if e and e.get("reason") and e["status"] != "unavailable":
                    notes.append(f"- {labels[s]}, {met['title']}: "
                                 f"{status_text(e)}: {e['reason']}")
            out.append(f"| {title(met)} | {cell(labels[s])} | "
                       + " | ".join(row) + " |")
    unavailable = [(s, d) for s, d in data["systems"].items()
                   if d["status"] == "unavailable"]
    if unavailable or notes:
        out.append("")
    for s, d in unavailable:
        out.append(f"- {labels[s]}: unavailable: {d['reason']}")
    out.extend(notes)
    return "\n".join(out) + "\n"
