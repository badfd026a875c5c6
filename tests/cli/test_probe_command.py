"""`tether probe` as a user runs it: a real subprocess against a real loopback server, output and exit codes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

OLLAMA = {
    "/api/tags": {"models": [{"name": "llama3.2:latest", "model": "llama3.2:latest"}, {"name": "qwen2.5:7b"}]},
    "/v1/models": {"object": "list", "data": [{"id": "llama3.2:latest"}, {"id": "qwen2.5:7b"}]},
}


class OllamaLike(BaseHTTPRequestHandler):
    """Answers like Ollama: its own /api/tags and the OpenAI-compatible /v1/models."""

    def do_GET(self) -> None:
        payload = OLLAMA.get(self.path)
        body = json.dumps(payload).encode() if payload else b"404 page not found"
        self.send_response(200 if payload else 404)
        self.send_header("Content-Type", "application/json" if payload else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt: str, *args: object) -> None:
        """Quiet: the test's output is the command's."""


@pytest.fixture
def ollama() -> Iterator[str]:
    """An Ollama-like server on a free loopback port, served from a thread; its root URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), OllamaLike)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port that is bound but not listening: connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def tether(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether.cli.app", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_probe_prints_what_answered_the_base_url_and_one_model_per_line(ollama: str) -> None:
    completed = tether("probe", ollama)

    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0].startswith(f"ok: {ollama} (")
    assert "answered as: openai-compatible, ollama" in lines
    assert f"base URL: {ollama}/v1" in lines
    assert lines[lines.index("models (2):") + 1 :][:2] == ["  llama3.2:latest", "  qwen2.5:7b"]
    assert lines[-1].startswith(f"Ollama answers at {ollama} with 2 models.")


def test_probe_json_is_the_whole_result(ollama: str) -> None:
    completed = tether("probe", f"{ollama}/v1", "--json", "--timeout", "10")

    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert set(result) == {"ok", "url", "base_url", "kinds", "models", "latency_ms", "message"}
    assert result["ok"] is True
    assert result["base_url"] == f"{ollama}/v1"
    assert result["kinds"] == ["openai-compatible", "ollama"]
    assert result["models"] == ["llama3.2:latest", "qwen2.5:7b"]


def test_nothing_listening_exits_1_and_says_how_to_start_a_server(closed_port: int) -> None:
    completed = tether("probe", f"127.0.0.1:{closed_port}")

    assert completed.returncode == 1
    assert completed.stdout == ""
    assert completed.stderr.startswith(f"not ok: http://127.0.0.1:{closed_port}")
    assert f"Nothing is listening at http://127.0.0.1:{closed_port} (connection refused)." in completed.stderr
    assert "`ollama serve`" in completed.stderr


def test_nothing_listening_with_json_exits_1_and_prints_json(closed_port: int) -> None:
    completed = tether("probe", f"127.0.0.1:{closed_port}", "--json")

    assert completed.returncode == 1
    result = json.loads(completed.stdout)
    assert result["ok"] is False
    assert result["message"].startswith("Nothing is listening")


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["probe"], "Missing argument 'URL'"),
        (["probe", "http://"], "Invalid value for URL: 'http://' is not an HTTP URL"),
        (["probe", "localhost:1", "--timeout", "0"], "Invalid value for '--timeout'"),
        (["probe", "localhost:1", "--colour"], "No such option"),
    ],
)
def test_usage_errors_exit_2_with_clicks_message(args: list[str], complaint: str) -> None:
    completed = tether(*args)

    assert completed.returncode == 2
    assert complaint in completed.stderr
    assert "Usage: tether probe" in completed.stderr


def test_the_installed_tether_script_reports_its_version() -> None:
    script = Path(sys.executable).parent / "tether"
    completed = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert completed.stdout.strip() == "tether 0.1.0"


@pytest.mark.parametrize("args", [["--help"], ["probe", "--help"]])
def test_help_imports_neither_aiohttp_nor_pydantic(args: list[str]) -> None:
    code = (
        "import sys\n"
        "from tether.cli.app import main\n"
        f"try:\n    main({args!r}, prog_name='tether')\n"
        "except SystemExit as exit:\n    assert exit.code == 0, exit.code\n"
        "heavy = {'aiohttp', 'pydantic', 'pydantic_core', 'jsonschema', 'yarl', 'multidict'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy), file=sys.stderr)\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "Usage: tether" in completed.stdout
    assert completed.stderr.strip() == "[]"
