"""Finding, downloading and checking data set files, without the network: the
download is a fake ``urlopen``."""

from __future__ import annotations

import hashlib
import http.client
import io
import os
import stat
import urllib.error
import zipfile
from pathlib import Path

import pytest

import graphattn.datasets.files as files
from graphattn.datasets.files import (
    DatasetCard,
    DatasetChecksumError,
    DatasetUnavailableError,
    resolve_file,
)

DATA = b"smiles,y\nCCO,1\n"
SHA = hashlib.sha256(DATA).hexdigest()


class FakeResponse(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@pytest.fixture
def toy(monkeypatch, tmp_path):
    """A card ``toy`` with one file, an empty cache, no GRAPHATTN_DATA."""
    card = DatasetCard(name="toy", url="https://example.org/toy.csv", files={"toy.csv": SHA})
    monkeypatch.setitem(files.CARDS, "toy", card)
    monkeypatch.setenv("GRAPHATTN_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GRAPHATTN_DATA", raising=False)
    return tmp_path / "cache" / "toy"


def serve(monkeypatch, body=None, error: Exception | None = None) -> None:
    def urlopen(url, timeout):
        if error is not None:
            raise error
        return FakeResponse(body)

    monkeypatch.setattr(files.urllib.request, "urlopen", urlopen)


def test_a_local_copy_is_used_and_checked(toy, tmp_path, monkeypatch):
    serve(monkeypatch, error=AssertionError("no download when a local copy exists"))
    local = tmp_path / "data" / "toy"
    local.mkdir(parents=True)
    (local / "toy.csv").write_bytes(DATA)
    assert resolve_file("toy", "toy.csv", tmp_path / "data") == local / "toy.csv"
    (local / "toy.csv").write_bytes(DATA + b"CCN,2\n")
    with pytest.raises(DatasetChecksumError, match=rf"toy.csv: sha256 \w+ does not match .*{SHA}"):
        resolve_file("toy", "toy.csv", tmp_path / "data")


def test_a_download_is_checked_before_it_reaches_the_cache(toy, monkeypatch):
    serve(monkeypatch, body=DATA[:10])  # truncated
    with pytest.raises(DatasetChecksumError, match="nothing was written"):
        resolve_file("toy", "toy.csv")
    assert not (toy / "toy.csv").exists()
    serve(monkeypatch, body=DATA)  # a later good download is not blocked by the bad one
    assert resolve_file("toy", "toy.csv").read_bytes() == DATA
    assert [p.name for p in toy.iterdir()] == ["toy.csv"]  # no temporary files left


@pytest.mark.parametrize(
    "error",
    [
        urllib.error.URLError("Name or service not known"),
        http.client.IncompleteRead(b"smi", 100),
    ],
    ids=["offline", "cut-short"],
)
def test_a_failed_download_says_which_file_to_put_where(toy, monkeypatch, error):
    serve(monkeypatch, error=error)
    with pytest.raises(DatasetUnavailableError) as info:
        resolve_file("toy", "toy.csv")
    message = str(info.value)
    assert (
        "file 'toy.csv' not found and download from https://example.org/toy.csv failed" in message
    )
    assert str(toy / "toy.csv") in message and f"sha256 {SHA}" in message


def test_a_zip_card_with_a_bad_archive_is_unavailable_not_a_crash(toy, monkeypatch):
    card = DatasetCard(
        name="toy",
        url="https://example.org/toy.zip",
        files={"toy.csv": SHA},
        archive_member={"toy.csv": "toy/toy.csv"},
    )
    monkeypatch.setitem(files.CARDS, "toy", card)
    serve(monkeypatch, body=b"<html>not a zip</html>")
    with pytest.raises(DatasetUnavailableError, match="BadZipFile"):
        resolve_file("toy", "toy.csv")
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("elsewhere/toy.csv", DATA)
    serve(monkeypatch, body=archive.getvalue())
    with pytest.raises(DatasetUnavailableError, match="KeyError"):
        resolve_file("toy", "toy.csv")
    # damage inside the compressed data shows only while a member is read: zlib.error
    # (a flipped byte) and ValueError (a chunk cut out) ended the CLI in a traceback
    rows = "".join(f"C{'C' * (i % 7)}O,{i * 0.37:.3f}\n" for i in range(3000)).encode()
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as handle:
        handle.writestr("toy/toy.csv", rows)
    body = archive.getvalue()
    flipped = bytearray(body)
    flipped[300] ^= 0xFF
    for damaged in (bytes(flipped), body[:500] + body[1500:]):
        serve(monkeypatch, body=damaged)
        with pytest.raises(DatasetUnavailableError, match="BadZipFile: damaged archive"):
            resolve_file("toy", "toy.csv")
    assert not toy.exists()  # nothing reached the cache


def test_a_failed_move_leaves_no_temporary_file(tmp_path, monkeypatch):
    def refuse(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.shutil, "move", refuse)
    with pytest.raises(OSError, match="No space"):
        files._atomic_write(tmp_path / "toy.csv", DATA)
    assert list(tmp_path.iterdir()) == []


def test_home_folders_are_expanded_and_an_empty_cache_setting_is_ignored(
    toy, tmp_path, monkeypatch
):
    serve(monkeypatch, error=AssertionError("no download when a local copy exists"))
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "toy.csv").write_bytes(DATA)
    assert resolve_file("toy", "toy.csv", "~/data") == tmp_path / "data" / "toy.csv"
    monkeypatch.setenv("GRAPHATTN_DATA", "~/data")
    assert resolve_file("toy", "toy.csv") == tmp_path / "data" / "toy.csv"
    monkeypatch.setenv("GRAPHATTN_CACHE", "~/cache")
    assert files.cache_dir() == tmp_path / "cache"
    monkeypatch.setenv("GRAPHATTN_CACHE", "")
    assert files.cache_dir() == Path.cwd() / "datasets" / "cache"
    # a ~user that does not exist is kept as written (it was a RuntimeError traceback,
    # even with the file found in --data-dir first)
    monkeypatch.setenv("GRAPHATTN_CACHE", "~nosuchuser_graphattn/cache")
    assert files.cache_dir() == Path("~nosuchuser_graphattn/cache")
    assert resolve_file("toy", "toy.csv", str(tmp_path / "data")) == tmp_path / "data" / "toy.csv"


