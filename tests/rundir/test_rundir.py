"""The run directory on disk: --out is checked before any request, JSON is written atomically and
masked, records are appended and read back (all of them, or a point's byte ranges)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from safety_helpers import _deliveries, _tokenbench

from tokenbench.config import RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.records import Outcome, RequestRecord
from tokenbench.results.manifest import RunManifest
from tokenbench.rundir import OutDirError, RunWriter, check_out_dir, read_records, write_json


def test_unwritable_out_fails_before_any_request(mock_server, tmp_path):
    url = mock_server(ttft_ms=5, itl_ms=1)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    for out in (blocker / "run", Path("/proc/tokenbench-cannot-write-here")):
        proc = _tokenbench("run", "--url", url, "--users", "1", "--max-requests", "2", "--out", str(out), "--no-live")
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 2, stderr
        assert str(out) in stderr.replace("\n", "") and "not writable" in stderr
    assert _deliveries(url) == {}


def test_an_out_that_holds_a_run_is_refused(mock_server, tmp_path):
    url = mock_server(ttft_ms=5, itl_ms=1)
    out = tmp_path / "run"
    args = ("run", "--url", url, "--users", "1", "--max-requests", "2", "--out", str(out), "--no-live")
    first = _tokenbench(*args)
    first.communicate(timeout=60)
    assert first.returncode == 0
    before = (out / "records.jsonl").read_bytes()
    n = len(_deliveries(url))
    second = _tokenbench(*args)
    _, stderr = second.communicate(timeout=60)
    assert second.returncode == 2 and "already holds files" in stderr
    assert (out / "records.jsonl").read_bytes() == before and len(_deliveries(url)) == n


def test_a_full_filesystem_is_refused(tmp_path, monkeypatch):
    import tokenbench.rundir as files

    monkeypatch.setattr(files, "MIN_FREE_BYTES", 2**62)
    with pytest.raises(OutDirError, match="MB free"):
        check_out_dir(tmp_path / "run")
    with pytest.raises(OutDirError, match="not writable"):
        check_out_dir(Path("/dev/full/run"))


def test_a_points_records_are_streamed_from_their_byte_ranges(tmp_path):
    """recompute finds each point's lines (by their first key, without parsing them whole) and
    reads them back one at a time; a torn last line (a kill mid-write) is skipped."""
    from tokenbench.rundir import RecordSlice, point_ranges

    def line(point, i):
        return (
            orjson.dumps(RequestRecord(point=point, id=i, scheduled_s=float(i), chunk_times_s=[i + 0.5]).to_json())
            + b"\n"
        )

    path = tmp_path / "records.jsonl"
    body = line(0, 0) + line(0, 1) + b"\n" + line(1, 2) + line(0, 3) + line(2, 4)
    path.write_bytes(body + line(2, 5)[:20])  # torn
    ranges = point_ranges(path)
    assert sorted(ranges) == [0, 1, 2] and len(ranges[0]) == 2  # point 0 in two runs of lines
    assert [r.id for r in RecordSlice(path, ranges[0])] == [0, 1, 3]
    assert [r.id for r in RecordSlice(path, ranges[1])] == [2]
    assert [r.id for r in RecordSlice(path, ranges[2])] == [4]
    records = RecordSlice(path, ranges[0])
    assert [r.chunk_times_s.tolist() for r in records] == [[0.5], [1.5], [3.5]]  # iterable again
    path.write_bytes(line(0, 0) + b"{not json}\n" + line(0, 1))
    with pytest.raises(ValueError, match="line 2 is not a record"):
        list(RecordSlice(path, point_ranges(path)[0]))


def test_write_json_replaces_the_file_whole_and_masks_credentials(tmp_path):
    path = tmp_path / "results.json"
    write_json(path, {"n": 1, "headers": {"Authorization": "Bearer abcdefghijklmnop"}})
    write_json(path, {"n": 2, "headers": {"Authorization": "Bearer abcdefghijklmnop"}})
    assert json.loads(path.read_text()) == {"n": 2, "headers": {"Authorization": "***"}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]  # no temporary left
    with pytest.raises(ValueError):
        write_json(path, {"n": float("nan")})  # not JSON: refused, and the old file stands
    assert json.loads(path.read_text())["n"] == 2


def test_a_run_writer_appends_records_and_reads_a_points_back(tmp_path):
    writer = RunWriter(tmp_path / "run")
    target = TargetConfig(url="http://h:1", extra_body={"api_key": "sk-plantedplantedplanted"})
    writer.write_config(
        RunManifest(config=RunConfig(target=target, loads=[UsersLoad(users=1)], stop=StopConfig(duration_s=1)))
    )
    written = writer.manifest().config.target  # what a reader gets back: masked
    assert (written.url, written.extra_body) == ("http://h:1", {"api_key": "***"})
    first = RequestRecord(point=0, id=0, scheduled_s=0.0, sent_s=0.1, chunk_times_s=[0.2], outcome=Outcome.OK)
    writer.write_record(first)
    offset = writer.records_offset()
    failed = RequestRecord(
        point=1, id=1, scheduled_s=1.0, outcome=Outcome.HTTP_ERROR, error="401 for Bearer abcdefghijk1"
    )
    writer.write_record(failed)
    assert [r.id for r in writer.records_since(offset)] == [1]
    assert [r.id for r in writer.records_since(0)] == [0, 1]
    writer.close()
    back = read_records(tmp_path / "run")
    assert back[0] == first and back[1].error == "401 for Bearer ***"
    assert json.loads((tmp_path / "run" / "config.json").read_text())["target"]["extra_body"]["api_key"] == "***"


def test_a_failed_start_keeps_only_the_engine_log_and_the_out_stays_usable(tmp_path):
    from tokenbench.rundir import fresh_out_dir, remove_failed_start

    out = tmp_path / "run"
    assert fresh_out_dir(out)
    writer = RunWriter(out)
    writer.close()
    (out / "server.log").write_text("engine said no\n")
    (out / "server-upstream.log").write_text("")  # empty: nothing to read, removed
    (out / "config.json").write_text("{}")
    remove_failed_start(out, made=True)
    assert sorted(p.name for p in out.iterdir()) == ["server.log"]  # the error names it
    assert fresh_out_dir(out)
    check_out_dir(out)  # a failed start's log does not make it "a run"
    RunWriter(out).close()  # the next run starts without the old log
    assert [p.name for p in out.iterdir()] == ["records.jsonl"]
    remove_failed_start(out, made=True)
    assert not out.exists()


def test_an_out_that_is_a_file_says_so(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(OutDirError, match=r"is a file: give a directory"):
        check_out_dir(f)


async def test_records_reach_the_disk_within_the_flush_delay_on_a_loop(tmp_path):
    # the compiled client: no flush per record on the run's loop, but on disk within FLUSH_S of a write
    import asyncio

    from tokenbench.rundir import FLUSH_S

    writer = RunWriter(tmp_path / "run")
    path = tmp_path / "run" / "records.jsonl"
    records = [RequestRecord(point=0, id=i, scheduled_s=0.0, error="bad key sk-12345678901234567890") for i in range(3)]
    writer.write_records(records[:1])
    writer.write_records(records[1:])
    writer.write_records(())
    assert path.read_bytes() == b""  # buffered: the flush is due
    await asyncio.sleep(FLUSH_S + 0.05)
    lines = path.read_bytes().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [0, 1, 2]
    assert "sk-1234" not in path.read_text()  # masked as before
    writer.write_record(RequestRecord(point=0, id=3, scheduled_s=0.0))
    assert len(read_records(tmp_path / "run")) == 3  # not yet on disk ...
    assert [r.id for r in writer.records_since(0)] == [0, 1, 2, 3]  # ... but read back whole
    writer.close()


def test_records_off_a_loop_are_on_disk_at_once(tmp_path):
    writer = RunWriter(tmp_path / "run")
    writer.write_record(RequestRecord(point=0, id=7, scheduled_s=0.0, chunk_times_s=[1.5]))
    line = (tmp_path / "run" / "records.jsonl").read_bytes()
    assert line == orjson.dumps(RequestRecord(point=0, id=7, scheduled_s=0.0, chunk_times_s=[1.5]).to_json()) + b"\n"
    writer.close()
