"""Locate a data set's files: a local folder first, then the cache, then a download.

Resolution order for a file of a named data set:

1. ``data_dir`` passed by the caller (the CLI's ``--data-dir``), as
   ``data_dir/<name>/<file>`` or ``data_dir/<file>``;
2. the ``GRAPHATTN_DATA`` environment variable, same layout;
3. the cache (``GRAPHATTN_CACHE`` or ``./datasets/cache``), as ``cache/<name>/<file>``;
4. a download from the canonical URL of the data set's card into the cache.

A leading ``~`` in these folders is expanded. Downloaded files are written whole or
not at all, readable as the user's umask allows (not only by their owner), so that a
cache can be shared. Every file found or downloaded is checked against the sha256 in
the card. Without
network access step 4 fails with a :class:`DatasetUnavailableError` that says which
file to put where.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import os
import shutil
import urllib.request
import uuid
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "DatasetCard",
    "DatasetChecksumError",
    "DatasetUnavailableError",
    "CARDS",
    "file_title",
    "resolve_file",
    "sha256sum",
]


def file_title(path: str | Path) -> str:
    """A file's name as text for ``metrics.json`` and plot titles: bytes that are not
    UTF-8 (kept as lone surrogates in the path, which JSON readers and matplotlib
    refuse) become U+FFFD."""
    return Path(path).name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


class DatasetUnavailableError(FileNotFoundError):
    """A data set file is neither on disk nor downloadable."""


class DatasetChecksumError(ValueError):
    """A data set file does not match the checksum in its card."""


@dataclass(frozen=True)
class DatasetCard:
    """Where a named data set comes from and what its files must hash to.

    Attributes:
        name: registry name (``esol``, ``freesolv``, ``facebook-pages``).
        url: canonical download URL.
        files: file name -> sha256 of that file.
        archive_member: for a zip download, file name -> path inside the archive.
        card: path of the human-readable card in the repository's ``datasets/``.
    """

    name: str
    url: str
    files: dict[str, str]
    archive_member: dict[str, str] = field(default_factory=dict)
    card: str = ""


CARDS: dict[str, DatasetCard] = {
    "esol": DatasetCard(
        name="esol",
        url="https://deepchemdata.s3-us-west-1.amazonaws.com/datasets/delaney-processed.csv",
        files={
            "delaney-processed.csv": (
                "e91dc7027cbaeec3872a45b2522c46676e483c123b1c97172839d858a2f26d9c"
            )
        },
        card="datasets/esol.md",
    ),
    "freesolv": DatasetCard(
        name="freesolv",
        url="https://deepchemdata.s3-us-west-1.amazonaws.com/datasets/SAMPL.csv",
        files={"SAMPL.csv": "a82c5da54d7615f02d77d327a602e152fb3ed604fc093c49fb806bff2fd2149d"},
        card="datasets/freesolv.md",
    ),
    "facebook-pages": DatasetCard(
        name="facebook-pages",
        url="https://snap.stanford.edu/data/facebook_large.zip",
        files={
            "musae_facebook_edges.csv": (
                "92f2847030ac11ef9e804d6f287921d20a6bb8230008379cc66a06ce7354b725"
            ),
            "musae_facebook_target.csv": (
                "7bd96eafea3c2ca40f44bfa9e73642194696c21e38c7b29ed409c32ad14075cd"
            ),
        },
        archive_member={
            "musae_facebook_edges.csv": "facebook_large/musae_facebook_edges.csv",
            "musae_facebook_target.csv": "facebook_large/musae_facebook_target.csv",
        },
        card="datasets/facebook-pages.md",
    ),
}


def sha256sum(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_dir() -> Path:
    """The download cache: ``$GRAPHATTN_CACHE`` (``~`` expanded; ignored when empty) or
    ``./datasets/cache``."""
    configured = os.environ.get("GRAPHATTN_CACHE")
    if configured:
        return _expand_user(configured)
    return Path.cwd() / "datasets" / "cache"


def _expand_user(folder: str | Path) -> Path:
    """``folder`` with ``~`` expanded; as written where it cannot be (``~nosuchuser``),
    so that it is looked in, and named, as given instead of ending in a traceback."""
    try:
        return Path(folder).expanduser()
    except RuntimeError:
        return Path(folder)


def _candidates(name: str, filename: str, data_dir: str | Path | None) -> list[Path]:
    # ~ is expanded here because a shell leaves it alone in --data-dir=~/data and in
    # quoted values
    folders = (data_dir, os.environ.get("GRAPHATTN_DATA"))
    roots = [_expand_user(d) for d in folders if d]
    paths = [p for root in roots for p in (root / name / filename, root / filename)]
    paths.append(cache_dir() / name / filename)
    return paths


def _verify(path: Path, expected: str) -> Path:
    actual = sha256sum(path)
    if actual != expected:
        raise DatasetChecksumError(
            f"{path}: sha256 {actual} does not match the expected {expected}; "
            "the file is corrupt or a different version. Replace it with the original."
        )
    return path


# What a failed download can raise: network and HTTP errors (a body cut short among
# them), a body that is not the expected zip, a zip without the expected member.
_DOWNLOAD_ERRORS = (OSError, http.client.HTTPException, zipfile.BadZipFile, KeyError)


def _download(card: DatasetCard, timeout: float) -> dict[str, bytes]:
    """Fetch the card's files (file name -> contents), each checked against its sha256,
    so that a wrong download never lands in the cache."""
    with urllib.request.urlopen(card.url, timeout=timeout) as response:  # noqa: S310
        payload = response.read()
    if card.archive_member:
        try:
            with zipfile.ZipFile(io.BytesIO(payload)) as archive:
                files = {n: archive.read(member) for n, member in card.archive_member.items()}
        except (zlib.error, ValueError, EOFError, NotImplementedError) as err:
            # a damaged archive fails while a member is read, not only when it is opened
            raise zipfile.BadZipFile(f"damaged archive: {err}") from err
    else:
        (filename,) = card.files
        files = {filename: payload}
    for filename, data in files.items():
        actual = hashlib.sha256(data).hexdigest()
        if actual != card.files[filename]:
            raise DatasetChecksumError(
                f"{filename} downloaded from {card.url} has sha256 {actual}, not the "
                f"expected {card.files[filename]}; nothing was written to the cache"
            )
    return files


def _write_cache(files: dict[str, bytes], target_dir: Path) -> None:
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        for filename, data in files.items():
            _atomic_write(target_dir / filename, data)
    except OSError as err:
        raise OSError(
            f"downloaded, but could not write to the cache {target_dir} ({err}); set "
            "GRAPHATTN_CACHE to a writable folder"
        ) from err


def _atomic_write(path: Path, payload: bytes) -> None:
    # Created with os.open and mode 0o666, so the umask applies as to any file the user
    # makes (tempfile's 0600 left a cache shared by a lab or a CI runner unreadable).
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.part")
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as out:
            out.write(payload)
        shutil.move(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def resolve_file(
    name: str,
    filename: str,
    data_dir: str | Path | None = None,
    download: bool = True,
    timeout: float = 30.0,
) -> Path:
    """Return the verified local path of ``filename`` from the named data set.

    Args:
        name: a key of :data:`CARDS`.
        filename: one of the card's files.
        data_dir: a folder holding ``<name>/<filename>`` or ``<filename>``.
        download: try the card's URL when no local copy exists.
        timeout: seconds before a download attempt gives up.

    Raises:
        KeyError: unknown data set or file name.
        DatasetChecksumError: a local or downloaded file has the wrong sha256.
        DatasetUnavailableError: no local copy and the download failed.
    """
    if name not in CARDS:
        raise KeyError(f"unknown data set {name!r}; known: {sorted(CARDS)}")
    card = CARDS[name]
    if filename not in card.files:
        raise KeyError(f"data set {name!r} has no file {filename!r}; files: {sorted(card.files)}")
    expected = card.files[filename]
    candidates = _candidates(name, filename, data_dir)
    for path in candidates:
        if path.is_file():
            return _verify(path, expected)
    folder = next((path for path in candidates if path.is_dir()), None)
    if folder is not None:
        raise DatasetUnavailableError(
            f"data set {name!r}: {folder} is a folder; the file {filename} itself must "
            "be there (was an archive unpacked one level too deep?)"
        )

    cached = cache_dir() / name / filename
    if download:
        try:
            files = _download(card, timeout)
        except _DOWNLOAD_ERRORS as err:
            reason = f"download from {card.url} failed ({type(err).__name__}: {err})"
        else:
            _write_cache(files, cached.parent)
            return _verify(cached, expected)
    else:
        reason = "downloads are disabled"
    looked = "\n  ".join(str(p) for p in candidates)
    member = card.archive_member.get(filename)
    origin = f"{member} in {card.url}" if member else card.url
    others = [f for f in card.files if f != filename]
    also = f" The data set needs {', '.join(others)} there too." if others else ""
    raise DatasetUnavailableError(
        f"data set {name!r}: file {filename!r} not found and {reason}.\n"
        f"Looked for:\n  {looked}\n"
        f"Put {filename} (from {origin}, sha256 {expected}) at one of these paths, "
        f"or pass --data-dir DIR / set GRAPHATTN_DATA=DIR with DIR/{name}/{filename}.{also}"
    )
