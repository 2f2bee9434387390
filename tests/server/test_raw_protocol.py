"""The KServe v2 protocol by hand (issue 19, item 6): the curl commands of model_repository/README.md run as
written against the real tritonserver, and an image sent the wrong way (inside JSON, or as base64 text) gets
an error that points at the binary tensor extension."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import urllib.error
import urllib.request

import pytest

from trt_plugin_kit.interface import REPO_ROOT

README = REPO_ROOT / "model_repository" / "README.md"
IMAGE = REPO_ROOT / "samples" / "digits" / "7.png"


def readme_curl_commands() -> list[str]:
    """The bash blocks of the README's "Raw protocol: curl" section, without the comment lines (answers)."""
    section = README.read_text().split("## Raw protocol: curl", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    return ["\n".join(line for line in block.splitlines() if not line.startswith("#")) for block in blocks]


def run_bash(script: str, http_port: int) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")} | {
        "TRITON_HTTP_PORT": str(http_port)
    }
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_readme_has_a_json_and_a_binary_curl_example():
    json_example, binary_example = readme_curl_commands()
    assert "Content-Type: application/json" in json_example and "/v2/models/l2norm/infer" in json_example
    assert "Inference-Header-Content-Length" in binary_example and "binary_data_size" in binary_example


def test_the_json_curl_example_answers_the_normalized_vector(triton_server):
    json_example, _ = readme_curl_commands()
    answer = json.loads(run_bash(json_example, triton_server.ports.http))
    (output,) = answer["outputs"]
    assert output["name"] == "normalized" and output["shape"] == [1, 2]
    assert output["data"] == pytest.approx([0.6, 0.8], rel=1e-6)


def test_the_binary_curl_example_classifies_the_sample_seven(triton_server):
    _, binary_example = readme_curl_commands()
    answer = json.loads(run_bash(binary_example, triton_server.ports.http))
    (output,) = answer["outputs"]
    assert output["name"] == "probabilities" and output["shape"] == [1, 3]
    score, index, label = output["data"][0].split(":")
    assert (index, label) == ("7", "7") and float(score) > 0.9


def _post_json(server, body: dict) -> tuple[int, str]:
    request = urllib.request.Request(
        f"http://{server.http_url}/v2/models/mnist_pipeline/infer",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.mark.parametrize(
    "encoding, expected",
    [
        # The case: the bytes put into a JSON string (as latin-1 text; JSON makes them UTF-8).
        ("text", "these are image bytes that went through a text string"),
        ("base64", "this is base64 text"),
    ],
)
def test_an_image_sent_inside_json_is_refused_with_the_way_to_send_it(triton_server, encoding, expected):
    png = IMAGE.read_bytes()
    text = png.decode("latin-1") if encoding == "text" else base64.b64encode(png).decode()
    body = {"inputs": [{"name": "image_bytes", "shape": [1, 1], "datatype": "BYTES", "data": [text]}]}
    status, answer = _post_json(triton_server, body)
    assert status == 400
    message = json.loads(answer)["error"]
    assert "not a PNG or JPEG image" in message and expected in message
    assert "binary tensor extension (curl example: model_repository/README.md)" in message
