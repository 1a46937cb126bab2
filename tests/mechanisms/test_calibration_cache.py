"""The on-disk shuffle calibration cache: verified on load, keyed exactly, written atomically."""

import json
import threading

import pytest

from mechanisms import calibration_cache
from mechanisms.calibration_cache import cached_calibration
from mechanisms.shuffle_vector_accountant import calibrate_noise_bits, vector_sum_delta

ARGS = (50, 2.0, 1e-2, 8, 1)  # n, epsilon, delta, levels, coordinates: a search of milliseconds


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DPGLM_CACHE_DIR", str(tmp_path))
    calibrate_noise_bits.cache_clear()  # a fresh process: only the disk remembers
    yield tmp_path
    calibrate_noise_bits.cache_clear()


def _entry(cache):
    (path,) = cache.glob("vector_sum_noise_bits-*.json")
    return path


def _reference(monkeypatch):
    """The search with the disk cache off (an empty DPGLM_CACHE_DIR)."""
    with monkeypatch.context() as m:
        m.setenv("DPGLM_CACHE_DIR", "")
        calibrate_noise_bits.cache_clear()
        bits = calibrate_noise_bits(*ARGS)
    calibrate_noise_bits.cache_clear()
    return bits


def test_the_cached_value_is_the_search_and_is_verified_once_on_load(cache, monkeypatch):
    reference = _reference(monkeypatch)
    n, epsilon, delta, levels, coordinates = ARGS
    # the search's own answer: enough bits, and one fewer is not (dp-accounting through vector_sum_delta)
    assert vector_sum_delta(n, reference, levels, epsilon, coordinates) <= delta
    assert vector_sum_delta(n, reference - 1, levels, epsilon, coordinates) > delta
    assert calibrate_noise_bits(*ARGS) == reference  # computed and stored
    assert json.loads(_entry(cache).read_text())["value"] == reference
    calibrate_noise_bits.cache_clear()
    calls = []
    original = calibration_cache.cached_calibration

    def counting(name, arguments, compute, verify):
        def counted(value):
            calls.append(value)
            return verify(value)
        return original(name, arguments, lambda: pytest.fail("recomputed a valid entry"), counted)

    monkeypatch.setattr("mechanisms.shuffle_vector_accountant.cached_calibration", counting)
    assert calibrate_noise_bits(*ARGS) == reference
    assert calls == [reference]  # one forward accounting call


@pytest.mark.parametrize("damage", ["", "{\"key\": ", "not json", "[1, 2]", "{\"key\": null, \"value\": 3}"])
def test_a_damaged_entry_is_recomputed_and_rewritten(cache, monkeypatch, damage):
    reference = _reference(monkeypatch)
    calibrate_noise_bits(*ARGS)
    path = _entry(cache)
    path.write_text(damage)
    calibrate_noise_bits.cache_clear()
    assert calibrate_noise_bits(*ARGS) == reference
    assert json.loads(path.read_text())["value"] == reference


def test_a_value_that_fails_verification_is_never_used(cache, monkeypatch):
    reference = _reference(monkeypatch)
    calibrate_noise_bits(*ARGS)
    path = _entry(cache)
    entry = json.loads(path.read_text())
    entry["value"] = reference // 2  # too little noise: a stale or tampered entry
    path.write_text(json.dumps(entry))
    calibrate_noise_bits.cache_clear()
    assert calibrate_noise_bits(*ARGS) == reference
    assert json.loads(path.read_text())["value"] == reference


def test_an_entry_of_another_key_is_ignored(cache, monkeypatch):
    reference = _reference(monkeypatch)
    calibrate_noise_bits(*ARGS)
    path = _entry(cache)
    entry = json.loads(path.read_text())
    # another epsilon's entry under this file name, with a value that would verify here (more noise)
    entry["key"] = entry["key"].replace('"epsilon": 2.0', '"epsilon": 1.0')
    entry["value"] = reference * 3
    path.write_text(json.dumps(entry))
    calibrate_noise_bits.cache_clear()
    assert calibrate_noise_bits(*ARGS) == reference


def test_versions_are_part_of_the_key(cache, monkeypatch):
    calibrate_noise_bits(*ARGS)
    key = json.loads(_entry(cache).read_text())["key"]
    assert '"dp-accounting"' in key and '"dpglm"' in key


def test_concurrent_writers_leave_one_whole_entry_and_readers_never_see_half(cache):
    computed = []

    def compute():
        computed.append(1)
        return 12345

    def writer():
        for _ in range(30):
            calibration_cache._store(cache, cache / "race.json", "k", 12345)

    seen = []

    def reader():
        for _ in range(300):
            if (cache / "race.json").exists():
                seen.append(calibration_cache._load(cache / "race.json", "k"))

    threads = [threading.Thread(target=writer) for _ in range(6)] + [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(v == 12345 for v in seen)  # a reader sees a whole old or a whole new file, never half
    assert json.loads((cache / "race.json").read_text()) == {"key": "k", "value": 12345}
    assert not list(cache.glob("*.tmp"))  # every temporary file was renamed into place
    assert cached_calibration("race-free", {"a": 1}, compute, lambda v: v == 12345) == 12345
    assert cached_calibration("race-free", {"a": 1}, compute, lambda v: v == 12345) == 12345
    assert computed == [1]


def test_an_unwritable_cache_directory_only_costs_the_search(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("DPGLM_CACHE_DIR", str(blocker / "sub"))  # a directory under a file cannot exist
    assert cached_calibration("x", {}, lambda: 7, lambda v: True) == 7
