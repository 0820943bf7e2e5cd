"""Model ids (`org/name`, `org/name@revision`, a bare `gpt2`) read from the local Hugging Face hub cache,
offline: nothing is fetched, and huggingface_hub is not imported. The layout is the one huggingface_hub
writes (file_download.py, `repo_folder_name` and `try_to_load_from_cache`):

    <cache>/models--org--name/refs/<revision>     the commit hash a branch or tag names, as text
    <cache>/models--org--name/snapshots/<commit>/ that commit's files, as links into ../../blobs/
    <cache>/models--org--name/blobs/<etag>        the bytes, or a link into <cache>/blobs/<xx>/<hash>, the store
                                                  of files shared across models (utils/_shared_blobs.py)

and the cache folder is found as its constants.py finds it (cache_folder). A link in the snapshot must end
inside the cache: one that leads out of it, loops or dangles is refused."""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from .core import files
from .core.errors import CheckpointError
from .core.text import quote
from .real_paths import RealPaths

REPO_PREFIX = "models--"  # repo_folder_name: "models" + "--" + the id with "/" as "--"
SEPARATOR = "--"
REFS, SNAPSHOTS = "refs", "snapshots"
DEFAULT_REVISION = "main"
# huggingface_hub's REPO_ID_REGEX (utils/_validators.py): an optional namespace, then a name, of ASCII letters,
# digits, "-", "_" and "."; validate_repo_id also forbids "--" and "..", a leading or trailing "-" or ".", ".git"
REPO_ID = re.compile(r"(?:[A-Za-z0-9_](?:[\w.-]{0,94}[A-Za-z0-9_])?/)?[A-Za-z0-9_](?:[\w.-]{0,94}[A-Za-z0-9_])?",
                     re.ASCII)
REVISION = re.compile(r"[\w.-]+(?:/[\w.-]+)*", re.ASCII)  # a branch, a tag, "refs/pr/1" or a commit hash
COMMIT = re.compile(r"[0-9a-f]{40}")
# a missing "model.pt" is a file name mistyped, not a model id: its error stays the plain one
FILE_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors", ".gguf", ".onnx", ".npz", ".npy", ".pkl", ".pickle", ".h5", ".keras",
                 ".json", ".txt", ".model")
MAX_REF_BYTES = 256  # a ref holds a 40-character hash; anything longer is not a ref
MAX_SNAPSHOT_ENTRIES = 10_000  # files and folders checked in a snapshot; no model repository has more
MAX_SNAPSHOT_DEPTH = 8
MAX_LINK_PARTS = 64  # names in a link's text (and in a path it leads through): huggingface_hub writes ../../blobs/<etag>
FETCH_HINT = "hf download {id}{rev} (or huggingface-cli download {id}{rev})"


@dataclass(frozen=True, eq=False)  # compared nowhere: no __eq__ and __hash__ to build at import
class HubSnapshot:
    """A model id resolved in the cache: the folder of the commit its revision names."""

    model_id: str
    revision: str  # as asked: "main" unless `@revision` was given
    commit: str
    folder: Path  # <cache>/models--org--name/snapshots/<commit>
    cache: Path

    def describe(self) -> str:
        at = "" if self.revision == self.commit else f" ({self.revision})"
        return f"{self.model_id} from the Hugging Face cache, snapshot {self.commit}{at}"


def cache_folder() -> tuple[Path, str]:
    """The hub cache and the variable that chose it, in huggingface_hub's order (constants.py): HF_HUB_CACHE,
    its old name HUGGINGFACE_HUB_CACHE, HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub."""
    def expand(value: str) -> Path:
        return Path(os.path.expandvars(os.path.expanduser(value)))
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(variable) is not None:
            return expand(os.environ[variable]), f"${variable}"
    if os.environ.get("HF_HOME") is not None:
        return expand(os.environ["HF_HOME"]) / "hub", "$HF_HOME/hub"
    if os.environ.get("XDG_CACHE_HOME") is not None:
        return expand(os.environ["XDG_CACHE_HOME"]) / "huggingface" / "hub", "$XDG_CACHE_HOME/huggingface/hub"
    return expand("~/.cache/huggingface/hub"), "the default"


def parse_model_id(text: str) -> tuple[str, str] | None:
    """(id, revision) when `text` can name a model on the hub ("org/name", "org/name@rev", "gpt2"), else None."""
    model_id, _, revision = text.partition("@")
    if not REPO_ID.fullmatch(model_id) or ".." in model_id or SEPARATOR in model_id or model_id.endswith(".git"):
        return None
    if model_id.lower().endswith(FILE_SUFFIXES):
        return None
    if "@" in text and not (REVISION.fullmatch(revision) and ".." not in revision.split("/")):
        return None
    return model_id, revision or DEFAULT_REVISION


def fetch_hint(model_id: str, revision: str) -> str:
    return FETCH_HINT.format(id=model_id, rev="" if revision == DEFAULT_REVISION else f" --revision {revision}")


