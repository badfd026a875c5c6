"""Bedrock's request signature: tether's signing function against the published AWS SigV4 test suite (the
vectors botocore's own tests use), and a model id with ``:`` encoded in the URL and once more in the canonical
request, as Bedrock requires."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("botocore")

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tether.providers.bedrock import model_path
from tether.providers.bedrock_auth import sign

VECTORS = json.loads((Path(__file__).parents[1] / "fixtures/wire/bedrock/sigv4_vectors.json").read_text("utf-8"))
CREDENTIALS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
SIGNED_AT = datetime.datetime(2015, 8, 30, 12, 36, 0, tzinfo=datetime.UTC)


def parsed(raw: str) -> tuple[str, str, dict[str, str], bytes]:
    """A raw request of the suite: its method, URL, headers and body."""
    head, _, body = raw.partition("\n\n")
    first, *lines = head.split("\n")
    method, rest = first.split(" ", 1)
    path = rest.rsplit(" ", 1)[0]
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name] = value
    return method, f"https://{headers['Host']}{path}", headers, body.encode()


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda case: case["name"])
def test_the_signature_is_the_test_suites(case: dict[str, Any]) -> None:
    method, url, headers, body = parsed(case["request"])
    signed = sign(CREDENTIALS, "us-east-1", method, url, headers, body, service="service", now=SIGNED_AT)
    assert signed["Authorization"] == case["authorization"]
    assert signed["X-Amz-Date"] == "20150830T123600Z"


def test_a_session_token_is_sent_and_signed() -> None:
    temporary = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "SESSION-TOKEN")
    signed = sign(temporary, "us-east-1", "POST", "https://example.amazonaws.com/", {}, b"{}", now=SIGNED_AT)
    assert signed["X-Amz-Security-Token"] == "SESSION-TOKEN"
    assert "x-amz-security-token" in signed["Authorization"].split("SignedHeaders=")[1]


def test_a_model_id_with_a_colon_is_encoded_in_the_path_and_again_in_the_canonical_request() -> None:
    path = model_path("anthropic.claude-3-5-haiku-20241022-v1:0", streaming=True)
    assert path == "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream"
    assert model_path("arn:aws:bedrock:us-east-1:1:inference-profile/x", streaming=False) == (
        "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx/converse"
    )
    url = "https://bedrock-runtime.us-east-1.amazonaws.com" + path
    request = AWSRequest(method="POST", url=url, headers={"X-Amz-Date": "20150830T123600Z"}, data=b"{}")
    request.context["timestamp"] = "20150830T123600Z"
    canonical = SigV4Auth(CREDENTIALS, "bedrock", "us-east-1").canonical_request(request)
    assert canonical.split("\n")[1] == "/model/anthropic.claude-3-5-haiku-20241022-v1%253A0/converse-stream"
    signed = sign(CREDENTIALS, "us-east-1", "POST", url, {"Content-Type": "application/json"}, b"{}", now=SIGNED_AT)
    assert signed["Authorization"].startswith(
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/bedrock/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date, Signature="
    )
