"""Reads Triton ``config.pbtxt`` files without Triton's protobuf classes (build_engines.py runs in NVIDIA's
TensorRT container, which has no tritonclient).

:func:`parse_text_proto` is a small parser of the protobuf text format into a multimap (every field maps to
the list of its values, because the text format does not say which fields are repeated).
:func:`load_model_config` turns that into a :class:`ModelConfig` with the parts that an engine must match:
platform/backend, ``max_batch_size``, the inputs and outputs (name, data type, dims, reshape) and the warmup
samples. tests/test_build_engines.py checks it against ``google.protobuf.text_format`` with Triton's own
``ModelConfig`` message on every config of model_repository/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

Message = dict[str, list]  # field name -> list of values (str, int, float, bool, identifier str, Message)


class TextProtoError(ValueError):
    """Malformed protobuf text, or a config that lacks what an engine needs."""


_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>[-+]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)[fF]?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[{}\[\]:,;<>])
    """,
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\"}


def _tokens(text: str) -> list[tuple[str, str, int]]:
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match:
            line = text.count("\n", 0, position) + 1
            raise TextProtoError(f"line {line}: unexpected character {text[position]!r}")
        kind = match.lastgroup
        if kind != "space":
            tokens.append((kind, match.group(), text.count("\n", 0, position) + 1))
        position = match.end()
    return tokens


def _scalar(kind: str, token: str):
    if kind == "string":
        body = token[1:-1]
        return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)
    if kind == "number":
        token = token.rstrip("fF") if not token.lower().startswith(("0x", "-0x", "+0x")) else token
        if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F]+", token):
            return int(token, 16)
        if re.fullmatch(r"[-+]?\d+", token):
            return int(token)
        return float(token)
    if token in ("true", "True"):
        return True
    if token in ("false", "False"):
        return False
    return token  # enum value identifier (e.g. TYPE_FP32, KIND_GPU)


def parse_text_proto(text: str) -> Message:
    """Parses protobuf text format into ``{field: [values]}``; nested messages are the same kind of dict."""
    tokens = _tokens(text)
    position = 0

    def peek(offset: int = 0):
        return tokens[position + offset] if position + offset < len(tokens) else ("end", "", -1)

    def expect(value: str):
        nonlocal position
        kind, token, line = peek()
        if token != value:
            where = f"line {line}" if line > 0 else "end of text"
            raise TextProtoError(f"{where}: expected {value!r}, got {token or 'end of text'!r}")
        position += 1

    def parse_value():
        nonlocal position
        kind, token, line = peek()
        if token in ("{", "<"):
            position += 1
            message = parse_message("}" if token == "{" else ">")
            return message
        if kind in ("string", "number", "name"):
            position += 1
            value = _scalar(kind, token)
            while kind == "string" and peek()[0] == "string":  # adjacent strings concatenate
                value += _scalar("string", peek()[1])
                position += 1
            return value
        raise TextProtoError(f"line {line}: expected a value, got {token or 'end of text'!r}")

    def parse_message(closing: str | None) -> Message:
        nonlocal position
        message: Message = {}
        while True:
            kind, token, line = peek()
            if closing is not None and token == closing:
                position += 1
                return message
            if kind == "end":
                if closing is None:
                    return message
                raise TextProtoError(f"unexpected end of text: missing {closing!r}")
            if kind != "name":
                raise TextProtoError(f"line {line}: expected a field name, got {token!r}")
            position += 1
            values = message.setdefault(token, [])
            if peek()[1] == ":":
                position += 1
            if peek()[1] == "[":
                position += 1
                while peek()[1] != "]":
                    values.append(parse_value())
                    if peek()[1] == ",":
                        position += 1
                    elif peek()[1] != "]":
                        raise TextProtoError(f"line {peek()[2]}: expected ',' or ']' in a list")
                expect("]")
            else:
                values.append(parse_value())
            if peek()[1] in (",", ";"):
                position += 1

    return parse_message(None)


# ------------------------------------------------------------------------------------------ model config


@dataclass(frozen=True)
class TensorConfig:
    name: str
    data_type: str  # Triton type name, e.g. "TYPE_FP32"
    dims: tuple[int, ...]  # without the batch dimension when max_batch_size > 0
    reshape: tuple[int, ...] | None = None  # the model's own shape when it differs from dims

    @property
    def model_dims(self) -> tuple[int, ...]:
        """The dims the model (engine) sees: ``reshape`` when given, else ``dims``."""
        return self.reshape if self.reshape is not None else self.dims


@dataclass(frozen=True)
class WarmupSample:
    name: str
    batch_size: int
    input_dims: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelConfig:
    name: str
    platform: str
    backend: str
    max_batch_size: int
    inputs: tuple[TensorConfig, ...]
    outputs: tuple[TensorConfig, ...]
    warmup: tuple[WarmupSample, ...] = ()
    path: Path | None = None

    @property
    def is_tensorrt(self) -> bool:
        return self.platform == "tensorrt_plan" or self.backend == "tensorrt"


def _one(message: Message, name: str, default=None):
    values = message.get(name, [])
    if len(values) > 1:
        raise TextProtoError(f"field '{name}' is given {len(values)} times")
    return values[0] if values else default


def _tensor(message: Message, where: str) -> TensorConfig:
    name = _one(message, "name")
    if not isinstance(name, str) or not name:
        raise TextProtoError(f"{where}: every input/output needs a name")
    data_type = _one(message, "data_type", "TYPE_INVALID")
    dims = tuple(int(d) for d in message.get("dims", []))
    reshape_message = _one(message, "reshape")
    reshape = tuple(int(d) for d in reshape_message.get("shape", [])) if reshape_message is not None else None
    return TensorConfig(name, str(data_type), dims, reshape)


def model_config_from_text(text: str, path: Path | None = None) -> ModelConfig:
    where = str(path) if path else "config"
    try:
        message = parse_text_proto(text)
        warmups = []
        for sample in message.get("model_warmup", []):
            dims = {}
            for entry in sample.get("inputs", []):
                key, value = _one(entry, "key"), _one(entry, "value", {})
                dims[key] = tuple(int(d) for d in value.get("dims", []))
            warmups.append(
                WarmupSample(str(_one(sample, "name", "")), int(_one(sample, "batch_size", 0)), dims)
            )
        return ModelConfig(
            name=str(_one(message, "name", "")),
            platform=str(_one(message, "platform", "")),
            backend=str(_one(message, "backend", "")),
            max_batch_size=int(_one(message, "max_batch_size", 0)),
            inputs=tuple(_tensor(m, where) for m in message.get("input", [])),
            outputs=tuple(_tensor(m, where) for m in message.get("output", [])),
            warmup=tuple(warmups),
            path=path,
        )
    except TextProtoError as error:
        raise TextProtoError(f"{where}: {error}") from None
    except (TypeError, ValueError, AttributeError) as error:
        raise TextProtoError(f"{where}: unexpected value ({error})") from None


def load_model_config(path: str | Path) -> ModelConfig:
    """Reads a ``config.pbtxt``; raises FileNotFoundError or :class:`TextProtoError` with the file name."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"model configuration not found: {path}")
    return model_config_from_text(path.read_text(), path)
