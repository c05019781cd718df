"""``python -m swin_opt cache {dir,list,prune,clear}`` and the functions behind it
(:func:`swin_opt.cache.cache_entries`, :func:`~swin_opt.cache.prune_cache`).

Runs without torch and without swin-aot: the cache entries are written by hand
in the layout :func:`swin_opt.compile` publishes (``k-<key>/config.json`` and
the kernel files)."""

from __future__ import annotations

import dataclasses
import json
import os
import time

import pytest

from swin_opt import __main__ as cli
from swin_opt import cache as C
from swin_opt.config import make_config

DAY = 86400.0


def _entry(root, key, size, age_days, heads=2, **options):
    d = root / f"k-{key}"
    d.mkdir(parents=True)
    (d / "kernel.so").write_bytes(b"x" * size)
    cfg = make_config((7, 7), heads, 32, resolution=(14, 14), shift=3, **options)
    meta = d / "config.json"
    meta.write_text(json.dumps({"config": dataclasses.asdict(cfg), "emit": "so"}))
    t = time.time() - age_days * DAY
    os.utime(meta, (t, t))
    return d


@pytest.fixture
def cache(tmp_path):
    root = tmp_path / "cache"
    _entry(root, "old", 4000, 40)
    _entry(root, "mid", 3000, 10, heads=4)
    _entry(root, "new", 2000, 0.01)
    (root / ".build-tmp123").mkdir()  # a build in progress: never listed
    (root / "k-broken").mkdir()       # no metadata: listed as incomplete
    os.utime(root / "k-broken", (time.time() - 50 * DAY,) * 2)
    return root


def test_cache_entries(cache):
    entries = C.cache_entries(cache)
    assert [e.key for e in entries] == ["k-broken", "k-old", "k-mid", "k-new"]  # LRU first
    sizes = {e.key: e.size for e in entries}
    assert sizes["k-old"] > 4000 and sizes["k-broken"] == 0
    old = entries[1]
    assert "window=7x7" in old.description and "heads=2" in old.description
    assert "emit=so" in old.description
    assert "incomplete" in entries[0].description
    assert C.cache_entries(cache / "missing") == []


def test_entries_of_other_builds_have_other_descriptions(tmp_path):
    """A gradient kernel (and a build for another CPU, kernel or thread mode) is not
    described like the forward kernel of the same configuration."""
    variants = [{}, {"grad": True}, {"cpu": "x86-64-v3"}, {"kernel": "rows"},
                {"parallel": False}, {"name": "attn"}]
    for i, options in enumerate(variants):
        _entry(tmp_path, f"v{i}", 10, i, **options)
    descriptions = [e.description for e in reversed(C.cache_entries(tmp_path))]
    assert len(set(descriptions)) == len(variants), descriptions
    assert "grad" in descriptions[1] and "grad" not in descriptions[0]


def test_prune_by_age_and_size(cache):
    gone = C.prune_cache(cache, older_than_days=30, dry_run=True)
    assert sorted(e.key for e in gone) == ["k-broken", "k-old"]
    assert (cache / "k-old").is_dir()                                  # dry run
    gone = C.prune_cache(cache, older_than_days=30)
    assert sorted(e.key for e in gone) == ["k-broken", "k-old"]
    assert not (cache / "k-old").exists() and (cache / "k-mid").is_dir()
    # size: least recently used go first until the rest fits
    new_size = [e for e in C.cache_entries(cache) if e.key == "k-new"][0].size
    gone = C.prune_cache(cache, max_size=new_size)
    assert [e.key for e in gone] == ["k-mid"]
    assert [e.key for e in C.cache_entries(cache)] == ["k-new"]
    assert (cache / ".build-tmp123").is_dir()  # in-progress builds are left alone


def test_compile_hit_refreshes_last_use(tmp_path, monkeypatch):
    """compile() touches the entry it finds, so prune keeps kernels in use."""
    meta = tmp_path / "config.json"
    meta.write_text("{}")
    os.utime(meta, (1.0, 1.0))
    C.touch(meta)
    assert meta.stat().st_mtime > time.time() - 60


def _run(capsys, *argv):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_list_prune_clear(cache, capsys):
    rc, out, _ = _run(capsys, "cache", "list", f"--dir={cache}")
    assert rc == 0
    lines = out.strip().splitlines()
    assert len(lines) == 5 and "k-old" in lines[1] and "window=7x7" in lines[1]
    assert lines[-1].startswith("4 kernels")

    rc, out, _ = _run(capsys, "cache", "prune", "--older-than=30", "--dry-run", f"--dir={cache}")
    assert rc == 0 and "would remove 2 kernels" in out and (cache / "k-old").is_dir()
    rc, out, _ = _run(capsys, "cache", "prune", "--older-than", "30", "--max-size=3K",
                      f"--dir={cache}")
    assert rc == 0 and "removed 3 kernels" in out, out
    assert [e.key for e in C.cache_entries(cache)] == ["k-new"]

    rc, out, _ = _run(capsys, "cache", "clear", f"--dir={cache}")
    assert rc == 0 and "removed 1 kernels" in out
    assert C.cache_entries(cache) == []


def test_cli_dir_and_compat(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SWIN_OPT_CACHE_DIR", str(tmp_path / "c"))
    rc, out, _ = _run(capsys, "cache")
    assert rc == 0 and out.strip() == str(tmp_path / "c")
    _entry(tmp_path / "c", "a", 10, 1)
    rc, out, _ = _run(capsys, "cache", "--clear")                    # the old spelling
    assert rc == 0 and "removed 1 kernels" in out


@pytest.mark.parametrize("argv,msg", [
    (["cache", "prune"], "needs --older-than"),
    (["cache", "list", "--max-size=1G"], "go with `cache prune`"),
    (["cache", "prune", "--max-size=lots"], "expected a size"),
    (["cache", "prune", "--older-than=-1"], "must not be negative"),
])
def test_cli_usage_errors(argv, msg, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv + [f"--dir={tmp_path}"])
    assert exc.value.code == 2
    assert msg in capsys.readouterr().err


def test_size_parser():
    assert cli._size("123") == 123
    assert cli._size("2K") == 2048
    assert cli._size("1.5M") == 1536 * 1024
    assert cli._size("2GiB") == 2 * 1024 ** 3