def resolve(text: str) -> HubSnapshot | None:
    """The snapshot `text` names when it is a model id (None when it cannot be one); an id that is not in the
    cache, or whose cache entry is broken, is an error that says where it looked and how to fetch it."""
    parsed = parse_model_id(text)
    if parsed is None:
        return None
    model_id, revision = parsed
    cache, chosen_by = cache_folder()
    repo = cache / (REPO_PREFIX + model_id.replace("/", SEPARATOR))
    if not repo.is_dir():
        raise CheckpointError(f"expected a checkpoint file or directory at {quote(text)}, or the model "
                              f"{quote(model_id)} in the Hugging Face cache {quote(cache)} ({chosen_by}), found "
                              f"neither; to fetch it: {fetch_hint(model_id, revision)}")
    commit = revision if COMMIT.fullmatch(revision) else read_ref(repo, model_id, revision)
    folder = repo / SNAPSHOTS / commit
    if folder.is_symlink() or not folder.is_dir():
        raise CheckpointError(f"expected the snapshot {quote(folder)} of {quote(model_id)} in the Hugging Face cache, "
                              f"found {'a link' if folder.is_symlink() else 'none'}; to fetch it: "
                              f"{fetch_hint(model_id, revision)}")
    snapshot = HubSnapshot(model_id, revision, commit, folder, cache)
    paths = RealPaths(strict=True, max_parts=MAX_LINK_PARTS)
    inside = check_inside(snapshot, paths)
    check_links(snapshot, inside, paths)
    return snapshot


def read_ref(repo: Path, model_id: str, revision: str) -> str:
    """The commit refs/<revision> holds: a regular file of one 40-character hash, read without blocking."""
    ref = repo / REFS / revision
    if files.status(ref) is None:
        held = cached_commits(repo)
        there = f"; the cache holds snapshot {', '.join(held)} (name one as {model_id}@<commit>)" if held else ""
        raise CheckpointError(f"expected the revision {quote(revision)} of {quote(model_id)} in the Hugging Face cache "
                              f"({quote(ref)}), found none{there}; to fetch it: "
                              f"{fetch_hint(model_id, revision)}")
    raw = files.read_bytes(ref, MAX_REF_BYTES, "a file holding a commit hash")
    commit = raw.decode("ascii", "replace").strip()
    if len(raw) > MAX_REF_BYTES or not COMMIT.fullmatch(commit):
        raise CheckpointError(f"expected a 40-character commit hash in {quote(ref)}, found {quote(commit[:60])}")
    return commit


def cached_commits(repo: Path, listed: int = 3) -> list[str]:
    """A few of the commits the cache holds snapshots of, for a message."""
    try:
        names = sorted(entry.name for entry in os.scandir(repo / SNAPSHOTS) if COMMIT.fullmatch(entry.name))
    except OSError:
        return []
    return names[:listed] + ([f"and {len(names) - listed} more"] if len(names) > listed else [])


def check_inside(snapshot: HubSnapshot, paths: RealPaths) -> Path:
    """The real cache folder, once every folder from it down to the snapshot (models--*, snapshots, the commit)
    is found to stay inside it: a `snapshots` that is a link out of the cache is refused like any other link."""
    try:
        inside = RealPaths(strict=True).resolve(snapshot.cache.absolute())  # the cache itself may be a link
    except OSError as err:
        raise CheckpointError(f"cannot read {quote(snapshot.cache)}: {err.strerror or err}") from None
    repo = snapshot.folder.parent.parent
    for folder in (repo, repo / SNAPSHOTS, snapshot.folder):
        check_link(folder.absolute(), inside, f"{quote(folder)} for {snapshot.describe()}", paths)
    return inside


def check_links(snapshot: HubSnapshot, inside: Path, paths: RealPaths) -> None:
    """Every link under the snapshot ends inside the cache (the model's blobs, or the shared store), at something
    that exists; a loop, a dangling link or one that leads out of the cache is refused before anything is read.
    `paths` resolves each folder the links pass through once."""
    folder = snapshot.folder
    pending, seen = [(folder, 0)], 0
    while pending:
        current, depth = pending.pop()
        try:
            entries = list(os.scandir(current))
        except OSError as err:
            raise CheckpointError(f"cannot read {quote(current)}: {err.strerror or err}") from None
        for entry in entries:
            seen += 1
            if seen > MAX_SNAPSHOT_ENTRIES:
                raise CheckpointError(f"expected at most {MAX_SNAPSHOT_ENTRIES:,} files in the snapshot "
                                      f"{quote(folder)}, found more")
            path = Path(entry.path)
            if entry.is_symlink():
                check_link(path, inside, f"{quote(path.relative_to(folder))} in {snapshot.describe()}", paths)
            try:
                is_folder = stat.S_ISDIR(path.stat().st_mode)
            except OSError:
                is_folder = False
            if is_folder and not entry.is_symlink() and depth < MAX_SNAPSHOT_DEPTH:
                pending.append((path, depth + 1))


def check_link(path: Path, inside: Path, what: str, paths: RealPaths) -> None:
    """`what` names the link for people: its name in the snapshot, and the snapshot."""
    try:
        target = paths.resolve(path)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise CheckpointError(f"{what} is a link that loops back on itself; refused") from None
        if err.errno == errno.ENAMETOOLONG:
            raise CheckpointError(f"{what} is a link through more than {MAX_LINK_PARTS} folders; refused") from None
        raise CheckpointError(f"{what} is a link to {quote(link_text(path))}, which is not there (an interrupted "
                              "download?); fetch the model again") from None
    if not target.is_relative_to(inside):
        raise CheckpointError(f"{what} is a link to {quote(target)}, outside the Hugging Face cache "
                              f"{quote(inside)}; refused")


def link_text(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:  # not itself a link: a folder on its way is missing
        return str(path)


def snapshot_cache(folder: Path, paths: RealPaths | None = None) -> Path | None:
    """The cache whose snapshot holds `folder` (where the snapshot's links legitimately end), or None when
    `folder` is not inside a hub snapshot."""
    parts = folder.parts
    for at in range(len(parts) - 2, 1, -1):
        if parts[at] == SNAPSHOTS and parts[at - 1].startswith(REPO_PREFIX) and COMMIT.fullmatch(parts[at + 1]):
            return (paths or RealPaths()).resolve(Path(*parts[:at - 1]))
    return None
