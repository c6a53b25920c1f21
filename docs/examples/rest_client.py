"""Drive an agentui run to the end over the REST API: start it, approve its tool calls, read
the trace. See docs/api.md.

    pip install httpx
    AGENTUI_TOKEN=agentui_... python docs/examples/rest_client.py --url http://127.0.0.1:8000

Create the token on the API tokens page (/settings/tokens/). With the offline demo model the
default question is one it knows.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import httpx

DEFAULT_QUESTION = "Which city had the highest sales revenue in 2024, and what is it with 8% tax added?"


def settled(client: httpx.Client, notebook: int) -> dict[str, Any]:
    """The notebook once nothing runs in it any more (the server holds the request meanwhile)."""
    while True:
        response = client.get(f"/notebooks/{notebook}/wait", params={"timeout": 30})
        response.raise_for_status()
        detail: dict[str, Any] = response.json()
        if detail["settled"]:
            return detail


def run(url: str, token: str, question: str, agent: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=f"{url}/api/v1", headers=headers, timeout=60) as client:
        # 1. start a notebook that stops before every tool call
        created = client.post(
            "/notebooks/", json={"text": question, "agent": agent, "mode": "tools"}
        )
        if created.status_code != 201:
            sys.exit(f"refused: {created.status_code} {created.json()['detail']}")
        notebook = created.json()["id"]
        print(f"notebook {notebook}: {url}{created.json()['url']}")

        # 2. wait; approve each step that waits for us, after a look at its calls
        while True:
            detail = settled(client, notebook)
            if detail["status"] in ("failed", "interrupted"):
                sys.exit(f"the run stopped: {detail['status']}")
            if not detail["waiting"]:
                break
            step = detail["waiting"][0]
            for call in step["tool_calls"] or []:
                print(f"  approving {call['tool_name']}({call['tool_kwargs']})")
            approved = client.post(
                f"/notebooks/{notebook}/steps/{step['step_id']}/approve"
            )
            approved.raise_for_status()

        # 3. fetch the trace
        trace = client.get(f"/notebooks/{notebook}/trace").json()
        print(f"steps: {sum(len(t['steps']) for t in trace['turns'])}")
        print(f"events: {len(trace['events'])}")
        print(f"answer: {detail['response']}")
        return trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--token", default=os.environ.get("AGENTUI_TOKEN", ""))
    parser.add_argument("--question", default=DEFAULT_QUESTION)
    parser.add_argument("--agent", default="function_calling")
    args = parser.parse_args()
    if not args.token:
        parser.error(
            "give --token or set AGENTUI_TOKEN (create one on /settings/tokens/)"
        )
    run(args.url.rstrip("/"), args.token, args.question, args.agent)


if __name__ == "__main__":
    main()
