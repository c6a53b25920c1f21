"""Shared helpers for benchmarks that compare the engine with LlamaIndex's agents (the "peer").

The peer harness lives outside the repo (``../shared/peer/`` by default, ``AGENTUI_PEER_DIR``
overrides it): a stdlib-only scripted OpenAI-compatible server (``fake_openai.py``), its scenario
files, and ``bench_llamaindex.py``, which must run in a virtualenv holding the pinned LlamaIndex
release (``/tmp/li-venv`` by default, ``AGENTUI_LI_VENV`` overrides it). This module only locates,
creates and drives those; it holds no benchmark logic of its own.

    from bench._peer import PeerServer, ensure_li_venv, peer_scenario, run_li_json

    ok, note = ensure_li_venv()            # creates the venv if absent; never raises
    with PeerServer() as server:           # fake_openai.py on a free 127.0.0.1 port
        server.load(script=peer_scenario("scenario_overhead.json"), log_path="/tmp/req.jsonl")
        ... point an OpenAI client at server.base_url (".../v1") ...

Also here, so every bench reports figures the same way: ``rss_mb``/``peak_rss_mb``,
``percentile``/``ms_summary`` and ``host_info``.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
PEER_DIR = Path(
    os.environ.get("AGENTUI_PEER_DIR") or REPO_ROOT.parent / "shared" / "peer"
).resolve()
LI_VENV = Path(os.environ.get("AGENTUI_LI_VENV") or "/tmp/li-venv")
LI_INSTALL_LOG = Path(
    os.environ.get("AGENTUI_LI_INSTALL_LOG") or "/tmp/li-venv-bench-install.log"
)
# The top-level pins of the peer README (used when its requirements-lock.txt is missing).
LI_PINS = [
    "llama-index-core==0.12.52.post1",
    "llama-index-agent-openai==0.4.12",
    "llama-index-agent-llm-compiler==0.3.2",
    "llama-index-packs-agents-coa==0.3.2",
    "llama-index-llms-openai==0.4.7",
    "openai==1.109.1",
]
LI_IMPORT_CHECK = (
    "import llama_index.core, llama_index.agent.openai, llama_index.llms.openai"
)

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- the LlamaIndex virtualenv ------------------------------------------------------------------


def li_python() -> Path:
    return LI_VENV / "bin" / "python"


def li_venv_ready(timeout: float = 180.0) -> bool:
    """True when the venv's python imports LlamaIndex's agent packages."""
    if not li_python().exists():
        return False
    try:
        proc = subprocess.run(
            [str(li_python()), "-W", "ignore", "-c", LI_IMPORT_CHECK],
            capture_output=True,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def _installer_running() -> bool:
    """Whether another process (say, someone creating the venv by hand) is installing into it."""
    needle = str(LI_VENV).encode()
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmd and (b"pip" in cmd or b"venv" in cmd):
            return True
    return False


def _lock_file(path: Path):
    import fcntl

    handle = open(path, "w")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def ensure_li_venv(wait_s: float = 300.0, log: Log = _stderr) -> tuple[bool, str]:
    """Make sure the LlamaIndex venv exists; create it (the peer README's commands) if absent.

    Waits up to ``wait_s`` for an install another process is running. Never raises: returns
    ``(ok, note)``, the note saying what happened or why the venv is unusable.
    """
    if li_venv_ready():
        return True, f"LlamaIndex venv {LI_VENV} ready"
    deadline = time.monotonic() + wait_s
    while _installer_running() and time.monotonic() < deadline:
        log(f"[peer] an install into {LI_VENV} is running; waiting for it ...")
        time.sleep(10)
        if li_venv_ready():
            return (
                True,
                f"LlamaIndex venv {LI_VENV} ready (after waiting for its install)",
            )
    # one creator at a time, across processes (two benches may start together)
    with _lock_file(Path(f"{LI_VENV}.agentui-bench.lock")):
        if li_venv_ready():
            return True, f"LlamaIndex venv {LI_VENV} ready"
        base = shutil.which("python3.11") or shutil.which("python3") or sys.executable
        lock = PEER_DIR / "requirements-lock.txt"
        reqs = ["-r", str(lock)] if lock.exists() else list(LI_PINS)
        commands = (
            [[base, "-m", "venv", str(LI_VENV)]] if not li_python().exists() else []
        )
        commands += [
            [str(li_python()), "-m", "pip", "install", "--upgrade", "pip"],
            [str(li_python()), "-m", "pip", "install", *reqs],
        ]
        log(
            f"[peer] creating the LlamaIndex venv {LI_VENV} (log: {LI_INSTALL_LOG}); takes a few minutes"
        )
        with open(LI_INSTALL_LOG, "a") as out:
            for cmd in commands:
                out.write(f"$ {' '.join(cmd)}\n")
                out.flush()
                try:
                    rc = subprocess.run(
                        cmd, stdout=out, stderr=subprocess.STDOUT, timeout=1800
                    ).returncode
                except (OSError, subprocess.TimeoutExpired) as exc:
                    return (
                        False,
                        f"creating {LI_VENV} failed: {' '.join(cmd[:4])} ...: {exc}",
                    )
                if rc != 0:
                    return (
                        False,
                        f"creating {LI_VENV} failed: `{' '.join(cmd[:5])} ...` exited {rc} (see {LI_INSTALL_LOG})",
                    )
    if li_venv_ready():
        return True, f"LlamaIndex venv {LI_VENV} created"
    return (
        False,
        f"{LI_VENV} was installed but `{LI_IMPORT_CHECK}` still fails (see {LI_INSTALL_LOG})",
    )


def run_li_json(
    argv: Sequence[str], timeout: float = 900.0, cwd: Path | None = None
) -> dict[str, Any]:
    """Run ``li-venv python *argv`` and parse the last stdout line as JSON.

    Returns ``{"error": ...}`` (with the stderr tail) if the process fails or prints no JSON.
    """
    env = dict(
        os.environ,
        PYTHONWARNINGS="ignore",
        OPENAI_API_KEY=os.environ.get("OPENAI_API_KEY", "sk-fake"),
    )
    try:
        proc = subprocess.run(
            [str(li_python()), *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd
            or REPO_ROOT,  # our drivers run as modules of the repo's bench package
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in proc.stdout.strip().splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit {proc.returncode}: {proc.stderr[-1500:]}"}
    try:
        result: dict[str, Any] = json.loads(lines[-1])
        return result
    except json.JSONDecodeError:
        return {
            "error": f"no JSON on the last stdout line: {lines[-1][:300]!r}; stderr: {proc.stderr[-800:]}"
        }


def li_versions() -> dict[str, Any]:
    code = (
        "import json, sys\n"
        "from importlib.metadata import version\n"
        "names = ['llama-index-core', 'llama-index-agent-openai', 'llama-index-llms-openai', 'openai', 'httpx', 'pydantic']\n"
        "out = {}\n"
        "for n in names:\n"
        "    try:\n"
        "        out[n] = version(n)\n"
        "    except Exception:\n"
        "        out[n] = None\n"
        "out['python'] = sys.version.split()[0]\n"
        "print(json.dumps(out))\n"
    )
    return run_li_json(["-c", code], timeout=60)


# --- the scripted server ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def peer_scenario(name: str) -> dict[str, Any]:
    """A scenario file of the peer harness (e.g. ``scenario_overhead.json``) as a dict."""
    with open(PEER_DIR / name) as f:
        return json.load(f)


class PeerServer:
    """``fake_openai.py`` from the peer harness, started on a free 127.0.0.1 port (stdlib only).

    ``base_url`` ends in ``/v1`` (what OpenAI clients take). Load a scenario with ``load``; both
    frameworks of a comparison should run against one server and one scenario.
    """

    def __init__(
        self,
        script_path: str | Path | None = None,
        port: int | None = None,
        python: str | None = None,
    ):
        self.port = port or free_port()
        argv = [
            python or sys.executable,
            str(PEER_DIR / "fake_openai.py"),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        if script_path is not None:
            argv += ["--script", str(script_path)]
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.root = f"http://127.0.0.1:{self.port}"
        self.base_url = self.root + "/v1"
        deadline = time.monotonic() + 10
        while True:
            try:
                self._get("/health")
                break
            except (OSError, urllib.error.URLError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(
                        f"fake_openai.py did not come up on port {self.port}"
                    ) from None
                time.sleep(0.05)

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.root + path, timeout=10) as resp:
            return json.loads(resp.read())

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        req = urllib.request.Request(
            self.root + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def load(
        self,
        script_path: str | Path | None = None,
        script: dict[str, Any] | None = None,
        log_path: str | Path | None = None,
    ) -> Any:
        """Swap the scenario (a file or a dict); also resets the call counter and rule uses."""
        if script is None and script_path is None:
            raise ValueError("load() needs script_path or script")
        body: dict[str, Any] = (
            {"script": script}
            if script is not None
            else {"script_path": str(Path(str(script_path)).resolve())}
        )
        body["log_path"] = str(log_path) if log_path else ""
        return self._post("/admin/load", body)

    def reset(self) -> Any:
        return self._post("/admin/reset", {})

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = self._get("/admin/stats")
        return result

    def close(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def __enter__(self) -> PeerServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- measuring ----------------------------------------------------------------------------------


def rss_mb() -> float:
    """This process's resident set size now (MB)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def peak_rss_mb() -> float:
    """This process's peak resident set size so far (MB; Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile on index round(p/100 * (n-1)) -- the peer harness's definition."""
    ordered = sorted(values)
    index = round(p / 100 * (len(ordered) - 1))
    return ordered[min(len(ordered) - 1, max(0, index))]


def ms_summary(
    seconds: Sequence[float], head: int = 20, tail: int = 20
) -> dict[str, float]:
    """mean / p50 / p95 / max of durations in seconds, in ms, plus the mean and median of the first
    ``head`` and of the last ``tail`` values (first20_mean / last20_mean are the peer's keys too)."""
    ms = [s * 1000 for s in seconds]
    if not ms:
        return {"n": 0}
    return {
        "n": len(ms),
        "mean": statistics.fmean(ms),
        "p50": percentile(ms, 50),
        "p95": percentile(ms, 95),
        "max": max(ms),
        "first20_mean": statistics.fmean(ms[:head]),
        "last20_mean": statistics.fmean(ms[-tail:]),
        "first20_p50": statistics.median(ms[:head]),
        "last20_p50": statistics.median(ms[-tail:]),
    }


def host_info() -> dict[str, Any]:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next(
                (
                    line.split(":", 1)[1].strip()
                    for line in f
                    if line.startswith("model name")
                ),
                "",
            )
    except OSError:
        pass
    mem_gib = 0.0
    try:
        with open("/proc/meminfo") as f:
            mem_gib = (
                int(next(line for line in f if line.startswith("MemTotal")).split()[1])
                / 1024
                / 1024
            )
    except (OSError, StopIteration):
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "mem_gib": round(mem_gib, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
