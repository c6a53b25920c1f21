"""schemathesis 4 against the REST API served by daphne, with the app's own OpenAPI document.

It sends generated requests (valid and invalid) to every operation with an API token and
runs every check: no answer is a 500, each status, content type, header and body is one the
schema declares, a request the schema refuses is refused and one it allows is accepted (but
where tests/schemathesis.toml names the state-dependent refusal), a method the schema does not
name is refused, auth is not ignored. Seeded and
bounded (a fixed number of examples per operation), so a run is the same every time and takes
one to five minutes (about 60 operations). The live app runs with DEBUG on, as a developer's
does, so a traceback page or an HTML 404 would be caught too.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from browser_helpers import USERNAME, LiveApp, served_app

# Every check, positive_data_acceptance included; the operations that may refuse a schema-valid
# request for a reason the schema cannot say (a file's real type, names that must exist, a
# webhook host's addresses, a condition's grammar) are listed with it in this file:
CONFIG = Path(__file__).with_name("schemathesis.toml")
SEED = 29
EXAMPLES = 30


@pytest.fixture
def app(
    subprocess_env: Callable[..., dict[str, str]], tmp_path: Path
) -> Iterator[LiveApp]:
    env = {
        **subprocess_env(),
        "AGENTUI_DATA_DIR": str(tmp_path / "data"),
        # generated requests start notebooks; the limit is tested elsewhere
        "AGENTUI_RUNS_PER_MINUTE": "100000",
    }
    with served_app(env, None, "agentui-schemathesis-") as live:
        yield live


def token_for(app: LiveApp) -> str:
    return app.shell(
        "from django.contrib.auth import get_user_model; "
        "from runs.service.tokens import create_token; "
        f"user = get_user_model().objects.get(username={USERNAME!r}); "
        "print(create_token(user, 'schemathesis')[1])"
    ).split()[-1]


@pytest.mark.timeout(480)
def test_the_api_answers_as_its_schema_says(
    app: LiveApp, tmp_path: Path, artifacts_dir: Path
) -> None:
    token = token_for(app)
    # a notebook of the caller's, so paths with id 1 reach a real one too
    app.shell(
        "from django.contrib.auth import get_user_model; from runs.models import Task; "
        f"Task.objects.create(owner=get_user_model().objects.get(username={USERNAME!r}), "
        "title='fuzzed', agent='function_calling')"
    )
    schema = httpx.get(f"{app.url}/api/v1/openapi.json").json()
    assert schema["openapi"].startswith("3.1")
    schema_file = tmp_path / "openapi.json"
    schema_file.write_text(httpx.get(f"{app.url}/api/v1/openapi.json").text)

    log = tmp_path / "schemathesis.txt"
    with log.open("w") as out:
        result = subprocess.run(
            [
                str(Path(sys.executable).with_name("schemathesis")),
                "--config-file",
                str(CONFIG),
                "run",
                str(schema_file),
                "--url",
                app.url,
                "--header",
                f"Authorization: Bearer {token}",
                "--checks",
                "all",
                # an event stream answers for as long as its client listens (an hour):
                # tests/test_rest_stream.py checks it, its refusals included
                "--exclude-operation-id",
                "stream_notebook",
                "--seed",
                str(SEED),
                "--max-examples",
                str(EXAMPLES),
                "--phases",
                "examples,coverage,fuzzing",
                "--workers",
                "1",
                "--request-timeout",
                "30",
                "--generation-database",
                "none",
                "--no-color",
                "--output-truncate",
                "true",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=420,
            cwd=tmp_path,
            env=app.env,
        )
    output = log.read_text()
    (artifacts_dir / "schemathesis.txt").write_text(
        output
    )  # what it found, for a person
    assert result.returncode == 0, output + app.log()
    # every generated case passed every check (warnings, e.g. mostly-refused data, are fine)
    assert re.search(r"(\d+) generated, \1 passed", output), output
