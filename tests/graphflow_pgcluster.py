"""A throwaway PostgreSQL cluster for the tests and benchmarks (the distribution's own server;
not shipped: only the test suite and benchmarks/ start servers).

``initdb`` into a temporary directory, ``pg_ctl start`` listening only on a unix socket in
that directory (no TCP port, so parallel sessions never collide), trust authentication, and
everything removed on :meth:`ThrowawayCluster.stop`. PostgreSQL refuses to run as root: as
root the server runs as the ``postgres`` system user (``runuser``), which the distribution's
package creates.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

__all__ = ["ThrowawayCluster", "find_pg_bin"]

_SEARCH = ("/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin", "/opt/homebrew/opt/postgresql*/bin")


def find_pg_bin() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl`` (``PATH`` first), or ``None``."""
    found = shutil.which("initdb")
    if found is not None and shutil.which("pg_ctl") is not None:
        return Path(found).parent
    for pattern in _SEARCH:
        for candidate in sorted(glob.glob(pattern), reverse=True):  # newest version first
            if (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
                return Path(candidate)
    return None


class ThrowawayCluster:
    """A PostgreSQL cluster in a temporary directory, on a unix socket there.

    Use it as a context manager (or call :meth:`start` and :meth:`stop`); :attr:`dsn` is a
    libpq connection string for the ``postgres`` database as the ``postgres`` user.

    Args:
        bin_dir: where ``initdb``/``pg_ctl`` are; found with :func:`find_pg_bin` by default.

    Raises:
        RuntimeError: no PostgreSQL server binaries were found, or the server did not start
            (the message carries its log).
    """

    def __init__(self, bin_dir: Path | None = None) -> None:
        found = bin_dir or find_pg_bin()
        if found is None:
            raise RuntimeError(
                "no PostgreSQL server binaries (initdb, pg_ctl) on PATH or in "
                "/usr/lib/postgresql/*/bin; install them (Debian: apt-get install postgresql)"
            )
        self.bin_dir: Path = found
        self.root: Path | None = None
        self._as_root = hasattr(os, "geteuid") and os.geteuid() == 0

    @property
    def dsn(self) -> str:
        """The connection string (``host`` is the socket directory)."""
        if self.root is None:
            raise RuntimeError("the cluster is not started")
        return f"host={self.root} port=5432 user=postgres dbname=postgres"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin_dir / args[0]), *args[1:]]
        if self._as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=False)

    def start(self) -> ThrowawayCluster:
        """Create and start the cluster; returns ``self``."""
        root = Path(tempfile.mkdtemp(prefix="graphflow-pg-"))
        self.root = root
        if self._as_root:
            shutil.chown(root, "postgres", "postgres")
        data = root / "data"
        init = self._run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust",
                         "--no-sync", "-E", "UTF8", "--locale=C")
        if init.returncode != 0:
            self._cleanup()
            raise RuntimeError(f"initdb failed:\n{init.stdout}\n{init.stderr}")
        options = (f"-c listen_addresses='' -c unix_socket_directories='{root}' "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                   "-c max_connections=200")
        started = self._run("pg_ctl", "-D", str(data), "-l", str(root / "server.log"),
                            "-o", options, "-w", "-t", "60", "start")
        if started.returncode != 0:
            log = (root / "server.log").read_text() if (root / "server.log").exists() else ""
            self._cleanup()
            raise RuntimeError(f"pg_ctl start failed:\n{started.stdout}\n{started.stderr}\n{log}")
        return self

    def stop(self) -> None:
        """Stop the server and remove the directory; stopping twice is harmless."""
        if self.root is None:
            return
        self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")
        self._cleanup()

    def _cleanup(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def __enter__(self) -> ThrowawayCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