def test_downloaded_files_follow_the_umask_not_mkstemps_0600(toy, monkeypatch):
    serve(monkeypatch, body=DATA)
    old = os.umask(0o022)
    try:
        path = resolve_file("toy", "toy.csv")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_folder_in_place_of_the_file_is_named(toy, tmp_path, monkeypatch):
    serve(monkeypatch, error=AssertionError("no download"))
    (tmp_path / "data" / "toy" / "toy.csv").mkdir(parents=True)
    with pytest.raises(DatasetUnavailableError, match=r"toy/toy.csv is a folder; the file"):
        resolve_file("toy", "toy.csv", tmp_path / "data")
    (tmp_path / "data" / "toy.csv").write_bytes(DATA)  # a later candidate is still found
    assert resolve_file("toy", "toy.csv", tmp_path / "data") == tmp_path / "data" / "toy.csv"


def test_a_cache_that_cannot_be_written_is_not_called_a_failed_download(toy, monkeypatch):
    serve(monkeypatch, body=DATA)
    toy.parent.mkdir(parents=True)
    toy.write_text("a file where the cache folder should be")
    with pytest.raises(OSError, match=r"downloaded, but could not write to the cache .*toy"):
        resolve_file("toy", "toy.csv")


def test_an_archive_member_missing_offline_names_the_member_and_the_other_files(toy, monkeypatch):
    card = DatasetCard(
        name="toy",
        url="https://example.org/toy.zip",
        files={"edges.csv": SHA, "labels.csv": SHA},
        archive_member={"edges.csv": "toy/edges.csv", "labels.csv": "toy/labels.csv"},
    )
    monkeypatch.setitem(files.CARDS, "toy", card)
    serve(monkeypatch, error=urllib.error.URLError("offline"))
    with pytest.raises(DatasetUnavailableError) as info:
        resolve_file("toy", "edges.csv")
    assert "Put edges.csv (from toy/edges.csv in https://example.org/toy.zip" in str(info.value)
    assert str(info.value).endswith("The data set needs labels.csv there too.")
