from cairnbench import report


def _data():
    metrics = [
        {"key": "cp_a", "title": "cp -a tree", "unit": "s", "kind": "time"},
        {"key": "iops", "title": "fio randwrite (IOPS)", "unit": "IOPS",
         "kind": "rate"},
        {"key": "stat", "title": "find | xargs stat", "unit": "s",
         "kind": "time"},
    ]

    def ok(*v):
        return {"status": "ok", "values": list(v), "extra": [],
                "reason": None}
    return {
        "systems": {
            "local": {"label": "local disk", "status": "ok"},
            "glusterfs": {"label": "glusterfs replica 3", "status": "ok"},
            "cairn": {"label": "cairn (1 brick)", "status": "ok"},
        },
        "metrics": metrics,
        "results": {
            "local": {"cp_a": ok(1.0, 3.0, 2.0), "iops": ok(1000.0),
                      "stat": ok(0.5)},
            "glusterfs": {"cp_a": ok(40.0, 44.0, 41.0),
                          "iops": ok(250.0, 200.0, 300.0),
                          "stat": {"status": "timeout", "values": [1.0],
                                   "extra": [],
                                   "reason": "timeout (>300s) stat_cold"}},
            "cairn": {"cp_a": ok(4.0), "iops": ok(500.0),
                      "stat": {"status": "failed", "values": [],
                               "extra": [], "reason": "wrong data"}},
        },
    }


def _row(text, *cells):
    for line in text.splitlines():
        parts = [p.strip() for p in line.strip("|").split(" | ")]
        if parts[:len(cells)] == list(cells):
            return parts
    raise AssertionError(f"no row {cells} in\n{text}")


def test_medians_min_max_and_ratios():
    text = report.render(_data())
    # median of 1,3,2 is 2; speed vs GlusterFS (median 41) = 41/2
    row = _row(text, "cp -a tree", "local disk")
    assert row[2:5] == ["2.00", "1.00", "3.00"]
    assert row[5] == "3"
    assert row[6] == "×20.5"
    assert row[7] == "×1.00"
    row = _row(text, "cp -a tree", "cairn (1 brick)")
    assert row[6] == "×10.2" and row[7] == "×0.50"


def test_rate_ratios_are_rate_ratios():
    text = report.render(_data())
    row = _row(text, "fio randwrite (IOPS)", "cairn (1 brick)")
    assert row[2] == "500"
    assert row[6] == "×2.00"      # 500 / 250 IOPS
    assert row[7] == "×0.50"      # 500 / 1000 IOPS


def test_summary_matrix_and_statuses():
    text = report.render(_data())
    row = _row(text, "find \\| xargs stat")
    assert row[1:] == ["0.500", "timeout (>300s)", "FAILED"]
    assert "wrong data" in text


def test_median_even_count():
    assert report.summarize({"status": "ok", "values": [1, 2, 3, 10],
                             "reason": None}) == (2.5, 1, 10)


def test_memory_has_no_speed_ratio():
    data = _data()
    data["metrics"].append({"key": "mib", "title": "peak client memory",
                            "unit": "MiB", "kind": "memory"})
    data["results"]["glusterfs"]["mib"] = {
        "status": "ok", "values": [180.0], "extra": [], "reason": None}
    data["results"]["cairn"]["mib"] = {
        "status": "ok", "values": [55.4], "extra": [], "reason": None}
    text = report.render(data)
    row = _row(text, "peak client memory (MiB)", "cairn (1 brick)")
    assert row[2] == "55" and row[6] == "-" and row[7] == "-"
    row = _row(text, "peak client memory (MiB)")
    assert row[1:] == ["-", "180", "55"]


def test_distributed_replicate_is_compared_with_its_own_shape():
    data = _data()
    data["systems"]["glusterfs-dr"] = {"label": "glusterfs 2 x 3", "status": "ok"}
    data["systems"]["cairn-dr"] = {"label": "cairn 2 x 3", "status": "ok"}
    ok = {"status": "ok", "extra": [], "reason": None}
    data["results"]["glusterfs-dr"] = {"cp_a": dict(ok, values=[80.0])}
    data["results"]["cairn-dr"] = {"cp_a": dict(ok, values=[2.0])}
    text = report.render(data)
    assert _row(text, "cp -a tree", "cairn 2 x 3")[6] == "×40.0"  # 80 / 2
    assert _row(text, "cp -a tree", "cairn (1 brick)")[6] == "×10.2"  # 41 / 4
